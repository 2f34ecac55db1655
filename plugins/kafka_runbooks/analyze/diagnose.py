"""From the parsed evidence of one bundle to findings (model.Finding). Pure: no I/O, no Spark.

Inputs are ParsedFile records (one per manifest file: path, kind, broker, the parser's result or a
LogSummary for logs, and any problems met before parsing, e.g. a sha256 mismatch). Every finding cites
file and line; when the evidence is ambiguous the finding says so (``details.ambiguity``).

Honesty rules (issue 5 §3, issue 9 §4):
- a fetch failure is attributed to the leader the line names, and only failures inside the incident window
  count (earlier episodes are listed apart, not counted);
- failures the reporting broker caused itself are not blamed on its peers: its own controlled shutdown
  (fetchers stopped: "Client was shutdown"), or its own stall (its ZooKeeper client heard nothing for N ms /
  a long GC pause) right before it logged them;
- "request handling stalled" needs evidence of it: handler threads blocked behind a lock cycle, or direct
  Kafka checks that timed out while Recv-Q grew on the broker's port.
"""

from __future__ import annotations

import bisect
import datetime as dt
import ipaddress
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

from ..model import Evidence, Finding, Severity
from .known_bugs import make_signature, match_known_bugs, upgrade_advice
from .lockgraph import (Cycle, LockEdge, WaitForGraph, blocked_behind, build_wait_for_graph, chain_into,
                        compare_dumps, find_cycles, stalled_request_handlers)
from .logsummary import LogSummary
from .parsers.jstack import JstackDump, ThreadDumps
from .parsers.kafka_log import CAUSE_CLIENT_SHUTDOWN, fetch_cause
from .parsers.listings import is_timeout
from .parsers.logs import LogRecord
from .parsers.misc import PROC_STATES, HeapInfo, OpenFiles, ProcessStat
from .parsers.sockets import SocketTable
from .parsed_file import ParsedFile  # noqa: F401 - part of this module's API

DEFAULT_BROKER_PORT = 9092
CLOSE_WAIT_MIN = 5
MAX_CITED_LINES = 50
STALL_MS = 4000  # a broker that heard nothing from ZooKeeper for this long was itself stalled
SELF_STALL_AFTER_S = 120  # its fetch errors within this long after the stall are its own doing
EPISODE_GAP_S = 600  # fetch failures more than 10 min apart are different episodes
LOG_KINDS = ("server_log", "controller_log", "state_change_log", "log_cleaner_log", "kafka_stdout", "zk_log")
SEGMENTS_OVERSIZED = 50  # segments in one __consumer_offsets partition worth a finding (seed 002: 2,000+)

# API keys a new client may send to an old broker: key -> (name, Kafka version that introduced it)
API_KEYS = {
    18: ("ApiVersions", "0.10.0"), 19: ("CreateTopics", "0.10.1"), 20: ("DeleteTopics", "0.10.1"),
    21: ("DeleteRecords", "0.11.0"), 22: ("InitProducerId", "0.11.0"), 23: ("OffsetForLeaderEpoch", "0.11.0"),
    24: ("AddPartitionsToTxn", "0.11.0"), 25: ("AddOffsetsToTxn", "0.11.0"), 26: ("EndTxn", "0.11.0"),
    27: ("WriteTxnMarkers", "0.11.0"), 28: ("TxnOffsetCommit", "0.11.0"), 29: ("DescribeAcls", "0.11.0"),
    30: ("CreateAcls", "0.11.0"), 31: ("DeleteAcls", "0.11.0"), 32: ("DescribeConfigs", "0.11.0"),
    33: ("AlterConfigs", "0.11.0"), 34: ("AlterReplicaLogDirs", "1.0.0"), 35: ("DescribeLogDirs", "1.0.0"),
    36: ("SaslAuthenticate", "1.0.0"), 37: ("CreatePartitions", "1.0.0"), 38: ("CreateDelegationToken", "1.1.0"),
    39: ("RenewDelegationToken", "1.1.0"), 40: ("ExpireDelegationToken", "1.1.0"), 41: ("DescribeDelegationToken", "1.1.0"),
    42: ("DeleteGroups", "1.1.0"), 43: ("ElectLeaders", "2.2.0"), 44: ("IncrementalAlterConfigs", "2.3.0"),
    45: ("AlterPartitionReassignments", "2.4.0"), 46: ("ListPartitionReassignments", "2.4.0"),
    47: ("OffsetDelete", "2.4.0"), 48: ("DescribeClientQuotas", "2.6.0"), 49: ("AlterClientQuotas", "2.6.0"),
    50: ("DescribeUserScramCredentials", "2.7.0"), 51: ("AlterUserScramCredentials", "2.7.0"),
    56: ("AlterPartition", "2.7.0"), 57: ("UpdateFeatures", "2.7.0"), 60: ("DescribeCluster", "2.8.0"),
    61: ("DescribeProducers", "2.8.0"), 65: ("DescribeTransactions", "3.0.0"), 66: ("ListTransactions", "3.0.0"),
    68: ("ConsumerGroupHeartbeat", "3.5.0"),
}


