"""The incident response's mitigation (mitigate first, issue 30) as Airflow runs it (``dag.test()``), on the ZooKeeper-only
stand-in cluster of conftest.py ("resttest": registrations and, here, one topic written by the test; nothing listens at
the brokers' endpoints, so every direct check of broker 3 fails, as for a broker that serves nothing). No controller
runs: a move that is approved is written and never taken, and halts -- the failed mitigation. What is claimed here is
the DAG's order and its gating, not Kafka's behaviour (tests/remediate/test_demote_lab.py has that on real Kafka 2.3).

* the move is offered (its own four-eyes approval) BEFORE the capture, and the capture runs after it whatever it
  became: skipped (no evidence that the broker does not serve), rejected, or failed (halted);
* a rejected move never writes anything under /admin (the znode's child version is unchanged) and leaves the
  partition's assignment and state as they were;
* the capture runs for real and fails (no SSH host answers); the tasks after it are marked success or left upstream
  failed: no Spark here."""

from __future__ import annotations

import json
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder

pytestmark = [pytest.mark.usefixtures("airflow_db"), pytest.mark.airflow, pytest.mark.timeout(600),
              pytest.mark.second_lane]  # ./run test: after the deployed suite in its lane (lane balance, docs/FIGURES.md)

DAG_ID = "kafka_incident_response"
AFTER_CAPTURE = r"^(analyze|report|choose_remediation|plan|approve|restart|verify_recovery|explain|follow_up_peers|close_incident)$"
ASSIGNMENT = {"0": [3, 1, 2], "1": [1, 2, 3]}  # broker 3 leads t-0, every replica in sync


@pytest.fixture
def stand_in(cluster_env, zk, tmp_path, monkeypatch):
    """The stand-in cluster with topic ``t`` (broker 3 leads t-0) and a short wait for a controller that never comes."""
    import os

    settings, _ = cluster_env
    zk.ensure_path("/admin")
    zk.create("/brokers/topics/t", json.dumps({"version": 1, "partitions": ASSIGNMENT}).encode())
    for p, replicas in ASSIGNMENT.items():
        zk.create(f"/brokers/topics/t/partitions/{p}/state", json.dumps(
            {"controller_epoch": 3, "leader": replicas[0], "version": 1, "leader_epoch": 0, "isr": replicas}).encode(),
            makepath=True)
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["resttest"]["election"] = {"znode_timeout_s": 3}
    clusters["resttest"]["canary"] = {"enabled": False}
    clusters["resttest"]["bundle_base"] = str(tmp_path / "bundles")
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    from kafka_runbooks.config import ClusterConfig

    return ClusterConfig.from_dict("resttest", clusters["resttest"]), zk


def _not_serving_incident(config) -> str:
    """An open incident saying broker 3 does not serve (as the health check opens it)."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.model import Finding, Severity

    finding = Finding("broker_unresponsive", Severity.CRITICAL, "broker 3 is registered and answers no request", (3,))
    return IncidentStore(config).open(cluster="resttest", broker_ids=[3], reason="broker 3 answers nothing", opened_by="test",
                                      trigger=finding.to_dict())["id"]


def _run(form, option=None):
    """The response run, the mitigation's approval answered ``option`` by carol (None: nobody answers)."""
    dag = load_dags().get_dag(DAG_ID)
    if option is None:
        return dag.test(run_conf=form, mark_success_pattern=AFTER_CAPTURE), None
    with Responder(DAG_ID, "approve_mitigation", option, user="carol", timeout_s=120) as responder:
        run = dag.test(run_conf=form, mark_success_pattern=AFTER_CAPTURE)
    assert responder.error is None, responder.error
    return run, responder


def _tis(run):
    return {ti.task_id: ti for ti in run.get_task_instances()}


def _form(incident_id=None):
    return {"cluster": "resttest", "broker_ids": [3], "reason": f"mitigation test {uuid.uuid4().hex[:8]}",
            "incident_id": incident_id}


