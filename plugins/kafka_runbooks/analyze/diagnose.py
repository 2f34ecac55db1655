"""From the parsed evidence of one bundle to findings (model.Finding). Pure: no I/O.

Inputs are ParsedFile records (one per manifest file: path, kind, broker, the parser's result and any
problems met before parsing, e.g. a sha256 mismatch). Outputs:
- "jvm_deadlock" (critical): wait-for cycles found from lock ownership in the jstack stacks, progress across
  successive dumps, known-bug matching by Kafka version, upgrade advice;
- "close_wait_pileup": connections piling up in CLOSE_WAIT on the broker port;
- "peer_fetch_failures": peers' ReplicaFetcherThread errors naming a broker;
- "processor_uncaught_exception", "group_load_unfinished", "isr_shrink";
- "unparsable" (warning) for every file that could not be (fully) parsed.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..model import Evidence, Finding, Severity
from .known_bugs import make_signature, match_known_bugs, upgrade_advice
from .lockgraph import Cycle, LockEdge, WaitForGraph, build_wait_for_graph, chain_into, compare_dumps, find_cycles
from .parsers.jstack import JstackDump
from .parsers.kafka_log import KafkaLog
from .parsers.misc import HeapInfo, OpenFiles, ProcessStat
from .parsers.sockets import SocketTable

DEFAULT_BROKER_PORT = 9092
CLOSE_WAIT_MIN = 5
MAX_CITED_LINES = 50


@dataclass
class ParsedFile:
    path: str  # bundle-relative
    kind: str
    broker_id: int | None = None
    host: str | None = None
    result: Any = None  # parser result, None when not parsed
    problems: list[str] = field(default_factory=list)  # problems before parsing (missing file, sha256 mismatch)
    seq: str = ""  # ordering key among files of one kind (command started_at, else path)
    bytes: int = 0

    @property
    def reasons(self) -> list[str]:
        return list(self.problems) + list(getattr(self.result, "unparsable", []) or [])


def _natural(s: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s)]


def _by_broker(files: Iterable[ParsedFile], kind: str | tuple[str, ...]) -> dict[int | None, list[ParsedFile]]:
    kinds = (kind,) if isinstance(kind, str) else kind
    out: dict[int | None, list[ParsedFile]] = defaultdict(list)
    for f in files:
        if f.kind in kinds and f.result is not None and not f.problems:
            out[f.broker_id].append(f)
    for v in out.values():
        v.sort(key=lambda f: (f.seq, _natural(f.path)))
    return out


def kafka_versions(files: Iterable[ParsedFile]) -> dict[int | None, str]:
    out: dict[int | None, str] = {}
    for b, logs in _by_broker(files, "server_log").items():
        for f in logs:
            v = f.result.kafka_version
            if v:
                out[b] = v
    return out


# ---------------------------------------------------------------- deadlocks


def _edge_dict(e: LockEdge, in_cycle: bool) -> dict:
    return {"thread": e.waiter, "waiting_for": {"address": e.address, "class": e.cls, "kind": e.kind},
            "held_by": e.holder, "in_cycle": in_cycle}


def _cycle_evidence(f: ParsedFile, dump: JstackDump, edges: list[LockEdge]) -> Evidence:
    lines: set[int] = set()
    excerpt: list[tuple[int, str]] = []
    for e in edges:
        t = dump.thread(e.waiter)
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
        h = dump.thread(e.holder)
        if h is not None and e.holder_line:
            ref = next((r for r, _ in h.held() if r.line == e.holder_line), None)
            lines.add(e.holder_line)
            excerpt.append((e.holder_line, f"\t{ref.text if ref else ''}   [in {e.holder!r}]"))
    for dl in dump.deadlocks:  # jstack's own report, when present
        names = {x.thread for x in dl}
        if names & {e.waiter for e in edges}:
            for x in dl:
                lines.add(x.line)
    seen, ex = set(), []
    for ln, text in sorted(excerpt):
        if (ln, text) not in seen:
            seen.add((ln, text))
            ex.append(f"{ln}: {text}")
    return Evidence(source=f.path, lines=tuple(sorted(lines))[:MAX_CITED_LINES], excerpt="\n".join(ex), host=f.host)


def _deadlock_findings(files: list[ParsedFile], versions: dict[int | None, str], kafka_version: str | None) -> list[Finding]:
    findings: list[Finding] = []
    for broker, dumps_f in _by_broker(files, "jstack").items():
        dumps = [f.result for f in dumps_f]
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
            members = set(cycle.threads)
            tails = [e for e in chain if e.waiter not in members]
            present = [k for k, cs in enumerate(per_dump) if any(c.key() == key for c in cs)]
            progress = compare_dumps(dumps[k0:], cycle.threads)
            reasons = list(progress.reasons)
            status = progress.status
            if len(present) != len(dumps) - k0:
                status = "progressing"
                reasons.append(f"cycle present in {len(present)} of {len(dumps)} dumps")
            frames = [fr.text for n in members | {e.waiter for e in tails}
                      for t in [d0.thread(n)] if t for fr in t.frames[:12]]
            sig = make_signature([e.waiter for e in chain], [e.cls for e in chain], frames)
            candidates, ruled_out = match_known_bugs(sig, version)
            path = [e.waiter for e in chain] + [chain[-1].holder]
            locks = []
            for e in chain:
                s = f"<{e.address}> ({e.cls})"
                if s not in locks:
                    locks.append(s)
            bid = f"broker {broker}" if broker is not None else "an unknown broker"
            summary = (f"JVM deadlock on {bid}: {' -> '.join(path)}; locks {', '.join(locks)}; "
                       f"{status} across {len(dumps) - k0} dump(s)")
            if candidates and version:
                summary += f"; Kafka {version}: matches {', '.join(c['id'] for c in candidates)}"
            reported = any(set(x.thread for x in dl) & members for d in dumps for dl in d.deadlocks)
            findings.append(Finding(
                kind="jvm_deadlock",
                severity=Severity.CRITICAL,
                summary=summary,
                broker_ids=(broker,) if broker is not None else (),
                evidence=tuple(_cycle_evidence(f, d, chain) for f, d in zip(dumps_f[k0:], dumps[k0:])),
                details={
                    "cycle": [_edge_dict(e, e.waiter in members) for e in chain],
                    "cycle_threads": list(cycle.threads),
                    "blocked_behind_cycle": [e.waiter for e in tails],
                    "dumps": len(dumps) - k0,
                    "dump_files": [f.path for f in dumps_f[k0:]],
                    "progress": status,
                    "progress_notes": reasons,
                    "reported_by_jstack": reported,
                    "kafka_version": version,
                    "known_bugs": candidates,
                    "ruled_out_bugs": ruled_out,
                    "advice": upgrade_advice(broker, version, candidates),
                },
            ))
    return findings


# ---------------------------------------------------------------- sockets


def broker_port_of(broker: int | None, broker_ports: dict[int, int] | None) -> int:
    if broker_ports and broker is not None and broker in broker_ports:
        return broker_ports[broker]
    return DEFAULT_BROKER_PORT


def on_broker_endpoint(row, broker: int | None, broker_ports: dict[int, int] | None,
                       broker_hosts: dict[int, str] | None = None) -> bool:
    """A socket of the broker's own listener: its port and, when the broker's address is known, that
    address (a host with several addresses, or hosts sharing one socket table, show others' sockets too)."""
    if row.local_port != broker_port_of(broker, broker_ports):
        return False
    host = (broker_hosts or {}).get(broker) if broker is not None else None
    return not host or row.local_host in (host, "*", "0.0.0.0", "::")


def _close_wait_findings(files: list[ParsedFile], broker_ports: dict[int, int] | None,
                         broker_hosts: dict[int, str] | None = None) -> list[Finding]:
    tables = _by_broker(files, ("sockets_ss", "sockets_netstat"))
    port_counts: dict[int | None, dict[str, int]] = {}
    latest: dict[int | None, ParsedFile] = {}
    for b, fs in tables.items():
        f = fs[-1]
        latest[b] = f
        port_counts[b] = dict(Counter(r.state for r in f.result.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts)))
    findings = []
    for b, f in latest.items():
        t: SocketTable = f.result
        port = broker_port_of(b, broker_ports)
        rows = [r for r in t.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts) and r.state != "LISTEN"]
        cw = [r for r in rows if r.state == "CLOSE_WAIT"]
        if len(cw) < CLOSE_WAIT_MIN or len(cw) * 2 < len(rows):
            continue
        peers = Counter(r.peer_host for r in cw)
        recvq = sum(r.recv_q for r in cw)
        others = {str(o): c for o, c in port_counts.items() if o != b}
        bid = f"broker {b}" if b is not None else "an unknown broker"
        summary = (f"connections piling up in CLOSE_WAIT on {bid}: {len(cw)} of {len(rows)} connections on :{port} "
                   f"(peers: {', '.join(f'{h} x{n}' for h, n in peers.most_common(5))}); {recvq} bytes unread in Recv-Q")
        if others:
            summary += "; other brokers on :" + str(port) + ": " + ", ".join(
                f"{o}: {c.get('CLOSE_WAIT', 0)} CLOSE_WAIT / {sum(c.values())}" for o, c in others.items())
        cited = cw[:MAX_CITED_LINES]
        findings.append(Finding(
            kind="close_wait_pileup",
            severity=Severity.CRITICAL if len(cw) >= 100 else Severity.WARNING,
            summary=summary,
            broker_ids=(b,) if b is not None else (),
            evidence=(Evidence(source=f.path, lines=tuple(r.line for r in cited),
                               excerpt="\n".join(f"{r.line}: {r.state} recv_q={r.recv_q} {r.local} <- {r.peer}"
                                                 for r in cited[:10]), host=f.host),),
            details={"port": port, "states_on_port": port_counts[b], "close_wait_by_peer": dict(peers),
                     "recv_q_bytes_close_wait": recvq, "other_brokers_on_port": others,
                     "meaning": "the broker stopped closing (reading) sockets its peers already closed: "
                                "its network/request threads are not making progress"},
        ))
    return findings


