"""The group coordinator: __consumer_offsets partitions whose loading started and never finished (``offsets_load_slow``,
the kind detection gives a load unfinished past its expected time; their groups get NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS), with the loader thread's progress across thread dumps; loads that finished, but slowly
(``offsets_load_finished_late``: their groups got those errors for as long); and loads that ended with an exception
(``offsets_load_failed``)."""

from __future__ import annotations

from ...findings import FindingKind
from ...model import Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from ..parsers.jstack import JstackDump
from ..parsers.logs import LogRecord
from .core import broker_label, cite, dumps_by_broker, logs_by_broker


# a load that took longer than this is slow: the health check's default offsets_load_expected_s (config.HealthSettings)
SLOW_LOAD_MS = 60_000


def group_load_findings(files: list[ParsedFile]) -> list[Finding]:
    out = slow_load_findings(files)
    dumps = dumps_by_broker(files)
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            starts: dict[str, LogRecord] = {}
            failed: dict[str, LogRecord] = {}
            for r in sorted(s.signatures("group_load_start") + s.signatures("group_load_done") + s.signatures("group_load_failed"),
                            key=lambda r: r.line):
                p = r.attrs.get("partition")
                starts.pop(p, None)
                failed.pop(p, None)
                if r.signature == "group_load_start":
                    starts[p] = r
                elif r.signature == "group_load_failed":
                    failed[p] = r
            if failed:
                out.append(_failed_load_finding(b, f, failed))
            if not starts:
                continue
            parts = sorted(starts, key=lambda p: int(p or 0))
            loader_note = _loader_progress(dumps.get(b, []))
            out.append(Finding(
                kind=FindingKind.OFFSETS_LOAD_SLOW, severity=Severity.WARNING,
                summary=(f"{broker_label(b)}: loading of __consumer_offsets partition(s) {', '.join(parts)} started without a matching "
                         f"'Finished loading' (their groups get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it "
                         f"completes){'; ' + loader_note if loader_note else ''}"),
                broker_ids=(b,) if b is not None else (), partitions=tuple(f"__consumer_offsets-{p}" for p in parts),
                evidence=(cite(f, [starts[p] for p in parts]),),
                details={"partitions": parts, "started": {p: starts[p].ts for p in parts}, "loader_progress": loader_note or None}))
    return out


def _failed_load_finding(b, f: ParsedFile, failed: dict[str, LogRecord]) -> Finding:
    """``offsets_load_failed``: loads whose last line in this log is "Error loading offsets from" (detect/offsets.py
    says what Kafka does then; whether the broker still leads the partition is not in one log: the summary says so)."""
    parts = sorted(failed, key=lambda p: int(p or 0))
    causes = "; ".join(f"__consumer_offsets-{p} at {failed[p].ts}: {failed[p].exception or 'no exception line'}" for p in parts)
    return Finding(
        kind="offsets_load_failed", severity=Severity.WARNING,
        summary=(f"{broker_label(b)}: the load of __consumer_offsets partition(s) {', '.join(parts)} ended with an exception "
                 f"({causes}). Kafka counts a failed load as done: while this broker stayed their coordinator, the groups the "
                 "load had not reached were missing from it (their consumers told of no committed offset, or rejoining); "
                 "a later leadership move of the partition loads it again"),
        broker_ids=(b,) if b is not None else (), partitions=tuple(f"__consumer_offsets-{p}" for p in parts),
        evidence=(cite(f, [failed[p] for p in parts]),),
        details={"partitions": parts, "failed": {p: {"at": failed[p].ts, "exception": failed[p].exception} for p in parts}})


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


def slow_load_findings(files: list[ParsedFile]) -> list[Finding]:
    """__consumer_offsets partitions whose load finished after SLOW_LOAD_MS or more ('Finished loading ... in N
    milliseconds'): their groups could not commit or join for that long."""
    out = []
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            slow = [r for r in f.result.signatures("group_load_done") if int(r.attrs.get("millis") or 0) >= SLOW_LOAD_MS]
            if not slow:
                continue
            slow.sort(key=lambda r: -int(r.attrs["millis"]))
            worst = slow[0]
            parts = sorted({r.attrs.get("partition") for r in slow}, key=lambda p: int(p or 0))
            out.append(Finding(
                kind=FindingKind.OFFSETS_LOAD_FINISHED_LATE, severity=Severity.WARNING,
                summary=(f"{broker_label(b)}: loading __consumer_offsets partition(s) {', '.join(parts)} took {SLOW_LOAD_MS // 1000} s "
                         f"or more, the longest {int(worst.attrs['millis']):,} ms (__consumer_offsets-{worst.attrs.get('partition')}, "
                         f"finished {worst.ts}): the groups it coordinates got NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS "
                         "(no commits, no joins) that long; a slow load points at a large partition (compaction behind, "
                         "or the log cleaner stopped)"),
                broker_ids=(b,) if b is not None else (), partitions=tuple(f"__consumer_offsets-{p}" for p in parts),
                evidence=(cite(f, slow),),
                details={"partitions": parts, "millis": {r.attrs.get("partition"): int(r.attrs["millis"]) for r in slow},
                         "slow_after_ms": SLOW_LOAD_MS}))
    return out