def _after(tis, first, then):
    assert tis[first].end_date is not None and tis[then].start_date is not None, (first, then)
    assert tis[first].end_date <= tis[then].start_date, (first, tis[first].end_date, then, tis[then].start_date)


def _znodes(zk):
    """What a move would change: the children of /admin ever created (child version) and the partitions' znodes."""
    return (zk.exists("/admin").cversion, zk.get("/brokers/topics/t")[1].mzxid,
            [zk.get(f"/brokers/topics/t/partitions/{p}/state")[1].mzxid for p in ASSIGNMENT])


def test_a_rejected_move_changes_nothing_and_the_capture_follows(stand_in):
    config, zk = stand_in
    before = _znodes(zk)
    run, responder = _run(_form(_not_serving_incident(config)), "Reject")
    tis = _tis(run)
    states = {k: ti.state for k, ti in tis.items()}
    assert (states["plan_mitigation"], states["approve_mitigation"], states["mitigate"]) == ("success", "success", "skipped"), states
    assert states["capture"] == "failed" and states["restore_order"] != "success", states  # ran: no SSH host answers
    for first, then in (("open_incident", "plan_mitigation"), ("plan_mitigation", "approve_mitigation"),
                        ("approve_mitigation", "capture")):
        _after(tis, first, then)
    # what was asked first: the move, now; then the capture and the restart
    from kafka_runbooks.runbook import plans

    plan = plans.load(tis["plan_mitigation"].xcom_pull(task_ids="plan_mitigation"), "-").plan.to_dict()  # XCom: a reference
    assert plan["kind"] == "demote" and plan["conditions"]["moves"] == {"t-0": [1, 2, 3]}, plan["conditions"]
    assert plan["blast_radius"][0].startswith("move leadership of 1 partition(s) off broker 3 now; its JVM keeps running for "
                                              "the capture, then the restart"), plan["blast_radius"]
    # nothing moved: nothing was ever created under /admin, the assignment and the partitions' state untouched
    assert _znodes(zk) == before
    from kafka_runbooks.incidents.store import IncidentStore

    trail = IncidentStore(config).audit_trail(plan["roll_id"])
    assert [(e["actor"], e["outcome"]) for e in trail if e["action"] == "approval"] == [("carol", "reject")], trail
    assert not [e for e in trail if e["action"] in ("maintenance_lock", "reassign", "elect")], trail
    record = IncidentStore(config).get(plan["roll_id"])  # the mitigation's own record ends with the Reject
    assert record["status"] == "closed" and record["resolution"].startswith("rejected by carol: leadership was not moved"), record


def test_a_move_that_halts_fails_its_task_and_the_capture_still_runs(stand_in):
    config, zk = stand_in
    before = _znodes(zk)
    run, _ = _run(_form(_not_serving_incident(config)), "Approve")
    tis = _tis(run)
    states = {k: ti.state for k, ti in tis.items()}
    assert (states["approve_mitigation"], states["mitigate"]) == ("success", "failed"), states
    assert states["capture"] == "failed" and states["restore_order"] != "success", states  # ran: no SSH host answers
    _after(tis, "mitigate", "capture")
    # no controller took the reordering: the run halted and removed its znode again (nothing left for a controller later)
    assert zk.exists("/admin/reassign_partitions") is None and zk.exists("/admin/preferred_replica_election") is None
    assert _znodes(zk)[1:] == before[1:]
    from kafka_runbooks.incidents.store import IncidentStore

    record = tis["plan_mitigation"].xcom_pull(task_ids="plan_mitigation")["plan"]["roll_id"]
    trail = IncidentStore(config).audit_trail(record)
    assert [e["outcome"] for e in trail if e["action"] == "maintenance_lock"] == ["acquired", "released"], trail
    assert [e["outcome"] for e in trail if e["action"] == "halt"] == ["failed"], trail
    now = IncidentStore(config).get(record)  # a halted move is left open, saying so
    assert now["status"] != "closed" and now["notes"][-1]["text"].startswith("halted: "), now
    # the incident it served keeps the outcome with its reason's stable code (a CI failure says why without a rerun)
    incident = IncidentStore(config).get(run.conf["incident_id"])
    m = incident["mitigation"]
    assert (m["outcome"], m.get("code")) == ("halted", "not_reordered"), m
    assert "the controller did not reorder t-0" in " ".join(m["reason"]), m
    assert [(e["outcome"], e["details"].get("code")) for e in IncidentStore(config).audit_trail(incident["id"])
            if e["action"] == "mitigation"] == [("halted", "not_reordered")]


