"""A roll of the lab's brokers through the engine is not an election storm (issue 16 §3) and the health check respects
the running plan (issue 17 §5), on the lab's real Kafka 2.3.0.

The rolling restart (kafka_rolling_restart, approved) restarts the three brokers, the controller last; meanwhile the
health check runs as its schedule would, reading the maintenance lock and the plans' ledgers, in a process of its own
(``health_loop.py``: as on a worker, never a thread beside dag.test()'s tasks); afterwards it runs again.
Before the fix every check after a roll called it a storm ("partitions changed leader 3+ times in 30 min": every
restart bumps the leader epoch of every partition of the broker). Now: no election_storm, during or after; findings
about the rolled brokers during the roll are annotated with the roll and open no incident."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.third_lane, pytest.mark.timeout(1500)]  # lane 3, after the tests without a lab: the lab lane is the longest


def test_a_roll_through_the_engine_is_no_storm_and_its_findings_are_its_own(lab_settings, tmp_path):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.observe import check_once
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate.activity import product_activity

    lab, settings = lab_settings
    config = load_cluster("lab")
    check_once(config)  # the history before the roll
    out, stop = tmp_path / "health.jsonl", tmp_path / "health.stop"
    checker = subprocess.Popen([sys.executable, str(Path(__file__).with_name("health_loop.py")), str(out), str(stop)])
    form = {"cluster": "lab", "brokers": [], "reason": f"roll {uuid.uuid4().hex[:8]}", "mode": "execute", "canary": True}
    try:
        with Responder("kafka_rolling_restart", "approve", "Approve", user="oncall-carol", timeout_s=900) as responder:
            run = load_dags().get_dag("kafka_rolling_restart").test(run_conf=form)
    finally:
        stop.touch()
        try:
            checker.wait(300)
        except subprocess.TimeoutExpired:
            checker.kill()
    assert responder.error is None and run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    errors = [r["error"] for r in rows if "error" in r]
    seen = [(r["when"], r["findings"]) for r in rows if "error" not in r]
    for _ in range(2):
        with ZooKeeperHook(config.zk_conn_id).session() as zk:
            activity = product_activity(config, zk)
        assert activity and all(not a.running for a in activity) and activity[-1].kind == "rolling_restart"
        seen.append(("after", [{"kind": f.kind, "summary": f.summary[:300], "broker_ids": list(f.broker_ids),
                                "during_plan": bool(f.details.get("during_plan"))} for f in check_once(config, activity=activity)[1]]))
    assert not errors, errors[:3]
    storms = [(when, f["summary"]) for when, fs in seen for f in fs if f["kind"] == "election_storm"]
    assert storms == [], storms
    during = [f for when, fs in seen if when == "during" for f in fs]
    assert any(when == "during" for when, _ in seen), "no health check ran while the roll held the lock"
    about_rolled = [f for f in during if f["broker_ids"] and f["during_plan"]]
    unannotated = [(f["kind"], f["broker_ids"]) for f in during if f["kind"] in ("broker_absent", "broker_unregistered_alive",
                                                                               "under_replicated_partitions") and not f["during_plan"]]
    assert not unannotated, unannotated
    print("annotated during the roll:", sorted({f["kind"] for f in about_rolled}), "checks:", [w for w, _ in seen])
