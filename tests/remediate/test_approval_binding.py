"""Issue 17 §3: an approval binds everything that will run -- the plan, per-broker argv, the broker -> host map,
the gates, the canary switch, the approvers and the seal key's connection. A Variable or an XCom edited after
Approve refuses naming what changed; approvals expire; four eyes fails closed (a starter known by name under an
auth manager whose ids are numbers; a run nobody started). The execute side (``use_approval``) is run with a real
sealed ledger, the cluster's configuration as the Variable gives it, and this run's XCom."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.remediate import approvals as A
from kafka_runbooks.remediate.digest import approval_digest, binding_changes, execution_binding
from kafka_runbooks.remediate.plan import plan_restart

from snapshot_builders import P, snap
from kafka_runbooks.state.db import StateDb

SECRET = b"0123456789abcdef0123456789abcdef"
RAW = {"zk_conn_id": "zk", "hosts": {"1": "ssh_b1", "2": "ssh_b2", "3": "ssh_b3"}, "kafka_version": "2.3.0",
       "stop_command": ["/opt/bin/kafka-stop", "{broker_id}"], "start_command": ["/opt/bin/kafka-start"],
       "kill_command": ["/opt/bin/kafka-kill"],
       "approvals": {"approvers": ["carol", "dave"], "max_age_s": 600}, "gates": {"stop_s": 60}}


def _config(**over):
    raw = json.loads(json.dumps(RAW))
    for k, v in over.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and k in raw and k != "hosts" else v
    return ClusterConfig.from_dict("c1", raw)


def _plan(config):
    return plan_restart(snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3])], controller=3), [2], config, roll_id="c1-roll-1")


def _approve(tmp_path, config, plan, canary, **kw):
    """The ledger as the approval task leaves it: a sealed request and a sealed Approve by carol."""
    from kafka_runbooks.remediate.ledger import Ledger

    binding = execution_binding(config, plan, canary)
    d = dict(dag_id="kafka_rolling_restart", run_id="run-1", task_id="approve", try_number=1,
             plan_digest=approval_digest(plan, binding), chosen="Approve", user_id="carol", user_name="carol",
             responded_at="2026-11-22T14:00:00+00:00", timed_out=False, starter="alice", binding=binding, plan=plan.to_dict())
    d.update(kw)
    ledger = Ledger(StateDb.embedded(tmp_path / "incidents"), plan.roll_id)
    ledger.append("approval", "run-1", **A.entry_for(A.Decision(**d), SECRET))
    return ledger


@pytest.fixture
def execute_side(tmp_path, monkeypatch):
    """``use_approval`` as the execute task calls it, at 14:05 on the approval's day, with the seal key."""
    from kafka_runbooks import clock
    from kafka_runbooks.runbook.task import Task

    monkeypatch.setattr(clock, "now_iso", lambda: "2026-11-22T14:05:00+00:00")
    monkeypatch.setattr(StateDb, "now", lambda self: "2026-11-22T14:05:00.000Z")  # expiry is on the database's clock
    task = Task(dag_id="kafka_rolling_restart", run_id="run-1", task_id="execute", try_number=1)

    def use(config, plan, canary):
        from kafka_runbooks.runbook.restart import use_approval

        config = dataclasses.replace(config, incident_base=str(tmp_path / "incidents"))
        return use_approval(task, plan, config, "nothing restarted", canary=canary, secret_of=lambda conn_id: SECRET)

    return use


def test_the_approved_plan_and_binding_are_usable_once(tmp_path, execute_side):
    from kafka_runbooks.runbook.errors import Stop as AirflowFailException  # the service's; the operator makes it Airflow's

    config = dataclasses.replace(_config(), incident_base=str(tmp_path / "incidents"))
    plan = _plan(config)
    _approve(tmp_path, config, plan, canary=True)
    decision, approver = execute_side(config, plan, True)
    assert approver == "carol" and decision.binding["commands"]["2"]["stop"] == ["/opt/bin/kafka-stop", "2"]
    with pytest.raises(AirflowFailException, match="already used"):
        execute_side(config, plan, True)


