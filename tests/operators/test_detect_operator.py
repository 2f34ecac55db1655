"""DetectFindingsOperator: which findings open incidents, which start a response, and no duplicates."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kafka_runbooks.incidents.store import IncidentStore
from kafka_runbooks.model import Broker, ClusterSnapshot, Partition
from kafka_runbooks.operators.detect import DetectFindingsOperator


@pytest.fixture
def cluster_file(tmp_path, monkeypatch):
    path = tmp_path / "clusters.json"
    path.write_text(json.dumps({"c1": {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}, "incident_base": str(tmp_path / "incidents")}}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(path))
    return tmp_path / "incidents"


def _snapshot(partitions):
    return ClusterSnapshot(
        cluster="c1", taken_at="2026-01-01T00:00:00Z", brokers=tuple(Broker(b, f"h{b}", 9092) for b in (1, 2, 3)),
        controller_id=1, partitions=tuple(partitions),
    ).to_dict()


def _run(snapshot):
    op = DetectFindingsOperator(task_id="detect", cluster="c1", snapshot=snapshot)
    return op.execute({"dag": SimpleNamespace(dag_id="kafka_health_check")})


# seed 001 shape: broker 3 leads partitions whose ISR shrank to [3]
STUCK = [Partition("orders", i, (3, 1, 2), 3, (3,)) for i in range(3)] + [Partition("orders", 3, (1, 2, 3), 1, (1, 2, 3))]


def test_unresponsive_broker_opens_one_incident_and_starts_one_response(cluster_file):
    confs = _run(_snapshot(STUCK))
    assert len(confs) == 1 and confs[0]["broker_ids"] == [3] and confs[0]["finding"]["kind"] == "broker_unresponsive"
    incident = IncidentStore(cluster_file).get(confs[0]["incident_id"])
    assert incident["status"] == "open" and incident["trigger"]["kind"] == "broker_unresponsive"
    assert _run(_snapshot(STUCK)) == []  # the next scheduled check does not pile up a second response


def test_leaderless_partitions_open_an_incident_but_start_no_restart_response(cluster_file):
    offline = [Partition("orders", 0, (1, 2, 3), -1, ())]
    assert _run(_snapshot(offline)) == []
    (record,) = [json.loads(p.read_text()) for p in cluster_file.glob("*/incident.json")]
    assert record["trigger"]["kind"] == "offline_partitions" and "needs a person" in record["notes"][0]["text"]


def test_healthy_cluster_opens_nothing(cluster_file):
    assert _run(_snapshot([Partition("orders", 0, (1, 2, 3), 1, (1, 2, 3))])) == []
    assert not cluster_file.exists() or not list(cluster_file.glob("*/incident.json"))