@dataclass(frozen=True)
class Window:
    """The incident's time window (UTC): fetch errors before ``since`` are earlier episodes."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    source: str = ""

    def contains(self, t: dt.datetime | None) -> bool | None:
        if t is None:
            return None
        if self.since and t < self.since:
            return False
        if self.until and t > self.until:
            return False
        return True

    def describe(self) -> str:
        if not self.since and not self.until:
            return "no incident window known: every episode in the logs counts"
        f = lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else "open"  # noqa: E731
        return f"{f(self.since)} .. {f(self.until)} UTC ({self.source})"


def _natural(s: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s)]


def _socket_tables(files: Iterable[ParsedFile]) -> dict[int | None, list[ParsedFile]]:
    """Connection tables per broker, in capture order; listener-only tables (``ss -Hltnp``) are left out (they
    would read as 'no connections' between two samples)."""
    out = {}
    for b, fs in _by_broker(files, ("sockets_ss", "sockets_netstat")).items():
        keep = [f for f in fs if any(r.state != "LISTEN" for r in f.result.rows) or not f.result.rows]
        if keep:
            out[b] = keep
    return out


def _by_broker(files: Iterable[ParsedFile], kind: str | tuple[str, ...]) -> dict[int | None, list[ParsedFile]]:
    kinds = (kind,) if isinstance(kind, str) else kind
    out: dict[int | None, list[ParsedFile]] = defaultdict(list)
    for f in files:
        if f.kind in kinds and f.result is not None and not f.problems:
            out[f.broker_id].append(f)
    for v in out.values():
        v.sort(key=lambda f: (f.seq, _natural(f.path)))
    return out


def _logs(files: Iterable[ParsedFile]) -> dict[int | None, list[ParsedFile]]:
    return _by_broker((f for f in files if not f.duplicate_of), LOG_KINDS)


DUPLICATE_SHARE = 0.9


def mark_duplicate_logs(files: list[ParsedFile]) -> None:
    """Kafka's default log4j configuration sends the root logger to both server.log and stdout (kafkaServer.out):
    with both in a bundle every record would count twice. A log of a broker whose records (time + logger +
    message) are, for >= 90 %, records of that broker's server_log is marked ``duplicate_of`` it and read only
    for what else it holds (thread dumps). Sets the mark on the given objects (idempotent)."""
    conv = [(_as_summary(f), f) for f in files]
    by_broker: dict[int | None, list] = defaultdict(list)
    for c, f in conv:
        if c.kind in LOG_KINDS and isinstance(c.result, LogSummary) and not f.duplicate_of:
            by_broker[c.broker_id].append((c, f))
    for b, items in by_broker.items():
        mains = [(c, f) for c, f in items if c.kind == "server_log"]
        if not mains:
            continue
        keys = {(e.ts, e.logger, e.message) for c, _ in mains for e in c.result.events}
        for c, f in items:
            if c.kind == "server_log" or c.kind not in ("kafka_stdout", "log"):
                continue
            evs = c.result.events
            if not evs:
                continue
            same = sum(1 for e in evs if (e.ts, e.logger, e.message) in keys)
            if same >= DUPLICATE_SHARE * len(evs):
                f.duplicate_of = mains[0][0].path
                note = (f"its log records repeat {mains[0][0].path} ({same} of {len(evs)} events read): log4j's "
                        "stdout appender; counted once, from that file")
                if note not in f.notes:
                    f.notes.append(note)


def kafka_versions(files: Iterable[ParsedFile]) -> dict[int | None, str]:
    out: dict[int | None, str] = {}
    for b, logs in _logs(files).items():
        for f in logs:
            v = f.result.kafka_version if isinstance(f.result, LogSummary) else None
            if v:
                out[b] = v
    return out


def _bid(b: int | None) -> str:
    return f"broker {b}" if b is not None else "an unknown broker"


def _cite(f: ParsedFile, recs: list[LogRecord], n: int = 10) -> Evidence:
    lines, ex = [], []
    for r in recs[:MAX_CITED_LINES // 2]:
        lines.append(r.line)
        if r.exception_line:
            lines.append(r.exception_line)
    for r in recs[:n]:
        ex.append(f"{r.line}: {r.raw or r.message}"[:600])
        if r.exception and r.exception_line:
            ex.append(f"{r.exception_line}: {r.exception}"[:400])
    return Evidence(source=f.path, lines=tuple(sorted(set(lines)))[:MAX_CITED_LINES], excerpt="\n".join(ex), host=f.host)


# ---------------------------------------------------------------- thread dumps and deadlocks


def _dumps_by_broker(files: list[ParsedFile]) -> dict[int | None, list[tuple[ParsedFile, JstackDump]]]:
    out: dict[int | None, list[tuple[ParsedFile, JstackDump]]] = defaultdict(list)
    for b, fs in _by_broker(files, ("jstack", "thread_dump_json")).items():
        for f in fs:
            dumps = f.result.dumps if isinstance(f.result, ThreadDumps) else [f.result]
            for d in dumps:
                out[b].append((f, d))
    return out


def _thread_at(d: JstackDump, key: str, name: str):
    return d.by_key(key) or d.thread(name)


def _cycle_evidence(f: ParsedFile, dump: JstackDump, edges: list[LockEdge]) -> Evidence:
    lines: set[int] = set()
    excerpt: list[tuple[int, str]] = []
    for e in edges:
        t = _thread_at(dump, e.waiter_key, e.waiter)
        if t is None:
            continue
        lines.add(t.line)
        excerpt.append((t.line, t.header_text))
        if t.frames:
            excerpt.append((t.frames[0].line, "\tat " + t.frames[0].text))
            lines.add(t.frames[0].line)
        aw = t.awaited
        if aw:
            lines.add(aw.line)
            excerpt.append((aw.line, "\t" + aw.text))
        h = _thread_at(dump, e.holder_key, e.holder)
        if h is not None and e.holder_line:
            ref = next((r for r, _ in h.held() if r.line == e.holder_line), None)
            lines.add(e.holder_line)
            excerpt.append((e.holder_line, f"\t{ref.text if ref else ''}   [in {e.holder!r}]"))
    for dl in dump.deadlocks:
        if {x.thread for x in dl} & {e.waiter for e in edges}:
            for x in dl:
                lines.add(x.line)
    seen, ex = set(), []
    for ln, text in sorted(excerpt):
        if (ln, text) not in seen:
            seen.add((ln, text))
            ex.append(f"{ln}: {text}")
    where = f" (dump {dump.index + 1} of the file, lines {dump.first_line}-{dump.last_line})" if dump.index or f.embedded else ""
    return Evidence(source=f.path, lines=tuple(sorted(lines))[:MAX_CITED_LINES], excerpt="\n".join(ex) + where, host=f.host)


def _deadlock_findings(files: list[ParsedFile], versions: dict[int | None, str], kafka_version: str | None) -> list[Finding]:
    findings: list[Finding] = []
    for broker, pairs in _dumps_by_broker(files).items():
        dumps = [d for _, d in pairs]
        graphs: list[WaitForGraph] = [build_wait_for_graph(d) for d in dumps]
        per_dump = [find_cycles(g) for g in graphs]
        distinct: dict[frozenset, tuple[int, Cycle]] = {}
        for k, cycles in enumerate(per_dump):
            for c in cycles:
                distinct.setdefault(c.key(), (k, c))
        version = kafka_version or versions.get(broker)
        for key, (k0, cycle) in distinct.items():
            g0, d0 = graphs[k0], dumps[k0]
            chain = chain_into(g0, cycle)
            members = set(cycle.keys)
            tails = [e for e in blocked_behind(g0, cycle)]
            present = [k for k, cs in enumerate(per_dump) if any(c.key() == key for c in cs)]
            progress = compare_dumps(dumps[k0:], cycle.threads, cycle.keys)
            reasons = list(progress.reasons)
            status = progress.status
            if len(present) != len(dumps) - k0:
                status = "progressing"
                reasons.append(f"cycle present in {len(present)} of {len(dumps) - k0} dumps")
            frames = [fr.text for e in list(cycle.edges) + tails for t in [_thread_at(d0, e.waiter_key, e.waiter)] if t
                      for fr in t.frames[:12]]
            sig = make_signature([e.waiter for e in chain], [e.cls for e in chain], frames)
            candidates, ruled_out = match_known_bugs(sig, version)
            path = [e.waiter for e in chain] + [chain[-1].holder]
            locks = []
            for e in chain:
                s = f"<{e.address}> ({e.cls})"
                if s not in locks:
                    locks.append(s)
            handlers = stalled_request_handlers(d0, g0, cycle)
            summary = (f"JVM deadlock on {_bid(broker)}: {' -> '.join(path)}; locks {', '.join(locks)}; "
                       f"{status} across {len(dumps) - k0} dump(s)")
            if handlers:
                summary += (f"; request handling stalled behind the deadlock: {len(handlers)} request handler thread(s) "
                            f"blocked ({', '.join(sorted(t.name for t in handlers)[:5])}{', ...' if len(handlers) > 5 else ''})")
            if candidates and version:
                summary += f"; Kafka {version}: matches {', '.join(c['id'] for c in candidates)}"
            reported = any(set(x.thread for x in dl) & set(cycle.threads) for d in dumps for dl in d.deadlocks)
            ev_pairs = [p for k, p in enumerate(pairs) if k >= k0][:8]
            details = {
                "cycle": [{"thread": e.waiter, "thread_key": e.waiter_key,
                           "waiting_for": {"address": e.address, "class": e.cls, "kind": e.kind},
                           "held_by": e.holder, "held_by_key": e.holder_key, "in_cycle": e.waiter_key in members,
                           "edge_source": e.source} for e in chain],
                "cycle_threads": list(cycle.threads),
                "lock_kinds": sorted({e.kind for e in cycle.edges}),
                "blocked_behind_cycle": [e.waiter for e in tails],
                "request_handlers_stalled": sorted(t.name for t in handlers),
                "dumps": len(dumps) - k0,
                "dump_files": sorted({f.path for f, _ in pairs[k0:]}),
                "progress": status,
                "progress_notes": reasons,
                "reported_by_jstack": reported,
                "kafka_version": version,
                "known_bugs": candidates,
                "ruled_out_bugs": ruled_out,
                "advice": upgrade_advice(broker, version, candidates),
            }
            findings.append(Finding(kind="jvm_deadlock", severity=Severity.CRITICAL, summary=summary,
                                    broker_ids=(broker,) if broker is not None else (),
                                    evidence=tuple(_cycle_evidence(f, d, chain) for f, d in ev_pairs), details=details))
            if handlers:
                findings.append(Finding(
                    kind="request_handling_stalled", severity=Severity.CRITICAL,
                    summary=(f"request handling stalled behind the deadlock on {_bid(broker)}: "
                             f"{len(handlers)} thread(s) running KafkaRequestHandler/KafkaApis wait on the lock cycle "
                             f"{' -> '.join(list(cycle.threads) + [cycle.threads[0]])}"),
                    broker_ids=(broker,) if broker is not None else (),
                    evidence=(Evidence(ev_pairs[0][0].path, tuple(sorted({t.line for t in handlers}))[:MAX_CITED_LINES],
                                       "\n".join(f"{t.line}: {t.header_text}" for t in handlers[:10]), ev_pairs[0][0].host),),
                    details={"cause": "deadlock", "handlers": sorted(t.name for t in handlers),
                             "handler_keys": sorted(t.key for t in handlers), "cycle_threads": list(cycle.threads)}))
    return findings


def _owner_unknown_findings(files: list[ParsedFile]) -> list[Finding]:
    """Threads parked on an ownable lock (ReentrantLock & co.) whose owner the dump does not show: without
    jstack -l a cycle through such locks cannot be seen, so say so instead of implying there is none."""
    out = []
    for broker, pairs in _dumps_by_broker(files).items():
        f, d = pairs[-1]
        g = build_wait_for_graph(d)
        waits = [(n, a, c) for n, a, c in g.unresolved if re.search(r"Lock\$[A-Za-z]{0,20}Sync$", c)]
        if not waits:
            continue
        why = ("the dump has no 'Locked ownable synchronizers' sections (taken without jstack -l)" if not d.ownable_info
               else "no thread in the dump lists them as owned")
        out.append(Finding(kind="lock_owner_unknown", severity=Severity.INFO if d.ownable_info else Severity.WARNING,
                           summary=(f"{len(waits)} thread(s) on {_bid(broker)} wait on lock(s) "
                                    f"{', '.join(sorted({f'<{a}> ({c})' for _, a, c in waits})[:3])} whose owner is unknown: {why}; "
                                    "a deadlock through them can be neither shown nor ruled out"),
                           broker_ids=(broker,) if broker is not None else (),
                           evidence=(Evidence(f.path, (), "\n".join(f"{n} waits for <{a}> ({c})" for n, a, c in waits[:10]), f.host),),
                           details={"waiting": [{"thread": n, "address": a, "class": c} for n, a, c in waits[:50]],
                                    "ownable_info": d.ownable_info, "ambiguity": why}))
    return out


# ---------------------------------------------------------------- sockets


def broker_ports_of(broker: int | None, broker_ports: dict | None) -> tuple[int, ...]:
    """The broker's listener ports (every listener: CLIENT, REPLICATION, ...); a value may be one port or several."""
    v = (broker_ports or {}).get(broker) if broker is not None else None
    if v is None:
        return (DEFAULT_BROKER_PORT,)
    if isinstance(v, int):
        return (v,)
    ports = sorted({int(x) for x in v})
    return tuple(ports) or (DEFAULT_BROKER_PORT,)


