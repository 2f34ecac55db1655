"""Capture: diagnostics from every broker host over SSH into an evidence bundle, before anything is touched."""

from __future__ import annotations


from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import clock


class CaptureEvidenceOperator(BaseOperator):
    """Runs the capture plan on all hosts in parallel; one failing command or host never stops the rest."""

    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.capture.bundle import EvidenceBundle
        from kafka_runbooks.capture.collector import capture_cluster
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.incidents.store import IncidentStore
        from kafka_runbooks.model import ClusterSnapshot, Finding

        config = load_cluster(self.incident["cluster"])
        incident_id = self.incident["incident_id"]
        snapshot = ClusterSnapshot.from_dict(self.incident["snapshot"])
        trigger = self.incident.get("trigger")
        bundle = EvidenceBundle(
            config.bundle_base,
            cluster=config.name,
            incident_id=incident_id,
            trigger=Finding.from_dict(trigger).to_dict() if trigger else None,
            # one incident may be captured by several response runs; evidence is never overwritten
            capture_id=clock.stamp(micros=True),
        )
        manifest = capture_cluster(config, snapshot, self.incident["capture_broker_ids"], bundle)
        hosts = manifest.get("hosts", {})
        unreachable = sorted(b for b, h in hosts.items() if not h.get("reachable"))
        failed = [c for c in manifest.get("commands", []) if c.get("error") or c.get("exit_code") not in (0, None)]
        store = IncidentStore(config.incident_base)
        store.audit(
            incident_id,
            actor=f"dag:{context['dag'].dag_id}/run:{context['run_id']}",
            action="capture",
            outcome="ok" if not unreachable else "partial",
            details={
                "bundle_dir": str(bundle.path),
                "hosts": sorted(hosts),
                "unreachable": unreachable,
                "failed_commands": [f"{c['broker_id']}:{c['name']}" for c in failed],
            },
        )
        store.update(incident_id, bundle_dir=str(bundle.path))
        if hosts and len(unreachable) == len(hosts):
            raise AirflowFailException(f"no broker host could be reached; nothing captured (see {bundle.path})")
        self.log.info("bundle %s: %d files, unreachable hosts %s", bundle.path, len(manifest.get("files", [])), unreachable)
        return {"bundle_dir": str(Path(bundle.path)), "unreachable": unreachable}
