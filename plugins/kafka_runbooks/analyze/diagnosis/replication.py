"""Replica fetch failures, attributed to the leader each line names and counted only inside the incident window;
failures the reporting broker caused itself (its own shutdown, its fetcher being stopped, its own stall right
before) are said apart and never blamed on its leaders."""

from __future__ import annotations

import bisect
import datetime as dt
from collections import Counter, defaultdict

from ...model import Evidence, Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from ..parsers.kafka_log import fetch_cause, stopping_fetchers
from ..parsers.logs import LogRecord
from .core import MAX_CITED_LINES, STALL_MS, Window, broker_label, cite, logs_by_broker, parse_utc, utc_of

SELF_STALL_AFTER_S = 120  # its fetch errors within this long after the stall are its own doing
EPISODE_GAP_S = 600  # fetch failures more than 10 min apart are different episodes
# what a ZooKeeper client's silence shows: one of these stalled, the log alone does not say which (zk_session_timeout)
ZK_SILENCE_MEANS = "the broker process, its ZooKeeper server or the network between them stalled"


def self_stalls(logs: dict[int | None, list[ParsedFile]], gc: dict[int | None, list], offsets) -> dict[int | None, list[tuple[dt.datetime, str, ParsedFile, int]]]:
    """Moments each broker was itself stalled or stopping: (time, why, file, line)."""
    out: dict[int | None, list] = defaultdict(list)
    for b, fs in logs.items():
        for f in fs:
            s: LogSummary = f.result
            for r in s.signatures("zk_session_timeout"):
                ms = int(r.attrs.get("millis", "0") or 0)
                t = utc_of(r, offsets, b)
                if ms >= STALL_MS and t:
                    out[b].append((t, f"its own ZooKeeper client heard nothing for {ms} ms ({ZK_SILENCE_MEANS})", f, r.line))
            for name, why in (("controlled_shutdown_start", "its own controlled shutdown"),
                              ("broker_shutting_down", "its own shutdown")):
                for r in s.signatures(name):
                    t = utc_of(r, offsets, b)
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


def by_time(stalls: list[tuple]) -> tuple[list[dt.datetime], list[int], list[tuple]]:
    """A broker's stalls, searchable by time: (their times sorted, their indexes in that order, the stalls)."""
    order = sorted(range(len(stalls)), key=lambda k: stalls[k][0])
    return [stalls[k][0] for k in order], order, stalls


