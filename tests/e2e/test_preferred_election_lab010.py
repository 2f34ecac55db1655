"""The deferred preferred election (``kafka_preferred_election``, approved) on the lab's real Kafka 0.10.2.1 brokers: no
ElectLeaders API before 2.2 (KIP-183), so every batch is written to ``/admin/preferred_replica_election``, and its
convergence is checked on the brokers' own Metadata v2 views, which carry no leader epoch (KIP-320, 2.1): leaders
only. Broker 3 restarted (automatic rebalance off: the lab's default profile), so it leads none of its preferred
partitions; the election restores them. (tests/e2e/test_preferred_election_lab.py: the same on 2.3.0.)"""

from __future__ import annotations

import json
import os
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.timeout(600)]

DAG_ID = "kafka_preferred_election"
APPROVER = "oncall-carol"


@pytest.fixture
def election010(healthy_lab010, airflow_db, monkeypatch):
    lab = healthy_lab010
    for k, v in lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"]["election"] = {"batch_size": 8, "offsets_batch_size": 10, "stable_s": 5.0, "poll_s": 1.0,
                                   "convergence_s": 60.0, "znode_timeout_s": 60.0, "deadline_s": 300.0}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    return lab, clusters["lab"]


def test_010_preferred_election_through_the_znode_converges_on_views_without_epochs(election010):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    lab, settings = election010
    lab.bounce(3)  # stopped and started: its preferred partitions are led by others, and stay so
    mine = [f"{t}-{p}" for t, p in lab.preferred_of(3)]
    assert mine and not lab.leads_preferred(3)

    dag = load_dags().get_dag(DAG_ID)
    with Responder(DAG_ID, "approve", "Approve", user=APPROVER, timeout_s=300) as responder:
        run = dag.test(run_conf={"cluster": "lab", "brokers": [3], "reason": f"lab010 election {uuid.uuid4().hex[:8]}",
                                 "mode": "execute"})
    assert responder.error is None
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    states = {k: ti.state for k, ti in tis.items()}
    assert states == {"plan": "success", "approve": "success", "wait": "success", "elect": "success", "close": "success"}, states
    plan = tis["plan"].xcom_pull(task_ids="plan")["plan"]
    result = tis["elect"].xcom_pull(task_ids="elect")
    assert sorted(result["elected"]) == sorted(mine) and result["canary_failures"] == 0
    assert len(plan["batches"]) == result["batches"] >= 2 and plan["steps"] == []

    # preferred leadership restored: ZooKeeper, and every broker's own view -- leaders only, 0.10 has no epochs
    assert lab.leads_preferred(3)
    for b, view in lab.views().items():
        assert "error" not in view, (b, view)
        assert all(view[k][0] == 3 for k in lab.preferred_of(3)), b
        assert {epoch for _, epoch in view.values()} == {None}, b
    assert lab.kazoo().exists("/admin/preferred_replica_election") is None

    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    record, trail = store.get(plan["roll_id"]), store.audit_trail(plan["roll_id"])
    actions = [e["action"] for e in trail]
    assert actions.count("elect_batch") == result["batches"] and actions.count("convergence") == result["batches"]
    batches = [e for e in trail if e["action"] == "elect_batch"]
    assert {(e["outcome"], e["details"]["method"], e["details"]["znode"]) for e in batches} == {
        ("ok", "zookeeper", "/admin/preferred_replica_election")}, batches
    assert all(e["actor"] == APPROVER for e in batches)
    assert "approval_verified" in actions and record["status"] == "closed"
