"""The seed incidents on their own era: drills 001 (deadlock, the approved restart), 002a (a newer client's request:
DescribeConfigs, API key 32 of Kafka 0.11, which 0.10.2 does not know -- explained, its client named, nothing
restarted), 002b (a dead log cleaner: the rolling restart that keeps a holder of every offsets partition up and waits
for 0.10's loading) and 004 (a ZooKeeper follower stalled past syncLimit x tickTime, found after the fact) end to end
on the lab's real Kafka 0.10.2.1 brokers, through Airflow (dag.test()), with the drills' own code (``./run demo
001|002a|002b|004 --kafka 0.10.2.1``). Together with tests/lab/test_kafka010*.py they run every version branch of the product on 0.10.2.1:
the direct check without DescribeConfigs and JmxTool without --one-time in every health check, the version read by the
plan and by each fresh-state check, DumpLogSegments in 002b's capture, the coordinator gate on 0.10's OffsetFetch and
its "Finished loading offsets from" lines, and the analysis of 0.10's logs and thread names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.spark, pytest.mark.airflow, pytest.mark.timeout(1500)]


@pytest.fixture
def drill010(healthy_lab010, airflow_db, tmp_path, monkeypatch):
    from kafka_lab.airflow_home import load_dags, take_triggered_confs
    from kafka_lab.drill import HEALTH, RESPONSE

    lab = healthy_lab010
    os.environ.update(lab.airflow_env())
    clusters = lab.cluster_settings()
    clusters["lab"] = {**clusters["lab"], "incident_base": str(tmp_path / "incidents"), "bundle_base": str(tmp_path / "bundles")}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    take_triggered_confs(RESPONSE)
    dags = load_dags()
    dags.get_dag(HEALTH).test(run_conf={"cluster": "lab"})  # a baseline in the history before the fault
    assert take_triggered_confs(RESPONSE) == [], "the healthy lab started a response"
    return lab, dags, clusters["lab"]


def _manifests(settings) -> list[dict]:
    from pathlib import Path

    return [json.loads(m.read_text()) for m in Path(settings["bundle_base"]).rglob("manifest.json")]


def _audit(settings, action: str) -> list[dict]:
    """Every audit entry of that action, of every record of the drill (the state database)."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    return [e for r in store.records("lab") for e in store.audit_trail(r["id"]) if e["action"] == action]


def test_010_001_deadlock_is_restarted_after_approval(drill010):
    from kafka_lab.drill import run_001

    lab, dags, settings = drill010
    pid = lab.broker_pid(3)
    assert run_001(lab, dags, 3, "Approve").ok
    assert lab.broker_pid(3) != pid and lab.registration(3) is not None
    lab.wait_full_isr(120)


def test_010_002b_dead_cleaner_rolling_restart_waits_for_0_10s_offsets_loading(drill010):
    from kafka_lab.incident_drills import run_incident

    lab, dags, settings = drill010
    pid = lab.broker_pid(1)
    result = run_incident(lab, dags, "002b", "Approve")
    assert result.ok and result.incident_status == "closed", result
    assert lab.broker_pid(1) != pid
    # the capture dumped the largest offsets partition's segments with the only tool 0.10 has
    dumps = [c for m in _manifests(settings) for c in m.get("commands", []) if c.get("kind") == "dump_log"]
    assert dumps and all("kafka.tools.DumpLogSegments" in c["argv"] for c in dumps), dumps
    # the coordinator gate answered for every probed partition, and each one the restarted broker leads again is
    # corroborated by 0.10's "Finished loading offsets from __consumer_offsets-P" line in its log. Whether it leads any
    # when the gate runs is the controller's timing (measured: under load none yet, every probe answered by the
    # brokers that took over); the wording on partitions it does lead is asserted in test_kafka010_product.py
    gates = _audit(settings, "gate_coordinator")
    assert gates and all(g["details"]["probed"] and set(g["details"]["loaded_after_s"]) == {str(p) for p in g["details"]["probed"]}
                         for g in gates), gates
    assert all(g["details"]["not_corroborated"] == [] for g in gates), gates


