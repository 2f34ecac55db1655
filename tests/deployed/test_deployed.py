"""The product as deployed (issue 18 §3, §4): a real Airflow deployment -- PostgreSQL, Redis, api-server, scheduler,
dag-processor, triggerer, two Celery workers with separate working directories and no shared ``var/`` -- running the
whole loop on the lab's real Kafka 2.3.0 brokers. Users act only through the REST API, as in the UI.

The flows share one deployment and one lab and run in this order; the last one reads the XCom table of the
deployment's PostgreSQL after the others.
"""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest

from kafka_lab.deployment import CONTROL, HEALTH_DAG, WORKERS
from kafka_lab.procs import wait_until

pytestmark = [pytest.mark.deployed, pytest.mark.timeout(1800)]

HEALTH, RESPONSE, ROLL, ELECTION = HEALTH_DAG, "kafka_incident_response", "kafka_rolling_restart", "kafka_preferred_election"
XCOM_LIMIT = 1024 * 1024
RAN = ("success", "failed")


def _iso_now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()


def _newer_runs(d, dag_id: str, since: str) -> list[dict]:
    return [r for r in d.runs(dag_id) if (r.get("run_after") or "") >= since]


def _decline_other_responses(d, keep=()) -> None:
    """Responses this flow did not cause (a finding of the loaded machine before the fault) are failed through REST, as
    on-call would decline them: the health check then stops deduplicating against their incidents."""
    for r in d.runs(RESPONSE):
        if r["state"] in ("queued", "running") and r["dag_run_id"] not in keep:
            resp = d.call("alice", "PATCH", f"/api/v2/dags/{RESPONSE}/dagRuns/{_q(r['dag_run_id'])}", json={"state": "failed"})
            assert resp.status_code == 200, resp.text


def _starts(lab, b: int) -> int:
    """How many times broker b's Kafka has started since the lab came up (its own log line)."""
    return len(re.findall(rf"\[KafkaServer id={b}\] started", lab.log_text(b)))


def _product(d):
    """The product's state as stored by the deployment (incidents, audit, ledgers), read through its database."""
    from kafka_lab.deployment import product_state

    return product_state(d)


def _planned(state, record_id, digest):
    """The plan the plan task recorded in the state database under the digest its XCom names."""
    return next(e["plan"] for e in state.ledger(record_id) if e["event"] == "planned" and e["digest"] == digest)


