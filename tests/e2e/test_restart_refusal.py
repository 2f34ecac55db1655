"""A restart that would take away the last in-sync replica of __consumer_offsets partitions is refused
on the real lab: the run halts before the approval is even asked, naming the partitions, and nothing
is restarted (incident 002: never leave a group coordinator without a replica)."""

from __future__ import annotations

import os

import pytest

from kafka_lab.airflow_home import load_dags, take_triggered_confs
from kafka_lab.approvals import Responder
from kafka_lab.drill import RESPONSE

pytestmark = [pytest.mark.lab, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(600)]


def test_last_in_sync_holder_of_consumer_offsets_is_not_restarted(healthy_lab, airflow_db):
    lab = healthy_lab
    os.environ.update(lab.airflow_env())
    take_triggered_confs(RESPONSE)
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    store = IncidentStore(ClusterConfig.from_dict("lab", lab.cluster_settings()["lab"]))
    for b in (2, 3):
        lab.stop(b)
    for b in (2, 3):
        lab.wait_unregistered(b, 30)
    # the controller moves every partition to broker 1 and shrinks its ISR to [1]
    lab.wait_partitions(lambda ps: all(s["isr"] == [1] for s in ps.values()), 30, "every ISR down to [1]")
    pid = lab.broker_pid(1)

    form = {"cluster": "lab", "broker_ids": [1], "reason": "rolling restart requested by hand"}
    # an approval is never asked; if it were, the responder would approve and the test would see the restart
    with Responder(RESPONSE, "approve", "Approve", user="oncall-dave", timeout_s=300) as responder:
        run = load_dags().get_dag(RESPONSE).test(run_conf=form)
    assert responder.answered_run_ids == []
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "failed"
    assert states["plan"] == "failed" and states["approve"] == "upstream_failed" and states["restart"] == "upstream_failed"
    assert states["close_incident"] == "failed"  # it records the halt and fails the run
    assert lab.broker_pid(1) == pid

    incident_id = next(ti for ti in run.get_task_instances() if ti.task_id == "open_incident").xcom_pull(task_ids="open_incident")["incident_id"]
    incident = store.get(incident_id)
    # a refused plan needs a person, and says first that nothing changed
    assert incident["status"] == "needs_person" and incident["status_reason"].startswith("refused; nothing changed"), incident
    # every refusal, in the order computed: the plan carries the first ones, the state database keeps them all
    from kafka_runbooks.state.plans import PlanDetails

    detail, _ = PlanDetails(ClusterConfig.from_dict("lab", lab.cluster_settings()["lab"])).get(incident_id)
    refusals = [f"broker 1: {r}" for r in detail.refusals[1]]
    assert incident["plan"]["refusals"][0] == refusals[0] and len(refusals) > len(incident["plan"]["refusals"])
    # cluster-wide reasons first (every partition is under-replicated), then each partition, offsets first
    assert refusals[0].startswith("broker 1: __consumer_offsets-") and "under-replicated" in refusals[0]
    last = [r for r in refusals if "is the last in-sync replica" in r]
    assert len([r for r in last if "__consumer_offsets-" in r]) == 50
    assert last[:50] == [r for r in last if "__consumer_offsets-" in r]
    audit = store.audit_trail(incident_id)
    assert [e["outcome"] for e in audit if e["action"] == "plan_restart"] == ["refused"]
    assert not [e for e in audit if e["action"] in ("approval", "restart_broker")]
    assert [e["outcome"] for e in audit if e["action"] == "halt"] == ["failed"]
