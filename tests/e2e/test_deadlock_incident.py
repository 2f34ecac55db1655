"""Seed incident 001 end to end on the lab: deadlock → finding → capture → Spark → approval → restart.

Reject first (nothing may change), then the same incident is answered from the UI form with an
Approve (broker 3 restarted, ISRs full again, incident closed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kafka_lab.airflow_home import load_dags, take_triggered_confs
from kafka_lab.approvals import Responder
from kafka_lab.drill import HEALTH, RESPONSE, detect_until_finding

pytestmark = [pytest.mark.lab, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(900)]

DEADLOCK_THREADS = {"executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"}


@pytest.fixture(scope="module")
def drill(lab, airflow_db):
    os.environ.update(lab.airflow_env())
    take_triggered_confs(RESPONSE)  # nothing left over from other tests
    return lab, load_dags(), lab.cluster_settings()["lab"]


def _store(settings):
    from kafka_runbooks.incidents.store import IncidentStore

    return IncidentStore(settings["incident_base"])


def _snapshot(lab):
    from kafka_lab import CHROOT, ZK_CONNECT
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import kazoo_client, zk_session

    with zk_session(kazoo_client(ZK_CONNECT, CHROOT)) as zk:
        return read_snapshot(zk, "lab")


def test_reject_then_approve_from_the_form(drill):
    lab, dags, settings = drill
    store = _store(settings)
    lab.deadlock(3)
    pid_before = lab.broker_pid(3)

    confs = detect_until_finding(dags.get_dag(HEALTH), "lab", timeout_s=120)
    assert len(confs) == 1 and confs[0]["broker_ids"] == [3], confs
    incident_id = confs[0]["incident_id"]
    assert store.get(incident_id)["trigger"]["kind"] == "broker_unresponsive"

    # --- Reject: nothing is restarted, the incident stays open with the evidence
    with Responder(RESPONSE, "approve", "Reject", user="oncall-alice", timeout_s=600) as responder:
        run = dags.get_dag(RESPONSE).test(run_conf=confs[0])
    assert responder.error is None and responder.answered_run_ids
    assert run.state == "success"
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["restart"] == "skipped" and states["verify_recovery"] == "skipped"
    assert states["close_incident"] == "success"
    incident = store.get(incident_id)
    assert incident["status"] == "open" and incident["decision"] == "Reject"
    assert lab.broker_pid(3) == pid_before, "a Reject must not restart anything"
    assert not [e for e in store.audit_trail(incident_id) if e["action"] == "restart_broker"]
    rejection = [e for e in store.audit_trail(incident_id) if e["action"] == "approval"]
    assert [(e["actor"], e["outcome"]) for e in rejection] == [("oncall-alice", "reject")]

    bundle = Path(incident["bundle_dir"])
    manifest = json.loads((bundle / "manifest.json").read_text())
    kinds = {(f["broker_id"], f["kind"]) for f in manifest["files"]}
    for kind in ("jstack", "jmap_histo", "open_files", "server_log", "process_stat"):
        assert (3, kind) in kinds, kind
    assert (3, "sockets_ss") in kinds or (3, "sockets_netstat") in kinds
    assert sum(1 for c in manifest["commands"] if c["broker_id"] == 3 and c["kind"] == "jstack") == 3
    from kafka_runbooks.capture.bundle import verify

    assert verify(bundle) == []

    findings = json.loads((bundle / "findings.json").read_text())["findings"]
    assert not [f["summary"] for f in findings if f["kind"] == "unparsable"], "every captured file must parse"
    pileup = [f for f in findings if f["kind"] == "close_wait_pileup"]
    assert [f["broker_ids"] for f in pileup] == [[3]]
    deadlock = [f for f in findings if f["kind"] == "jvm_deadlock"]
    assert deadlock and deadlock[0]["broker_ids"] == [3]
    assert all(t in deadlock[0]["summary"] for t in DEADLOCK_THREADS)
    assert any(e["source"].startswith("hosts/3/") and e["lines"] for e in deadlock[0]["evidence"])
    assert {"KAFKA-3994", "KAFKA-4399"} <= {b["id"] for b in deadlock[0]["details"]["known_bugs"]}
    report = (bundle / "report.html").read_text()
    assert all(t in report for t in DEADLOCK_THREADS)

    # --- the same incident, started by hand from the UI form, approved this time
    form = {"cluster": "lab", "broker_ids": [3], "reason": "on-call: restart after review", "incident_id": incident_id}
    with Responder(RESPONSE, "approve", "Approve", user="oncall-bob", timeout_s=600) as responder:
        run = dags.get_dag(RESPONSE).test(run_conf=form)
    assert responder.error is None
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}

    assert lab.broker_pid(3) != pid_before
    snapshot = _snapshot(lab)
    assert 3 in snapshot.live_broker_ids
    assert not [p.name for p in snapshot.partitions if set(p.isr) != set(p.replicas)]
    incident = store.get(incident_id)
    assert incident["status"] == "closed"
    approvals = [(e["actor"], e["outcome"]) for e in store.audit_trail(incident_id) if e["action"] == "approval"]
    assert approvals == [("oncall-alice", "reject"), ("oncall-bob", "approve")]
    restarts = [e for e in store.audit_trail(incident_id) if e["action"] == "restart_broker"]
    assert len(restarts) == 1 and restarts[0]["outcome"] == "ok"
    assert restarts[0]["actor"] == "oncall-bob" and restarts[0]["host"] == "kafka_lab_host_3"
    assert [e["outcome"] for e in store.audit_trail(incident_id) if e["action"] == "wait_for_recovery"] == ["ok"]