def broker_port_of(broker: int | None, broker_ports: dict | None) -> int:
    return broker_ports_of(broker, broker_ports)[0]


def _is_ip(h: str) -> bool:
    try:
        ipaddress.ip_address(h)
        return True
    except ValueError:
        return False


def broker_addresses_of(broker: int | None, broker_hosts: dict | None) -> frozenset[str]:
    """The broker's own addresses (one or several); names are left out (a name is never compared with an address)."""
    v = (broker_hosts or {}).get(broker) if broker is not None else None
    if not v:
        return frozenset()
    vals = [v] if isinstance(v, str) else list(v)
    return frozenset(h for h in vals if isinstance(h, str) and _is_ip(h))


def on_broker_endpoint(row, broker: int | None, broker_ports: dict | None, broker_hosts: dict | None = None) -> bool:
    """A server-side socket of one of the broker's own listeners: its ports and, when the broker's addresses are
    known, one of those addresses (hosts sharing one socket table, or with several addresses, show others' sockets
    too)."""
    if row.local_port not in broker_ports_of(broker, broker_ports):
        return False
    hosts = broker_addresses_of(broker, broker_hosts)
    return not hosts or row.local_host in hosts or row.local_host in ("*", "0.0.0.0", "::")


def _close_wait_findings(files: list[ParsedFile], broker_ports: dict[int, int] | None,
                         broker_hosts: dict[int, str] | None = None) -> list[Finding]:
    tables = _socket_tables(files)
    port_counts: dict[int | None, dict[str, int]] = {}
    latest: dict[int | None, ParsedFile] = {}
    for b, fs in tables.items():
        f = fs[-1]
        latest[b] = f
        port_counts[b] = dict(Counter(r.state for r in f.result.rows
                                      if r.state != "LISTEN" and on_broker_endpoint(r, b, broker_ports, broker_hosts)))
    findings = []
    for b, f in latest.items():
        t: SocketTable = f.result
        ports = broker_ports_of(b, broker_ports)
        port = ports[0]
        rows = [r for r in t.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts) and r.state != "LISTEN"]
        cw = [r for r in rows if r.state == "CLOSE_WAIT"]
        if len(cw) < CLOSE_WAIT_MIN or len(cw) * 2 < len(rows):
            continue
        peers = Counter(r.peer_host for r in cw)
        recvq = sum(r.recv_q for r in cw)
        others = {str(o): c for o, c in port_counts.items() if o != b}
        summary = (f"connections piling up in CLOSE_WAIT on {_bid(b)}: {len(cw)} of {len(rows)} connections to its listener{'s' if len(ports) > 1 else ''} "
                   f"{', '.join(f':{p}' for p in ports)} (peers: {', '.join(f'{h} x{n}' for h, n in peers.most_common(5))}); {recvq} bytes unread in Recv-Q")
        if others:
            summary += f"; other brokers' listeners: " + ", ".join(
                f"{o}: {c.get('CLOSE_WAIT', 0)} CLOSE_WAIT / {sum(c.values())}" for o, c in others.items())
        cited = cw[:MAX_CITED_LINES]
        findings.append(Finding(
            kind="close_wait_pileup", severity=Severity.CRITICAL if len(cw) >= 100 else Severity.WARNING, summary=summary,
            broker_ids=(b,) if b is not None else (),
            evidence=(Evidence(source=f.path, lines=tuple(r.line for r in cited),
                               excerpt="\n".join(f"{r.line}: {r.state} recv_q={r.recv_q} {r.local} <- {r.peer}" for r in cited[:10]),
                               host=f.host),),
            details={"port": port, "ports": list(ports), "port_label": f"Kafka listener(s) of {_bid(b)}", "states_on_port": port_counts[b],
                     "close_wait_by_peer": dict(peers), "recv_q_bytes_close_wait": recvq, "other_brokers_on_port": others,
                     "counted_once": True, "duplicates_dropped": t.duplicates,
                     "meaning": "the broker stopped closing (reading) sockets its peers already closed: "
                                "its network/request threads are not making progress"},
        ))
    return findings


def _recvq_series(files: list[ParsedFile], broker: int | None, broker_ports, broker_hosts) -> list[tuple[ParsedFile, int, int, int]]:
    """(file, Recv-Q bytes, CLOSE_WAIT count, ESTABLISHED count) on the broker's listener, per socket table in order."""
    out = []
    for f in _socket_tables(files).get(broker, []):
        rows = [r for r in f.result.rows if on_broker_endpoint(r, broker, broker_ports, broker_hosts) and r.state != "LISTEN"]
        out.append((f, sum(r.recv_q for r in rows), sum(1 for r in rows if r.state == "CLOSE_WAIT"),
                    sum(1 for r in rows if r.state == "ESTABLISHED")))
    return out


def _probe_findings(files: list[ParsedFile], broker_ports, broker_hosts) -> list[Finding]:
    out = []
    probes = _by_broker(files, "kafka_probe")
    for b, fs in probes.items():
        results = [(f, r) for f in fs for r in f.result.results]
        if not results:
            continue
        failed = [(f, r) for f, r in results if not r.ok]
        timeouts = [(f, r) for f, r in failed if is_timeout(r.error)]
        series = _recvq_series(files, b, broker_ports, broker_hosts)
        grows = len(series) >= 2 and series[-1][1] > series[0][1]
        cw_grows = len(series) >= 2 and series[-1][2] > series[0][2]
        ev = [Evidence(f.path, (), "\n".join(f"{r.at} {r.check}: {'ok' if r.ok else r.error} "
                                            f"({r.latency_ms} ms)" for g, r in results if g is f)[:1500], f.host) for f in fs]
        ev += [Evidence(f.path, (), f"Recv-Q {q} bytes, CLOSE_WAIT {cw}, ESTABLISHED {es} on the listener", f.host)
               for f, q, cw, es in series]
        if timeouts and len(failed) == len(results) and (grows or cw_grows):
            out.append(Finding(
                kind="request_handling_stalled", severity=Severity.CRITICAL,
                summary=(f"request handling stalled on {_bid(b)}: all {len(results)} direct Kafka check(s) failed "
                         f"({len(timeouts)} timed out) while unread bytes on its listener grew "
                         f"{series[0][1]} -> {series[-1][1]} (CLOSE_WAIT {series[0][2]} -> {series[-1][2]}) across "
                         f"{len(series)} socket tables"),
                broker_ids=(b,) if b is not None else (), evidence=tuple(ev),
                details={"cause": "probes_and_recv_q", "checks": len(results), "timeouts": len(timeouts),
                         "recv_q": [s[1] for s in series], "close_wait": [s[2] for s in series]}))
        elif failed:
            why = ("Recv-Q did not grow" if len(series) >= 2 else "fewer than two socket tables to compare Recv-Q")
            out.append(Finding(
                kind="broker_unresponsive", severity=Severity.WARNING,
                summary=(f"{len(failed)} of {len(results)} direct Kafka check(s) of {_bid(b)} failed "
                         f"({failed[-1][1].error}); ambiguous: {why}, so a stall of request handling is not shown"),
                broker_ids=(b,) if b is not None else (), evidence=tuple(ev),
                details={"checks": len(results), "failed": len(failed), "timeouts": len(timeouts),
                         "ambiguity": why}))
    return out