# ---------------------------------------------------------------------------------------------------------------- (a)
def test_incident_loop_detected_on_one_worker_answered_on_the_other(healthy, deployed_lab):
    """001 (deadlock) → the scheduled health check on worker1 opens the incident → the response on worker2: capture,
    Spark, report, plan → bob approves through REST → restart → verified → closed; then bob looks at it in Chromium
    (the incident list, its page and audit trail, its report naming the deadlock)."""
    d, lab = healthy, deployed_lab
    d.set_paused(RESPONSE, True)  # the run the health check starts waits until the workers are switched below
    d.consume("worker2", False)
    try:
        _decline_other_responses(d)
        for r in d.runs(HEALTH, limit=3):  # a check that began on worker2 before it was drained ends first
            if r["state"] in ("queued", "running"):
                d.wait_run(HEALTH, r["dag_run_id"], 300)
        before = {r["dag_run_id"] for r in d.runs(RESPONSE)}
        starts_before = _starts(lab, 3)
        lab.deadlock(3)
        t_fault = time.monotonic()

        def started():
            return [r for r in d.runs(RESPONSE) if r["dag_run_id"] not in before and (r.get("conf") or {}).get("broker_ids") == [3]]

        response = wait_until(started, 600, "the health check to start an incident response for broker 3", interval=3.0)[-1]
        detected_s = time.monotonic() - t_fault
        _decline_other_responses(d, keep={response["dag_run_id"]})
        conf = response["conf"]
        assert conf["cluster"] == "lab" and conf["incident_id"], conf
        # the health-check run that opened the incident, as the incident's audit trail names it, ran on worker1 only
        opened = [e for e in _product(d).audit_trail(conf["incident_id"]) if e["action"] == "open_incident"]
        health_run = opened[0]["actor"].split("/run:", 1)[1]
        found_by = d.wait_run(HEALTH, health_run, 300) and d.task_instances(HEALTH, health_run)
        assert {d.worker_of(t) for t in found_by.values() if t["state"] in RAN} == {"worker1"}, found_by

        d.consume("worker1", False)
        d.consume("worker2", True)
        d.set_paused(RESPONSE, False)
        run_id = response["dag_run_id"]
        # mitigate first: bob moves leadership off broker 3 (its JVM untouched) before the capture
        m = d.answer_if_asked("bob", RESPONSE, run_id, "approve_mitigation", "Approve", 900)
        assert m["status_code"] == 200 and "Move leadership off" in m["subject"] and "capture, then restart" in m["subject"], m
        d.wait_task(RESPONSE, run_id, "approve", ("awaiting_input",), 1500)  # capture and Spark first
        hitl = d.hitl(RESPONSE, run_id, "approve", "bob")
        assert "plan digest" in hitl["body"] and "broker 3" in hitl["body"]
        r = d.answer("bob", RESPONSE, run_id, "approve")
        assert r.status_code == 200, r.text
        done = d.wait_run(RESPONSE, run_id, 900)
        tis = d.task_instances(RESPONSE, run_id)
        assert done["state"] == "success", {k: t["state"] for k, t in tis.items()}
        ran = {k: d.worker_of(t) for k, t in tis.items() if t["state"] in RAN}
        assert set(ran.values()) == {"worker2"}, ran
        assert {"open_incident", "capture", "analyze", "report", "plan", "restart", "verify_recovery", "close_incident"} <= set(ran)
        assert tis["approve"]["state"] == "success"
        # the mitigation ran before the capture; the restart only after both
        assert tis["mitigate"]["state"] == "success" and tis["mitigate"]["end_date"] <= tis["capture"]["start_date"], tis["mitigate"]
        assert tis["capture"]["end_date"] <= tis["restart"]["start_date"]
        assert _starts(lab, 3) == starts_before + 1  # restarted once, by the engine (not by the mitigation)
        print(f"\n[fault -> incident response queued: {detected_s:.1f} s]")
    finally:
        for w in WORKERS:
            d.consume(w, True)
        d.set_paused(RESPONSE, False)

    # the incident and its audit trail, read back through the product's database (written by two workers)
    state = _product(d)
    incident = state.incident(conf["incident_id"])
    assert incident["status"] == "closed", incident
    audit = [(e["actor"], e["action"], e["outcome"]) for e in state.audit_trail(conf["incident_id"])]
    assert ("bob", "approval", "approve") in audit and ("bob", "approval_verified", "ok") in audit, audit
    assert any(a == "capture" for _, a, _ in audit) and ("bob", "restart_broker", "ok") in audit, audit
    assert [o for _, a, o in audit if a == "maintenance_lock"] == ["acquired", "released"], audit
    # the engine's restart of a broker that serves nothing: its evidence (a direct check failing now AND the run's
    # jvm_deadlock finding), then stop, (kill after the shorter grace if its shutdown hangs), old session waited out,
    # start with a new session, the gates -- in that order
    evidence = incident["plan"]["not_serving"]["3"]
    assert "direct check failed" in evidence and "jvm_deadlock" in evidence, evidence
    trail = state.audit_trail(conf["incident_id"])
    actions = [e["action"] for e in trail if e.get("host") == "kafka_lab_host_3"]
    wanted = ["stop_broker", "broker_stopped", "start_broker", "broker_registered", "gate_in_sync", "gate_coordinator", "restart_broker"]
    assert [a for a in actions if a in wanted] == wanted, actions
    stopped = next(e for e in trail if e["action"] == "broker_stopped")["details"]
    assert ("kill_broker" in actions) == stopped["killed"]
    gates = lab.cluster_settings()["lab"]["gates"]
    for kill in (e for e in trail if e["action"] == "kill_broker"):  # not serving: the shorter grace, not stop_s
        assert kill["details"]["grace_s"] == gates["stop_unserving_s"] < gates["stop_s"], kill

    # issue 19: on-call sees the same in a real browser -- the list, the incident's page and timeline, its report
    from test_browser import DEPLOYED_VAR as BROWSER_VAR, deadlock_in_the_browser

    shots = BROWSER_VAR / "screenshots" / "incident-001"
    print(f"\n[screenshots of incident 001 in {shots}]")
    deadlock_in_the_browser(d, conf["incident_id"], run_id, shots)


