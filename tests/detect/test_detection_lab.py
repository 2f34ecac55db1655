"""Detection on the lab's real Kafka 2.3.0 brokers: each fault gives the right finding with its
evidence, the healthy lab under load gives none, a broker catching up after a restart is not
accused. One health check here is exactly the health DAG's (detect/observe.check_once): ZooKeeper,
direct checks, canary, SSH probes, history, detectors."""

from __future__ import annotations

import os
import time

import pytest

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect.observe import check_once
from kafka_runbooks.model import Severity

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]

NOT_SERVING = ("broker_unresponsive", "broker_unregistered_alive", "broker_absent", "broker_check_failed")
FIND_BOUND_S = 120.0  # generous: two cores shared with other labs and Spark


def lab_config(lab, tmp_path, leadership: dict | None = None, **health) -> ClusterConfig:
    os.environ.update(lab.airflow_env())
    raw = dict(lab.cluster_settings()["lab"])
    raw["incident_base"] = str(tmp_path / "incidents")  # this test's own history
    raw["health"] = {**raw.get("health", {}), **health}
    raw["leadership"] = {**raw.get("leadership", {}), **(leadership or {})}
    raw["canary"] = {**raw.get("canary", {}), "enabled": True}
    return ClusterConfig.from_dict("lab", raw)


def until(config, predicate, what: str, bound: float = FIND_BOUND_S):
    """Health checks back to back until ``predicate(snapshot, findings)`` holds; every check is kept."""
    seen = []
    deadline = time.monotonic() + bound
    while True:
        snapshot, findings = check_once(config)
        seen.append((snapshot, findings))
        if predicate(snapshot, findings):
            return snapshot, findings, seen
        if time.monotonic() > deadline:
            last = [(f.kind, f.broker_ids, f.summary[:200]) for f in findings]
            pytest.fail(f"{what}: not seen within {bound:.0f}s over {len(seen)} checks; last findings {last}", pytrace=False)


def of(findings, kind, broker):
    return [f for f in findings if f.kind == kind and f.broker_ids == (broker,)]


def not_accusing_others(seen, suspect):
    for _, findings in seen:
        wrong = [f for f in findings if f.kind in NOT_SERVING and f.broker_ids != (suspect,)]
        assert not wrong, [(f.kind, f.broker_ids, f.summary) for f in wrong]


def test_the_healthy_lab_under_load_gives_no_finding(healthy_lab, tmp_path):
    # no broker is stuck here, so JmxTool's timeout is no cost of the check: it is a JVM start over SSH on two cores
    # shared with three other labs, and in one CI run it did not answer within the default 15 s (a
    # request_metrics_unknown finding, right for the product, saying nothing of the lab's health)
    config = lab_config(healthy_lab, tmp_path, leadership={"jmx_timeout_s": 90.0})
    before = healthy_lab.load_stats()
    started = clock.now_iso()
    for _ in range(4):
        snapshot, findings = check_once(config)
        assert [c.broker_id for c in snapshot.kafka_checks if c.ok] == [1, 2, 3]
        assert [c.broker_id for c in snapshot.canary if c.ok] == [1, 2, 3], [c.error for c in snapshot.canary]
        # an earlier test's bad client stays in the brokers' logs for health.bad_request_window_s: not a new finding
        findings = [f for f in findings if not (f.kind == "unknown_api_requests" and f.details["last"] < started)]
        assert findings == [], [(f.kind, f.summary) for f in findings]
        time.sleep(3)
    assert healthy_lab.load_stats()["produced_ok"] > before["produced_ok"]  # the load ran all along
    # the probes found every broker on its own address, its ports from the registration (both listeners)
    for p in snapshot.probes:
        assert p.reachable and p.process_state in ("sleeping", "running") and p.listening
        assert p.addresses == (f"127.{100 + int(os.environ.get('KAFKA_RUNBOOKS_SLOT', '0'))}.1.{p.broker_id}",)
        assert set(p.ports) == {9092, 9093} and p.ports[0] == 9093  # the configured listener (REPLICATION) first
    # the direct checks went to the REPLICATION listener, advertised by host name
    assert all(c.endpoint.startswith("kafka-lab-") and c.endpoint.endswith(":9093") and c.answered_by == c.broker_id
               for c in snapshot.kafka_checks)


