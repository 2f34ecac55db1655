"""Capture on the lab's real Kafka 2.3.0 brokers: gentle with the peers, heavy only on the suspect,
bounded on a stopped JVM, truthful about what it could not do."""

from __future__ import annotations

import json
import os

import pytest

from kafka_runbooks import clock
from kafka_runbooks.capture.bundle import EvidenceBundle, verify
from kafka_runbooks.capture.collector import capture_cluster
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect.observe import brokers_to_probe, known_registrations, take_snapshot
from kafka_runbooks.hooks.kafka import KafkaHook

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def capture(lab, tmp_path, suspects, **capture_settings):
    os.environ.update(lab.airflow_env())
    raw = dict(lab.cluster_settings()["lab"])
    raw["bundle_base"] = str(tmp_path / "bundles")
    raw["incident_base"] = str(tmp_path / "incidents")
    raw["capture"] = {**raw.get("capture", {}), **capture_settings}
    config = ClusterConfig.from_dict("lab", raw)
    known = known_registrations(config)
    snapshot = take_snapshot(config, known=known)
    targets, missing = brokers_to_probe(config, snapshot, known)
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    bundle = EvidenceBundle(config.bundle_base, "lab", "inc-lab", capture_id=clock.stamp(micros=True))
    manifest = capture_cluster(config, snapshot, [1, 2, 3], bundle, suspects=suspects, known={b.id: b for b in targets},
                               checker=lambda: hook.check_all(targets, 5.0, unregistered=missing))
    return bundle, manifest


def names(manifest, broker):
    return [c["name"] for c in manifest["commands"] if c["broker_id"] == broker]


def test_a_hung_broker_gets_the_heavy_tools_and_its_peers_one_plain_jstack(healthy_lab, tmp_path):
    healthy_lab.hang(3)
    bundle, m = capture(healthy_lab, tmp_path, [3], heap_dump=False)
    assert m["suspects"] == [3] and m["status"] == "complete", m["status_reasons"]
    three = names(m, 3)
    assert [n for n in three if n.startswith("jstack-")] == ["jstack-1", "jstack-2", "jstack-3"]
    assert "jmap-histo" in three and "heap-info" in three
    for peer in (1, 2):
        assert [n for n in names(m, peer) if n.startswith(("jstack", "jmap", "heap"))] == ["jstack-1"]
        assert m["hosts"][str(peer)]["role"] == "peer" and m["hosts"][str(peer)]["status"] == "complete"
    dump = (bundle.path / "hosts" / "3" / "jstack-1.out").read_text()
    assert "data-plane-kafka-request-handler" in dump  # Kafka 2.3's own request handlers, stuck behind the fault
    # the broker's logs, and the direct checks made during the capture
    kinds = {(f["broker_id"], f["kind"]) for f in m["files"]}
    for kind in ("server_log", "controller_log", "state_change_log", "log_cleaner_log", "kafka_stdout", "gc_log", "proc_threads"):
        assert (3, kind) in kinds, kind
    checks = json.loads((bundle.path / "kafka-checks.json").read_text())
    assert {(c["broker_id"], c["ok"]) for c in checks} == {(1, True), (2, True), (3, False)}
    assert {c["during_capture"] for c in checks} == {"start", "end"}
    assert verify(bundle.path) == []


def test_a_paused_jvm_is_captured_within_the_deadline_and_reported_partial(healthy_lab, tmp_path):
    healthy_lab.pause(3)
    bundle, m = capture(healthy_lab, tmp_path, [3], heap_dump=True)
    h = m["hosts"]["3"]
    assert h["process_state"] == "stopped" and h["status"] == "partial" and m["status"] == "partial"
    assert m["duration_s"] <= m["deadline_s"] + 15 and h["duration_s"] <= m["deadline_s"]
    # no attach tool, no signal: only the ptrace-based jhsdb, bounded (on JDK 17 it cannot read a Kafka 2.3 JVM: recorded)
    assert [n for n in names(m, 3) if n.startswith(("jstack", "jmap", "heap", "sigquit"))] == ["jstack-jhsdb-1"]
    reasons = " ".join(m["status_reasons"])
    assert "broker 3: skipped jstack: the process is stopped" in reasons and "skipped heap dump" in reasons
    threads = (bundle.path / "hosts" / "3" / "proc-threads.out").read_text()
    assert "kafka-log-clean" in threads and " T " in threads  # the thread list, from the kernel
    assert m["hosts"]["1"]["status"] == m["hosts"]["2"]["status"] == "complete"
    assert healthy_lab.broker_pid(3) and open(f"/proc/{healthy_lab.broker_pid(3)}/stat").read().rsplit(")", 1)[1].split()[0] == "T"
