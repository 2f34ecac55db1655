"""ZooKeeper unreachable is a finding that pages on-call (issue 16 §3), on the lab's real ZooKeeper 3.8 ensemble: two of
its three servers stopped (SIGSTOP), the third up but without a quorum. Before, the health DAG's snapshot task failed
with a raw ``KazooTimeoutError: Connection time-out`` and no address."""

from __future__ import annotations

import json
import os
import signal

import pytest

from kafka_lab.airflow_home import load_dags, take_triggered_confs
from kafka_lab.drill import HEALTH, RESPONSE
from kafka_lab.lab import zk_connect
from webhook_receiver import WebhookReceiver
from kafka_runbooks.config import ClusterConfig

pytestmark = [pytest.mark.lab, pytest.mark.fourth_lane, pytest.mark.airflow, pytest.mark.timeout(900)]


def test_an_unreachable_zookeeper_is_a_finding_that_pages_on_call(lab_settings, monkeypatch):
    from kafka_runbooks.incidents.store import IncidentStore

    lab, settings = lab_settings
    with WebhookReceiver() as webhook:
        clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
        clusters["lab"]["approvals"]["oncall_conn_id"] = "lab_oncall"
        clusters["lab"]["capture"] = {**clusters["lab"].get("capture", {}), "connect_timeout_s": 5.0}
        monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
        monkeypatch.setenv("AIRFLOW_CONN_LAB_ONCALL", webhook.connection())
        stopped = [1, 2]
        for z in stopped:
            os.kill(lab.zk_pid(z), signal.SIGSTOP)
        try:
            run = load_dags().get_dag(HEALTH).test(run_conf={"cluster": "lab"})
            states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
        finally:
            for z in stopped:
                os.kill(lab.zk_pid(z), signal.SIGCONT)
        assert states["snapshot"] == "success" and states["detect"] == "success", states
        ref = next(ti for ti in run.get_task_instances() if ti.task_id == "snapshot").xcom_pull(task_ids="snapshot")
        from kafka_runbooks.state.snapshots import Snapshots

        snapshot = Snapshots(ClusterConfig.from_dict("lab", settings)).get(ref).to_dict()  # XCom carries its ref only
        assert "KazooTimeoutError" in snapshot["zookeeper_error"] and zk_connect().split(",")[0] in snapshot["zookeeper_error"]
        assert take_triggered_confs(RESPONSE) == []  # nothing to capture or restart
        store = IncidentStore(ClusterConfig.from_dict("lab", settings))
        (incident,) = [r for r in store.records("lab") if (r.get("trigger") or {}).get("kind") == "zookeeper_unreachable"]
        finding = incident["trigger"]
        assert incident["status"] == "needs_person"
        members = {m["server"]: m for m in finding["details"]["members"]}
        assert not members["1"]["answers"] and not members["2"]["answers"]
        assert members["3"]["answers"] and not members["3"]["serving"]
        assert "1 of 3 members answer their four-letter words, 0 serve" in finding["summary"]
        assert finding["details"]["since"] <= snapshot["taken_at"]
        page = webhook.wait_for(lambda m: m.get("event") == "finding", 30)
        assert "ZooKeeper could not be read" in page["text"] and page["details"]["incident"] == incident["id"]
        trail = store.audit_trail(incident["id"])
        assert [(e["action"], e["outcome"]) for e in trail if e["action"] == "page_oncall"] == [("page_oncall", "sent")]