# ---------------------------------------------------------------------------------------------------------------- (b)
def test_rolling_restart_survives_a_killed_worker(healthy, deployed_lab):
    """A roll started through REST by alice, approved by bob; the worker running it is SIGKILLed after the first
    broker is done → the scheduler fails the task, on-call is paged, the roll is halted; ``resume`` on the other
    worker restarts the rest and never the finished broker."""
    d, lab = healthy, deployed_lab
    d.set_paused(HEALTH, True)  # the roll changes /brokers/ids: no health check in between (its own tests cover that)
    try:
        starts = {b: _starts(lab, b) for b in (1, 2, 3)}
        reason = f"deployed suite roll {uuid.uuid4().hex[:6]}"
        run_id = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [], "reason": reason, "mode": "execute", "canary": True})
        d.wait_task(ROLL, run_id, "approve", ("awaiting_input",), 600)
        hitl = d.hitl(ROLL, run_id, "approve", "bob")
        assert "alice" not in [u["id"] for u in hitl["assigned_users"]]  # the starter is never asked
        assert d.answer("alice", ROLL, run_id, "approve").status_code == 403
        assert d.answer("bob", ROLL, run_id, "approve").status_code == 200
        execute = d.wait_task(ROLL, run_id, "execute", ("running",), 600)
        victim = d.worker_of(execute)
        survivor = next(w for w in WORKERS if w != victim)
        plan = d.call("alice", "GET", f"/api/v2/dags/{ROLL}/dagRuns/{_q(run_id)}/taskInstances/plan/xcomEntries/return_value").json()["value"]
        record_id = plan["plan"]["roll_id"]
        state = _product(d)
        order = [s["broker_id"] for s in _planned(state, record_id, plan["digest"])["steps"]]  # XCom names the plan
        wait_until(lambda: any(e["event"] == "step_done" and e["broker_id"] == order[0] for e in state.ledger(record_id)), 600,
                   f"broker {order[0]} to be done")
        killed = d.kill_worker(victim)
        t_kill = time.monotonic()
        assert killed

        # the scheduler fails the task of the dead worker; its failure callback pages on-call
        failed = d.wait_task(ROLL, run_id, "execute", ("failed",), 600)
        page = wait_until(lambda: [p for p in d.pages() if p.get("event") == "halted" and p.get("run_id") == run_id
                                   and p.get("task_id") == "execute"], 300, "on-call to be paged")[0]
        print(f"\n[worker killed -> task failed and paged: {time.monotonic() - t_kill:.1f} s]")
        assert failed["state"] == "failed" and "rolling restart of lab" in page["text"]
        d.wait_run(ROLL, run_id, 300)
        progress = state.progress(record_id)
        assert progress.resumable and list(progress.completed) == [order[0]], progress

        resume_id = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [], "reason": reason + " resumed", "mode": "execute",
                                              "canary": True, "resume": True})
        d.wait_task(ROLL, resume_id, "approve", ("awaiting_input",), 600)
        assert d.answer("bob", ROLL, resume_id, "approve").status_code == 200
        done = d.wait_run(ROLL, resume_id, 900)
        tis = d.task_instances(ROLL, resume_id)
        assert done["state"] == "success", {k: t["state"] for k, t in tis.items()}
        assert d.worker_of(tis["execute"]) == survivor
        resumed_plan = d.call("alice", "GET", f"/api/v2/dags/{ROLL}/dagRuns/{_q(resume_id)}/taskInstances/plan/xcomEntries/return_value").json()["value"]
        assert order[0] not in [s["broker_id"] for s in _planned(state, record_id, resumed_plan["digest"])["steps"]]
        # every broker started exactly once across both runs: the finished one was never restarted again
        assert {b: _starts(lab, b) - starts[b] for b in (1, 2, 3)} == {1: 1, 2: 1, 3: 1}
        assert state.record(record_id)["status"] == "closed"
        # issue 18 §4: no XCom of the loop over 1 MB (the plan carries counts and a fingerprint, not every line)
        from kafka_runbooks.xcom_size import assert_xcom_fits

        for task in tis:
            entries = d.call("alice", "GET", f"/api/v2/dags/{ROLL}/dagRuns/{_q(resume_id)}/taskInstances/{task}/xcomEntries")
            for entry in (entries.json().get("xcom_entries") or []) if entries.status_code == 200 else []:
                value = d.call("alice", "GET", f"/api/v2/dags/{ROLL}/dagRuns/{_q(resume_id)}/taskInstances/{task}/xcomEntries/"
                                            f"{_q(entry['key'])}").json().get("value")
                assert_xcom_fits(value, f"{ROLL}/{task}/{entry['key']}")
    finally:
        d.set_paused(HEALTH, False)  # the next flow's ``healthy`` starts the killed worker again