# ---------------------------------------------------------------- logs: fetch failures


def _utc(r: LogRecord, offsets: dict[int | None, dt.timedelta], broker: int | None) -> dt.datetime | None:
    return r.at(offsets.get(broker))


def _self_stalls(logs: dict[int | None, list[ParsedFile]], gc: dict[int | None, list], offsets) -> dict[int | None, list[tuple[dt.datetime, str, ParsedFile, int]]]:
    """Moments each broker was itself stalled or stopping: (time, why, file, line)."""
    out: dict[int | None, list] = defaultdict(list)
    for b, fs in logs.items():
        for f in fs:
            s: LogSummary = f.result
            for r in s.signatures("zk_session_timeout"):
                ms = int(r.attrs.get("millis", "0") or 0)
                t = _utc(r, offsets, b)
                if ms >= STALL_MS and t:
                    out[b].append((t, f"its own ZooKeeper client heard nothing for {ms} ms (the process was stalled)", f, r.line))
            for name, why in (("controlled_shutdown_start", "its own controlled shutdown"),
                              ("broker_shutting_down", "its own shutdown")):
                for r in s.signatures(name):
                    t = _utc(r, offsets, b)
                    if t:
                        out[b].append((t, why, f, r.line))
    for b, pauses in gc.items():
        for f, p in pauses:
            if p.seconds * 1000 >= STALL_MS and p.at:
                try:
                    t = dt.datetime.fromisoformat(p.at.replace("Z", "+00:00"))
                    t = t.astimezone(dt.timezone.utc) if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)
                    out[b].append((t, f"its own {p.seconds:.1f} s GC pause", f, p.line))
                except ValueError:
                    pass
    return out


def _by_time(stalls: list[tuple]) -> tuple[list[dt.datetime], list[int], list[tuple]]:
    """A broker's stalls, searchable by time: (their times sorted, their indexes in that order, the stalls)."""
    order = sorted(range(len(stalls)), key=lambda k: stalls[k][0])
    return [stalls[k][0] for k in order], order, stalls


def _stall_explaining(index, t: dt.datetime) -> tuple | None:
    """The first of a broker's stalls (in _self_stalls' order) that explains its fetch error at ``t``: the error
    came at most SELF_STALL_AFTER_S after it, or that close to a shutdown on either side. Only the stalls within
    that distance of ``t`` are looked at (a long log holds thousands of each)."""
    if index is None:
        return None
    times, order, stalls = index
    near = order[bisect.bisect_left(times, t - dt.timedelta(seconds=SELF_STALL_AFTER_S)):
                 bisect.bisect_right(times, t + dt.timedelta(seconds=SELF_STALL_AFTER_S))]
    for k in sorted(near):
        st, reason = stalls[k][0], stalls[k][1]
        d = (t - st).total_seconds()
        if 0 <= d <= SELF_STALL_AFTER_S or ("shutdown" in reason and abs(d) <= SELF_STALL_AFTER_S):
            return stalls[k]
    return None


def _fetch_findings(files: list[ParsedFile], window: Window, offsets, gc) -> list[Finding]:
    logs = _logs(files)
    stall_index = {b: _by_time(xs) for b, xs in _self_stalls(logs, gc, offsets).items()}
    errors: dict[int, list[tuple[ParsedFile, LogRecord, dt.datetime | None, int | None]]] = defaultdict(list)
    excluded: list[dict] = []
    reporters_all: dict[int | None, set] = defaultdict(set)  # reporter -> leaders it reports
    log_end: dict[str, dt.datetime | None] = {}
    for b, fs in logs.items():
        for f in fs:
            s: LogSummary = f.result
            log_end[f.path] = _parse_utc(s.last_ts, offsets.get(b))
            recs = s.signatures("replica_fetch_error") or s.signatures("fetch_session_error")
            for r in recs:
                try:
                    leader = int(r.attrs["leader"])
                except (KeyError, ValueError):
                    continue
                reporter = int(r.attrs["fetcher"]) if r.attrs.get("fetcher", "").lstrip("-").isdigit() else b
                t = _utc(r, offsets, b)
                why = None
                if "client_shutdown" in r.attrs:
                    why = "the reporting broker stopped this fetcher itself (leadership moved or it was shutting down)"
                elif t is not None:
                    stall = _stall_explaining(stall_index.get(reporter), t)
                    if stall is not None:
                        _, reason, sf, sl = stall
                        why = f"logged by broker {reporter} right after {reason} ({sf.path}:{sl})"
                if why:
                    excluded.append({"leader": leader, "reporter": reporter, "source": f.path, "line": r.line, "why": why})
                    continue
                errors[leader].append((f, r, t, reporter))
                reporters_all[reporter].add(leader)
    findings = []
    for leader, all_evs in sorted(errors.items()):
        # episodes; one that ended before the incident window (its reporters kept logging without the error) is an
        # earlier, already-fixed episode and is not counted
        timed = sorted((x for x in all_evs if x[2] is not None), key=lambda x: x[2])
        untimed = [x for x in all_evs if x[2] is None]
        episodes: list[list] = []
        for x in timed:
            if episodes and (x[2] - episodes[-1][-1][2]).total_seconds() <= EPISODE_GAP_S:
                episodes[-1].append(x)
            else:
                episodes.append([x])
        counted, earlier, notes = list(untimed), [], []
        for ep in episodes:
            first, last = ep[0][2], ep[-1][2]
            in_window = window.contains(last) is not False or window.since is None
            if in_window:
                counted.extend(ep)
                continue
            ended = all((log_end.get(f.path) or last) > last + dt.timedelta(seconds=EPISODE_GAP_S) for f, _, _, _ in ep)
            if ended:
                earlier.append({"from": first.isoformat(), "to": last.isoformat(), "count": len(ep),
                                "why_not_counted": "before the incident window, and the reporters kept logging without it afterwards"})
            else:
                counted.extend(ep)
                ends = sorted({log_end.get(f.path).isoformat() for f, _, _, _ in ep if log_end.get(f.path)})
                notes.append(f"{len(ep)} failure(s) between {first:%H:%M:%S} and {last:%H:%M:%S} precede the incident window, "
                             f"but the reporters' logs end at {', '.join(ends) or 'an unknown time'}: nothing shows the episode "
                             "ended, so they are counted")
        if not counted:
            findings.append(Finding(kind="earlier_fetch_failures", severity=Severity.INFO,
                                    summary=(f"replica fetch failures from broker {leader} in {len(earlier)} earlier episode(s) "
                                             f"({sum(e['count'] for e in earlier)} failures) ended before the incident window; not counted"),
                                    broker_ids=(leader,), evidence=(_cite(all_evs[0][0], [r for _, r, _, _ in all_evs]),),
                                    details={"earlier_episodes": earlier, "window": window.describe()}))
            continue
        reporters = sorted({rep for _, _, _, rep in counted} - {None})
        times = [t for _, _, t, _ in counted if t]
        causes = Counter(fetch_cause(r.attrs) for _, r, _, _ in counted)
        per_file: dict[str, list] = defaultdict(list)
        for f, r, _, _ in counted:
            per_file[f.path].append((f, r))
        evidence = [_cite(items[0][0], [r for _, r in items]) for items in per_file.values()]
        ambiguity = list(notes)
        if len(reporters) == 1:
            ambiguity.append(f"only broker {reporters[0]} reports it")
            if len(reporters_all.get(reporters[0], ())) > 1:
                ambiguity.append(f"broker {reporters[0]} reports fetch failures from {len(reporters_all[reporters[0]])} "
                                 f"leaders ({', '.join(map(str, sorted(reporters_all[reporters[0]])))}): the reporter itself "
                                 "may be the problem")
        sampled = any(f.result.omitted.get(r.signature or "") for f, r, _, _ in counted)
        exact_minutes = [m for path in per_file for f in [per_file[path][0][0]] for m in f.result.minutes
                         if str(m.get("leader")) == str(leader)]
        span = f"between {min(times):%Y-%m-%d %H:%M:%S} and {max(times):%H:%M:%S} UTC" if times else ""
        summary = (f"peers report replica fetch failures from broker {leader}: {len(counted)} failure(s) logged by broker(s) "
                   f"{', '.join(map(str, reporters)) or '?'} {span} ({', '.join(f'{c} x{n}' for c, n in causes.most_common())})")
        if earlier:
            summary += (f"; {sum(e['count'] for e in earlier)} failure(s) of {len(earlier)} earlier, ended episode(s) "
                        "before the incident window not counted")
        if ambiguity:
            summary += "; ambiguous: " + "; ".join(ambiguity)
        findings.append(Finding(
            kind="peer_fetch_failures", severity=Severity.WARNING, summary=summary, broker_ids=(leader,),
            evidence=tuple(evidence),
            details={"leader": leader, "reporters": reporters, "count": len(counted), "causes": dict(causes),
                     "first": min(times).isoformat() if times else None, "last": max(times).isoformat() if times else None,
                     "window": window.describe(), "earlier_episodes": earlier,
                     "excluded": [x for x in excluded if x["leader"] == leader][:50],
                     "sampled": sampled, "minutes": exact_minutes[:500],
                     "ambiguity": "; ".join(ambiguity) or None}))
    # failures the reporters caused themselves: said once, apart, so nobody reads them as the leader's fault
    by_rep: dict[int | None, list[dict]] = defaultdict(list)
    for x in excluded:
        by_rep[x["reporter"]].append(x)
    for rep, xs in by_rep.items():
        findings.append(Finding(
            kind="fetch_failures_own_doing", severity=Severity.INFO,
            summary=(f"{len(xs)} fetch failure(s) logged by {_bid(rep)} are its own doing, not its leaders' "
                     f"(leaders named: {', '.join(map(str, sorted({x['leader'] for x in xs})))}): {xs[0]['why']}"),
            broker_ids=(rep,) if rep is not None else (),
            evidence=(Evidence(xs[0]["source"], tuple(sorted({x["line"] for x in xs}))[:MAX_CITED_LINES],
                               "; ".join(sorted({x["why"] for x in xs}))[:1000]),),
            details={"failures": xs[:100]}))
    return findings


