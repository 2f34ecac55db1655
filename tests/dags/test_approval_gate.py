"""The approval gate of the rolling-restart DAG, without the REST API (test_approval_rest.py has it):
no answer is a Reject, an answer from someone who is not an approver does not count even when it
reaches the database directly, an approval task marked success by hand approves nothing, and a dry
run shows the plan and changes nothing. (Stand-in ZooKeeper cluster; see conftest.py.)"""

from __future__ import annotations

import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.remediate import host as _host

REAL_UNREACHABLE_HOSTS = _host.unreachable_hosts  # before conftest.py's cluster_env keeps the plan-time probe out

pytestmark = [pytest.mark.usefixtures("airflow_db"), pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.second_lane]  # ./run test: after the deployed suite in its lane (lane balance, docs/FIGURES.md)

DAG_ID = "kafka_rolling_restart"


def _form(mode="execute", **kw):
    return {"cluster": "resttest", "brokers": [2], "reason": f"gate test {uuid.uuid4().hex[:8]}", "mode": mode, "canary": False, **kw}


def _states(run):
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def _xcom(run, task_id, key="return_value"):
    return next(ti for ti in run.get_task_instances() if ti.task_id == task_id).xcom_pull(task_ids=task_id, key=key)


def _audit(settings, run):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    record_id = _xcom(run, "plan")["plan"]["roll_id"]
    return record_id, IncidentStore(ClusterConfig.from_dict("resttest", settings)).audit_trail(record_id)


def test_no_answer_before_the_timeout_is_a_reject(cluster_env, monkeypatch):
    settings, _ = cluster_env
    import json
    import os

    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["resttest"]["approvals"]["timeout_s"] = 2
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    with Responder(DAG_ID, "approve", "Approve", sweep_timeouts=True, timeout_s=120) as sweeper:
        run = load_dags().get_dag(DAG_ID).test(run_conf=_form())
    assert sweeper.error is None and sweeper.answered_run_ids
    states = _states(run)
    assert states["approve"] == "success" and states["execute"] == "skipped" and states["close"] == "success", states
    assert _xcom(run, "approve", "decision")["timedout"] is True
    record_id, audit = _audit(settings, run)
    assert [(e["actor"], e["outcome"]) for e in audit if e["action"] == "approval"] == [("nobody", "timeout")]
    assert not [e for e in audit if e["action"] in ("maintenance_lock", "stop_broker")]


def test_an_answer_from_outside_the_approvers_does_not_count(cluster_env):
    """The Responder writes the HITL row directly, as a database user could, bypassing the REST
    API's assignment check: the operator's own four-eyes check still refuses it."""
    settings, webhook = cluster_env
    with Responder(DAG_ID, "approve", "Approve", user="mallory", timeout_s=120) as responder:
        run = load_dags().get_dag(DAG_ID).test(run_conf=_form())
    assert responder.error is None and responder.answered_run_ids
    states = _states(run)
    assert states["approve"] == "failed" and states["execute"] == "upstream_failed", states
    decision = _xcom(run, "approve", "decision")
    assert any("'mallory' is not one of the cluster's approvers" in r for r in decision["refusals"])
    record_id, audit = _audit(settings, run)
    assert [(e["actor"], e["outcome"]) for e in audit if e["action"] == "approval"] == [("mallory", "refused")]
    assert webhook.wait_for(lambda m: m["event"] == "halted" and m["task_id"] == "approve")
    # issue 16 §3: the record of a run refused by four eyes is closed with the reason, not left open
    from kafka_runbooks.incidents.store import IncidentStore

    record = IncidentStore(ClusterConfig.from_dict("resttest", settings)).get(record_id)
    assert record["status"] == "closed" and "approval by mallory refused" in record["resolution"], record
    # issue 29 §3: a refused roll's DAG run ends failed (its close task fails after closing the record)
    assert "is not one of the cluster's approvers" in record["resolution"] and _states(run)["close"] == "failed"


def test_the_starter_answering_directly_does_not_count(cluster_env):
    settings, _ = cluster_env
    with Responder(DAG_ID, "approve", "Approve", user="dag_test", timeout_s=120):
        run = load_dags().get_dag(DAG_ID).test(run_conf=_form())
    assert _states(run)["execute"] == "upstream_failed"
    assert any("started this run and cannot approve it" in r for r in _xcom(run, "approve", "decision")["refusals"])
    from kafka_runbooks.incidents.store import IncidentStore

    record = IncidentStore(ClusterConfig.from_dict("resttest", settings)).get(_audit(settings, run)[0])
    assert record["status"] == "closed" and "started this run and cannot approve it" in record["resolution"], record


def test_an_approval_marked_success_by_hand_approves_nothing(cluster_env):
    settings, _ = cluster_env
    run = load_dags().get_dag(DAG_ID).test(run_conf=_form(), mark_success_pattern="approve")
    states = _states(run)
    assert states["approve"] == "success" and states["execute"] == "failed", states
    _, audit = _audit(settings, run)
    refused = [e for e in audit if e["action"] == "execute_plan"]
    assert [e["outcome"] for e in refused] == ["refused"]
    assert any("no approval was recorded for run" in r for r in refused[0]["details"]["refusals"])
    assert not [e for e in audit if e["action"] in ("maintenance_lock", "stop_broker")]


