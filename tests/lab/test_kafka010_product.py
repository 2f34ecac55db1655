"""Every version branch of the product (kafka_runbooks/versions.py) run against real Kafka 0.10.2.1 brokers: the
version read from the cluster, the mismatch finding, the direct check without DescribeConfigs, per-broker metadata
views without leader epochs, JmxTool without --one-time, the canary without the idempotent producer, DumpLogSegments
instead of kafka-dump-log.sh, the preferred election's method, the KIP-291 note, unclean leader election's default
and the refusal of a stop that would cause one, and the coordinator gate on 0.10's OffsetFetch and wording.
(tests/lab/test_versions_23.py runs the other side of each branch on 2.3.0.)"""

from __future__ import annotations

import dataclasses
import json

import pytest

from kafka_lab import LabError, wait_until
from kafka_lab.topics import ORDERS, bootstrap_all

pytestmark = pytest.mark.lab


@pytest.fixture
def on010(healthy_lab010, monkeypatch):
    """(lab, its cluster config as the DAGs load it), the lab's Airflow connections in this process."""
    from kafka_runbooks.config import ClusterConfig

    for k, v in healthy_lab010.airflow_env().items():
        monkeypatch.setenv(k, v)
    return healthy_lab010, ClusterConfig.from_dict("lab", healthy_lab010.cluster_settings()["lab"])


def observed(lab, config):
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook

    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        snapshot = read_snapshot(zk, config.name)
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    return snapshot, hook, hook.kafka_version(snapshot.brokers, 5.0, config.kafka_version)


def test_010_version_is_read_from_the_brokers_and_a_wrong_setting_is_a_finding(on010):
    from kafka_runbooks import versions
    from kafka_runbooks.detect.version_check import mismatch_findings

    lab, config = on010
    snapshot, hook, kv = observed(lab, config)
    assert kv.known and kv.describe() == ">= 0.10.2, < 0.11.0 (every broker)"
    assert [b.schema_version for b in snapshot.brokers] == [4, 4, 4]  # a floor only: 2.3 writes 4 too
    assert [f for f in versions.FEATURES if kv.has(f)] == ["api_versions"]
    assert mismatch_findings(kv, "0.10.2.1") == [] and mismatch_findings(kv, "0.10") == []
    (f,) = mismatch_findings(kv, "2.3.0")
    assert f.kind == "kafka_version_mismatch" and "brokers 1, 2, 3 are >= 0.10.2, < 0.11.0 (ApiVersions)" in f.summary
    # the health check itself: the setting says 2.3.0, the brokers say otherwise
    from kafka_runbooks.detect.observe import check_once

    snap, findings = check_once(dataclasses.replace(config, kafka_version="2.3.0"), probe_hosts=False)
    assert snap.version.describe() == kv.describe()
    assert "kafka_version_mismatch" in {x.kind for x in findings}


def test_010_version_is_exactly_0_10_2_1_from_the_brokers_own_log_line(on010):
    """Each broker's own ``Kafka version : 0.10.2.1`` line (AppInfoParser at its start), which 0.10 writes to
    kafkaServer.out only: the host probe reads it once per JVM (one grep), the health check's version is then exact;
    the next check takes it from the history (no grep) while the JVM is the same."""
    from kafka_runbooks.detect.host_probe import probe_all
    from kafka_runbooks.detect.observe import check_once

    lab, config = on010
    snapshot, _, _ = observed(lab, config)
    probes = probe_all(config, snapshot.brokers)  # nothing read before: each host greps its logs
    assert [(p.broker_id, p.kafka_version_logged, p.kafka_version_log) for p in probes] == [
        (b, "0.10.2.1", "kafkaServer.out or server.log") for b in (1, 2, 3)], [(p.broker_id, p.error) for p in probes]
    for b in (1, 2, 3):  # 0.10's server.log never has the line: it came from kafkaServer.out
        rc, out, _ = lab.ssh(b, ["grep", "-c", "Kafka version", config.server_log(b)])
        assert (rc, out.strip()) == (1, "0"), (rc, out)
    first, _ = check_once(config)
    assert first.version.describe() == "0.10.2.1" and first.version.exact == "0.10.2.1", first.version.notes
    assert {p.kafka_version_log for p in first.probes} <= {"kafkaServer.out or server.log", "history"}
    second, findings = check_once(config)
    assert [(p.kafka_version_logged, p.kafka_version_log) for p in second.probes] == [("0.10.2.1", "history")] * 3
    assert second.version.describe() == "0.10.2.1" and "kafka_version_mismatch" not in {f.kind for f in findings}
    logged = [o for b in second.version.brokers for o in b.observations if o.source == "log"]
    assert [o.broker_id for o in logged] == [1, 2, 3] and all(o.exact for o in logged)