def _q(value: str) -> str:
    from kafka_lab.deployment import quote

    return quote(value)


# ---------------------------------------------------------------------------------------------------------------- (c)
def test_election_waits_in_the_real_triggerer(healthy, deployed_lab):
    """Broker 3 returns without its leaderships → the election (alice starts it, carol approves) defers its wait to
    the triggerer on the control node -- no worker slot held -- then elects once the broker is ready."""
    d, lab = healthy, deployed_lab
    d.set_paused(HEALTH, True)
    try:
        lab.bounce(3)
        assert not lab.leads_preferred(3)
        run_id = d.trigger("alice", ELECTION, {"cluster": "lab", "brokers": [3], "reason": f"deployed suite {uuid.uuid4().hex[:6]}",
                                               "mode": "execute"})
        d.wait_task(ELECTION, run_id, "approve", ("awaiting_input",), 600)
        assert d.answer("carol", ELECTION, run_id, "approve").status_code == 200
        d.wait_task(ELECTION, run_id, "wait", ("deferred",), 600)
        # the trigger row exists once the task deferred; a triggerer takes it up on its next poll (under load, seconds
        # later: a CI run once read the row before that, with no triggerer yet)
        query = ("SELECT ti.state, t.classpath, j.job_type, j.hostname, j.state FROM task_instance ti JOIN trigger t ON t.id = ti.trigger_id "
                 f"JOIN job j ON j.id = t.triggerer_id WHERE ti.dag_id = '{ELECTION}' AND ti.run_id = '{run_id}' AND ti.task_id = 'wait'")
        rows = wait_until(lambda: d.metadata_query(query), 120, "a triggerer to take up the election's trigger", interval=1.0)
        assert rows == [("deferred", "kafka_runbooks.triggers.election.ElectionReadyTrigger", "TriggererJob", d.address[CONTROL],
                         "running")], rows
        done = d.wait_run(ELECTION, run_id, 900)
        tis = d.task_instances(ELECTION, run_id)
        assert done["state"] == "success", {k: t["state"] for k, t in tis.items()}
        assert lab.leads_preferred(3)
        waited = d.call("alice", "GET", f"/api/v2/dags/{ELECTION}/dagRuns/{_q(run_id)}/taskInstances/wait/xcomEntries/return_value").json()["value"]
        assert waited["status"] == "ready" and waited["checks"] >= 1, waited  # the trigger's own event, from the triggerer
        # issue 19 §5: one line per batch and gate in the elect task's log, the summary in the close task's and the note
        elect = d.task_log(ELECTION, run_id, "elect")
        assert re.search(r"batch 1 of \d+ -> broker 3: \d+ partition\(s\) to move to their preferred leader", elect), elect[-4000:]
        assert re.search(r"batch 1 of \d+ -> broker 3: \d+ partition\(s\) handed to the controller through "
                         r"/admin/preferred_replica_election, taken in [\d.]+ s", elect), elect[-4000:]
        assert re.search(r"batch 1 of \d+ -> broker 3: gate convergence PASSED in [\d.]+ s", elect), elect[-4000:]
        assert "Connected (version" not in elect
        close = d.task_log(ELECTION, run_id, "close")
        assert "preferred election of lab: DONE, every batch converged" in close, close[-3000:]
        assert re.search(r"elected: broker 3 now leads \d+ more partition", close), close[-3000:]
        assert re.search(r"left: (every partition led by its preferred replica|\d+ partition\(s\) still led)", close), close[-3000:]
        assert "elected: broker 3" in (d.run(ELECTION, run_id).get("note") or "")
        print(f"\n[election: ready after {waited['checks']} checks in the triggerer; tasks ran on "
              f"{ {k: d.worker_of(t) for k, t in tis.items() if t['state'] in RAN} }]")
    finally:
        d.set_paused(HEALTH, False)