def test_dry_run_shows_the_plan_and_changes_nothing(cluster_env):
    settings, webhook = cluster_env
    run = load_dags().get_dag(DAG_ID).test(run_conf={**_form(mode="dry-run"), "brokers": []})
    states = _states(run)
    assert states["plan"] == "success" and states["approve"] == "skipped" and states["execute"] == "skipped", states
    out = _xcom(run, "plan")
    assert out["dry_run"] is True and out["plan"]["roll_id"] is None and "steps" not in out["plan"]  # nothing recorded
    assert out["order"] == [2, 3, 1]  # every broker, the controller (1) last
    assert _xcom(run, "close")["status"] == "dry run"
    assert not webhook.received


def test_a_dry_run_whose_plan_would_be_refused_says_so_as_loudly_as_a_refusal(cluster_env, monkeypatch):
    """Issue 32 point 2: the plan-time probe of broker 2's host (real: nothing listens at the stand-in's address) refuses
    the plan; a dry run of it fails its plan task like a real refusal, says "would be refused: ..." first in the log and
    as the note, and its close task says it -- not a green run whose refusal is a WARNING somewhere in a log."""
    settings, webhook = cluster_env
    monkeypatch.setattr(_host, "unreachable_hosts", REAL_UNREACHABLE_HOSTS)
    import structlog

    with structlog.testing.capture_logs() as events:  # what Airflow's task runner logs (the same as a worker's)
        run = load_dags().get_dag(DAG_ID).test(run_conf=_form(mode="dry-run"))
    states = _states(run)
    assert states["plan"] == "failed" and states["approve"] == "upstream_failed" and states["execute"] == "upstream_failed", states
    refused = _xcom(run, "plan", "refused")
    assert refused["dry_run"] is True and refused["summary"].startswith("refused: 1 of 1 step(s) -- broker 2: "), refused
    close = _xcom(run, "close")
    assert close["status"] == "dry run, would be refused", close
    assert close["summary"].startswith("dry run: would be refused; nothing was asked and nothing changed. would be refused: 1 of 1")
    # nothing was asked and nothing changed: on-call is not paged about a dry run (the person who started it reads it)
    assert not webhook.received
    # issue 32 point 7: the plan task fails without a traceback: Airflow's task runner says "Task exited" (exit code 1)
    # after the refusal's sentence (logged by operators/refusal.py), not "Task failed with exception" with its frames
    failed = [e for e in events if e.get("event") in ("Task failed with exception", "Task exited")]
    assert [(e["event"], e.get("exit_code"), bool(e.get("exc_info"))) for e in failed] == [("Task exited", 1, False)], failed


def test_a_responder_that_cannot_answer_ends_the_wait_instead_of_hanging(cluster_env):
    """The test harness itself: dag.test() waits for input without bound, so a responder that fails
    must fail the parked task (and say why), never leave its caller waiting."""
    with Responder(DAG_ID, "approve", "Maybe", user="oncall-bob", timeout_s=120) as responder:
        run = load_dags().get_dag(DAG_ID).test(run_conf=_form())
    assert isinstance(responder.error, ValueError) and "'Maybe' is not one of" in str(responder.error)
    assert _states(run)["approve"] == "failed" and _states(run)["execute"] == "upstream_failed", _states(run)


def test_an_answered_approval_acknowledges_on_calls_pagerduty_incident(cluster_env, monkeypatch):
    """Issue 31: on-call on PagerDuty (Events v2, a local receiver standing where events.pagerduty.com would be). The
    approval waiting triggers the roll's PagerDuty incident; carol (an approver) answers Reject -- a person has it -- and
    the same dedup key is acknowledged, audited with who answered. Nothing is restarted."""
    import json

    from kafka_lab.net import service_ip
    from webhook_receiver import WebhookReceiver

    settings, webhook = cluster_env
    with WebhookReceiver(path="/v2/enqueue") as pd:
        monkeypatch.setenv("AIRFLOW_CONN_RESTTEST_ONCALL", json.dumps({
            "conn_type": "pagerduty_events", "host": service_ip("webhook"), "port": pd.port, "schema": "http",
            "password": "R0UT1NGKEY0123456789abcdef012345"}))
        with Responder(DAG_ID, "approve", "Reject", user="carol", timeout_s=120) as responder:
            run = load_dags().get_dag(DAG_ID).test(run_conf=_form())
    assert responder.error is None and responder.answered_run_ids
    assert _states(run)["execute"] == "skipped", _states(run)
    record_id, audit = _audit(settings, run)
    events = [(m["event_action"], m["dedup_key"]) for m in pd.received]
    assert events[:2] == [("trigger", f"resttest/{record_id}"), ("acknowledge", f"resttest/{record_id}")], events
    acks = [e for e in audit if e["action"] == "page_acknowledge"]
    assert [(e["outcome"], e["details"]["answered_by"]) for e in acks] == [("ok", "carol")], acks
    assert not webhook.received  # the chat webhook is not on-call's connection here