def test_010_direct_check_without_describe_configs_and_metadata_views_without_epochs(on010):
    lab, config = on010
    snapshot, hook, kv = observed(lab, config)
    assert kv.lacks("describe_configs") and kv.lacks("metadata_leader_epoch")
    checks = hook.check_all(snapshot.brokers, 5.0)
    assert [(c.broker_id, c.ok, c.method, c.answered_by) for c in checks] == [(b, True, "ApiVersions+Metadata", b) for b in (1, 2, 3)]
    views = hook.metadata_views(snapshot.brokers, 5.0)
    zk = {p.name: p.leader for p in snapshot.partitions}
    for v in views:  # Metadata v2 (0.10.2's highest): leaders, no leader epoch
        assert v.ok and {k: leader for k, (leader, epoch) in v.leaders.items()} == zk
        assert {epoch for _, epoch in v.leaders.values()} == {None}
    lab.hang(3)
    try:
        c = hook.check_broker(snapshot.broker(3), 3.0)
        # librdkafka cannot even learn the stuck broker's ApiVersions: its DescribeConfigs times out, no fallback needed
        assert not c.ok and c.error_code in ("_TIMED_OUT", "_TRANSPORT") and c.method == "DescribeConfigs", c
        assert [x.ok for x in hook.check_all([snapshot.broker(1), snapshot.broker(2)], 5.0)] == [True, True]
    finally:
        lab.unhang(3)


def test_010_jmxtool_without_one_time_and_the_kip291_note(on010):
    from kafka_runbooks.detect.jmx import REQUEST_QUEUE, kip291_note
    from kafka_runbooks.detect.leadership_observe import read_hosts

    lab, config = on010
    snapshot, hook, kv = observed(lab, config)
    # JmxTool is a JVM start: give it room on this shared machine
    config = dataclasses.replace(config, leadership=dataclasses.replace(config.leadership, jmx_timeout_s=90.0))
    parts = read_hosts(config, [snapshot.broker(1)], {1}, version=kv)
    m = parts[0].metrics
    assert m is not None and m.ok, (m, parts[0].notes)
    assert m.get(REQUEST_QUEUE, "Value") is not None
    assert "0.10.2" in kip291_note(kv, None, 500, False) and "KIP-291" in kip291_note(kv, None, 500, False)
    # the JVM was stopped after its first row: no JmxTool left on the host (a leaked one would print its next row
    # an hour later); seconds are allowed for a loaded host to reap it, and what is left is named
    left = []

    def none_left():
        rc, out, _ = lab.ssh(1, ["pgrep", "-a", "-u", "kbroker1", "-f", "kafka.tools.JmxTool"])
        left[:] = [out]
        return rc == 1 and out == ""

    try:
        wait_until(none_left, 15, "no JmxTool left on host 1")
    except LabError:
        raise AssertionError(f"JmxTool still running on host 1: {left[0]!r}") from None


def test_010_canary_without_idempotence_counts_its_own_duplicates(on010):
    from kafka_runbooks.remediate.gates import canary_leaders

    lab, config = on010
    snapshot, hook, kv = observed(lab, config)
    led = canary_leaders(snapshot, config.canary.topic)
    results = hook.canary(snapshot.brokers, led, config.canary.topic, 10.0, version=kv)
    assert [(r.ok, r.idempotent, r.duplicates) for r in results] == [(True, False, 0)] * 3, results


def test_010_dump_log_runs_dumplogsegments_the_only_tool_0_10_has(on010):
    from kafka_runbooks.host.commands import dump_log_command

    lab, config = on010
    _, _, kv = observed(lab, config)
    seg = str(lab.host_dir(1) / "data" / f"{ORDERS}-0" / "00000000000000000000")
    cmd = dump_log_command(config.kafka_home, [f"{seg}.log", f"{seg}.index", f"{seg}.timeindex"], "dump-log-oldest", 120, kv)
    assert "kafka.tools.DumpLogSegments" in cmd.argv
    rc, out, err = lab.ssh(1, list(cmd.argv), timeout=120)
    assert rc == 0, err
    assert f"Dumping {seg}.log" in out and "magic: 1 compresscodec: NONE" in out  # message format v1
    rc, _, _ = lab.ssh(1, ["test", "-e", f"{config.kafka_home}/bin/kafka-dump-log.sh"])
    assert rc == 1


def test_010_preferred_election_method_admin_is_refused_the_znode_is_used(on010):
    from kafka_runbooks.remediate.election import method_refusals

    lab, config = on010
    snapshot, _, kv = observed(lab, config)
    admin = dataclasses.replace(config, election=dataclasses.replace(config.election, method="admin"), kafka_version=None)
    (why,) = method_refusals(admin, kv)
    assert "needs Kafka >= 2.2" in why and "report >= 0.10.2, < 0.11.0" in why
    assert method_refusals(config, kv) == []