def _parse_utc(ts: str | None, offset: dt.timedelta | None) -> dt.datetime | None:
    if not ts:
        return None
    try:
        t = dt.datetime.fromisoformat(ts)
    except ValueError:
        return None
    if offset:
        t = t - offset
    return t.replace(tzinfo=dt.timezone.utc)


# ---------------------------------------------------------------- logs: other signatures


def _api_key_name(k: str | None) -> str:
    try:
        key = int(k or "")
    except ValueError:
        return f"API key {k}"
    name, since = API_KEYS.get(key, (None, None))
    return f"API key {key} ({name}, added in Kafka {since})" if name else f"API key {key} (unknown to Kafka's API list)"


def _client_of(connection: str | None) -> tuple[str | None, int | None]:
    """'127.102.1.1:9092-127.0.0.1:48908-5' -> ('127.0.0.1', 48908)."""
    if not connection:
        return None, None
    parts = connection.split("-")
    if len(parts) >= 2:
        host, _, port = parts[1].rpartition(":")
        try:
            return host or None, int(port)
        except ValueError:
            return host or None, None
    return None, None


def _request_findings(files: list[ParsedFile], versions: dict[int | None, str]) -> list[Finding]:
    out = []
    sockets = _socket_tables(files)
    for b, fs in _logs(files).items():
        for f in fs:
            s: LogSummary = f.result
            recs = s.signatures("processor_uncaught_exception") + s.signatures("invalid_request")
            if not recs:
                continue
            keys = Counter(r.attrs.get("api_key") or r.attrs.get("api_key_aioobe") for r in recs
                           if r.attrs.get("api_key") or (r.attrs.get("api_key_aioobe") and r.attrs.get("api_key_frame")))
            clients = Counter(_client_of(r.attrs.get("connection")) for r in recs if r.attrs.get("connection"))
            matched = []
            for (host, port), n in clients.items():
                for sf in sockets.get(b, []):
                    for row in sf.result.rows:
                        if row.peer_host == host and row.peer_port == port:
                            matched.append(f"{sf.path}:{row.line} {row.state} {row.local} <- {row.peer} "
                                           f"{'(pid ' + str(row.pid) + ')' if row.pid else ''}".strip())
            ver = versions.get(b)
            what = ", ".join(_api_key_name(k) for k in keys) if keys else "a request the broker could not parse"
            total = s.count("processor_uncaught_exception") + s.count("invalid_request")
            summary = (f"{_bid(b)} rejected {total} request(s) from a client it does not understand: {what}")
            if clients:
                summary += "; client(s): " + ", ".join(f"{h}:{p} x{n}" for (h, p), n in clients.most_common(5))
            if s.count("processor_uncaught_exception"):
                summary += ("; on Kafka 0.9 - 0.10.0 the network thread drops every request selected in the same poll, "
                            "broker-to-broker requests included")
            advice = ("Find the client by its address (and client id in its own logs) and pin its protocol/version to what "
                      f"the broker supports (Kafka {ver or 'of this broker'}), or upgrade the brokers. No restart is proposed.")
            out.append(Finding(kind="unknown_api_request", severity=Severity.CRITICAL if s.count("processor_uncaught_exception") else Severity.WARNING,
                               summary=summary, broker_ids=(b,) if b is not None else (), evidence=(_cite(f, recs),),
                               details={"api_keys": {k: _api_key_name(k) for k in keys}, "clients": [
                                   {"host": h, "port": p, "count": n} for (h, p), n in clients.items()],
                                   "socket_table_matches": matched[:20], "kafka_version": ver, "advice": advice,
                                   "no_restart": True}))
    return out


def _group_load_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    dumps = _dumps_by_broker(files)
    for b, fs in _logs(files).items():
        for f in fs:
            s: LogSummary = f.result
            starts: dict[str, LogRecord] = {}
            for r in sorted(s.signatures("group_load_start") + s.signatures("group_load_done"), key=lambda r: r.line):
                p = r.attrs.get("partition")
                if r.signature == "group_load_start":
                    starts[p] = r
                elif p in starts:
                    starts.pop(p)
            if not starts:
                continue
            parts = sorted(starts, key=lambda p: int(p or 0))
            loader_note = _loader_progress(dumps.get(b, []))
            out.append(Finding(
                kind="group_load_unfinished", severity=Severity.WARNING,
                summary=(f"{_bid(b)}: loading of __consumer_offsets partition(s) {', '.join(parts)} started without a matching "
                         f"'Finished loading' (their groups get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it "
                         f"completes){'; ' + loader_note if loader_note else ''}"),
                broker_ids=(b,) if b is not None else (), partitions=tuple(f"__consumer_offsets-{p}" for p in parts),
                evidence=(_cite(f, [starts[p] for p in parts]),),
                details={"partitions": parts, "started": {p: starts[p].ts for p in parts}, "loader_progress": loader_note or None}))
    return out


def _loader_progress(pairs: list[tuple[ParsedFile, JstackDump]]) -> str | None:
    """Across successive dumps: does a thread running GroupMetadataManager.loadGroupsAndOffsets/doLoadGroupsAndOffsets
    show different frames (progressing) or the same (stuck)?"""
    seen = []
    for _, d in pairs:
        for t in d.all_threads():
            if any("GroupMetadataManager" in fr.text and "oadGroupsAndOffsets" in fr.text for fr in t.frames[:40]):
                seen.append((t.key, tuple(fr.text for fr in t.frames[:6])))
    if len(seen) < 2:
        return "the loader thread was seen in one dump" if seen else None
    tops = {x[1] for x in seen}
    return (f"the loader thread is progressing: its top frames differ across {len(seen)} dumps" if len(tops) > 1
            else f"the loader thread shows the same top frames in {len(seen)} dumps (stuck, or each dump caught it in one place)")


