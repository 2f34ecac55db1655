"""The configured ``kafka_version`` against what the brokers report (``versions.py`` says what they report): a
finding when they disagree. Detection's, not the vocabulary's: ``versions`` stays below ``model``."""

from __future__ import annotations

from kafka_runbooks import versions
from kafka_runbooks.model import Evidence, Finding, Severity


def mismatch_findings(kv: versions.KafkaVersion, configured: str | None):
    """A finding when the configured ``kafka_version`` disagrees with what the brokers report (else [])."""
    why = versions.KafkaVersion(kv.brokers, configured, kv.notes).mismatch()
    if not why:
        return []
    seen = "; ".join(o.describe() for b in kv.brokers for o in b.observations)
    return [Finding(
        kind="kafka_version_mismatch", severity=Severity.WARNING,
        summary=f"{why}. The runbooks follow what the brokers report ({kv.describe()}), not the setting: correct "
                f"kafka_version in the cluster's settings",
        broker_ids=tuple(sorted(b.broker_id for b in kv.brokers if b.broker_id is not None)),
        evidence=(Evidence(source="kafka:ApiVersions", excerpt=seen[:2000]),),
        details={"problem": "configuration", "configured": configured, "observed": versions.to_dict(kv)},
    )]