def test_010_unclean_leader_election_a_stop_that_would_cause_one_is_refused(on010):
    """0.10's default for unclean.leader.election.enable is on (KIP-106 turned it off in 0.11). A broker whose requests
    are stuck shrinks the ISR of every partition it leads to itself on 0.10: stopping it would let the controller elect
    a replica that is behind. The lab sets it off (profile.py); here the topic override turns it on for orders."""
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.remediate.plan import plan_restart, safety_settings
    from kafka_runbooks.remediate.safety import not_serving_evidence, unclean_enabled

    lab, config = on010
    kz = lab.kazoo()
    # 0.10's dynamic topic config (kafka-configs.sh --zookeeper ... --alter --add-config): the config znode and a
    # change notification the brokers apply
    kz.set(f"/config/topics/{ORDERS}", json.dumps({"version": 1, "config": {"min.insync.replicas": "2",
                                                                              "unclean.leader.election.enable": "true"}}).encode())
    kz.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": f"topics/{ORDERS}"}).encode(), sequence=True)
    b = 3
    try:
        lab.hang(b)
        led = [k for k, s in lab.partitions().items() if s["leader"] == b]
        lab.wait_partitions(lambda ps: all(ps[k]["isr"] == [b] for k in led), 60, f"broker {b}'s ISRs to shrink to [{b}]")
        snapshot, hook, kv = observed(lab, config)
        check = hook.check_broker(snapshot.broker(b), 3.0)
        assert not check.ok
        stuck = Finding(kind="jvm_deadlock", severity=Severity.CRITICAL, summary=f"broker {b} is stuck", broker_ids=(b,))
        not_serving = not_serving_evidence([check], [stuck])
        settings = safety_settings(config, {}, version=kv)  # no static config read: the version's default decides
        offsets = next(p for p in snapshot.partitions if p.topic == "__consumer_offsets" and p.leader == b)
        # the stuck broker answers no ApiVersions: its registration's schema (4) says only ">= 0.10.2"; its peers place
        # the cluster before 0.11, so the default is on
        assert unclean_enabled(offsets, snapshot, settings) == (
            True, "Kafka broker 1: >= 0.10.2, < 0.11.0; broker 2: >= 0.10.2, < 0.11.0; broker 3: >= 0.10.2 default, as the "
                  "brokers report their version (on before 0.11, KIP-106)")
        plan = plan_restart(snapshot, [b], config, not_serving=not_serving, settings=settings)
        orders = sorted(p.name for p in snapshot.partitions if p.topic == ORDERS and p.leader == b)
        assert orders and plan.refused
        for name in orders:
            assert any(r.startswith(f"broker {b}: {name}: unclean.leader.election.enable=true (topic override): with broker {b} stopped the "
                                    "controller would elect out-of-sync replica") and "lose every record written since it left the ISR" in r
                       for r in plan.refusals), plan.refusals
        assert any("unclean.leader.election.enable is on (topic override)" in w for w in plan.warnings)
        # the lab's own setting (server.properties: false) lifts the refusal of every partition it covers
        plan = plan_restart(snapshot, [b], config, not_serving=not_serving,
                            settings=safety_settings(config, {r: {"unclean.leader.election.enable": "false"} for r in (1, 2, 3)}, version=kv))
        assert [r for r in plan.refusals if "__consumer_offsets" in r] == [] and all(ORDERS in r for r in plan.refusals), plan.refusals
    finally:
        kz.set(f"/config/topics/{ORDERS}", json.dumps({"version": 1, "config": {"min.insync.replicas": "2"}}).encode())
        kz.create("/config/changes/config_change_", json.dumps({"version": 2, "entity_path": f"topics/{ORDERS}"}).encode(), sequence=True)
        lab.unhang(b)
        lab.wait_full_isr(120)


def test_010_coordinator_gate_uses_offsetfetch_and_0_10s_finished_loading_lines(on010):
    from kafka_runbooks.remediate import gates as G

    lab, config = on010
    b = next(x for x in (2, 1, 3) if x != lab.controller()["brokerid"])
    mine = sorted(p for (t, p), s in lab.partitions(["__consumer_offsets"]).items() if s["replicas"][0] == b)
    lab.stop(b)
    lab.start(b)
    lab.wait_full_isr(120)
    lab.ensure_preferred_leaders(60)  # through /admin/preferred_replica_election: 0.10 has no ElectLeaders
    base = {"bootstrap.servers": bootstrap_all(), "enable.auto.commit": False, "session.timeout.ms": 10000}
    res = G.coordinator_gate(lambda g: {**base, "group.id": g}, mine, 50, timeout_s=120, poll_s=0.5, request_timeout_s=5,
                             broker_log=lambda: lab.log_text(b), led_by_broker=mine)
    d = res.to_dict()
    assert d["probed"] == mine and d["not_corroborated"] == [], d
    assert set(d["finished_loading_lines"]) == {str(p) for p in mine}  # "Finished loading offsets from __consumer_offsets-P in N milliseconds."
