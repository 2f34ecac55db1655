"""The other side of every version branch (kafka_runbooks/versions.py), against the lab's real Kafka 2.3.0 brokers:
what the real 0.10.2.1 lab lacked (recorded before its withdrawal: tests/analyze/fixtures/real0102/), 2.3.0 has -- read from the brokers, not the setting."""

from __future__ import annotations

import dataclasses

import pytest

from kafka_lab.topics import ORDERS

pytestmark = pytest.mark.lab


@pytest.fixture
def on23(healthy_lab, monkeypatch):
    from kafka_runbooks.config import ClusterConfig

    for k, v in healthy_lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    return healthy_lab, ClusterConfig.from_dict("lab", healthy_lab.cluster_settings()["lab"])


def test_23_every_branch_takes_the_newer_side(on23):
    from kafka_runbooks import versions
    from kafka_runbooks.detect.version_check import mismatch_findings
    from kafka_runbooks.host.commands import dump_log_command
    from kafka_runbooks.detect.jmx import kip291_note
    from kafka_runbooks.host.jmxtool import REQUEST_QUEUE, jmxtool_argv
    from kafka_runbooks.detect.leadership_observe import read_hosts
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate.election import method_refusals
    from kafka_runbooks.remediate.gates import canary_leaders
    from kafka_runbooks.remediate.plan import safety_settings
    from kafka_runbooks.remediate.safety import unclean_enabled

    lab, config = on23
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        snapshot = read_snapshot(zk, config.name)
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    # a setting that lies is not believed: the brokers say 2.3
    kv = hook.kafka_version(snapshot.brokers, 5.0, "0.10.2.1")
    assert kv.describe() == ">= 2.3.0, < 2.4.0 (every broker)" and all(kv.has(f) for f in versions.FEATURES)
    assert mismatch_findings(kv, "0.10.2.1")[0].kind == "kafka_version_mismatch"
    assert mismatch_findings(kv, "2.3.0") == []
    # direct check: DescribeConfigs answered with the broker's own id
    assert [(c.ok, c.method, c.answered_by) for c in hook.check_all(snapshot.brokers, 5.0)] == [(True, "DescribeConfigs", b) for b in (1, 2, 3)]
    # metadata views carry the leader epoch (Metadata v7, KIP-320)
    assert all(epoch is not None for v in hook.metadata_views(snapshot.brokers, 5.0) for _, epoch in v.leaders.values())
    # the canary's producer is idempotent (KIP-98)
    results = hook.canary(snapshot.brokers, canary_leaders(snapshot, config.canary.topic), config.canary.topic, 10.0, version=kv)
    assert [(r.ok, r.idempotent, r.duplicates) for r in results] == [(True, True, 0)] * 3, results
    # JmxTool --one-time
    assert "--one-time" in jmxtool_argv(config.kafka_home, "service:jmx:rmi:///jndi/rmi://h:1/jmxrmi", version=kv)
    slow = dataclasses.replace(config, leadership=dataclasses.replace(config.leadership, jmx_timeout_s=90.0))
    m = read_hosts(slow, [snapshot.broker(1)], {1}, version=kv)[0].metrics
    # the tool ran with --one-time and exited with its answer, read with its leading "time" line
    assert m is not None and m.ok and m.get(REQUEST_QUEUE, "Value") is not None, m
    note = kip291_note(kv, None, 500, False)  # 2.2+: the separate control plane exists, needs its listener
    assert "< 2.2" not in note and note.startswith("no control.plane.listener.name")
    # kafka-dump-log.sh (2.0+, KAFKA-6615), run on the broker's host
    seg = str(lab.host_dir(1) / "data" / f"{ORDERS}-0" / "00000000000000000000")
    cmd = dump_log_command(config.kafka_home, [f"{seg}.log", f"{seg}.index"], "d", 120, kv)
    assert cmd.argv[3].endswith("/bin/kafka-dump-log.sh")
    rc, out, err = lab.ssh(1, list(cmd.argv), timeout=120)
    assert rc == 0 and f"Dumping {seg}.log" in out and "baseOffset:" in out, err
    # ElectLeaders exists (KIP-183); unclean election is off by default (KIP-106)
    admin = dataclasses.replace(config, election=dataclasses.replace(config.election, method="admin"))
    assert method_refusals(admin, kv) == []
    p = next(p for p in snapshot.partitions if p.topic == "__consumer_offsets")
    assert unclean_enabled(p, snapshot, safety_settings(config, {}, version=kv))[0] is False
