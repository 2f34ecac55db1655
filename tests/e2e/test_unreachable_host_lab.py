"""A roll that includes a host the product cannot reach over SSH is refused at plan time, naming the host -- never
offered for approval to halt later (issue 16 §3), on the lab: broker 2's SSH connection points at a port where no sshd
listens (the host's sshd "down")."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder
from kafka_runbooks.config import ClusterConfig

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.timeout(600)]


def test_a_roll_with_an_unreachable_host_is_refused_at_plan_time(lab_settings, monkeypatch):
    from kafka_runbooks.incidents.store import IncidentStore

    lab, settings = lab_settings
    conn = json.loads(os.environ["AIRFLOW_CONN_KAFKA_LAB_HOST_2"])
    conn["port"] = 1  # nothing listens there
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_LAB_HOST_2", json.dumps(conn))
    form = {"cluster": "lab", "brokers": [], "reason": f"roll {uuid.uuid4().hex[:8]}", "mode": "execute", "canary": True}
    # if it were offered for approval, this answers Reject (the test then fails on the plan's state, it never hangs)
    with Responder("kafka_rolling_restart", "approve", "Reject", user="oncall-carol", timeout_s=300) as responder:
        run = load_dags().get_dag("kafka_rolling_restart").test(run_conf=form)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["plan"] == "failed" and not responder.answered_run_ids, states
    (record,) = [r for r in IncidentStore(ClusterConfig.from_dict("lab", settings)).records("lab") if r.get("plan")]
    refusals = record["plan"]["refusals"]
    assert any(r.startswith("broker 2: its host cannot be reached over SSH now (kafka_lab_host_2") for r in refusals), refusals
    assert record["status"] == "closed" and lab.broker_pid(2)  # nothing was touched