@pytest.mark.parametrize("fault", ["hang", "deadlock"])
def test_a_broker_that_stops_serving_while_registered_is_unresponsive(healthy_lab, tmp_path, fault):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)  # the history knows broker 3 answered before the fault
    getattr(healthy_lab, fault)(3)
    snapshot, findings, seen = until(config, lambda s, fs: of(fs, "broker_unresponsive", 3), f"{fault} -> broker_unresponsive")
    (f,) = of(findings, "broker_unresponsive", 3)
    assert f.severity is Severity.CRITICAL and 3 in snapshot.live_broker_ids
    assert f.details["check"]["ok"] is False and f.details["check"]["endpoint"].endswith(":9093")
    assert f.details["corroborated_by"], f.summary
    assert f.evidence[0].source == "kafka:check/broker/3"
    # on real 2.3 the ISRs stay full: the detection did not need them
    assert snapshot.probe(3).process_state in ("sleeping", "running")
    not_accusing_others(seen, 3)
    # the peers' own log lines, windowed after broker 3 last answered, name it
    until(config, lambda s, fs: any(e.source.endswith("/server.log") and "Connection to 3" in e.excerpt
                                    for f in of(fs, "broker_unresponsive", 3) for e in f.evidence),
          "peers' fetch errors naming broker 3 in the evidence")


def test_a_paused_broker_is_unresponsive_then_alive_but_unregistered(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)
    healthy_lab.pause(3)
    snapshot, findings, seen = until(config, lambda s, fs: of(fs, "broker_unregistered_alive", 3), "pause -> unregistered but alive")
    (f,) = of(findings, "broker_unregistered_alive", 3)
    assert 3 not in snapshot.live_broker_ids and f.details["process_state"] == "stopped" and f.details["listening"] is True
    assert set(f.details["ports"]) == {9092, 9093}  # from its last registration, kept in the history
    assert f.details["last_registered_sample"] is not None
    kinds_for_3 = [f.kind for _, fs in seen for f in fs if f.broker_ids == (3,) and f.kind in NOT_SERVING]
    assert set(kinds_for_3) <= {"broker_unresponsive", "broker_check_failed", "broker_unregistered_alive"}
    not_accusing_others(seen, 3)


def test_a_killed_broker_becomes_absent(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)
    healthy_lab.kill(3)
    snapshot, findings, seen = until(config, lambda s, fs: of(fs, "broker_absent", 3), "kill -> absent")
    (f,) = of(findings, "broker_absent", 3)
    assert f.details["host_reachable"] is True and f.details["pid"] is None
    assert "no process listens on its ports" in f.summary
    not_accusing_others(seen, 3)


def test_a_broker_catching_up_after_a_restart_is_not_accused(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)
    healthy_lab.stop(3)
    healthy_lab.start(3)  # returns once the new JVM is registered: it is loading and rejoining ISRs now
    seen, whole = [], 0
    deadline = time.monotonic() + 45
    while time.monotonic() < deadline and whole < 3:  # through the catch-up, then three checks of the whole cluster
        snapshot, findings = check_once(config)
        seen.append(findings)
        accused = [f for f in findings if f.severity is Severity.CRITICAL or f.kind in NOT_SERVING]
        assert not accused, [(f.kind, f.broker_ids, f.summary) for f in accused]
        whole = whole + 1 if all(set(p.isr) == set(p.replicas) for p in snapshot.partitions) else 0
        time.sleep(2)
    kinds = {f.kind for fs in seen for f in fs}
    # leadership_imbalance is true and accuses nobody: the restart moved broker 3's leaderships away (issue 7).
    # Kafka 2.3.0 itself sometimes fails a coordinator's load of an offsets partition that moved with the restart (a
    # ci19 run: "Error loading offsets from __consumer_offsets-16", NoSuchElementException from
    # GroupCoordinator.tryCompleteHeartbeat): then offsets_load_failed says so, citing that line
    failed = [f for fs in seen for f in fs if f.kind == "offsets_load_failed"]
    assert all("Error loading offsets from __consumer_offsets-" in e.excerpt for f in failed for e in f.evidence), failed
    assert kinds - {"offsets_load_failed"} <= {"under_replicated_partitions", "broker_starting", "leadership_imbalance"}, kinds