def _cleaner_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in _logs(files).items():
        for f in fs:
            s: LogSummary = f.result
            died = s.signatures("log_cleaner_died")
            unclean = s.signatures("log_cleaner_uncleanable")
            if died:
                req = next((r.attrs.get("requirement") for r in died if r.attrs.get("requirement")), None)
                out.append(Finding(
                    kind="log_cleaner_dead", severity=Severity.CRITICAL,
                    summary=(f"the log cleaner thread on {_bid(b)} died ('Error due to'): compacted topics, __consumer_offsets "
                             "first, stop being compacted and grow until the broker restarts"
                             + (f"; cause: {req}" if req else "")),
                    broker_ids=(b,) if b is not None else (), evidence=(_cite(f, died),),
                    details={"requirement": req, "advice": "Restart the broker through the rolling-restart runbook (keeps one "
                             "holder of every offsets partition up); never delete segments by hand."}))
            if unclean:
                parts = sorted({f"{r.attrs.get('topic')}-{r.attrs.get('partition')}" for r in unclean})
                out.append(Finding(kind="log_cleaner_uncleanable", severity=Severity.WARNING,
                                   summary=f"{_bid(b)}: the log cleaner marked {len(parts)} partition(s) uncleanable ({', '.join(parts[:10])}); they are no longer compacted",
                                   broker_ids=(b,) if b is not None else (), partitions=tuple(parts), evidence=(_cite(f, unclean),),
                                   details={"partitions": parts}))
    # a broker whose dumps show no cleaner thread although other Kafka threads are there
    for b, pairs in _dumps_by_broker(files).items():
        last_f, last = pairs[-1]
        names = [t.name for t in last.threads]
        if last.full_dump and any(n.startswith(("kafka-request-handler", "data-plane-kafka-request-handler")) for n in names) \
                and not any(n.startswith("kafka-log-cleaner-thread") for n in names):
            out.append(Finding(kind="log_cleaner_missing", severity=Severity.WARNING,
                               summary=(f"no kafka-log-cleaner-thread in the last thread dump of {_bid(b)} although its request "
                                        "handlers are there: the log cleaner is dead or disabled (log.cleaner.enable)"),
                               broker_ids=(b,) if b is not None else (),
                               evidence=(Evidence(last_f.path, (last.first_line,), f"{len(names)} threads, none named kafka-log-cleaner-thread-*", last_f.host),),
                               details={"threads": len(names), "ambiguity": "log.cleaner.enable=false gives the same picture"}))
    return out


def _listing_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in _by_broker(files, "log_dir_listing").items():
        for f in fs:
            big = [p for p in f.result.partitions.values() if p.topic == "__consumer_offsets" and p.segments >= SEGMENTS_OVERSIZED]
            if big:
                big.sort(key=lambda p: -p.segments)
                out.append(Finding(
                    kind="oversized_offsets_partition", severity=Severity.WARNING,
                    summary=(f"{_bid(b)}: {len(big)} __consumer_offsets partition(s) hold {SEGMENTS_OVERSIZED}+ segments "
                             f"({', '.join(f'{p.name}: {p.segments} segments, {p.log_bytes} bytes' for p in big[:5])}): compaction "
                             "is not keeping up or the log cleaner died; loading them after a leadership change is slow"),
                    broker_ids=(b,) if b is not None else (), partitions=tuple(p.name for p in big),
                    evidence=(Evidence(f.path, tuple(p.line for p in big[:MAX_CITED_LINES]), "", f.host),),
                    details={"partitions": {p.name: {"segments": p.segments, "log_bytes": p.log_bytes, "bytes": p.bytes} for p in big}}))
    return out


def _dumplog_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in _by_broker(files, "dump_log").items():
        for f in fs:
            for d in f.result.files:
                probs = d.problems()
                if probs:
                    out.append(Finding(kind="segment_damage", severity=Severity.WARNING,
                                       summary=f"{d.path or f.path}: {len(probs)} problem(s) in kafka-dump-log output: {probs[0]}",
                                       broker_ids=(b,) if b is not None else (),
                                       evidence=(Evidence(f.path, tuple(int(p.split(':')[0].split()[-1]) for p in probs[:20] if p.startswith('line ')),
                                                          "\n".join(probs[:10]), f.host),),
                                       details={"segment": d.path, "kind": d.kind, "problems": probs[:100],
                                                "offsets": d.offset_range(), "time_range_ms": d.time_range()}))
    return out


def _zk_session_findings(files: list[ParsedFile], offsets, gc) -> list[Finding]:
    out = []
    for b, fs in _logs(files).items():
        for f in fs:
            s: LogSummary = f.result
            exp = s.signatures("zk_session_expired")
            to = s.signatures("zk_session_timeout")
            if not exp and not to:
                continue
            longest = max((int(r.attrs.get("millis", "0") or 0) for r in to), default=0)
            pauses = [(gf, p) for gf, p in gc.get(b, []) if p.seconds * 1000 >= STALL_MS]
            gc_note = ""
            if pauses:
                gf, p = max(pauses, key=lambda x: x[1].seconds)
                gc_note = f"; its GC log shows a {p.seconds:.1f} s pause ({gf.path}:{p.line}) that alone exceeds a typical session timeout"
            out.append(Finding(
                kind="zk_session_expired", severity=Severity.WARNING,
                summary=(f"{_bid(b)}'s ZooKeeper session expired {len(exp)} time(s)"
                         + (f"; before that its client heard nothing from ZooKeeper for up to {longest} ms: the broker process itself "
                            "was stalled (GC, SIGSTOP, swap) or cut off" if longest else "") + gc_note
                         + "; while expired it is missing from /brokers/ids and its leaderships move"),
                broker_ids=(b,) if b is not None else (), evidence=(_cite(f, sorted(exp + to, key=lambda r: r.line)),),
                details={"expiries": len(exp), "longest_silence_ms": longest or None,
                         "gc_pauses_s": [p.seconds for _, p in pauses][:20]}))
    return out


def _zk_server_findings(files: list[ParsedFile], offsets, gc, zk_configs: dict[str, Any],
                        zones: dict[str, str] | None = None) -> list[Finding]:
    """Followers dropping out of the ensemble (seed 004), with syncLimit x tickTime and correlations."""
    out = []
    drops = []
    for _, fs in _logs(files).items():
        for f in fs:
            s: LogSummary = f.result
            if f.kind != "zk_log" and not any(s.count(n) for n in ("zk_follow_exception", "zk_transaction_timeout", "zk_learner_closed")):
                continue
            server = f.server or (str(f.broker_id) if f.broker_id is not None else f.host or f.path)
            follows = s.signatures("zk_follow_exception")
            for r in follows:
                took = next((e for e in s.signatures("zk_election_took") if e.line > r.line), None)
                disc = next((e for e in s.signatures("zk_disconnected_from_leader") if e.line >= r.line and e.line - r.line < 50), None)
                drops.append({"server": server, "at": r.ts, "line": r.line, "file": f.path, "host": f.host,
                              "zone": (zones or {}).get(str(server)),
                              "cause": r.attrs.get("cause"), "rejoined_after_ms": int(took.attrs["millis"]) if took else None,
                              "connected_for_ms": int(disc.attrs["millis"]) if disc and disc.attrs.get("millis") else None,
                              "rec": r, "took": took})
            for r in s.signatures("zk_transaction_timeout") + s.signatures("zk_learner_closed"):
                drops.append({"server": server, "at": r.ts, "line": r.line, "file": f.path, "host": f.host, "leader_side": r.signature,
                              "learner": r.attrs.get("sid"), "rec": r})
    if not drops:
        return out
    cfg = next(iter(zk_configs.values()), None) if zk_configs else None
    arithmetic = None
    if cfg is not None:
        tick, sync = cfg.int("tickTime"), cfg.int("syncLimit")
        if tick and sync:
            arithmetic = f"syncLimit {sync} x tickTime {tick} ms = {sync * tick} ms: a proposal or ping unacknowledged for longer makes the leader drop the follower"
    follower = [d for d in drops if "leader_side" not in d]
    leader_side = [d for d in drops if "leader_side" in d]
    by_file: dict[str, list] = defaultdict(list)
    for d in drops:
        by_file[d["file"]].append(d)
    evidence = tuple(Evidence(p, tuple(sorted({d["line"] for d in ds} | {d["took"].line for d in ds if d.get("took")}))[:MAX_CITED_LINES],
                              "\n".join(f"{d['line']}: {d['rec'].raw}"[:400] for d in ds[:6]), ds[0]["host"]) for p, ds in by_file.items())
    # correlations in the same minutes: brokers' session expiries, GC pauses
    minutes = {d["at"][:16] for d in drops}
    corr = []
    for b, fs in _logs(files).items():
        for f in fs:
            for r in f.result.signatures("zk_session_expired") + f.result.signatures("zk_session_timeout"):
                if r.ts[:16] in minutes:
                    corr.append(f"{_bid(b)} {r.signature} at {r.ts} ({f.path}:{r.line})")
    for b, pauses in gc.items():
        for gf, p in pauses:
            if p.at and p.at[:16].replace(" ", "T") in minutes and p.seconds >= 1:
                corr.append(f"GC pause {p.seconds:.1f} s on {_bid(b)} at {p.at} ({gf.path}:{p.line})")
    servers = sorted({d["server"] for d in follower}) or sorted({d["server"] for d in leader_side})
    summary = (f"ZooKeeper follower(s) {', '.join(map(str, servers))} dropped out of the ensemble {len(follower)} time(s)"
               + (f" and rejoined after {', '.join(str(d['rejoined_after_ms']) + ' ms' for d in follower if d.get('rejoined_after_ms') is not None)}" if any(d.get('rejoined_after_ms') is not None for d in follower) else "")
               + (f"; the leader dropped learner(s) {', '.join(sorted({str(d.get('learner')) for d in leader_side if d.get('learner')}))}" if leader_side else "")
               + (f"; {arithmetic}" if arithmetic else "; syncLimit x tickTime unknown (no zoo.cfg in the bundle)")
               + (f"; same minutes: {'; '.join(corr[:5])}" if corr else "; no broker session expiry or GC pause in the same minutes"))
    out.append(Finding(
        kind="zk_follower_drop", severity=Severity.WARNING, summary=summary, evidence=evidence,
        details={"drops": [{k: v for k, v in d.items() if k not in ("rec", "took")} for d in drops][:200],
                 "sync_timeout": arithmetic, "correlated": corr[:50],
                 "record": "each drop: time, server, rejoin time; zone/rack from the cluster settings when configured"}))
    return out


