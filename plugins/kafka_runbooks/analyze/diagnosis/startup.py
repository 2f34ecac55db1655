"""A broker that failed to start: Kafka's 'Fatal error during ... startup. Prepare to shutdown' with the exception
logged under it as the cause, and the process exiting ('Exiting Kafka.'); several in one log is a crash loop."""

from __future__ import annotations

from ...model import Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from .core import broker_label, cite, logs_by_broker


def startup_failure_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            fatal = s.signatures("broker_startup_failed")
            exits = s.signatures("broker_exiting")
            if not fatal and not exits:
                continue
            recs = sorted(fatal + exits, key=lambda r: r.line)
            causes = [r.exception for r in recs if r.exception]
            attempts = max(s.count("broker_startup_failed") - sum(1 for r in fatal if r.attrs.get("what") == "KafkaServerStartable"),
                           s.count("broker_exiting"), 1)
            first = recs[0]
            cause = causes[0] if causes else None
            summary = (f"{broker_label(b)} failed to start at {first.ts or 'an unknown time'} ({f.path}:{first.line}): "
                       + (f"cause: {cause[:300]}" if cause else "the cause is not in this log (no exception under the fatal line)")
                       + ("; the process exited ('Exiting Kafka')" if exits else "")
                       + (f"; {attempts} failed start(s) in this log: a crash loop" if attempts > 1 else ""))
            out.append(Finding(kind="broker_startup_failed", severity=Severity.CRITICAL, summary=summary,
                               broker_ids=(b,) if b is not None else (), evidence=(cite(f, recs),),
                               details={"cause": cause, "causes": sorted(set(causes))[:10], "failed_starts": attempts,
                                        "exited": bool(exits), "first_at": first.ts, "count": s.count("broker_startup_failed"),
                                        "sampled": bool(s.omitted.get("broker_startup_failed"))}))
    return out
