"""Evidence the analysis could not read, or read with damage: said as a finding, naming the file and why. An empty
optional file (a log or configuration file the capture takes only where it exists) is not a finding: it is said
in the file's notes (the report's 'Evidence read' table); an empty required file is."""

from __future__ import annotations

from typing import Any

from ...model import Evidence, Finding, Severity
from ..parsed_file import ParsedFile
from ..parsers.base import EMPTY_REASONS


def empty_optional(f: ParsedFile) -> str | None:
    """What to say of an optional file that is empty (not a problem), else None."""
    reasons = f.reasons
    if f.optional and reasons and all(r in EMPTY_REASONS for r in reasons):
        return f"empty ({reasons[0]}): an optional file, nothing to analyse"
    return None


def _has_content(result: Any) -> bool:
    return any(bool(getattr(result, a, None)) for a in ("threads", "dumps", "deadlock_stacks", "rows", "events", "count",
                                                          "pauses", "files", "partitions", "results", "counts"))


def unparsable_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for f in files:
        reasons = f.reasons
        notes = list(f.notes) + list(getattr(f.result, "notes", []) or [])
        damaged = [n for n in notes if "damaged" in n or "invalid UTF-8" in n or "UTF-16" in n]
        if not reasons and not damaged:
            continue
        if empty_optional(f) or (f.kind == "jmx" and f.command_error):  # a JMX read that failed: request_metrics_unknown
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
