"""The log cleaner and ``__consumer_offsets`` (incident 002b). Pure.

* ``log_cleaner_not_running`` (warning; opens an incident whose plan restarts those brokers, one at a time,
  through the rolling-restart engine): a running broker, past its startup grace, with no thread named
  ``kafka-log-cleaner-thread-*`` (read from /proc, nothing asked of the JVM), corroborated by
  log-cleaner.log's ``Error due to``. Compacted topics -- ``__consumer_offsets`` first -- then grow without
  bound until the broker restarts, and every later load of their partitions gets slower (seed 002:
  2,000+ segments of ~100 MB).
* ``offsets_partition_oversized`` (warning): a ``__consumer_offsets`` partition directory with more than
  ``health.offsets_segments_max`` segments or ``health.offsets_bytes_max`` bytes.
* ``offsets_load_failed`` (warning): the newest load line of a ``__consumer_offsets`` partition that the broker still
  leads is ``Error loading offsets from`` (an exception ended the load; Kafka counts it as done): groups missing from
  the coordinator (see :func:`detect_failed_loads`).
* ``offsets_load_slow`` (warning): a broker started loading a ``__consumer_offsets`` partition
  (``Scheduling loading of offsets and group metadata``) more than ``health.offsets_load_expected_s`` ago
  with no ``Finished loading``; its groups get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS meanwhile.
  Progress: the bytes its loader threads (``group-metadata-manager-*``) read between probes (their
  ``/proc/<pid>/task/<tid>/io`` rchar), against the partition's size on disk.

The plan never deletes segments: the seed's authors did, and warned that groups may lose their committed
offsets and reset. Waiting for the load is safe; restarting a broker that is loading starts the load again
elsewhere.
"""

from __future__ import annotations

from typing import Any

from kafka_runbooks import clock
from kafka_runbooks.detect import trends
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.evidence import trend_evidence
from kafka_runbooks.detect.history import broker_series
from kafka_runbooks.model import CONSUMER_OFFSETS, Evidence, Finding, HostProbe, Severity

PROBLEM = "log_cleaner_stopped"
OPENS_INCIDENT = ("log_cleaner_not_running",)
RUNBOOK = "runbooks/offsets-load-stalled.md"
NEVER_DELETE = ("never delete __consumer_offsets segments by hand (seed 002 did: groups may lose their committed offsets and "
                "reset); a broker restart brings its log cleaner back, and it compacts the partitions again")