def test_after_a_halt_that_reordered_nothing_the_restore_writes_nothing_and_says_so(stand_in):
    """restore_order runs after the restart whatever the mitigation became (its intent was recorded before the halt):
    here no controller took the reordering, so nothing differs from the recorded original order -- nothing is written
    under /admin, the assignment stays, and the mitigation's record ends saying nothing was written back (not that
    leadership was moved)."""
    import logging

    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook import mitigate
    from kafka_runbooks.runbook.task import Task

    config, zk = stand_in
    run, _ = _run(_form(_not_serving_incident(config)), "Approve")
    assert {ti.task_id: ti.state for ti in run.get_task_instances()}["mitigate"] == "failed"
    plan_output = _tis(run)["plan_mitigation"].xcom_pull(task_ids="plan_mitigation")
    before = _znodes(zk)
    out = mitigate.restore(plan_output, "resttest", Task(dag_id=DAG_ID, run_id="run-restore", task_id="restore_order",
                                                         log=logging.getLogger("test")))
    assert (out["restored"], out["left"]) == ([], []), out
    assert _znodes(zk) == before  # nothing created under /admin, no partition touched
    record = IncidentStore(config).get(plan_output["plan"]["roll_id"])
    assert record["status"] == "closed", record
    assert record["resolution"].startswith("nothing to write back after broker 3's restart"), record["resolution"]


def test_without_evidence_nothing_is_asked_and_the_capture_runs(stand_in):
    config, zk = stand_in
    before = _znodes(zk)
    run, _ = _run(_form())  # a person's form, no incident saying broker 3 does not serve
    tis = _tis(run)
    states = {k: ti.state for k, ti in tis.items()}
    assert (states["plan_mitigation"], states["approve_mitigation"], states["mitigate"]) == ("skipped",) * 3, states
    assert states["capture"] == "failed", states  # it ran: no SSH host answers
    _after(tis, "open_incident", "capture")
    assert _znodes(zk) == before


def test_the_xcoms_of_a_response_run_hold_no_finding(stand_in):
    """Issue 28: findings cross the tasks as references. A response to an incident the health check opened with its
    finding (the trigger): every XCom the run wrote -- the incident's (open_incident), the mitigation's plan reference,
    the approval's decision -- holds no finding; the tasks load it from the incident's record
    (``runbook/finding_records.py``; tests/runbook/test_finding_references.py has the report, choice and explanation)."""
    import json as _json

    from sqlalchemy import select

    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from finding_dicts import finding_dicts

    config, _ = stand_in
    run, _ = _run(_form(_not_serving_incident(config)), "Reject")
    with create_session() as session:
        rows = session.execute(select(XComModel.task_id, XComModel.key, XComModel.value).where(
            XComModel.dag_id == DAG_ID, XComModel.run_id == run.run_id)).all()
    def value_of(stored):  # the metadata database's JSON column: the serialized value (a JSON text), or a plain string
        try:
            return _json.loads(stored) if isinstance(stored, str) else stored
        except ValueError:
            return stored

    xcoms = {(task, key): value_of(value) for task, key, value in rows}
    assert ("open_incident", "return_value") in xcoms and ("plan_mitigation", "return_value") in xcoms, sorted(xcoms)
    assert {k: finding_dicts(v) for k, v in xcoms.items() if finding_dicts(v)} == {}
    assert xcoms[("open_incident", "return_value")]["incident_id"]  # the reference the later tasks load it by