def _zk_stats_findings(files: list[ParsedFile]) -> list[Finding]:
    """One server with very few client connections while its peers have many, no election (same epoch)."""
    stats = [f for f in files if f.kind in ("zk_mntr", "zk_srvr") and f.result is not None and not f.problems and f.result.ok]
    if len(stats) < 2:
        return []
    latest: dict[str, ParsedFile] = {}
    for f in sorted(stats, key=lambda f: (f.seq, f.path)):
        latest[f.server or f.host or f.path] = f
    conns = {k: f.result.connections for k, f in latest.items() if f.result.connections is not None}
    if len(conns) < 2:
        return []
    out = []
    epochs = {f.result.epoch for f in latest.values() if f.result.epoch is not None}
    top = max(conns.values())
    for k, n in conns.items():
        if top >= 20 and n < 10 and n * 5 < top:
            f = latest[k]
            out.append(Finding(
                kind="zk_server_starved", severity=Severity.WARNING,
                summary=(f"ZooKeeper server {k} serves only {n} client connection(s) while a peer serves {top}"
                         + ("; all servers on the same epoch: no ensemble election happened" if len(epochs) == 1 else "")
                         + f"; packets received {f.result.packets_received}"),
                evidence=(Evidence(f.path, (), f"connections {n}, mode {f.result.mode}, zxid {hex(f.result.zxid) if f.result.zxid is not None else '?'}", f.host),),
                details={"server": k, "connections": conns, "epochs": sorted(epochs)}))
    return out


def _jmx_findings(files: list[ParsedFile], versions: dict[int | None, str]) -> list[Finding]:
    """Request queue at its bound (queued.max.requests, default 500): before Kafka 2.2 (KIP-291) controller
    requests wait in the same queue behind client requests (incident 003)."""
    from .known_bugs import parse_version

    out = []
    configs = {b: fs[-1].result for b, fs in _by_broker(files, "kafka_config").items()}
    for b, fs in _by_broker(files, "jmx").items():
        series = [(f, t, v) for f in fs for t, v in f.result.series("RequestQueueSize")]
        if not series:
            continue
        cfg = configs.get(b)
        bound = (cfg.int("queued.max.requests") if cfg is not None else None) or 500
        f, t, peak = max(series, key=lambda x: x[2])
        if peak < 0.9 * bound:
            continue
        v = parse_version(versions.get(b))
        kip = ""
        if v is not None and v < (2, 2, 0, 0):
            kip = (f"; Kafka {versions.get(b)} < 2.2 queues controller requests behind client requests (KIP-291): "
                   "leadership changes wait too")
        out.append(Finding(kind="request_queue_saturated", severity=Severity.WARNING,
                           summary=(f"{_bid(b)}: RequestQueueSize reached {peak:.0f} of queued.max.requests {bound}"
                                    f"{' (default)' if cfg is None or cfg.int('queued.max.requests') is None else ''}{kip}"),
                           broker_ids=(b,) if b is not None else (),
                           evidence=(Evidence(f.path, (), f"time {t}: RequestQueueSize {peak:.0f}", f.host),),
                           details={"peak": peak, "bound": bound, "samples": len(series)}))
    return out


def _gc_by_broker(files: list[ParsedFile]) -> dict[int | None, list]:
    out: dict[int | None, list] = defaultdict(list)
    for b, fs in _by_broker(files, "gc_log").items():
        for f in fs:
            for p in f.result.pauses + f.result.stopped:
                out[b].append((f, p))
    return out


def _gc_findings(gc: dict[int | None, list]) -> list[Finding]:
    out = []
    for b, pauses in gc.items():
        long = [(f, p) for f, p in pauses if p.seconds * 1000 >= STALL_MS]
        if long:
            f, p = max(long, key=lambda x: x[1].seconds)
            out.append(Finding(kind="gc_pause_long", severity=Severity.WARNING,
                               summary=(f"{_bid(b)}: {len(long)} GC pause(s) of {STALL_MS / 1000:.0f} s or more, the longest {p.seconds:.1f} s "
                                        f"at {p.at or ('uptime ' + str(p.uptime_s) + ' s')}: long enough to expire a ZooKeeper session"),
                               broker_ids=(b,) if b is not None else (),
                               evidence=(Evidence(f.path, tuple(x.line for _, x in long[:MAX_CITED_LINES]), "\n".join(f"{x.line}: {x.text}" for _, x in long[:5]), f.host),),
                               details={"pauses_s": [x.seconds for _, x in long][:50]}))
    return out


def _simple_log_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    specs = (
        ("registration_conflict", "registration_conflict", Severity.CRITICAL,
         "{b} was started while its previous ZooKeeper session still held its registration; it exited ('Exiting Kafka.'): "
         "wait until the old /brokers/ids entry is gone before starting it"),
        ("response_without_connection", "responses_after_client_left", Severity.WARNING,
         "{b} finished {n} request(s) after their client had disconnected ('no open connection'): clients are timing out "
         "on it (slow or stuck request handling, or a connection storm)"),
        ("isr_update_skipped", "isr_update_skipped", Severity.WARNING,
         "{b}: {n} ISR update(s) skipped because its cached partition state is stale (zkVersion mismatch; repeated, "
         "it is KAFKA-2729: the broker must be restarted)"),
        ("isr_shrink", "isr_shrink", Severity.INFO, "{b}: {n} ISR shrink(s)"),
        ("preferred_election", "preferred_elections", Severity.INFO,
         "{b} (controller) ran {n} preferred replica leader election(s)"),
        ("controlled_shutdown_start", "own_controlled_shutdown", Severity.INFO,
         "{b} did a controlled shutdown of its own: its fetch errors around it are not its peers' fault"),
    )
    for b, fs in _logs(files).items():
        for f in fs:
            s: LogSummary = f.result
            for sig, kind, sev, text in specs:
                recs = s.signatures(sig)
                if not recs:
                    continue
                n = s.count(sig)
                parts = tuple(sorted({f"{r.attrs['topic']}-{r.attrs['partition']}" for r in recs if "topic" in r.attrs}))[:100]
                out.append(Finding(kind=kind, severity=sev, summary=text.format(b=_bid(b), n=n), broker_ids=(b,) if b is not None else (),
                                   partitions=parts, evidence=(_cite(f, recs),),
                                   details={"count": n, "sampled": bool(s.omitted.get(sig))}))
    return out


# ---------------------------------------------------------------- unparsable


def _has_content(result: Any) -> bool:
    return any(bool(getattr(result, a, None)) for a in ("threads", "dumps", "deadlock_stacks", "rows", "events", "count",
                                                          "pauses", "files", "partitions", "results", "counts"))


def _unparsable_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for f in files:
        reasons = f.reasons
        notes = list(f.notes) + list(getattr(f.result, "notes", []) or [])
        damaged = [n for n in notes if "damaged" in n or "invalid UTF-8" in n or "UTF-16" in n]
        if not reasons and not damaged:
            continue
        if not reasons:
            out.append(Finding(kind="damaged_evidence", severity=Severity.INFO,
                               summary=f"{f.path} ({f.kind}) was analysed with damage: {'; '.join(damaged)}",
                               broker_ids=(f.broker_id,) if f.broker_id is not None else (),
                               evidence=(Evidence(source=f.path, excerpt="; ".join(damaged), host=f.host),),
                               details={"path": f.path, "kind": f.kind, "notes": damaged}))
            continue
        out.append(Finding(
            kind="unparsable", severity=Severity.WARNING,
            summary=f"{f.path} ({f.kind}) could not be parsed: {'; '.join(reasons)}",
            broker_ids=(f.broker_id,) if f.broker_id is not None else (),
            evidence=(Evidence(source=f.path, excerpt="; ".join(reasons + damaged), host=f.host),),
            details={"path": f.path, "kind": f.kind, "reasons": reasons, "bytes": f.bytes, "notes": damaged,
                     "partially_parsed": _has_content(f.result) and not f.problems},
        ))
    return out


