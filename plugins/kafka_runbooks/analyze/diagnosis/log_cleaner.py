"""The log cleaner: dead (its thread logged 'Error due to', or is missing from the thread dump), partitions marked
uncleanable, and __consumer_offsets partitions grown to many segments (compaction not keeping up)."""

from __future__ import annotations

from ...findings import FindingKind
from ...model import Evidence, Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from .core import MAX_CITED_LINES, broker_label, by_broker, cite, dumps_by_broker, logs_by_broker

SEGMENTS_OVERSIZED = 50  # segments in one __consumer_offsets partition worth a finding (seed 002: 2,000+)


def log_cleaner_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            died = s.signatures("log_cleaner_died")
            unclean = s.signatures("log_cleaner_uncleanable")
            if died:
                req = next((r.attrs.get("requirement") for r in died if r.attrs.get("requirement")), None)
                out.append(Finding(
                    kind=FindingKind.LOG_CLEANER_NOT_RUNNING, severity=Severity.CRITICAL,
                    summary=(f"the log cleaner thread on {broker_label(b)} died ('Error due to'): compacted topics, __consumer_offsets "
                             "first, stop being compacted and grow until the broker restarts"
                             + (f"; cause: {req}" if req else "")),
                    broker_ids=(b,) if b is not None else (), evidence=(cite(f, died),),
                    details={"seen": "died", "requirement": req, "advice": "Restart the broker through the rolling-restart runbook (keeps one "
                             "holder of every offsets partition up); never delete segments by hand."}))
            if unclean:
                parts = sorted({f"{r.attrs.get('topic')}-{r.attrs.get('partition')}" for r in unclean})
                out.append(Finding(kind="log_cleaner_uncleanable", severity=Severity.WARNING,
                                   summary=f"{broker_label(b)}: the log cleaner marked {len(parts)} partition(s) uncleanable ({', '.join(parts[:10])}); they are no longer compacted",
                                   broker_ids=(b,) if b is not None else (), partitions=tuple(parts), evidence=(cite(f, unclean),),
                                   details={"partitions": parts}))
    # a broker whose dumps show no cleaner thread although other Kafka threads are there
    for b, pairs in dumps_by_broker(files).items():
        last_f, last = pairs[-1]
        names = [t.name for t in last.threads]
        if last.full_dump and any(n.startswith(("kafka-request-handler", "data-plane-kafka-request-handler")) for n in names) \
                and not any(n.startswith("kafka-log-cleaner-thread") for n in names):
            out.append(Finding(kind=FindingKind.LOG_CLEANER_NOT_RUNNING, severity=Severity.WARNING,
                               summary=(f"no kafka-log-cleaner-thread in the last thread dump of {broker_label(b)} although its request "
                                        "handlers are there: the log cleaner is dead or disabled (log.cleaner.enable)"),
                               broker_ids=(b,) if b is not None else (),
                               evidence=(Evidence(last_f.path, (last.first_line,), f"{len(names)} threads, none named kafka-log-cleaner-thread-*", last_f.host),),
                               details={"seen": "absent from the thread dump", "threads": len(names), "ambiguity": "log.cleaner.enable=false gives the same picture"}))
    return out


def oversized_offsets_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    for b, fs in by_broker(files, "log_dir_listing").items():
        for f in fs:
            big = [p for p in f.result.partitions.values() if p.topic == "__consumer_offsets" and p.segments >= SEGMENTS_OVERSIZED]
            if big:
                big.sort(key=lambda p: -p.segments)
                out.append(Finding(
                    kind=FindingKind.OFFSETS_PARTITION_OVERSIZED, severity=Severity.WARNING,
                    summary=(f"{broker_label(b)}: {len(big)} __consumer_offsets partition(s) hold {SEGMENTS_OVERSIZED}+ segments "
                             f"({', '.join(f'{p.name}: {p.segments} segments, {p.log_bytes} bytes' for p in big[:5])}): compaction "
                             "is not keeping up or the log cleaner died; loading them after a leadership change is slow"),
                    broker_ids=(b,) if b is not None else (), partitions=tuple(p.name for p in big),
                    evidence=(Evidence(f.path, tuple(p.line for p in big[:MAX_CITED_LINES]), "", f.host),),
                    details={"partitions": {p.name: {"segments": p.segments, "log_bytes": p.log_bytes, "bytes": p.bytes} for p in big}}))
    return out
