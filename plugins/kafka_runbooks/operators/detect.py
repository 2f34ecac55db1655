"""Detect: read the cluster, keep its history, run the detectors, and open / resolve incidents -- glue over
``runbook/detect.py``."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from kafka_runbooks.operators.glue import service
from kafka_runbooks.runbook.detect import HEALTH_DAG_PREFIX, RESPONSE_DAG, health_dag_id

__all__ = ["HEALTH_DAG_PREFIX", "RESPONSE_DAG", "ClusterSnapshotOperator", "DetectFindingsOperator", "health_dag_id"]


class ClusterSnapshotOperator(BaseOperator):
    """Reads ZooKeeper, checks every broker directly, runs the canary and probes every host. The snapshot is kept in the
    state database; what it returns (XCom) is its ``state.snapshots.SnapshotRef`` (``runbook.detect.snapshot``)."""

    template_fields: Sequence[str] = ("cluster",)

    def __init__(self, *, cluster: str, probe_hosts: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.probe_hosts = probe_hosts

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import detect  # keeps DAG parsing fast: the clients load when the task runs

        with service(context, self.log) as task:
            return detect.snapshot(self.cluster, task, probe_hosts=self.probe_hosts)


class DetectFindingsOperator(BaseOperator):
    """Records the snapshot in the history, runs the detectors on it, and moves incidents (``runbook.detect.detect``).
    Returns ``[{"trigger_run_id": ..., "conf": ...}]`` for a mapped TriggerDagRunOperator."""

    template_fields: Sequence[str] = ("cluster", "snapshot")

    def __init__(self, *, cluster: str, snapshot: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.snapshot = snapshot

    def execute(self, context) -> list[dict[str, Any]]:
        from kafka_runbooks.runbook import detect  # keeps DAG parsing fast: the clients load when the task runs

        with service(context, self.log) as task:
            return detect.detect(self.cluster, self.snapshot, task)