def _mib(n: int | float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _oversized(p: HostProbe, segments_max: int, bytes_max: int):
    """Segments holding data beyond the limit (empty ones left by a compaction are not counted), or bytes beyond it."""
    return [o for o in p.offsets_dirs if o.data_segments > segments_max or o.bytes > bytes_max]


def detect_cleaner(ctx: Context) -> list[Finding]:
    s, h = ctx.snapshot, ctx.settings
    dead: list[HostProbe] = []
    for p in sorted(s.probes, key=lambda p: p.broker_id):
        if (p.reachable and p.process_alive and not p.stopped and p.log_cleaner_threads == 0 and p.broker_id in s.live_broker_ids
                and (p.process_uptime_s is None or p.process_uptime_s >= h.startup_grace_s)):
            dead.append(p)
    findings = []
    if dead:
        ids = [p.broker_id for p in dead]
        evidence, parts, per = [], [], {}
        for p in dead:
            died = p.lines("log_cleaner_died")
            big = _oversized(p, h.offsets_segments_max, h.offsets_bytes_max)
            largest = max(p.offsets_dirs, key=lambda o: o.bytes, default=None)
            per[str(p.broker_id)] = {"pid": p.pid, "uptime_s": p.process_uptime_s, "died_lines": [x.to_dict() for x in died],
                                     "largest_offsets_partition": largest.to_dict() if largest else None,
                                     "oversized": [o.name for o in big]}
            parts.append(f"broker {p.broker_id} (pid {p.pid}, up {int(p.process_uptime_s or 0)} s): no kafka-log-cleaner-thread among its threads"
                         + (f", log-cleaner.log: '{died[-1].excerpt[:120]}' at {died[-1].at}" if died else ", nothing in log-cleaner.log")
                         + (f"; its largest __consumer_offsets partition: {largest.name} {largest.segments} segments, {_mib(largest.bytes)}" if largest else ""))
            evidence.append(Evidence(source=f"probe:broker/{p.broker_id}/threads", excerpt=f"{p.probed_at}: pid {p.pid}: 0 threads named kafka-log-clean*",
                                     host=ctx.host_of(p.broker_id)))
            evidence += [Evidence(source=f"probe:broker/{p.broker_id}/log-cleaner.log", lines=(x.line_no,), excerpt=x.excerpt, host=ctx.host_of(p.broker_id))
                         for x in died[-2:]]
        findings.append(Finding(
            kind="log_cleaner_not_running", severity=Severity.WARNING,
            summary=(f"The log cleaner is not running on broker(s) {ids}: " + "; ".join(parts) + ". Compacted topics, __consumer_offsets "
                     "first, are no longer compacted: they grow until the broker restarts, and loading their partitions after a "
                     "leadership change gets slower (incident 002). Proposed: restart these brokers one at a time through the "
                     f"rolling-restart runbook (one holder of every offsets partition stays up; each start waits for the coordinators to "
                     f"load); {NEVER_DELETE}"),
            broker_ids=tuple(ids), evidence=tuple(evidence[: h.max_evidence]),
            details={"problem": PROBLEM, "brokers": per, "runbook": RUNBOOK, "remediation": "rolling_restart", "never_delete_segments": True},
        ))
    big = {p.broker_id: _oversized(p, h.offsets_segments_max, h.offsets_bytes_max) for p in s.probes if p.reachable}
    big = {b: os for b, os in big.items() if os}
    if big:
        text = "; ".join(f"broker {b}: " + ", ".join(f"{o.name} {o.data_segments} segments {_mib(o.bytes)}" for o in sorted(os, key=lambda o: -o.bytes)[:4])
                         for b, os in sorted(big.items()))
        findings.append(Finding(
            kind="offsets_partition_oversized", severity=Severity.WARNING,
            summary=(f"__consumer_offsets partition(s) grew past {h.offsets_segments_max} segments or {_mib(h.offsets_bytes_max)}: {text}; "
                     "compaction is not keeping up or the log cleaner died; loading them after a leadership change will be slow"),
            broker_ids=tuple(sorted(big)), partitions=tuple(sorted({o.name for os in big.values() for o in os})),
            evidence=tuple(Evidence(source=f"probe:broker/{b}/log.dirs", excerpt=f"{o.log_dir}/{o.name}: {o.segments} segments, {o.bytes} bytes, "
                                    f"oldest {o.oldest_segment}, newest {o.newest_segment}", host=ctx.host_of(b))
                           for b, os in sorted(big.items()) for o in os[:5]),
            details={"brokers": {str(b): [o.to_dict() for o in os] for b, os in big.items()}, "runbook": RUNBOOK,
                     "segments_max": h.offsets_segments_max, "bytes_max": h.offsets_bytes_max},
        ))
    return findings


def load_outcomes(p: HostProbe) -> dict[str, Any]:
    """{partition: the newest of its load lines}: a start (``group_load_start``: still loading), a finish
    (``group_load_done``) or a failure (``group_load_failed``: Kafka logged the exception and counts the load as done)."""
    last: dict[str, Any] = {}
    for x in sorted(p.log_lines, key=lambda x: (x.at or "", x.line_no)):
        if x.what in ("group_load_start", "group_load_done", "group_load_failed"):
            last[x.attrs.get("partition")] = x
    return last


def unfinished_loads(p: HostProbe) -> dict[str, Any]:
    """{partition: the start line} of loads started without a Finished loading (or a failure) line after them."""
    return {k: x for k, x in load_outcomes(p).items() if x.what == "group_load_start"}


def failed_loads(ctx: Context, p: HostProbe) -> dict[str, Any]:
    """{partition: the failure line} of loads whose newest line is a failure, on a partition this broker still leads
    (a broker that has since handed the partition over coordinates none of its groups)."""
    led = {str(x.index) for x in ctx.snapshot.partitions if x.topic == CONSUMER_OFFSETS and x.leader == p.broker_id}
    return {k: x for k, x in load_outcomes(p).items() if x.what == "group_load_failed" and k in led}


def detect_failed_loads(ctx: Context) -> list[Finding]:
    """``offsets_load_failed``: Kafka's GroupMetadataManager catches any exception of a load, logs "Error loading
    offsets from" and then counts the partition as owned (loadGroupsAndOffsets' finally, 0.10.2 - 3.x; 0.9 alike): the
    groups it had not reached are missing from the coordinator's cache, and their members and committed offsets
    unknown to it until the partition is loaded again (its leadership moves)."""
    findings = []
    for p in sorted(ctx.snapshot.probes, key=lambda p: p.broker_id):
        failed = failed_loads(ctx, p) if p.reachable else {}
        if not failed:
            continue
        parts = sorted(failed, key=int)
        causes = "; ".join(f"{CONSUMER_OFFSETS}-{k} at {failed[k].at}: {failed[k].attrs.get('cause') or 'no exception line read'}"
                           for k in parts)
        findings.append(Finding(
            kind="offsets_load_failed", severity=Severity.WARNING,
            summary=(f"Broker {p.broker_id}'s load of {', '.join(f'{CONSUMER_OFFSETS}-{k}' for k in parts)} failed ({causes}). "
                     "Kafka counts a failed load as done: the groups it had not reached are not in this coordinator's cache, "
                     "so their consumers may be told they have no committed offset (and reset) or rejoin from scratch. "
                     "Moving the partition's leadership to another in-sync replica loads it again there; "
                     f"{NEVER_DELETE}"),
            broker_ids=(p.broker_id,), partitions=tuple(f"{CONSUMER_OFFSETS}-{k}" for k in parts),
            evidence=tuple(Evidence(source=f"probe:broker/{p.broker_id}/server.log", lines=(failed[k].line_no,),
                                    excerpt=failed[k].excerpt, host=ctx.host_of(p.broker_id)) for k in parts)[: ctx.settings.max_evidence],
            details={"failed": {k: {"at": failed[k].at, "cause": failed[k].attrs.get("cause")} for k in parts},
                     "runbook": RUNBOOK, "never_delete_segments": True},
        ))
    return findings


def detect_slow_loads(ctx: Context) -> list[Finding]:
    s, h = ctx.snapshot, ctx.settings
    findings = []
    for p in sorted(s.probes, key=lambda p: p.broker_id):
        if not p.reachable:
            continue
        slow = {}
        for part, x in unfinished_loads(p).items():
            age = (ctx.now - clock.parse(x.at)).total_seconds() if x.at else None
            if age is not None and age >= h.offsets_load_expected_s:
                slow[part] = (x, age)
        if not slow:
            continue
        series = ctx.series(p.broker_id)
        rate = trends.rate(broker_series(p.broker_id), series, "loader_read_bytes")
        sizes = {str(o.partition): o for o in p.offsets_dirs}
        loading_bytes = sum(sizes[k].bytes for k in slow if k in sizes)
        progress: dict[str, Any] = {"bytes_per_s": rate.change if rate else None, "partition_bytes": loading_bytes or None}
        evidence = [Evidence(source=f"probe:broker/{p.broker_id}/server.log", lines=(x.line_no,), excerpt=x.excerpt, host=ctx.host_of(p.broker_id))
                    for x, _ in slow.values()]
        if rate is not None:
            evidence.append(trend_evidence(rate))
            first_start = min(x.at for x, _ in slow.values())
            before = [sm for sm in series if sm.at <= first_start and isinstance(sm.get("loader_read_bytes"), (int, float))]
            read = (p.loader_read_bytes - before[-1].get("loader_read_bytes")) if before and p.loader_read_bytes is not None else None
            progress["bytes_read_since_start"] = read
            if rate.change > 0:
                state = (f"progressing: its loader threads read {_mib(rate.change)}/s"
                         + (f", {_mib(read)} of {_mib(loading_bytes)} since the load started" if read is not None and loading_bytes else "")
                         + (f", about {max(0.0, (loading_bytes - (read or 0)) / rate.change):.0f} s left" if loading_bytes else ""))
                if read is not None and loading_bytes:
                    progress["share_read"] = round(min(1.0, read / loading_bytes), 3)
            else:
                state = f"NOT progressing: its loader threads read nothing between {rate.points[0][0]} and {rate.points[-1][0]} (stuck?)"
        else:
            state = "progress unknown yet (the loader threads' I/O needs two probes)"
        progress["state"] = state
        parts = ", ".join(f"{CONSUMER_OFFSETS}-{k} for {age:.0f} s" + (f" ({sizes[k].segments} segments, {_mib(sizes[k].bytes)})" if k in sizes else "")
                          for k, (_, age) in sorted(slow.items(), key=lambda kv: int(kv[0])))
        findings.append(Finding(
            kind="offsets_load_slow", severity=Severity.WARNING,
            summary=(f"Broker {p.broker_id} has been loading {parts} (expected within {h.offsets_load_expected_s:g} s): {state}. Groups whose "
                     "coordinator is on these partitions get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it finishes; waiting is "
                     f"safe, restarting this broker starts the load again elsewhere; {NEVER_DELETE}"),
            broker_ids=(p.broker_id,), partitions=tuple(f"{CONSUMER_OFFSETS}-{k}" for k in sorted(slow, key=int)),
            evidence=tuple(evidence[: h.max_evidence]),
            details={"loading": {k: {"since": x.at, "age_s": round(age, 1)} for k, (x, age) in slow.items()}, "progress": progress,
                     "runbook": RUNBOOK, "never_delete_segments": True},
        ))
    return findings