def stall_explaining(index, t: dt.datetime) -> tuple | None:
    """The first of a broker's stalls (in self_stalls' order) that explains its fetch error at ``t``: the error
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


_FetchError = tuple  # (the log file, its record, when (UTC) or None, the reporting broker)


def fetch_findings(files: list[ParsedFile], window: Window, offsets, gc) -> list[Finding]:
    logs = logs_by_broker(files)
    stall_index = {b: by_time(xs) for b, xs in self_stalls(logs, gc, offsets).items()}
    errors, excluded, reporters_all, log_end = _fetch_errors(logs, offsets, stall_index)
    findings = []
    for leader, all_evs in sorted(errors.items()):
        counted, earlier, notes = _episodes(all_evs, window, log_end)
        if not counted:
            findings.append(Finding(kind="earlier_fetch_failures", severity=Severity.INFO,
                                    summary=(f"replica fetch failures from broker {leader} in {len(earlier)} earlier episode(s) "
                                             f"({sum(e['count'] for e in earlier)} failures) ended before the incident window; not counted"),
                                    broker_ids=(leader,), evidence=(cite(all_evs[0][0], [r for _, r, _, _ in all_evs]),),
                                    details={"earlier_episodes": earlier, "window": window.describe()}))
            continue
        findings.append(_peer_fetch_failures(leader, counted, earlier, notes, reporters_all, excluded, window))
    return findings + _own_doing(excluded)


def _fetch_errors(logs, offsets, stall_index) -> tuple[dict[int, list[_FetchError]], list[dict], dict[int | None, set],
                                                       dict[str, dt.datetime | None]]:
    """Every replica fetch error the brokers' logs hold, by the leader it names; those the reporter caused itself (it
    stopped the fetcher, or logged it right after a stall of its own) apart, with why. -> (errors by leader, the
    excluded, {reporter: the leaders it reports}, {log path: its last time})."""
    errors: dict[int, list[_FetchError]] = defaultdict(list)
    excluded: list[dict] = []
    reporters_all: dict[int | None, set] = defaultdict(set)  # reporter -> leaders it reports
    log_end: dict[str, dt.datetime | None] = {}
    for b, fs in logs.items():
        for f in fs:
            s: LogSummary = f.result
            log_end[f.path] = parse_utc(s.last_ts, offsets.get(b))
            recs = s.signatures("replica_fetch_error") or s.signatures("fetch_session_error")
            stopped = stopping_fetchers(s.events) if recs else {}
            for r in recs:
                try:
                    leader = int(r.attrs["leader"])
                except (KeyError, ValueError):
                    continue
                reporter = int(r.attrs["fetcher"]) if r.attrs.get("fetcher", "").lstrip("-").isdigit() else b
                t = utc_of(r, offsets, b)
                why = None
                if r.line in stopped:
                    why = f"broker {reporter} stopped this fetcher itself: {stopped[r.line]}"
                elif "client_shutdown" in r.attrs:
                    why = "the reporting broker stopped this fetcher itself (leadership moved or it was shutting down)"
                elif t is not None:
                    stall = stall_explaining(stall_index.get(reporter), t)
                    if stall is not None:
                        _, reason, sf, sl = stall
                        why = f"logged by broker {reporter} right after {reason} ({sf.path}:{sl})"
                if why:
                    excluded.append({"leader": leader, "reporter": reporter, "source": f.path, "line": r.line, "why": why})
                    continue
                errors[leader].append((f, r, t, reporter))
                reporters_all[reporter].add(leader)
    return errors, excluded, reporters_all, log_end


def _episodes(all_evs: list[_FetchError], window: Window, log_end: dict[str, dt.datetime | None]
              ) -> tuple[list[_FetchError], list[dict], list[str]]:
    """One leader's errors in episodes; one that ended before the incident window (its reporters kept logging without
    the error) is an earlier, already-fixed episode and is not counted. -> (the errors counted, the earlier
    episodes, notes on episodes counted although before the window)."""
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
    return counted, earlier, notes


def _peer_fetch_failures(leader: int, counted: list[_FetchError], earlier: list[dict], notes: list[str],
                         reporters_all: dict[int | None, set], excluded: list[dict], window: Window) -> Finding:
    """The ``peer_fetch_failures`` finding of one leader: who reports it, when, why, and what makes it ambiguous."""
    reporters = sorted({rep for _, _, _, rep in counted} - {None})
    times = [t for _, _, t, _ in counted if t]
    causes = Counter(fetch_cause(r.attrs) for _, r, _, _ in counted)
    per_file: dict[str, list] = defaultdict(list)
    for f, r, _, _ in counted:
        per_file[f.path].append((f, r))
    evidence = [cite(items[0][0], [r for _, r in items]) for items in per_file.values()]
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
    return Finding(
        kind="peer_fetch_failures", severity=Severity.WARNING, summary=summary, broker_ids=(leader,),
        evidence=tuple(evidence),
        details={"leader": leader, "reporters": reporters, "count": len(counted), "causes": dict(causes),
                 "first": min(times).isoformat() if times else None, "last": max(times).isoformat() if times else None,
                 "window": window.describe(), "earlier_episodes": earlier,
                 "excluded": [x for x in excluded if x["leader"] == leader][:50],
                 "sampled": sampled, "minutes": exact_minutes[:500],
                 "ambiguity": "; ".join(ambiguity) or None})


def _own_doing(excluded: list[dict]) -> list[Finding]:
    """Failures the reporters caused themselves: said once per reporter, apart, so nobody reads them as the leader's
    fault."""
    findings = []
    by_rep: dict[int | None, list[dict]] = defaultdict(list)
    for x in excluded:
        by_rep[x["reporter"]].append(x)
    for rep, xs in by_rep.items():
        # a shutdown, a stopped fetcher or a GC pause is the reporter's own doing; a ZooKeeper silence only shows it
        # lost ZooKeeper and its leaders together, which is not evidence against the leaders
        doing = ("are not counted against its leaders" if any(ZK_SILENCE_MEANS in x["why"] for x in xs)
                 else "are its own doing, not its leaders'")
        findings.append(Finding(
            kind="fetch_failures_own_doing", severity=Severity.INFO,
            summary=(f"{len(xs)} fetch failure(s) logged by {broker_label(rep)} {doing} "
                     f"(leaders named: {', '.join(map(str, sorted({x['leader'] for x in xs})))}): {xs[0]['why']}"),
            broker_ids=(rep,) if rep is not None else (),
            evidence=(Evidence(xs[0]["source"], tuple(sorted({x["line"] for x in xs}))[:MAX_CITED_LINES],
                               "; ".join(sorted({x["why"] for x in xs}))[:1000]),),
            details={"failures": xs[:100]}))
    return findings


def truncation_refused_findings(files: list[ParsedFile]) -> list[Finding]:
    """A follower that exited rather than truncate its log to its new leader's end (unclean election off, before
    KIP-101): one finding per broker and partition, with both offsets and the decision it leaves to a person."""
    out = []
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            by_partition: dict[str, list[LogRecord]] = defaultdict(list)
            for r in s.signatures("log_truncation_refused"):
                a = r.attrs
                by_partition[f"{a.get('topic')}-{a['partition']}" if a.get("partition") else f"{a.get('topic')} (a partition of)"].append(r)
            for part, recs in sorted(by_partition.items()):
                a = recs[-1].attrs
                broker = int(a["broker"]) if a.get("broker") else b
                leader = a.get("leader") or a.get("fetch_leader")
                lo, ro = int(a["leader_offset"]), int(a["replica_offset"])
                who = broker_label(broker)
                out.append(Finding(
                    kind="log_truncation_refused", severity=Severity.CRITICAL,
                    summary=(f"{who} exited rather than truncate {part} ({f.path}:{recs[-1].line}, {recs[-1].ts}): its log ends at "
                             f"offset {ro}, its leader broker {leader}'s at {lo}, and unclean.leader.election.enable is false "
                             f"for the topic. The {ro - lo} record(s) from offset {lo} on exist only on {who} (the leader was "
                             "elected without them). Restarting it truncates them: before KIP-101 (Kafka < 0.11) nothing "
                             "reconciles them. A person decides first: save them (DumpLogSegments on its copy of "
                             f"{part}) or accept their loss, then restart it"
                             + (f"; {len(recs)} such exits in this log" if len(recs) > 1 else "")),
                    broker_ids=(broker,) if broker is not None else (), partitions=(part,) if a.get("partition") else (),
                    evidence=(cite(f, recs),),
                    details={"partition": part, "leader": int(leader) if leader else None, "leader_end_offset": lo,
                             "replica_end_offset": ro, "records_only_here": ro - lo, "exits": len(recs),
                             "wording": recs[-1].wording,
                             "advice": ("Decide before restarting the broker: a restart truncates its log of this partition "
                                        "to the leader's end. To keep the records, copy them out first (kafka-run-class "
                                        "kafka.tools.DumpLogSegments --print-data-log on the partition's segment files); on "
                                        "0.10 the JVM may hang in its own shutdown after this exit: kill it, then start it.")}))
    return out