# ---------------------------------------------------------------- logs


def _log_findings(files: list[ParsedFile]) -> list[Finding]:
    findings: list[Finding] = []
    logs = _by_broker(files, "server_log")
    by_remote: dict[int, list[tuple[ParsedFile, Any]]] = defaultdict(list)
    for b, fs in logs.items():
        for f in fs:
            for e in f.result.signatures("replica_fetch_error"):
                remote = e.attrs.get("disconnected_broker") or e.attrs.get("remote_broker")
                if remote is not None:
                    by_remote[int(remote)].append((f, e))
    for remote, evs in sorted(by_remote.items()):
        reporters = sorted({f.broker_id for f, _ in evs if f.broker_id is not None})
        times = sorted(e.timestamp for _, e in evs)
        causes = Counter((e.exception or e.message)[:160] for _, e in evs)
        per_file: dict[str, list] = defaultdict(list)
        for f, e in evs:
            per_file[f.path].append((f, e))
        evidence = []
        for path, items in per_file.items():
            lines, ex = [], []
            for f, e in items[:MAX_CITED_LINES // 2]:
                lines.append(e.line)
                ex.append(f"{e.line}: [{e.timestamp}] {e.level} {e.message}")
                if e.exception and e.exception_line:
                    lines.append(e.exception_line)
                    ex.append(f"{e.exception_line}: {e.exception}")
            evidence.append(Evidence(source=path, lines=tuple(lines), excerpt="\n".join(ex[:10]), host=items[0][0].host))
        findings.append(Finding(
            kind="peer_fetch_failures",
            severity=Severity.WARNING,
            summary=(f"peers report fetch failures from broker {remote}: {len(evs)} error(s) logged by broker(s) "
                     f"{', '.join(map(str, reporters)) or '?'} between {times[0]} and {times[-1]} "
                     f"({causes.most_common(1)[0][0]})"),
            broker_ids=(remote,),
            evidence=tuple(evidence),
            details={"reporters": reporters, "count": len(evs), "first": times[0], "last": times[-1],
                     "causes": dict(causes)},
        ))
    for b, fs in logs.items():
        for f in fs:
            log: KafkaLog = f.result
            pe = log.signatures("processor_uncaught_exception")
            if pe:
                keys = sorted({e.attrs.get("unknown_api_key") for e in pe if e.attrs.get("unknown_api_key")})
                findings.append(Finding(
                    kind="processor_uncaught_exception", severity=Severity.CRITICAL,
                    summary=(f"broker {b}: network Processor got {len(pe)} uncaught exception(s)"
                             + (f" (unknown API key {', '.join(keys)}: a newer client; every request in the same "
                                "poll batch is dropped)" if keys else "")),
                    broker_ids=(b,) if b is not None else (),
                    evidence=(Evidence(f.path, tuple(e.line for e in pe[:MAX_CITED_LINES]),
                                       "\n".join(f"{e.line}: [{e.timestamp}] {e.message} {e.exception or ''}" for e in pe[:5]),
                                       f.host),),
                    details={"count": len(pe), "unknown_api_keys": keys},
                ))
            starts = {e.attrs.get("partition"): e for e in log.signatures("group_load_start")}
            for e in log.signatures("group_load_done"):
                s = starts.get(e.attrs.get("partition"))
                if s is not None and s.line < e.line:
                    starts.pop(e.attrs.get("partition"))
            if starts:
                parts = sorted(starts, key=lambda p: int(p or 0))
                findings.append(Finding(
                    kind="group_load_unfinished", severity=Severity.WARNING,
                    summary=(f"broker {b}: loading of __consumer_offsets partition(s) {', '.join(parts)} started "
                             "without a matching 'Finished loading offsets' (groups of those partitions get "
                             "NOT_COORDINATOR until it completes)"),
                    broker_ids=(b,) if b is not None else (),
                    partitions=tuple(f"__consumer_offsets-{p}" for p in parts),
                    evidence=(Evidence(f.path, tuple(starts[p].line for p in parts),
                                       "\n".join(f"{starts[p].line}: [{starts[p].timestamp}] {starts[p].message}" for p in parts[:10]),
                                       f.host),),
                    details={"partitions": parts},
                ))
            shrinks = log.signatures("isr_shrink")
            if shrinks:
                parts = sorted({f"{e.attrs['topic']}-{e.attrs['partition']}" for e in shrinks})
                findings.append(Finding(
                    kind="isr_shrink", severity=Severity.INFO,
                    summary=f"broker {b}: {len(shrinks)} ISR shrink(s) on {len(parts)} partition(s)",
                    broker_ids=(b,) if b is not None else (), partitions=tuple(parts[:100]),
                    evidence=(Evidence(f.path, tuple(e.line for e in shrinks[:MAX_CITED_LINES]),
                                       "\n".join(f"{e.line}: [{e.timestamp}] {e.message}" for e in shrinks[:5]), f.host),),
                    details={"count": len(shrinks)},
                ))
    return findings


# ---------------------------------------------------------------- unparsable


def _has_content(result: Any) -> bool:
    return any(bool(getattr(result, a, None)) for a in ("threads", "deadlock_stacks", "rows", "events", "count"))


def _unparsable_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for f in files:
        reasons = f.reasons
        if not reasons:
            continue
        out.append(Finding(
            kind="unparsable", severity=Severity.WARNING,
            summary=f"{f.path} ({f.kind}) could not be parsed: {'; '.join(reasons)}",
            broker_ids=(f.broker_id,) if f.broker_id is not None else (),
            evidence=(Evidence(source=f.path, excerpt="; ".join(reasons), host=f.host),),
            details={"path": f.path, "kind": f.kind, "reasons": reasons, "bytes": f.bytes,
                     "partially_parsed": _has_content(f.result) and not f.problems},
        ))
    return out


def diagnose(files: list[ParsedFile], kafka_version: str | None = None,
             broker_ports: dict[int, int] | None = None,
             broker_hosts: dict[int, str] | None = None,
             broker_versions: dict[int, str] | None = None) -> list[Finding]:
    """All findings for one bundle, most severe first.

    Kafka version per broker: `kafka_version` (from configuration) overrides everything, then the
    server.log `Kafka version :` line, then `broker_versions` (e.g. from the cluster snapshot).
    """
    files = list(files)
    versions: dict[int | None, str] = dict(broker_versions or {})
    versions.update(kafka_versions(files))
    findings = (_deadlock_findings(files, versions, kafka_version) + _close_wait_findings(files, broker_ports, broker_hosts)
                + _log_findings(files) + _unparsable_findings(files))
    rank = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(findings, key=lambda x: rank[x.severity])


# ---------------------------------------------------------------- tables for the report


def broker_table(files: list[ParsedFile], broker_ports: dict[int, int] | None = None,
                 broker_hosts: dict[int, str] | None = None) -> list[dict]:
    """One row per broker: pid, uptime, RSS, open files, heap, connection states on its port, threads blocked."""
    rows: dict[int | None, dict] = {}

    def row(b):
        return rows.setdefault(b, {"broker_id": b, "pid": None, "uptime_s": None, "rss_kb": None, "open_files": None,
                                   "heap_used_kb": None, "heap_total_kb": None, "connection_states": {},
                                   "threads_blocked": None, "threads_total": None, "kafka_version": None})

    for b, fs in _by_broker(files, "process_stat").items():
        p: ProcessStat = fs[-1].result
        row(b).update(pid=p.pid, uptime_s=p.uptime_s, rss_kb=p.rss_kb)
    for b, fs in _by_broker(files, "open_files").items():
        o: OpenFiles = fs[-1].result
        row(b)["open_files"] = o.count
    for b, fs in _by_broker(files, "heap_info").items():
        h: HeapInfo = fs[-1].result
        row(b).update(heap_used_kb=h.used_kb, heap_total_kb=h.total_kb)
    for b, fs in _by_broker(files, ("sockets_ss", "sockets_netstat")).items():
        row(b)["connection_states"] = dict(
            Counter(r.state for r in fs[-1].result.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts)))
    for b, fs in _by_broker(files, "jstack").items():
        d: JstackDump = fs[-1].result
        ts = d.all_threads()
        row(b).update(threads_total=len(ts), threads_blocked=sum(1 for t in ts if t.state == "BLOCKED"))
    for b, v in kafka_versions(files).items():
        row(b)["kafka_version"] = v
    return [rows[k] for k in sorted(rows, key=lambda x: (x is None, x or 0))]


def timeline(files: list[ParsedFile], limit: int = 200) -> list[dict]:
    """Key log events (signatures and ERROR/FATAL lines) across brokers, in time order."""
    out = []
    for b, fs in _by_broker(files, "server_log").items():
        for f in fs:
            for e in f.result.events:
                if e.signature or e.level in ("ERROR", "FATAL"):
                    out.append({"timestamp": e.timestamp, "broker_id": b, "level": e.level,
                                "signature": e.signature or "", "message": e.message, "source": f.path, "line": e.line})
    out.sort(key=lambda r: r["timestamp"])
    return out[:limit]
