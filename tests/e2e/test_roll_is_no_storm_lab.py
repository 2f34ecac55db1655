"""A roll of the lab's brokers through the engine is not an election storm (issue 16 §3) and the health check respects
the running plan (issue 17 §5), on the lab's real Kafka 2.3.0.

The rolling restart (kafka_rolling_restart, approved) restarts the three brokers, the controller last; meanwhile the
health check runs as its schedule would, reading the maintenance lock and the plans' ledgers; afterwards it runs again.
Before the fix every check after a roll called it a storm ("partitions changed leader 3+ times in 30 min": every
restart bumps the leader epoch of every partition of the broker). Now: no election_storm, during or after; findings
about the rolled brokers during the roll are annotated with the roll and open no incident."""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.timeout(1500)]


def test_a_roll_through_the_engine_is_no_storm_and_its_findings_are_its_own(lab_settings):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.observe import check_once
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate.activity import product_activity

    lab, settings = lab_settings
    config = load_cluster("lab")
    seen: list[tuple[str, list]] = []
    errors: list[str] = []
    stop = threading.Event()

    def health() -> None:
        while not stop.is_set():
            try:
                with ZooKeeperHook(config.zk_conn_id).session() as zk:
                    activity = product_activity(config, zk)
                _, findings = check_once(config, activity=activity)
                seen.append(("during" if any(a.running for a in activity) else "outside", findings))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(f"{type(exc).__name__}: {exc}")
            stop.wait(2.0)

    check_once(config)  # the history before the roll
    checker = threading.Thread(target=health, name="health-during-roll", daemon=True)
    checker.start()
    form = {"cluster": "lab", "brokers": [], "reason": f"roll {uuid.uuid4().hex[:8]}", "mode": "execute", "canary": True}
    try:
        with Responder("kafka_rolling_restart", "approve", "Approve", user="oncall-carol", timeout_s=900) as responder:
            run = load_dags().get_dag("kafka_rolling_restart").test(run_conf=form)
    finally:
        stop.set()
        checker.join(300)
    assert responder.error is None and run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    for _ in range(2):
        with ZooKeeperHook(config.zk_conn_id).session() as zk:
            activity = product_activity(config, zk)
        assert activity and all(not a.running for a in activity) and activity[-1].kind == "rolling_restart"
        seen.append(("after", check_once(config, activity=activity)[1]))
    assert not errors, errors[:3]
    storms = [(when, f.summary[:300]) for when, fs in seen for f in fs if f.kind == "election_storm"]
    assert storms == [], storms
    during = [f for when, fs in seen if when == "during" for f in fs]
    assert any(when == "during" for when, _ in seen), "no health check ran while the roll held the lock"
    about_rolled = [f for f in during if f.broker_ids and f.details.get("during_plan")]
    unannotated = [(f.kind, f.broker_ids) for f in during if f.kind in ("broker_absent", "broker_unregistered_alive",
                                                                       "under_replicated_partitions") and not f.details.get("during_plan")]
    assert not unannotated, unannotated
    print("annotated during the roll:", sorted({f.kind for f in about_rolled}), "checks:", [w for w, _ in seen])