# ---------------------------------------------------------------------------------------------------------------- (e)
def test_the_serving_watch_in_the_real_triggerer_starts_the_health_check_of_a_hung_broker(healthy, deployed_lab):
    """Issue 30: broker 2's request path hangs -- ZooKeeper sees nothing -- and the serving watch running in the
    deployment's triggerer updates the health check's asset naming broker 2; the run it starts opens the incident.
    (Its response is paused and then declined: nothing is captured or restarted.)"""
    from kafka_runbooks.incidents.store import IncidentStore

    d, lab = healthy, deployed_lab
    rows = wait_until(lambda: d.metadata_query("SELECT t.classpath, j.hostname FROM trigger t JOIN job j ON j.id = t.triggerer_id "
                                               "WHERE t.classpath LIKE '%ServingWatchTrigger'"), 120,
                      "the serving watch to run in a triggerer", interval=1.0)
    assert rows == [("kafka_runbooks.triggers.serving.ServingWatchTrigger", d.address[CONTROL])], rows
    d.set_paused(RESPONSE, True)
    try:
        since = _iso_now()
        t0 = time.time()
        lab.hang(2)

        def serving_events():
            found = d.metadata_query(f"SELECT extra FROM asset_event WHERE timestamp >= to_timestamp({t0})")
            return [p for (extra,) in found for p in [json.loads(extra).get("payload") or {}]
                    if p.get("changed") == ["serving"] and "2" in (p.get("not_answering") or {})]

        (event, *_) = wait_until(serving_events, 120, "the serving watch to name broker 2", interval=1.0)
        assert event["cluster"] == "lab" and "no answer within" in event["not_answering"]["2"]["error"], event
        state = _product(d)
        opened = wait_until(lambda: [r for r in IncidentStore(state.db).records("lab") if r.get("broker_ids") == [2]
                                     and str(r.get("opened_at") or "") >= since], 300, "an incident for broker 2", interval=1.0)
        print(f"\n[hang -> serving watch event and incident {opened[0]['id']}: {time.time() - t0:.1f} s]")
    finally:
        _decline_other_responses(d)
        d.set_paused(RESPONSE, False)


# ---------------------------------------------------------------------------------------------------------------- (d)
def test_no_xcom_over_1_mb_in_the_loop(deployment):
    """Every XCom the flows above wrote (findings, snapshots, plans, decisions), in the deployment's PostgreSQL."""
    rows = deployment.metadata_query("SELECT dag_id, task_id, key, octet_length(value::text) FROM xcom ORDER BY 4 DESC")
    sizes = [(dag, task, key, int(n)) for dag, task, key, n in rows]
    by_dag = {dag for dag, *_ in sizes}
    assert {HEALTH, RESPONSE, ROLL, ELECTION} <= by_dag, f"the flows wrote no XCom in {sorted({HEALTH, RESPONSE, ROLL, ELECTION} - by_dag)}"
    print(f"\n[{len(sizes)} XComs; largest: {sizes[:5]}]")
    assert all(n <= XCOM_LIMIT for *_, n in sizes), [s for s in sizes if s[3] > XCOM_LIMIT]
