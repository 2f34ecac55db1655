"""Issue 29 §2, finished: the plan task's XCom is a reference to the plan it recorded (record and digest); the
approval page and the change load the plan -- and the findings, the canary switch, the gates and the report recorded
with it -- from the state database. An XCom edited between the plan task and the approval (canary off, a forged
finding, no gates, another report) changes neither what the approver is shown and binds to, nor what runs.

Run through the real operators over the product's real SQLite state store, the cluster configured through the
clusters file. Two things are replaced, both Airflow's or the cluster's side: Airflow's HITL ``execute`` (it stores
the request through the worker's supervisor and defers; here it records what it would store) and the engine's ``run``
and the fresh re-plan (they talk to the brokers and ZooKeeper; here they record what they were given)."""

from __future__ import annotations

import datetime as dt
import json
from types import SimpleNamespace

import pytest

from snapshot_builders import P, snap

SECRET = b"0123456789abcdef0123456789abcdef"
RECORDED_FINDING = {"kind": "broker_unresponsive", "severity": "critical", "broker_ids": [2],
                    "summary": "broker 2 does not answer a direct check"}
FORGED_FINDING = {"kind": "broker_unresponsive", "severity": "critical", "broker_ids": [2],
                  "summary": "FORGED: every check passed, approve without reading"}


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """Cluster c1 (approvers carol and dave); a rolling restart of broker 2 started by alice, its plan recorded by the
    plan task with the canary on, one finding, the gates and the report."""
    import kafka_runbooks.operators.approval as approval_op
    from kafka_runbooks.config import FILE_ENV, load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart
    from kafka_runbooks.runbook import finding_records

    raw = {"c1": {"zk_conn_id": "zk", "hosts": {"1": "ssh_b1", "2": "ssh_b2", "3": "ssh_b3"}, "kafka_version": "2.3.0",
                  "incident_base": str(tmp_path / "state"), "approvals": {"approvers": ["carol", "dave"]},
                  "stop_command": ["/opt/bin/kafka-stop"], "start_command": ["/opt/bin/kafka-start"]}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    monkeypatch.setattr(approval_op, "approval_secret", lambda conn_id: SECRET)  # the seal key's Airflow connection
    config = load_cluster("c1")
    record = IncidentStore(config).open(cluster="c1", broker_ids=[2], reason="roll", opened_by="alice",
                                        trigger={"kind": "rolling_restart", "requested": [2]})
    s = snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3]), P("orders", 1, [3, 1, 2], 3, [3, 1, 2])], controller=3)
    plan = plan_restart(s, [2], config, roll_id=record["id"], canary_topic=None)
    digest = plan_digest(plan)
    L.Ledger(config, plan.roll_id).append(L.PLANNED, "run-1", plan=plan.to_dict(), digest=digest, findings=[RECORDED_FINDING],
                                          findings_sha256=finding_records.records_sha256([RECORDED_FINDING]),
                                          canary=True, gates=["registered again", "canary produce"], report="/bundles/r.html")
    true = {"plan": plan.to_dict(), "digest": digest, "dry_run": False, "canary": True, "findings": [RECORDED_FINDING],
            "gates": ["registered again", "canary produce"], "report": "/bundles/r.html"}
    edited = {**true, "canary": False, "findings": [FORGED_FINDING], "gates": [], "report": "/elsewhere/forged.html"}
    return SimpleNamespace(config=config, plan=plan, digest=digest, true=true, edited=edited)


def _context(run_id, task_id, pushed=None):
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id=run_id, task_id=task_id, try_number=1,
                         xcom_push=lambda key, value: (pushed if pushed is not None else {}).__setitem__(key, value),
                         xcom_pull=lambda *a, **k: None)
    return {"ti": ti, "run_id": run_id, "dag_run": SimpleNamespace(triggering_user_name="alice", run_type="manual")}


@pytest.fixture
def hitl(monkeypatch):
    """Airflow's HITL request, as it would be stored: subject, body, assigned users."""
    from airflow.providers.standard.operators.hitl import HITLOperator

    asked = []
    monkeypatch.setattr(HITLOperator, "execute", lambda self, context: asked.append(
        {"subject": self.subject, "body": self.body, "assigned": [u["id"] for u in self.assigned_users]}))
    return asked


def _ask(plan_output, run_id):
    from kafka_runbooks.operators.approval import RemediationApprovalOperator

    op = RemediationApprovalOperator(task_id="approve", plan_output=plan_output, cluster="c1")
    op.execute(_context(run_id, "approve"))
    return op


def _sealed_binding(config, record_id, run_id):
    from kafka_runbooks.remediate.ledger import Ledger

    (entry,) = [e for e in Ledger(config, record_id).entries() if e["event"] == "approval_requested"
                and e["decision"]["run_id"] == run_id]
    return entry["decision"]["binding"]


def test_an_edited_xcom_does_not_change_what_the_approver_is_shown_or_binds_to(recorded, hitl):
    _ask(recorded.true, "run-1")
    _ask(recorded.edited, "run-2")
    shown, edited = hitl
    assert edited["body"] == shown["body"] and edited["assigned"] == shown["assigned"] == ["carol", "dave"]
    assert "FORGED" not in edited["body"] and RECORDED_FINDING["summary"] in edited["body"]
    assert "canary produce" in edited["body"]  # the recorded gates
    sealed = _sealed_binding(recorded.config, recorded.plan.roll_id, "run-2")
    assert sealed["canary"]["enabled"] is True and sealed == _sealed_binding(recorded.config, recorded.plan.roll_id, "run-1")


def test_an_edited_xcom_does_not_change_what_runs(recorded, hitl, monkeypatch):
    from kafka_runbooks.operators.remediate import ExecutePlanOperator
    from kafka_runbooks.remediate import executor as E

    ran = []
    monkeypatch.setattr(E, "run", lambda execution: ran.append(execution) or {"restarted": [2]})
    monkeypatch.setattr(E, "plan_changed", lambda approved, fresh: [])
    _no_fresh_state(monkeypatch, recorded.plan)
    approve = _ask(recorded.edited, "run-1")
    decision = {}
    approve.execute_complete(_context("run-1", "approve", decision), {
        "chosen_options": ["Approve"], "params_input": {}, "responded_by_user": {"id": "carol", "name": "carol"},
        "responded_at": dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=60)})  # a minute ago: within approvals.max_age_s
    assert decision["decision"]["refusals"] == []
    ExecutePlanOperator(task_id="execute", plan_output=recorded.edited).execute(_context("run-1", "execute"))
    (execution,) = ran
    assert execution.canary is True and execution.plan == recorded.plan and execution.approver == "carol"


def _no_fresh_state(monkeypatch, plan):
    """The execute task's fresh re-plan (it reads ZooKeeper and the brokers) gives the approved plan back. Its home is
    ``runbook/restart.py`` (``operators/remediate.py`` before the service layer)."""
    import kafka_runbooks.operators.remediate as op_remediate

    monkeypatch.setattr(op_remediate, "fresh_plan", lambda config, approved, canary=False: approved, raising=False)
    try:
        import kafka_runbooks.runbook.restart as restart
    except ImportError:  # before the service layer
        return
    monkeypatch.setattr(restart, "fresh_plan", lambda config, approved, canary=False: approved)
