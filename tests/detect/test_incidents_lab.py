"""Detection of incidents 000, 002a, 002b and 004 on the lab's real Kafka 2.3.0 brokers and ZooKeeper 3.8 ensemble,
through one whole health check (detect/observe.check_once: ZooKeeper, direct checks, canary, SSH probes of the
broker hosts and of the ZooKeeper hosts, history, detectors); and a healthy lab under load that stays quiet."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from kafka_runbooks import clock

from kafka_lab.zookeeper import SYNC_LIMIT, TICK_TIME_MS, ZONES, quorum_modes
from kafka_runbooks.detect.observe import check_once

from test_detection_lab import NOT_SERVING, lab_config, not_accusing_others, until

pytestmark = [pytest.mark.lab, pytest.mark.timeout(900)]


def new_findings(findings, since: str):
    """Findings, less reports of events that happened before ``since`` and are still within their window (an earlier
    test's bad client: its lines stay in the broker's log for health.bad_request_window_s)."""
    return [f for f in findings if not (f.kind == "unknown_api_requests" and f.details["last"] < since)]


def kinds(findings, prefix=""):
    return sorted((f.kind, f.broker_ids, f.details.get("subject")) for f in findings if f.kind.startswith(prefix))


def test_the_healthy_lab_is_quiet_with_every_new_probe(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    started = clock.now_iso()
    for _ in range(5):
        snapshot, findings = check_once(config)
        assert new_findings(findings, started) == [], [(f.kind, f.summary[:300]) for f in findings]
        time.sleep(2)
    # every ZooKeeper member answered its words and its host over SSH; zoo.cfg read
    assert [(z.server, z.serving, z.host_reachable, z.tick_time_ms, z.sync_limit, z.zone) for z in snapshot.zookeeper] == [
        (str(z), True, True, TICK_TIME_MS, SYNC_LIMIT, ZONES[z]) for z in (1, 2, 3)]
    assert sorted(z.mode for z in snapshot.zookeeper) == ["follower", "follower", "leader"]
    for p in snapshot.probes:  # each broker's cleaner and loader threads seen, its offsets partitions listed
        assert p.log_cleaner_threads == 1 and p.loader_read_bytes is not None and p.mem_available_bytes > 0
        assert len(p.offsets_dirs) == 50 and p.server_log_age_s < 30  # the lab's brokers log every 10 s


def test_an_isolated_broker_is_found_from_the_outside_and_named_silently_isolated(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)
    healthy_lab.isolate(3)
    snapshot, findings, seen = until(config, lambda s, fs: any(f.kind == "broker_unresponsive" and f.details.get("pattern") == "silently_isolated"
                                                              for f in fs), "isolate -> silently isolated", bound=240)
    (f,) = [f for f in findings if f.kind == "broker_unresponsive"]
    assert f.broker_ids == (3,) and f.details["incident"] == "000"
    assert f.details["log_silent"]["age_s"] >= config.health.log_silent_s
    assert snapshot.probe(3).process_alive and 3 in snapshot.live_broker_ids
    # from the outside: the direct check, the peers' fetch errors and its sockets -- not its own log lines
    assert f.details["check"]["ok"] is False and (f.details["traffic_near_zero"] or f.details["peer_fetch_errors"])
    not_accusing_others(seen, 3)


def test_a_client_with_an_unknown_api_key_is_named_with_its_sockets(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)
    healthy_lab.start_bad_client(2, api_key=60, interval_s=3)
    snapshot, findings, seen = until(config, lambda s, fs: any(f.kind == "unknown_api_requests" and f.details["client"]["sockets_now"]
                                                              for f in fs), "bad client -> unknown_api_requests")
    (f,) = [f for f in findings if f.kind == "unknown_api_requests"]
    from kafka_lab.net import service_ip

    client = service_ip("lab_bad_client")
    assert f.broker_ids == (2,) and f.details["api_keys"] == ["60"] and f.details["client"]["host"] == client
    assert any(f"<- {client}:" in s for s in f.details["client"]["sockets_now"])  # the connection it holds, from `ss`
    assert f.details["form"] == "invalid_request" and f.details["no_restart"] is True
    assert "Unknown API key 60" in f.evidence[0].excerpt
    assert not [x for _, fs in seen for x in fs if x.kind not in ("unknown_api_requests",)], kinds(seen[-1][1])


def test_a_dead_log_cleaner_is_seen_in_the_brokers_threads(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path, startup_grace_s=0)
    check_once(config)
    healthy_lab.kill_cleaner(1)
    snapshot, findings, _ = until(config, lambda s, fs: any(f.kind == "log_cleaner_not_running" for f in fs), "kill-cleaner -> not running")
    (f,) = [f for f in findings if f.kind == "log_cleaner_not_running"]
    assert f.broker_ids == (1,) and snapshot.probe(1).log_cleaner_threads == 0
    assert "Error due to" in f.summary and f.details["remediation"] == "rolling_restart"


def test_a_zookeeper_follower_stalled_past_sync_limit_is_a_drop_with_its_arithmetic(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    check_once(config)
    check_once(config)
    follower = min(z for z, m in quorum_modes().items() if m == "follower")
    stall = threading.Thread(target=healthy_lab.zk_stall, args=(follower, 2 * SYNC_LIMIT * TICK_TIME_MS / 1000))
    stall.start()
    time.sleep(0.5)
    during, _ = check_once(config)
    stall.join()
    snapshot, findings, seen = until(config, lambda s, fs: any(f.kind == "zookeeper_follower_dropped" for f in fs), "zk-stall -> drop")
    (f,) = [f for f in findings if f.kind == "zookeeper_follower_dropped"]
    assert f.details["subject"] == str(follower) and f.details["zone"] == ZONES[follower]
    assert f.details["no_ensemble_election"] is True
    assert f.details["sync_timeout"]["arithmetic"] == f"syncLimit {SYNC_LIMIT} x tickTime {TICK_TIME_MS} ms = {SYNC_LIMIT * TICK_TIME_MS} ms"
    (drop,) = f.details["drops"]
    assert drop["server"] == str(follower) and drop["rejoined_at"] and drop["election_took_ms"] is not None
    assert "Exception when following the leader" in "\n".join(e.excerpt for e in f.evidence)
    others = {x.details.get("subject") for _, fs in seen for x in fs if x.kind.startswith("zookeeper")}
    assert others == {str(follower)}, others
    accused = [x for _, fs in seen for x in fs if x.kind in NOT_SERVING]
    assert not accused, "no broker is accused for a ZooKeeper drop"


def test_a_slow_offsets_load_is_seen_with_its_progress(healthy_lab, tmp_path):
    """Incident 002b's load: a real __consumer_offsets partition grown with every cleaner dead, the loader threads
    slowed (cgroup.py), its leader stopped: the new leader's load is seen in progress, with the bytes it reads."""
    lab = healthy_lab
    config = lab_config(lab, tmp_path, offsets_load_expected_s=1.0, startup_grace_s=0)
    # two host probes must fall inside the load: no JmxTool JVM per broker per check here (leadership is not the point)
    config = dataclasses.replace(config, leadership=dataclasses.replace(config.leadership, jmx=False))
    partition = 7
    for b in (1, 2, 3):
        lab.kill_cleaner(b)
    grown = lab.grow_offsets(partition, 120 << 20)
    leader = lab.partitions(["__consumer_offsets"])[("__consumer_offsets", partition)]["leader"]
    for b in (1, 2, 3):
        lab.slow_loader(b, 2)
    check_once(config)
    stopper = threading.Thread(target=lab.stop, args=(leader,))
    stopper.start()
    try:
        snapshot, findings, seen = until(config, lambda s, fs: any(f.kind == "offsets_load_slow" and f.details["progress"].get("bytes_per_s")
                                                                  for f in fs), "a slow load with its rate", bound=120)
    finally:
        stopper.join()
        lab.start(leader)
    (f,) = [f for f in findings if f.kind == "offsets_load_slow"]
    assert f"__consumer_offsets-{partition}" in f.partitions and leader not in f.broker_ids  # with the others it led
    prog = f.details["progress"]
    assert prog["bytes_per_s"] > 0 and prog["state"].startswith("progressing") and prog["partition_bytes"] > 50 << 20, prog
    assert min(grown["bytes"].values()) >= 120 << 20
    assert any(x.kind == "log_cleaner_not_running" for x in findings) and any(x.kind == "offsets_partition_oversized" for x in findings)
