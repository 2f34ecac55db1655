"""The analysis' result joins the incident: the Spark job's findings.json read, its findings and report recorded on
the incident and in the bundle index."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from kafka_runbooks.runbook import capture, finding_records, plans
from kafka_runbooks.runbook.errors import Stop
from kafka_runbooks.runbook.task import Task


def bundle_to_analyze(incident: Any, handed: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> str:
    """The bundle the analysis reads: the incident's recorded one (``capture.recorded_bundle``); ``handed``, what the
    capture task pushed, must be it (``BundleMismatch`` otherwise, naming both)."""
    bundle_dir = capture.recorded_bundle(config_of(incident["cluster"]) if isinstance(incident, dict) else None,
                                         incident, handed)
    task.log.info("analysing the incident's recorded bundle %s", bundle_dir)
    return bundle_dir


def publish(incident: dict[str, Any], bundle_dir: str, task: Task,
            config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Reads the job's findings.json, attaches findings and report to the incident; Stop when none can be read.
    ``bundle_dir`` (what the capture task pushed) must be the incident's recorded bundle (``capture.recorded_bundle``:
    ``BundleMismatch`` otherwise). Returns a reference (``finding_records``): the incident, the bundle, the report, how
    many findings and the SHA-256 of findings.json -- never the findings, which the tasks after it load from the
    incident's record."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.state.bundles import BundleIndex  # keeps DAG parsing fast: loaded when a task runs

    config = config_of(incident["cluster"])
    bundle_dir = capture.recorded_bundle(config, incident, bundle_dir)
    path = Path(bundle_dir) / finding_records.FINDINGS_FILE
    report = Path(bundle_dir) / "report.html"
    try:
        findings, sha256 = finding_records.read_analysis(bundle_dir)
    except (OSError, ValueError) as exc:
        raise Stop(f"the analysis left no readable findings at {path}: {exc!r}") from exc
    for f in findings:
        task.log.warning("finding %s [%s]: %s", f.kind, f.severity.value, f.summary)
    task.log.info("report: %s", report)
    IncidentStore(config).update(incident["incident_id"], bundle_dir=str(bundle_dir), report=str(report),
                                 findings=finding_records.to_records(findings), findings_sha256=sha256)
    BundleIndex(config).record_analysis(str(bundle_dir), report=str(report), findings=len(findings))
    return {"incident_id": incident["incident_id"], "cluster": config.name, "bundle_dir": str(bundle_dir),
            "report": str(report), "findings": len(findings), "findings_sha256": sha256}
