"""Issue 29 §2 "what was approved is what runs": the approval page and the executor read the plan the plan task
recorded in the state database (its ``planned`` ledger entry), by the digest XCom refers to -- never XCom's copy of
the plan -- and a not-serving waiver is honoured only when the findings recorded with the plan name its broker.
The state database is the product's real SQLite; the cluster's settings come from the clusters file, as in a
deployment without the Airflow Variable."""

from __future__ import annotations

import dataclasses
import json

import pytest

from snapshot_builders import P, snap

WAIVER = {2: "direct check failed (no answer within 5s) and jvm_deadlock: 'kafka-request-handler-1' <-> ..."}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """Cluster c1 configured; the plan task recorded a plan of broker 2 with NO waiver (no finding said broker 2 was
    not serving)."""
    from kafka_runbooks.config import FILE_ENV, load_cluster
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart

    raw = {"c1": {"zk_conn_id": "zk", "hosts": {"1": "ssh_b1", "2": "ssh_b2", "3": "ssh_b3"}, "kafka_version": "2.3.0",
                  "incident_base": str(tmp_path / "state")}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    config = load_cluster("c1")
    s = snap([P("orders", 0, [2, 1, 3], 2, [2, 1, 3]), P("orders", 1, [1, 3, 2], 1, [1, 3, 2])], controller=3)
    plan = plan_restart(s, [2], config, kind="incident_restart", roll_id="c1-incident-1")
    L.Ledger(config, plan.roll_id).append(L.PLANNED, "run-1", plan=plan.to_dict(), digest=plan_digest(plan), findings=[])
    return config, plan


def _xcom(plan, digest):
    return {"plan": plan.to_dict(), "digest": digest, "canary": False, "dry_run": False}


def test_a_waiver_written_into_the_plan_xcom_before_approve_is_not_honoured(recorded):
    """Someone edits the plan task's XCom before Approve: the plan now carries a waiver for broker 2. The approval page
    binds the approval to the plan as recorded (no waiver), the execute side loads that same plan; an XCom whose
    digest is the forged plan's names no recorded plan and both refuse. (Before: both read XCom, so the approver was
    shown -- and the executor ran -- the forged waiver.)"""
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.runbook import approval, plans
    from kafka_runbooks.runbook.errors import Stop

    config, plan = recorded
    forged = dataclasses.replace(plan, not_serving=dict(WAIVER))
    kept_digest = _xcom(forged, plan_digest(plan))  # the forged plan under the recorded plan's digest
    shown = approval.bind(kept_digest, "c1", "nothing to approve").plan
    assert shown.not_serving == {} and plan_digest(shown) == plan_digest(plan)

    runs = plans.load(kept_digest, "nothing restarted").plan
    assert runs.not_serving == {} and runs == dataclasses.replace(shown)

    own_digest = _xcom(forged, plan_digest(forged))  # the forged plan under its own digest: nothing recorded it
    with pytest.raises(Stop, match="no plan with digest .* was recorded"):
        approval.bind(own_digest, "c1", "nothing to approve")
    with pytest.raises(Stop, match="no plan with digest .* was recorded .*; nothing restarted"):
        plans.load(own_digest, "nothing restarted")


def test_a_waiver_is_recomputed_from_the_findings_recorded_with_the_plan():
    """The waiver of a recorded plan holds only for a broker a recorded not-serving finding names."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.remediate.ledger import waiver_refusals
    from kafka_runbooks.remediate.plan import plan_restart

    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"}, kafka_version="2.3.0")
    s = snap([P("orders", 0, [2, 1, 3], 2, [2, 1, 3])], controller=3)
    plan = plan_restart(s, [2], cfg, kind="incident_restart", not_serving=dict(WAIVER), roll_id="c1-1")
    deadlock = {"kind": "jvm_deadlock", "broker_ids": [2], "summary": "deadlock"}
    assert waiver_refusals(plan, [deadlock]) == []
    assert waiver_refusals(plan, [{**deadlock, "broker_ids": [1]}]) == [
        "broker 2 is under the not-serving waiver, but no not-serving finding recorded with the plan names it: the waiver "
        "is not honoured"]
    assert waiver_refusals(plan, [{**deadlock, "kind": "under_replicated_partitions"}]) != []