def _as_summary(f: ParsedFile) -> ParsedFile:
    """Log results given as a LogParse/KafkaLog (pure callers) become the LogSummary diagnose reads."""
    from .logsummary import summarize
    from .parsers.kafka_log import KafkaLog
    from .parsers.logs import LogParse

    r = f.result
    if isinstance(r, KafkaLog):
        r = r.parse
    if isinstance(r, LogParse):
        return ParsedFile(path=f.path, kind=f.kind, broker_id=f.broker_id, host=f.host,
                          result=summarize(r, f.path, f.kind, f.broker_id, f.host), problems=list(f.problems), seq=f.seq,
                          bytes=f.bytes, notes=list(f.notes), server=f.server, embedded=f.embedded, parse_s=f.parse_s,
                          duplicate_of=f.duplicate_of)
    if f.kind == "jstack" and isinstance(r, JstackDump):
        return ParsedFile(path=f.path, kind=f.kind, broker_id=f.broker_id, host=f.host, result=ThreadDumps(dumps=[r]),
                          problems=list(f.problems), seq=f.seq, bytes=f.bytes, notes=list(f.notes), server=f.server,
                          embedded=f.embedded, parse_s=f.parse_s, duplicate_of=f.duplicate_of)
    return f


def diagnose(files: list[ParsedFile], kafka_version: str | None = None,
             broker_ports: dict[int, int] | None = None,
             broker_hosts: dict[int, str] | None = None,
             broker_versions: dict[int, str] | None = None,
             window: Window | None = None,
             utc_offsets: dict[int, dt.timedelta] | None = None,
             zk_zones: dict[str, str] | None = None) -> list[Finding]:
    """All findings for one bundle, most severe first.

    Kafka version per broker: `kafka_version` (from configuration) overrides everything, then the
    server.log `Kafka version` line, then `broker_versions` (e.g. from the cluster snapshot).
    """
    mark_duplicate_logs(files)
    files = [_as_summary(f) for f in files]
    window = window or Window()
    offsets: dict[int | None, dt.timedelta] = dict(utc_offsets or {})
    versions: dict[int | None, str] = dict(broker_versions or {})
    versions.update(kafka_versions(files))
    gc = _gc_by_broker(files)
    zk_configs = {f.server or f.path: f.result for f in files if f.kind == "zk_config" and f.result is not None and f.result.ok}
    findings = (_deadlock_findings(files, versions, kafka_version) + _owner_unknown_findings(files)
                + _probe_findings(files, broker_ports, broker_hosts)
                + _close_wait_findings(files, broker_ports, broker_hosts) + _fetch_findings(files, window, offsets, gc)
                + _request_findings(files, versions) + _group_load_findings(files) + _cleaner_findings(files)
                + _listing_findings(files) + _dumplog_findings(files) + _zk_session_findings(files, offsets, gc)
                + _zk_server_findings(files, offsets, gc, zk_configs, zk_zones) + _zk_stats_findings(files) + _gc_findings(gc)
                + _simple_log_findings(files) + _jmx_findings(files, versions) + _process_findings(files)
                + _unparsable_findings(files))
    rank = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(findings, key=lambda x: rank[x.severity])


def _process_findings(files: list[ParsedFile]) -> list[Finding]:
    """/proc/<pid>/stat of a broker (kind process_state): a STOPPED process (SIGSTOP, a debugger, a job-control
    stop) serves nothing and answers nothing until continued; it also explains its peers' fetch failures and its
    ZooKeeper session expiring."""
    out = []
    for b, fs in _by_broker(files, "process_state").items():
        stopped = [(f, f.result.process) for f in fs if f.result.process and f.result.process.state in ("T", "t")]
        if not stopped:
            continue
        f, p = stopped[-1]
        out.append(Finding(
            kind="process_stopped", severity=Severity.CRITICAL,
            summary=(f"{_bid(b)}'s process {p.tid} ({p.name}) is {PROC_STATES.get(p.state, p.state)} (state {p.state} in "
                     f"/proc/<pid>/stat, {len(stopped)} of {len(fs)} sample(s)): stopped by SIGSTOP, a debugger or job "
                     "control, it serves nothing until continued (SIGCONT)"),
            broker_ids=(b,) if b is not None else (),
            evidence=tuple(Evidence(g.path, (q.line,), f"{q.tid} ({q.name}) {q.state}", g.host) for g, q in stopped),
            details={"pid": p.tid, "state": p.state, "samples": len(fs), "stopped_samples": len(stopped)}))
    return out


# ---------------------------------------------------------------- tables for the report


def broker_table(files: list[ParsedFile], broker_ports: dict[int, int] | None = None,
                 broker_hosts: dict[int, str] | None = None) -> list[dict]:
    """One row per broker: pid, uptime, RSS, open files, heap, connection states on its listener, threads blocked."""
    files = [_as_summary(f) for f in files]
    rows: dict[int | None, dict] = {}

    def row(b):
        return rows.setdefault(b, {"broker_id": b, "pid": None, "uptime_s": None, "rss_kb": None, "open_files": None,
                                   "heap_used_kb": None, "heap_total_kb": None, "connection_states": {},
                                   "threads_blocked": None, "threads_total": None, "kafka_version": None,
                                   "listener_port": broker_port_of(b, broker_ports),
                                   "listener_ports": list(broker_ports_of(b, broker_ports))})

    for b, fs in _by_broker(files, "process_stat").items():
        p: ProcessStat = fs[-1].result
        row(b).update(pid=p.pid, uptime_s=p.uptime_s, rss_kb=p.rss_kb)
    for b, fs in _by_broker(files, "open_files").items():
        o: OpenFiles = fs[-1].result
        row(b)["open_files"] = o.count
    for b, fs in _by_broker(files, "heap_info").items():
        h: HeapInfo = fs[-1].result
        row(b).update(heap_used_kb=h.used_kb, heap_total_kb=h.total_kb)
    for b, fs in _socket_tables(files).items():
        row(b)["connection_states"] = dict(
            Counter(r.state for r in fs[-1].result.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts)))
    for b, pairs in _dumps_by_broker(files).items():
        d = pairs[-1][1]
        ts = d.all_threads()
        row(b).update(threads_total=len(ts), threads_blocked=sum(1 for t in ts if t.state == "BLOCKED"))
    for b, v in kafka_versions(files).items():
        row(b)["kafka_version"] = v
    return [rows[k] for k in sorted(rows, key=lambda x: (x is None, x or 0))]


def file_table(files: list[ParsedFile]) -> list[dict]:
    """How each file was read: layout, parsed share, reader, problems (the report's 'Evidence read' table)."""
    out = []
    for f in files:
        r = f.result
        row = {"path": f.path, "kind": f.kind, "broker_id": f.broker_id, "bytes": f.bytes,
               "problems": "; ".join(f.reasons) or None, "notes": "; ".join(f.notes + list(getattr(r, "notes", []) or [])) or None}
        if isinstance(r, LogSummary):
            row.update(layout=r.layout, parsed_share=r.parsed_share, share_sampled=r.share_sampled, read_by=r.read_by,
                       signatures=sum(r.counts.values()))
        elif isinstance(r, ThreadDumps):
            row.update(layout="thread dump" + (" (inside the log)" if f.embedded else ""), dumps=len(r.dumps),
                       formats=sorted({d.format for d in r.dumps}))
        out.append(row)
    return out


def timeline(files: list[ParsedFile], limit: int = 300) -> list[dict]:
    """Key log events (signatures and ERROR/FATAL lines) across brokers, in time order."""
    mark_duplicate_logs(files)
    files = [_as_summary(f) for f in files]
    out = []
    for b, fs in _logs(files).items():
        for f in fs:
            for e in f.result.events:
                out.append({"timestamp": e.timestamp, "broker_id": b, "level": e.level, "signature": e.signature or "",
                            "message": e.message[:400], "source": f.path, "line": e.line})
    out.sort(key=lambda r: r["timestamp"])
    return out[:limit]