@pytest.mark.parametrize("edit, named", [
    ({"stop_command": ["/opt/bin/evil-stop"]}, 'commands.2.stop: approved ["/opt/bin/kafka-stop", "2"], now ["/opt/bin/evil-stop"]'),
    ({"kill_command": []}, "commands.2.kill: approved"),
    ({"hosts": {"1": "ssh_b1", "2": "ssh_other_host", "3": "ssh_b3"}}, 'hosts.2: approved "ssh_b2", now "ssh_other_host"'),
    ({"gates": {"stop_s": 5}}, "gates.stop_s: approved 60, now 5"),
    ({"approvals": {"approvers": ["carol", "mallory"]}}, "approvers"),
    ({"approvals": {"approvers": ["carol", "dave"], "secret_conn_id": "other_key"}}, 'seal_key_conn_id: approved "kafka_runbooks_approvals", now "other_key"'),
    ({"server_properties_path": "/etc/other/server.properties"}, "identity.server_properties_path"),
])
def test_a_variable_edited_after_approve_refuses_naming_what_changed(tmp_path, execute_side, edit, named):
    from kafka_runbooks.runbook.errors import Stop as AirflowFailException  # the service's; the operator makes it Airflow's

    approved = _config()
    plan = _plan(approved)
    _approve(tmp_path, approved, plan, canary=True)
    with pytest.raises(AirflowFailException) as refused:
        execute_side(_config(**edit), plan, True)
    assert "not what would run now" in str(refused.value) and named in str(refused.value), str(refused.value)


def test_an_xcom_edited_after_approve_refuses_naming_what_changed(tmp_path, execute_side):
    from kafka_runbooks.runbook.errors import Stop as AirflowFailException  # the service's; the operator makes it Airflow's

    config = _config()
    plan = _plan(config)
    _approve(tmp_path, config, plan, canary=True)
    with pytest.raises(AirflowFailException, match="canary.enabled: approved true, now false"):
        execute_side(config, plan, False)  # the plan task's XCom says canary off now
    edited = dataclasses.replace(plan, not_serving={2: "edited into the XCom"})
    with pytest.raises(AirflowFailException, match='plan.not_serving.2: approved "<absent>", now "edited into the XCom"'):
        execute_side(config, edited, True)


def test_approvals_expire_after_max_age_except_an_elections_approved_deadline(tmp_path, execute_side):
    from kafka_runbooks.runbook.errors import Stop as AirflowFailException  # the service's; the operator makes it Airflow's

    config = _config()
    plan = _plan(config)
    _approve(tmp_path, config, plan, canary=False, responded_at="2026-11-22T13:50:00+00:00")  # 15 min before, max 10
    with pytest.raises(AirflowFailException, match=r"expired \(approvals.max_age_s = 600\)"):
        execute_side(config, plan, False)
    waits = dataclasses.replace(plan, roll_id="c1-roll-2", conditions={"deadline_at": "2026-11-22T18:00:00+00:00"})
    _approve(tmp_path, config, waits, canary=False, responded_at="2026-11-22T13:50:00+00:00")
    assert execute_side(config, waits, False)[1] == "carol"  # approved to wait until 18:00


def test_binding_changes_name_every_path():
    assert binding_changes({"a": {"b": 1, "c": [1]}}, {"a": {"b": 2, "c": [1]}, "d": 3}) == [
        "a.b: approved 1, now 2", 'd: approved "<absent>", now 3']


def test_four_eyes_by_id_and_by_name_under_an_auth_manager_whose_ids_are_numbers():
    """FAB: approvers are numeric ids, a run's starter is recorded by user name (``triggering_user_name``)."""
    names = {"3": "alice", "5": "bob"}
    assert A.assigned_users(["3", "5"], "alice", names) == [{"id": "5", "name": "bob"}]
    assert A.four_eyes_refusals("3", "alice", ["3", "5"], "alice", names) == ["user '3' started this run and cannot approve it (four eyes)"]
    # even when the auth manager reports another display name, the configured name of id 3 is the starter's
    assert "started this run" in A.four_eyes_refusals("3", "Alice Example", ["3", "5"], "alice", names)[0]
    assert A.four_eyes_refusals("5", "bob", ["3", "5"], "alice", names) == []
    assert "answered as 'mallory'" in A.four_eyes_refusals("5", "mallory", ["3", "5"], "alice", names)[0]
    # without the id -> name map (FAB configured by ids only) the starter's own answer still does not count: the HITL
    # row carries the auth manager's user name, compared with the run's triggering_user_name
    assert A.four_eyes_refusals("3", "alice", ["3", "5"], "alice", {}) == ["user '3' started this run and cannot approve it (four eyes)"]


def test_a_run_nobody_started_needs_a_configured_approver_and_says_it_was_automatic():
    assert A.assigned_users(["carol", "dave"], None) == [{"id": "carol", "name": "carol"}, {"id": "dave", "name": "dave"}]
    assert A.four_eyes_refusals("mallory", "mallory", ["carol", "dave"], None) == [
        "user 'mallory' is not one of the cluster's approvers ['carol', 'dave']"]
    auto = A.Decision(dag_id="d", run_id="r", task_id="approve", try_number=1, plan_digest="x", chosen="Approve", user_id="carol",
                      user_name="carol", responded_at="t", timed_out=False, starter=None, automatic="run type manual: started by another DAG")
    assert auto.started_by == "nobody: automatic run (run type manual: started by another DAG)"
    assert A.Decision.from_payload(auto.payload()) == auto
