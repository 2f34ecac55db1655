"""The analysis' result joins the incident: the Spark job's findings.json read, its findings and report recorded on
the incident and in the bundle index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from kafka_runbooks.runbook import plans
from kafka_runbooks.runbook.errors import Stop
from kafka_runbooks.runbook.task import Task


def publish(incident: dict[str, Any], bundle_dir: str, task: Task,
            config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Reads the job's findings.json, attaches findings and report to the incident; Stop when none can be read."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.model import Finding  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.state.bundles import BundleIndex  # keeps DAG parsing fast: loaded when a task runs

    path = Path(bundle_dir) / "findings.json"
    report = Path(bundle_dir) / "report.html"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        findings = [Finding.from_dict(f) for f in doc["findings"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Stop(f"the analysis left no readable findings at {path}: {exc!r}") from exc
    for f in findings:
        task.log.warning("finding %s [%s]: %s", f.kind, f.severity.value, f.summary)
    task.log.info("report: %s", report)
    config = config_of(incident["cluster"])
    IncidentStore(config).update(incident["incident_id"], bundle_dir=str(bundle_dir), report=str(report),
                                 findings=[f.to_dict() for f in findings])
    BundleIndex(config).record_analysis(str(bundle_dir), report=str(report), findings=len(findings))
    return {"bundle_dir": str(bundle_dir), "report": str(report), "findings": [f.to_dict() for f in findings]}
