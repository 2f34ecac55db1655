"""Findings that are one log signature counted per broker (registration conflicts, responses after the client left,
ISR updates skipped on stale state, ISR shrinks, preferred elections, the broker's own controlled shutdown)."""

from __future__ import annotations

from ...findings import FindingKind as K
from ...model import Finding, Severity
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from .core import broker_label, cite, logs_by_broker


def signature_count_findings(files: list[ParsedFile]) -> list[Finding]:
    out = []
    specs = (
        ("registration_conflict", K.REGISTRATION_CONFLICT, Severity.CRITICAL,
         "{b} was started while its previous ZooKeeper session still held its registration; it exited ('Exiting Kafka.'): "
         "wait until the old /brokers/ids entry is gone before starting it"),
        ("response_without_connection", K.RESPONSES_AFTER_CLIENT_LEFT, Severity.WARNING,
         "{b} finished {n} request(s) after their client had disconnected ('no open connection'): clients are timing out "
         "on it (slow or stuck request handling, or a connection storm)"),
        ("isr_update_skipped", K.ISR_UPDATE_SKIPPED, Severity.WARNING,
         "{b}: {n} ISR update(s) skipped because its cached partition state is stale (zkVersion mismatch; repeated, "
         "it is KAFKA-2729: the broker must be restarted)"),
        ("isr_shrink", K.ISR_SHRINK, Severity.INFO, "{b}: {n} ISR shrink(s)"),
        ("preferred_election", K.PREFERRED_ELECTIONS, Severity.INFO,
         "{b} (controller) ran {n} preferred replica leader election(s)"),
        ("controlled_shutdown_start", K.OWN_CONTROLLED_SHUTDOWN, Severity.INFO,
         "{b} did a controlled shutdown of its own: its fetch errors around it are not its peers' fault"),
    )
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            for sig, kind, sev, text in specs:
                recs = s.signatures(sig)
                if not recs:
                    continue
                n = s.count(sig)
                parts = tuple(sorted({f"{r.attrs['topic']}-{r.attrs['partition']}" for r in recs if "topic" in r.attrs}))[:100]
                out.append(Finding(kind=kind, severity=sev, summary=text.format(b=broker_label(b), n=n), broker_ids=(b,) if b is not None else (),
                                   partitions=parts, evidence=(cite(f, recs),),
                                   details={"count": n, "sampled": bool(s.omitted.get(sig))}))
    return out
