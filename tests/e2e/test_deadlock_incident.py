"""Seed incident 001 on the lab's real Kafka 2.3.0, by drill 001's own code: a real JVM deadlock in broker 3 → the health DAG
(direct checks, peers' logs, probes, history; consecutive checks) opens ONE incident and starts ONE
response → capture over SSH (heavy tools on broker 3 only) → Spark analysis → report → the approval
is answered Reject: nothing is restarted, the incident needs a person, and the next health checks
note the problem on it instead of piling up responses.

The Approve half (restart and recovery) belongs to the remediation engine's tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_lab.airflow_home import load_dags, take_triggered_confs
from kafka_lab.drill import HEALTH, RESPONSE

pytestmark = [pytest.mark.lab, pytest.mark.fourth_lane, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(1500)]  # a bound: the drill waits up to 240 s for the finding, Spark takes minutes under load


@pytest.fixture
def drill(lab_settings):
    lab, settings = lab_settings
    return lab, load_dags(), settings


def _store(settings):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    return IncidentStore(ClusterConfig.from_dict("lab", settings))


def _hitl(run, task_id):
    """The approval's question as Airflow stored it (subject, body, the answer)."""
    from sqlalchemy import select

    from airflow.models.hitl import HITLDetail
    from airflow.utils.session import create_session

    (ti,) = [t for t in run.get_task_instances() if t.task_id == task_id]
    with create_session() as session:
        detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
        session.expunge(detail)
    return detail


def test_deadlock_is_detected_captured_analysed_and_a_reject_leaves_it_to_a_person(drill):
    """Drill 001's own code (``./run demo``, ``./run demo all``), answered Reject, then checked in depth."""
    from airflow.models import DagRun

    from kafka_lab.drill import run_001

    lab, dags, settings = drill
    store = _store(settings)
    already = {r["id"] for r in store.records("lab")}
    pid_before = lab.broker_pid(3)
    replicas_before = {k: v["replicas"] for k, v in lab.partitions().items()}

    result = run_001(lab, dags, 3, "Reject", finding_timeout_s=240, user="oncall-alice")  # the mitigation: Reject too
    assert result.ok and result.run_state == "success", result
    incident_id = result.incident_id
    incident = store.get(incident_id)
    assert incident_id not in already
    trigger = incident["trigger"]
    assert trigger["kind"] == "broker_unresponsive" and trigger["details"]["check"]["ok"] is False
    assert trigger["details"]["corroborated_by"] and incident["broker_ids"] == [3]
    trail = [e["action"] for e in store.audit_trail(incident_id)]
    assert trail[:3] == ["open_incident", "detected", "status -> responding"]

    (run,) = [r for r in DagRun.find(dag_id=RESPONSE) if (r.conf or {}).get("incident_id") == incident_id]
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["restart"] == "skipped" and states["close_incident"] == "success"
    # mitigate first: the move of leadership off broker 3 was offered before the capture, rejected, and nothing moved
    assert (states["plan_mitigation"], states["approve_mitigation"], states["mitigate"]) == ("success", "success", "skipped"), states
    assert states["capture"] == "success" and states["restore_order"] == "skipped", states
    asked = _hitl(run, "approve_mitigation")
    assert asked.subject.startswith("Move leadership off Kafka broker(s) [3] of lab now (capture, then restart)?"), asked.subject
    assert "move leadership of" in asked.body and "off broker 3 now; its JVM keeps running for the capture, then the restart" in asked.body
    assert asked.body.index("Move leadership off broker 3") < asked.body.index("Reject"), asked.body[:2000]
    assert asked.chosen_options == ["Reject"] and asked.responded_by_user_id == "oncall-alice"
    assert {k: v["replicas"] for k, v in lab.partitions().items()} == replicas_before, "a rejected mitigation reordered replicas"
    assert lab.kazoo().exists("/admin/reassign_partitions") is None and lab.kazoo().exists("/admin/preferred_replica_election") is None
    incident = store.get(incident_id)
    assert incident["status"] == "needs_person" and incident["decision"] == "Reject"
    assert lab.broker_pid(3) == pid_before, "a Reject must not restart anything"
    trail = store.audit_trail(incident_id)
    assert not [e for e in trail if e["action"] == "restart_broker"]
    assert [(e["actor"], e["outcome"]) for e in trail if e["action"] == "approval"] == [("oncall-alice", "reject")]

    # the capture: complete, heavy tools on broker 3 only, its peers' logs and one jstack each
    (capture,) = [e for e in trail if e["action"] == "capture"]
    assert capture["outcome"] == "complete", capture["details"]["reasons"]
    bundle = Path(incident["bundle_dir"])
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["suspects"] == [3]
    kinds = {(f["broker_id"], f["kind"]) for f in manifest["files"]}
    for kind in ("jstack", "jmap_histo", "open_files", "server_log", "process_stat", "sockets_ss", "controller_log", "proc_threads"):
        assert (3, kind) in kinds, kind
    assert sum(1 for c in manifest["commands"] if c["broker_id"] == 3 and c["kind"] == "jstack") == 3
    for peer in (1, 2):
        assert sum(1 for c in manifest["commands"] if c["broker_id"] == peer and c["kind"] == "jstack") == 1
        assert (peer, "jmap_histo") not in kinds and (peer, "server_log") in kinds
    assert json.loads((bundle / "kafka-checks.json").read_text())
    # its JMX read had no answer within its bound (the request queue's lock is in the deadlock): evidence about a broker
    # that failed every direct check of the capture, not a gap -- the capture above is complete
    assert manifest["hosts"]["3"]["jmx"]["counted_as"] == "evidence", manifest["hosts"]["3"]["jmx"]
    assert all(manifest["hosts"][str(p)]["jmx"]["answered"] for p in (1, 2))
    from kafka_runbooks.capture.bundle import verify

    assert verify(bundle) == []

    # the analysis found the deadlock in broker 3's own dumps
    findings = json.loads((bundle / "findings.json").read_text())["findings"]
    deadlock = [f for f in findings if f["kind"] == "jvm_deadlock"]
    assert deadlock and deadlock[0]["broker_ids"] == [3]
    assert any(e["source"].startswith("hosts/3/") and e["lines"] for e in deadlock[0]["evidence"])
    assert [f for f in findings if f["kind"] == "request_metrics_unknown" and f["broker_ids"] == [3]], [f["kind"] for f in findings]
    assert (bundle / "report.html").exists()

    # the problem goes on: the next health checks note it on this incident, no second response
    for _ in range(2):
        dags.get_dag(HEALTH).test(run_conf={"cluster": "lab"})
        assert take_triggered_confs(RESPONSE) == []
    assert store.get(incident_id)["last_seen_kind"] in ("broker_unresponsive", "broker_check_failed")
