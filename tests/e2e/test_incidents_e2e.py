"""Incidents 000, 002a, 002b and 004 end to end on the lab's real Kafka 2.3.0 brokers and ZooKeeper 3.8 ensemble,
through Airflow (dag.test()), by the drills' own code (``kafka_lab.incident_drills.run_incident``, what
``./run demo 000|002a|002b|004`` and ``./run demo all`` run): the health DAG finds the fault and starts ONE response → capture over SSH → the
Spark analysis of the captured bundle (local mode) → the report → the response chooses:

* 000 (a silently isolated broker) and 002b (a dead log cleaner): a restart planned through the remediation
  engine; the approval is answered by the drill as on-call ("drill-bot") (four eyes: the run was started by the health check);
  the broker is restarted, recovery verified, and (000) its peers looked at again -- healthy peers are left alone;
* 002a (a client sending an unknown API key) and 004 (a ZooKeeper follower dropping out): no restart -- the
  incident is explained (what was found, why nothing is restarted, the runbook) and handed to a person.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_lab.airflow_home import load_dags, take_triggered_confs
from kafka_lab.drill import HEALTH, RESPONSE
from kafka_lab.incident_drills import run_incident

pytestmark = [pytest.mark.lab, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(900)]


@pytest.fixture
def drill(lab_settings):
    lab, settings = lab_settings
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    dags = load_dags()
    dags.get_dag(HEALTH).test(run_conf={"cluster": "lab"})  # a baseline in the history before the fault
    assert take_triggered_confs(RESPONSE) == [], "the healthy lab started a response"
    return lab, dags, IncidentStore(ClusterConfig.from_dict("lab", settings))


def _bundle(store, incident_id):
    incident = store.get(incident_id)
    (capture,) = [e for e in store.audit_trail(incident_id) if e["action"] == "capture"]
    assert capture["outcome"] == "complete", capture["details"]["reasons"]
    bundle = Path(incident["bundle_dir"])
    from kafka_runbooks.capture.bundle import verify

    assert verify(bundle) == []
    manifest = json.loads((bundle / "manifest.json").read_text())
    findings = json.loads((bundle / "findings.json").read_text())["findings"]
    return incident, bundle, manifest, findings


def _drill(lab, dags, name):
    """The drill of incident ``name`` on the lab: (its result, the response run's task states). It passed. A move of
    leadership (mitigate first) is offered only for a broker that does not serve: never for a serving one (002a, 002b)
    nor for a ZooKeeper incident (004); the capture runs in every case."""
    r = run_incident(lab, dags, name, finding_timeout_s=300)
    assert r.ok, r
    states = _states_of(r.incident_id)
    if name != "000":
        assert (states["plan_mitigation"], states["approve_mitigation"], states["mitigate"]) == ("skipped",) * 3, states
    assert states["capture"] == "success", states
    return r, states


def _states_of(incident_id):
    """The task states of the response run that worked on the incident (dag.test() keeps them in the metadata DB)."""
    from airflow.models import DagRun

    runs = [run for run in DagRun.find(dag_id=RESPONSE) if (run.conf or {}).get("incident_id") == incident_id]
    assert len(runs) == 1, [r.run_id for r in runs]
    return {ti.task_id: ti.state for ti in runs[0].get_task_instances()}


def _explained(store, incident_id, states, runbook):
    assert states["explain"] == "success" and states["plan"] == "skipped" and states["restart"] == "skipped", states
    incident = store.get(incident_id)
    assert incident["status"] == "needs_person", incident["status"]
    assert incident["explanation"]["runbook"] == runbook and incident["explanation"]["why_no_restart"]
    trail = store.audit_trail(incident_id)
    assert [e["outcome"] for e in trail if e["action"] == "explain"] == ["no_restart"]
    assert not [e for e in trail if e["action"] in ("restart_broker", "stop_broker", "approval")]
    return incident


@pytest.mark.fourth_lane  # ./run test's lanes: the 2.3 lab lane is the longest (fresh clone ci11: 44.6 min)
def test_000_isolated_broker_is_restarted_through_the_engine_and_healthy_peers_are_left_alone(drill):
    lab, dags, store = drill
    pid_before = lab.broker_pid(3)
    r, states = _drill(lab, dags, "000")
    incident_id = r.incident_id
    assert store.get(incident_id)["broker_ids"] == [3]
    trigger = store.get(incident_id)["trigger"]
    # found from the outside (its own log may not be silent for health.log_silent_s yet: then it is not yet
    # *named* silently isolated -- tests/detect/test_incidents_lab.py waits for that)
    assert trigger["kind"] == "broker_unresponsive" and trigger["details"]["check"]["ok"] is False
    assert trigger["details"]["peer_fetch_errors"] or trigger["details"]["traffic_near_zero"], trigger["details"]

    assert states["plan"] == "success" and states["explain"] == "skipped" and states["follow_up_peers"] == "success"
    # mitigate first (approved by the drill): offered before the capture for the broker that serves nothing; the move ran
    # (or halted, saying why: the capture goes on either way); after the restart the original order is written back
    assert (states["plan_mitigation"], states["approve_mitigation"]) == ("success", "success"), states
    _mitigated_as_kafka_allows(store, incident_id, states)

    incident, bundle, manifest, findings = _bundle(store, incident_id)
    # the scene over time on the isolated broker: socket states repeated, memory at start and end, threads
    per_kind = {}
    for c in manifest["commands"]:
        if c["broker_id"] == 3:
            per_kind[c["kind"]] = per_kind.get(c["kind"], 0) + 1
    assert per_kind.get("sockets_ss", 0) >= 2 and per_kind.get("jstack", 0) >= 2, per_kind
    assert per_kind.get("meminfo", 0) >= 2 and per_kind.get("proc_threads", 0) >= 1, per_kind
    # the analysis (Spark, on the bundle) sees the broker from its peers' side
    assert any(3 in f["broker_ids"] for f in findings if f["severity"] in ("critical", "warning")), [f["kind"] for f in findings]
    # its JMX read had no answer within its bound (the request queue's lock is held): evidence, cited by the analysis
    assert manifest["hosts"]["3"]["jmx"]["counted_as"] == "evidence", manifest["hosts"]["3"]["jmx"]
    assert [f for f in findings if f["kind"] == "request_metrics_unknown" and f["broker_ids"] == [3]], [f["kind"] for f in findings]

    # restarted through the engine: approval by a person other than the starter, lock, stop/start, gates
    assert lab.broker_pid(3) != pid_before
    lab.wait_full_isr(120)
    assert incident["status"] == "closed", incident["status"]
    trail = store.audit_trail(incident_id)
    assert [(e["actor"], e["outcome"]) for e in trail if e["action"] == "approval"] == [("drill-bot", "approve")]
    actions = [e["action"] for e in trail if e.get("host") == "kafka_lab_host_3"]
    wanted = ["stop_broker", "broker_stopped", "start_broker", "broker_registered", "gate_in_sync", "gate_coordinator", "restart_broker"]
    assert [a for a in actions if a in wanted] == wanted, actions
    (follow,) = [e for e in trail if e["action"] == "follow_up_peers"]
    assert follow["outcome"] == "peers healthy" and follow["details"]["peers"] == [], follow["details"]


def _mitigated_as_kafka_allows(store, incident_id, states):
    """What the move of leadership off the isolated broker 3 became, as Kafka 2.3 decides it, and what restore_order did:

    * broker 3 is not the controller: the controller (1 or 2) reorders and elects -- moved; the order written back after
      the restart;
    * broker 3 IS the controller (the lab's brokers race for it at start; on CI it was 3 now and then): its
      controller-event-thread takes /admin/reassign_partitions and blocks on its first log line (KafkaController
      ``info("Handling reassignment of partition ...")``; the isolation holds its log4j appenders -- jstack of the
      capture: BLOCKED in AppenderSkeleton.doAppend from maybeTriggerPartitionReassignment). Nothing is reordered: the
      move halts (``not_reordered``; ``controller_did_not_take`` had there been only an election) after its intent was
      recorded, so restore_order runs after the restart and finds nothing to write back."""
    m = store.get(incident_id).get("mitigation") or {}
    record = store.get(m["record_id"]) if m.get("record_id") else {}
    controller = ((record.get("plan") or {}).get("conditions") or {}).get("controller")
    restores = [e for e in store.audit_trail(m["record_id"]) if e["action"] == "restore_order"] if record else []
    said = (f"tasks {states}; the mitigation recorded on the incident: {m.get('outcome')} (code {m.get('code')}) -- "
            + " / ".join(str(x) for x in (m.get("reason") or [])[:3])
            + f"; broker 3 was the controller when planned: {controller}; its record: {record.get('status')} "
            f"{record.get('resolution') or ''}; restore_order: {[(e['outcome'], e['details']) for e in restores]}")
    assert m and controller is not None, said
    if not controller:
        assert (states["mitigate"], states["restore_order"]) == ("success", "success") and m["outcome"] == "moved", said
        return
    assert (states["mitigate"], states["restore_order"]) == ("failed", "success"), said
    assert m["outcome"] == "halted" and m.get("code") in ("not_reordered", "controller_did_not_take"), said
    assert [(e["outcome"], e["details"]["restored"], e["details"]["left"]) for e in restores] == [("ok", [], [])], said
    assert record["status"] == "closed" and record["resolution"].startswith("nothing to write back"), said


@pytest.mark.fourth_lane  # ./run test's lanes: the 2.3 lab lane is the longest (fresh clone ci11: 44.6 min)
def test_002a_unknown_api_key_is_explained_with_its_client_and_nothing_restarted(drill):
    lab, dags, store = drill
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    r, states = _drill(lab, dags, "002a")  # API key 60 to broker 2 every 3 s
    incident_id = r.incident_id
    trigger = store.get(incident_id)["trigger"]
    assert trigger["kind"] == "unknown_api_requests" and trigger["details"]["api_keys"] == ["60"]
    incident = _explained(store, incident_id, states, "runbooks/unsupported-client-request.md")
    from kafka_lab.net import service_ip

    assert service_ip("lab_bad_client") in incident["explanation"]["detected"] and incident["explanation"]["advice"]
    _, bundle, manifest, findings = _bundle(store, incident_id)
    unknown = [f for f in findings if f["kind"] == "unknown_api_requests"]
    assert unknown and 2 in unknown[0]["broker_ids"], [f["kind"] for f in findings]
    assert "60" in json.dumps(unknown[0]) and service_ip("lab_bad_client") in json.dumps(unknown[0])
    assert {b: lab.broker_pid(b) for b in (1, 2, 3)} == pids, "a bad client must not restart anything"


def test_002b_dead_log_cleaner_is_restarted_through_the_engine_and_compacts_again(drill):
    lab, dags, store = drill
    pid_before = lab.broker_pid(1)
    r, states = _drill(lab, dags, "002b")
    incident_id = r.incident_id
    assert store.get(incident_id)["broker_ids"] == [1]
    assert store.get(incident_id)["trigger"]["kind"] == "log_cleaner_not_running"
    assert states["plan"] == "success" and states["explain"] == "skipped", states
    incident, bundle, manifest, findings = _bundle(store, incident_id)
    kinds = {(f["kind"], tuple(f["broker_ids"])) for f in findings}
    assert ("log_cleaner_not_running", (1,)) in kinds, kinds
    assert any(c["kind"] == "dump_log" for c in manifest["commands"]), "kafka-dump-log of the offsets segments"
    # the plan went through the engine: never deletes segments, restarts broker 1, waits for coordinator loading
    assert "delete" not in json.dumps(incident["plan"]["steps"]).lower()
    assert lab.broker_pid(1) != pid_before and incident["status"] == "closed"
    trail = store.audit_trail(incident_id)
    actions = [e["action"] for e in trail if e.get("host") == "kafka_lab_host_1"]
    assert "gate_coordinator" in actions and actions[-1] == "restart_broker", actions
    assert [(e["actor"], e["outcome"]) for e in trail if e["action"] == "approval"] == [("drill-bot", "approve")]
    # the new JVM has its cleaner thread
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.observe import check_once

    snapshot, _ = check_once(load_cluster("lab"))
    assert snapshot.probe(1).log_cleaner_threads == 1


@pytest.mark.fourth_lane  # ./run test's lanes: the 2.3 lab lane is the longest (fresh clone ci11: 44.6 min)
def test_004_zookeeper_follower_drop_is_explained_with_its_arithmetic_and_nothing_restarted(drill):
    lab, dags, store = drill
    from kafka_lab.zookeeper import SYNC_LIMIT, TICK_TIME_MS, quorum_modes

    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    zk_pids = {z: lab.zk_pid(z) for z in (1, 2, 3)}
    follower = min(z for z, m in quorum_modes().items() if m == "follower")  # the one the drill stalls
    r, states = _drill(lab, dags, "004")  # no health check during the stall: found after the fact
    incident_id = r.incident_id
    trigger = store.get(incident_id)["trigger"]
    assert trigger["kind"] == "zookeeper_follower_dropped" and str(trigger["details"]["subject"]) == str(follower), trigger
    assert f"syncLimit {SYNC_LIMIT} x tickTime {TICK_TIME_MS} ms" in trigger["details"]["sync_timeout"]["arithmetic"]
    _explained(store, incident_id, states, "runbooks/zookeeper-follower-drop.md")
    _, bundle, manifest, findings = _bundle(store, incident_id)
    # every ensemble member's words, config and log, and the affected server's jstack
    files = [f["path"] for f in manifest["files"]]
    for z in (1, 2, 3):
        assert any(p.startswith(f"zookeeper/{z}/") and "mntr" in p for p in files), (z, files)
        assert any(p.startswith(f"zookeeper/{z}/") and "zoo-cfg" in p for p in files), (z, files)
    assert any(p.startswith(f"zookeeper/{follower}/") and "jstack" in p for p in files), files
    drops = [f for f in findings if f["kind"] == "zookeeper_follower_dropped"]
    assert drops, [f["kind"] for f in findings]
    assert {b: lab.broker_pid(b) for b in (1, 2, 3)} == pids and {z: lab.zk_pid(z) for z in (1, 2, 3)} == zk_pids
