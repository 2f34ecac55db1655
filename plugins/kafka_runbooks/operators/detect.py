"""Detect: read the cluster (kazoo + SSH host probes), run the detectors, open incidents."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

# findings that open an incident; those that name brokers also start the incident response
OPENS_INCIDENT = ("broker_unresponsive", "offline_partitions")


def take_snapshot(config, *, probe_hosts: bool = True):
    """ClusterSnapshot from ZooKeeper, with host probes over SSH for every registered broker."""
    from kafka_runbooks.detect.host_probe import probe_all
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook

    with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
        snapshot = read_snapshot(zk, config.name)
    if probe_hosts:
        snapshot = snapshot.with_probes(probe_all(config, snapshot.brokers))
    return snapshot


class ClusterSnapshotOperator(BaseOperator):
    """Reads registrations, controller and partition state from ZooKeeper and probes each broker host."""

    template_fields: Sequence[str] = ("cluster",)

    def __init__(self, *, cluster: str, probe_hosts: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.probe_hosts = probe_hosts

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.config import load_cluster

        snapshot = take_snapshot(load_cluster(self.cluster), probe_hosts=self.probe_hosts)
        self.log.info(
            "cluster %s: brokers %s, controller %s, %d partitions, %d unparsable znodes",
            snapshot.cluster,
            sorted(snapshot.live_broker_ids),
            snapshot.controller_id,
            len(snapshot.partitions),
            len(snapshot.unparsable),
        )
        return snapshot.to_dict()


class DetectFindingsOperator(BaseOperator):
    """Runs the detectors on a snapshot; opens one incident per new actionable finding.

    Returns the DAG-run confs for ``kafka_incident_response`` (one per newly opened incident), so a
    mapped TriggerDagRunOperator can start them. An open incident that already covers the same broker
    and kind is not opened twice: a scheduled check must not pile up responses to one fault.
    """

    template_fields: Sequence[str] = ("cluster", "snapshot")

    def __init__(self, *, cluster: str, snapshot: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.snapshot = snapshot

    def execute(self, context) -> list[dict[str, Any]]:
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.detect.detectors import detect
        from kafka_runbooks.incidents.store import IncidentStore
        from kafka_runbooks.model import ClusterSnapshot

        config = load_cluster(self.cluster)
        snapshot = ClusterSnapshot.from_dict(self.snapshot)
        findings = detect(snapshot)
        for f in findings:
            self.log.warning("finding %s [%s] brokers=%s: %s", f.kind, f.severity.value, list(f.broker_ids), f.summary)
        store = IncidentStore(config.incident_base)
        confs = []
        for f in findings:
            if f.kind not in OPENS_INCIDENT:
                continue
            existing = store.find_open(config.name, f.broker_ids, f.kind)
            if existing:
                self.log.info("incident %s already open for %s on brokers %s", existing["id"], f.kind, list(f.broker_ids))
                continue
            record = store.open(
                cluster=config.name,
                broker_ids=f.broker_ids,
                reason=f.summary,
                trigger=f.to_dict(),
                opened_by=f"dag:{context['dag'].dag_id}",
            )
            self.log.warning("opened incident %s", record["id"])
            if not f.broker_ids:
                # e.g. partitions with no leader at all: nothing to capture or restart automatically
                store.update(record["id"], note="no broker named by the finding: needs a person; no response run started")
                continue
            confs.append(
                {
                    "cluster": config.name,
                    "incident_id": record["id"],
                    "broker_ids": list(f.broker_ids),
                    "reason": f.summary,
                    "finding": f.to_dict(),
                }
            )
        return confs