def _explained(settings, incident_id, runbook):
    """The response explained the incident and restarted nothing (no plan, no restart)."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    from kafka_runbooks.capture.bundle import verify

    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    incident = store.get(incident_id)
    assert incident["status"] == "needs_person", incident["status"]
    assert incident["explanation"]["runbook"] == runbook and incident["explanation"]["why_no_restart"], incident["explanation"]
    trail = store.audit_trail(incident_id)
    assert [e["outcome"] for e in trail if e["action"] == "explain"] == ["no_restart"]
    assert not [e for e in trail if e["action"] in ("restart_broker", "stop_broker", "approval")]
    (capture,) = [e for e in trail if e["action"] == "capture"]
    assert capture["outcome"] == "complete", capture["details"]["reasons"]
    assert verify(Path(incident["bundle_dir"])) == []
    return store, incident


def _findings(incident) -> list[dict]:
    return json.loads((Path(incident["bundle_dir"]) / "findings.json").read_text())["findings"]


def test_010_002a_unknown_api_key_32_is_explained_with_its_client_and_nothing_restarted(drill010):
    from kafka_lab.incident_drills import run_incident
    from kafka_lab.net import service_ip

    lab, dags, settings = drill010
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    result = run_incident(lab, dags, "002a", finding_timeout_s=300)  # DescribeConfigs (key 32) to broker 2 every 3 s
    assert result.ok, result
    store, incident = _explained(settings, result.incident_id, "runbooks/unsupported-client-request.md")
    trigger = incident["trigger"]
    assert trigger["kind"] == "unknown_api_requests" and trigger["details"]["api_keys"] == ["32"], trigger
    client = service_ip("lab_bad_client")
    assert client in incident["explanation"]["detected"] and incident["explanation"]["advice"]
    # the analysis of the captured bundle: broker 2's 0.10 wording ("Unexpected ApiKeys id `32`"), the client's address
    unknown = [f for f in _findings(incident) if f["kind"] == "unknown_api_requests"]
    assert unknown and 2 in unknown[0]["broker_ids"], [f["kind"] for f in _findings(incident)]
    assert "32" in json.dumps(unknown[0]) and client in json.dumps(unknown[0])
    assert {b: lab.broker_pid(b) for b in (1, 2, 3)} == pids, "a bad client must not restart anything"


def test_010_004_zookeeper_follower_drop_is_found_after_the_fact_and_nothing_restarted(drill010):
    from kafka_lab.incident_drills import run_incident
    from kafka_lab.zookeeper import SYNC_LIMIT, TICK_TIME_MS, quorum_modes

    lab, dags, settings = drill010
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    zk_pids = {z: lab.zk_pid(z) for z in (1, 2, 3)}
    follower = min(z for z, m in quorum_modes().items() if m == "follower")  # the one the drill stalls
    result = run_incident(lab, dags, "004", finding_timeout_s=300)  # no health check during the stall
    assert result.ok, result
    store, incident = _explained(settings, result.incident_id, "runbooks/zookeeper-follower-drop.md")
    trigger = incident["trigger"]
    assert trigger["kind"] == "zookeeper_follower_dropped" and str(trigger["details"]["subject"]) == str(follower), trigger
    assert f"syncLimit {SYNC_LIMIT} x tickTime {TICK_TIME_MS} ms" in trigger["details"]["sync_timeout"]["arithmetic"]
    assert [f for f in _findings(incident) if f["kind"] == "zookeeper_follower_dropped"], [f["kind"] for f in _findings(incident)]
    assert {b: lab.broker_pid(b) for b in (1, 2, 3)} == pids and {z: lab.zk_pid(z) for z in (1, 2, 3)} == zk_pids
