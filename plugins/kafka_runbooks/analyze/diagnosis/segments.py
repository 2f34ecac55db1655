"""Segment files read by kafka-dump-log: damage it reports (offsets out of order, invalid records, index entries
past the log)."""

from __future__ import annotations

from ...model import Evidence, Finding, Severity
from ..parsed_file import ParsedFile
from .core import by_broker


def segment_damage_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in by_broker(files, "dump_log").items():
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
