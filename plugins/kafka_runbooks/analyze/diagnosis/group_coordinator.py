"""The group coordinator: __consumer_offsets partitions whose loading started and never finished (their groups get
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS), with the loader thread's progress across thread dumps."""

from __future__ import annotations

from ...model import Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from ..parsers.jstack import JstackDump
from ..parsers.logs import LogRecord
from .core import broker_label, cite, dumps_by_broker, logs_by_broker


def group_load_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    dumps = dumps_by_broker(files)
    for b, fs in logs_by_broker(files).items():
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
                summary=(f"{broker_label(b)}: loading of __consumer_offsets partition(s) {', '.join(parts)} started without a matching "
                         f"'Finished loading' (their groups get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it "
                         f"completes){'; ' + loader_note if loader_note else ''}"),
                broker_ids=(b,) if b is not None else (), partitions=tuple(f"__consumer_offsets-{p}" for p in parts),
                evidence=(cite(f, [starts[p] for p in parts]),),
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
