"""ZooKeeper, from both sides: the brokers' sessions (expired, or timed out and re-established), followers dropping
out of the ensemble (syncLimit x tickTime, with what happened in the same minutes), a server starved of clients, a
server that could not load its database at start and exited."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...findings import FindingKind
from ...model import Evidence, Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from .core import MAX_CITED_LINES, STALL_MS, broker_label, cite, logs_by_broker


def session_outcomes(s: LogSummary) -> list[dict]:
    """What followed each time the ZooKeeper client timed out in one log: the same session id re-established (a
    reconnect: the session survived), Kafka's expiry wording or a new session id (it expired), the broker restarting,
    or nothing the log shows. One timeout is one event however many lines say it: the 3.4 client logs it as a WARN
    ('Client session timed out, ...') and again as an INFO ('..., closing socket connection and attempting
    reconnect'), and a client that keeps failing to reconnect says it again; the lines of one session with no
    reconnection, expiry or restart between them are one event (its longest silence, its first line cited)."""
    events = sorted(s.signatures("zk_session_timeout") + s.signatures("zk_session_established")
                    + s.signatures("zk_session_expired") + s.signatures("kafka_version"), key=lambda r: r.line)
    out = []
    for k, r in enumerate(events):
        if r.signature != "zk_session_timeout":
            continue
        prev = events[k - 1] if k else None
        if prev is not None and prev.signature == "zk_session_timeout" and prev.attrs.get("session") == r.attrs.get("session"):
            continue  # the same event, said again: counted with its first line
        outcome, by, lines, millis = "unknown", None, [r], int(r.attrs.get("millis", "0") or 0)
        for x in events[k + 1:]:
            if x.signature == "zk_session_timeout" and x.attrs.get("session") == r.attrs.get("session"):
                lines.append(x)  # the same silence logged again while reconnecting
                millis = max(millis, int(x.attrs.get("millis", "0") or 0))
                continue
            if x.signature == "zk_session_expired":
                outcome, by = "expired", x
            elif x.signature == "kafka_version":
                outcome, by = "restarted", x
            elif x.signature == "zk_session_established":
                same = x.attrs.get("session", "").lower() == r.attrs.get("session", "").lower()
                outcome, by = ("reconnected" if same else "new_session"), x
            break
        out.append({"timeout": r, "outcome": outcome, "by": by, "millis": millis, "session": r.attrs.get("session"),
                    "lines": lines})
    return out


EXPIRY_LINES_WITHIN_S = 10  # one expiry is logged by the ZooKeeper client and by Kafka's ZooKeeperClient, moments apart


def distinct_expiries(exp: list) -> list:
    """The expiry lines that start an expiry: Kafka 1.1+ logs one expiry twice (ClientCnxn's 'Unable to reconnect ...
    has expired', then '[ZooKeeperClient] Session expired.'); lines within EXPIRY_LINES_WITHIN_S of the previous one
    are the same expiry."""
    out, last = [], None
    for r in sorted(exp, key=lambda r: r.line):
        t = r.at()
        if last is not None and t is not None and (t - last).total_seconds() <= EXPIRY_LINES_WITHIN_S:
            last = t
            continue
        out.append(r)
        last = t
    return out


def zk_session_findings(files: list[ParsedFile], offsets, gc) -> list[Finding]:
    """An expiry is claimed only on Kafka's / the ZooKeeper client's expiry wording, or a new session id after a
    timeout; a timeout followed by the same session id is a reconnect (the broker stayed registered)."""
    out = []
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            exp = s.signatures("zk_session_expired")
            outcomes = session_outcomes(s)
            if not exp and not outcomes:
                continue
            pauses = [(gf, p) for gf, p in gc.get(b, []) if p.seconds * 1000 >= STALL_MS]
            gc_note = ""
            if pauses:
                gf, p = max(pauses, key=lambda x: x[1].seconds)
                gc_note = f"; its GC log shows a {p.seconds:.1f} s pause ({gf.path}:{p.line}) that alone exceeds a typical session timeout"
            renewed = [o for o in outcomes if o["outcome"] == "new_session"]
            distinct = distinct_expiries(exp)
            expired_n = len(distinct) + len(renewed)
            if expired_n:
                silent = [o for o in outcomes if o["outcome"] in ("expired", "new_session")]
                longest = max((o["millis"] for o in silent), default=0)
                how = []
                if exp:
                    how.append(f"{len(exp)} expiry line(s)" + (f" for {len(distinct)} expiry" if len(distinct) != len(exp) else ""))
                if renewed:
                    how.append(f"{len(renewed)} new session(s) after a timeout ("
                               + ", ".join(f"{o['session']} -> {o['by'].attrs.get('session')}" for o in renewed[:3]) + ")")
                recs = exp + [x for o in silent for x in o["lines"]] + [o["by"] for o in renewed]
                out.append(Finding(
                    kind="zk_session_expired", severity=Severity.WARNING,
                    summary=(f"{broker_label(b)}'s ZooKeeper session expired {expired_n} time(s) ({'; '.join(how)})"
                             + (f"; before that its client heard nothing from ZooKeeper for up to {longest} ms: the broker "
                                "process was stalled (GC, SIGSTOP, swap), or its ZooKeeper server or the network was" if longest else "")
                             + gc_note + "; while expired it is missing from /brokers/ids and its leaderships move"),
                    broker_ids=(b,) if b is not None else (), evidence=(cite(f, sorted(recs, key=lambda r: r.line)),),
                    details={"expiries": expired_n, "expiry_lines": len(exp), "new_sessions": len(renewed),
                             "longest_silence_ms": longest or None, "gc_pauses_s": [p.seconds for _, p in pauses][:20]}))
            kept = [o for o in outcomes if o["outcome"] in ("reconnected", "unknown", "restarted")]
            if not kept:
                continue
            back = [o for o in kept if o["outcome"] == "reconnected"]
            unknown = [o for o in kept if o["outcome"] == "unknown"]
            longest = max(o["millis"] for o in kept)
            parts = []
            if back:
                parts.append(f"{len(back)} time(s) it reconnected with the same session "
                             f"({', '.join(sorted({o['session'] for o in back}))}): the session did not expire and the broker "
                             "stayed registered")
            if unknown:
                parts.append(f"{len(unknown)} time(s) the log shows no reconnection after it"
                             + (" (events of this log were sampled)" if s.omitted.get("zk_session_established") else "")
                             + ": whether the session survived is not shown")
            restarted = [o for o in kept if o["outcome"] == "restarted"]
            if restarted:
                parts.append(f"{len(restarted)} time(s) the broker restarted before reconnecting")
            recs = [x for o in kept for x in o["lines"]] + [o["by"] for o in kept if o["by"] is not None]
            out.append(Finding(
                kind="zk_session_timeout", severity=Severity.INFO if not unknown else Severity.WARNING,
                summary=(f"{broker_label(b)}'s ZooKeeper client heard nothing from its server for up to {longest} ms "
                         f"({len(kept)} time(s)): the broker process, its ZooKeeper server or the network between them "
                         f"stalled that long; {'; '.join(parts)}" + gc_note),
                broker_ids=(b,) if b is not None else (), evidence=(cite(f, sorted(recs, key=lambda r: r.line)),),
                details={"timeouts": len(kept), "reconnected": len(back), "not_shown": len(unknown),
                         "restarted": len(restarted), "longest_silence_ms": longest,
                         "sessions": sorted({o["session"] for o in kept if o["session"]}),
                         "ambiguity": "whether the session survived is not shown" if unknown else None}))
    return out


def zk_server_findings(files: list[ParsedFile], offsets, gc, zk_configs: dict[str, Any],
                        zones: dict[str, str] | None = None) -> list[Finding]:
    """Followers dropping out of the ensemble (seed 004), with syncLimit x tickTime and correlations."""
    out = []
    drops = []
    for _, fs in logs_by_broker(files).items():
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
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            for r in f.result.signatures("zk_session_expired") + f.result.signatures("zk_session_timeout"):
                if r.ts[:16] in minutes:
                    corr.append(f"{broker_label(b)} {r.signature} at {r.ts} ({f.path}:{r.line})")
    for b, pauses in gc.items():
        for gf, p in pauses:
            if p.at and p.at[:16].replace(" ", "T") in minutes and p.seconds >= 1:
                corr.append(f"GC pause {p.seconds:.1f} s on {broker_label(b)} at {p.at} ({gf.path}:{p.line})")
    servers = sorted({d["server"] for d in follower}) or sorted({d["server"] for d in leader_side})
    summary = (f"ZooKeeper follower(s) {', '.join(map(str, servers))} dropped out of the ensemble {len(follower)} time(s)"
               + (f" and rejoined after {', '.join(str(d['rejoined_after_ms']) + ' ms' for d in follower if d.get('rejoined_after_ms') is not None)}" if any(d.get('rejoined_after_ms') is not None for d in follower) else "")
               + (f"; the leader dropped learner(s) {', '.join(sorted({str(d.get('learner')) for d in leader_side if d.get('learner')}))}" if leader_side else "")
               + (f"; {arithmetic}" if arithmetic else "; syncLimit x tickTime unknown (no zoo.cfg in the bundle)")
               + (f"; same minutes: {'; '.join(corr[:5])}" if corr else "; no broker session expiry or GC pause in the same minutes"))
    out.append(Finding(
        kind=FindingKind.ZOOKEEPER_FOLLOWER_DROPPED, severity=Severity.WARNING, summary=summary, evidence=evidence,
        details={"drops": [{k: v for k, v in d.items() if k not in ("rec", "took")} for d in drops][:200],
                 "sync_timeout": arithmetic, "correlated": corr[:50],
                 "record": "each drop: time, server, rejoin time; zone/rack from the cluster settings when configured"}))
    return out


def zk_stats_findings(files: list[ParsedFile]) -> list[Finding]:
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


def zk_load_failed_findings(files: list[ParsedFile]) -> list[Finding]:
    """A ZooKeeper server that could not load its database from disk at start ('Unable to load database on disk',
    QuorumPeer.loadDataBase) and exited ('... exiting abnormally'): down until its data directory is repaired."""
    out = []
    for _, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            fails = s.signatures("zk_load_database_failed")
            if not fails:
                continue
            server = f.server or (str(f.broker_id) if f.broker_id is not None else f.host or f.path)
            last = fails[-1]
            exits = [r for r in s.signatures("zk_exiting_abnormally") if r.line > last.line]
            cause = (last.exception or "").strip()
            out.append(Finding(
                kind="zk_database_load_failed", severity=Severity.CRITICAL,
                summary=(f"ZooKeeper server {server} could not load its database from disk at {last.ts}"
                         + (f" ({cause[:200]})" if cause else "")
                         + (f" and exited ('{exits[0].attrs.get('reason', 'Unexpected exception')}, exiting abnormally', "
                            f"line {exits[0].line}): it is not running" if exits else
                            "; the log does not show whether it exited")
                         + ": a truncated or corrupt snapshot or transaction log in its dataDir/dataLogDir (a full disk, a "
                           "crash while writing) or an epoch file behind its data; the ensemble runs without it and loses "
                           "quorum if one more server fails. Repair: move the damaged files aside and let it sync from the "
                           "leader (a person decides; never on the last good copy)"
                         + (f"; {len(fails)} failed starts in this log" if len(fails) > 1 else "")),
                evidence=(cite(f, fails + exits[:1]),),
                details={"server": server, "failed_starts": len(fails), "exited": bool(exits), "cause": cause or None,
                         "no_restart": True,  # restarting brokers (or the server as it is) does not repair its data
                         "advice": (f"ZooKeeper server {server}: keep its dataDir as it is (copy it aside), read the "
                                    "exception under 'Unable to load database on disk', then move the damaged snapshot or "
                                    "log aside and start it empty so it syncs from the leader -- only while a quorum "
                                    "of the other servers is up")}))
    return out
