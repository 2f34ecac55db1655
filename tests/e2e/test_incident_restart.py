"""The Approve half of incident 001 on the lab's real Kafka 2.3.0: a real JVM deadlock in broker 3, the
incident response started from the UI form, on-call approves, and the restart goes through the
remediation engine -- the not-serving evidence (a direct check failing now AND this run's jvm_deadlock
finding), the maintenance lock, a stop the stuck broker cannot finish (killed after gates.stop_s), its
old ZooKeeper session waited out, a start with a new session, the gates, the incident closed."""

from __future__ import annotations


import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder
from kafka_lab.drill import RESPONSE

pytestmark = [pytest.mark.lab, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(900)]


def test_an_approved_restart_of_a_deadlocked_broker_goes_through_the_engine(lab_settings):
    lab, settings = lab_settings
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    old_registration = lab.registration(3)[1]
    pid_before = lab.broker_pid(3)
    lab.deadlock(3)

    form = {"cluster": "lab", "broker_ids": [3], "reason": "on-call: broker 3 stopped answering"}
    with Responder(RESPONSE, "approve", "Approve", user="oncall-bob", timeout_s=600) as responder:
        run = load_dags().get_dag(RESPONSE).test(run_conf=form)
    assert responder.error is None and responder.answered_run_ids
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states

    # broker 3 is a new JVM with a new ZooKeeper session, and the cluster is whole again
    assert lab.broker_pid(3) != pid_before
    assert lab.registration(3)[1].ephemeralOwner != old_registration.ephemeralOwner
    lab.wait_full_isr(60)

    incident_id = next(ti for ti in run.get_task_instances() if ti.task_id == "open_incident").xcom_pull(task_ids="open_incident")["incident_id"]
    incident = store.get(incident_id)
    assert incident["status"] == "closed"
    evidence = incident["plan"]["not_serving"]["3"]
    assert "direct check failed" in evidence and "jvm_deadlock" in evidence
    trail = store.audit_trail(incident_id)
    assert [(e["actor"], e["outcome"]) for e in trail if e["action"] == "approval"] == [("oncall-bob", "approve")]
    actions = [e["action"] for e in trail if e.get("host") == "kafka_lab_host_3"]
    # the stop, then (a stuck shutdown) maybe the kill, then start, new session, gates, done -- in that order
    wanted = ["stop_broker", "broker_stopped", "start_broker", "broker_registered", "gate_in_sync", "gate_coordinator", "restart_broker"]
    assert [a for a in actions if a in wanted] == wanted, actions
    stopped = next(e for e in trail if e["action"] == "broker_stopped")["details"]
    assert ("kill_broker" in actions) == stopped["killed"]
    for kill in (e for e in trail if e["action"] == "kill_broker"):  # not serving: the shorter grace, not stop_s
        assert kill["details"]["grace_s"] == settings["gates"]["stop_unserving_s"] < settings["gates"]["stop_s"]
    done = next(e for e in trail if e["action"] == "restart_broker")
    assert done["outcome"] == "ok" and done["actor"] == "oncall-bob"
    assert [e["outcome"] for e in trail if e["action"] == "maintenance_lock"] == ["acquired", "released"]
