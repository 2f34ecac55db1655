"""Detectors on hand-built snapshots: no I/O."""

from __future__ import annotations

import json

from kafka_runbooks.detect.detectors import Thresholds, blame, broken_links, detect
from kafka_runbooks.model import Broker, ClusterSnapshot, Finding, HostProbe, Partition, Severity


from snapshot_builders import P, snap  # noqa: E402


def healthy_partitions():
    out = []
    for i in range(6):
        r = [1 + (i + k) % 3 for k in range(3)]
        out.append(P("orders", i, r, r[0], r))
        out.append(P("__consumer_offsets", i, r, r[0], r))
    return out


def seed001():
    """Seed 001 shape: broker 3 deadlocked -- peers dropped it, partitions it leads have Isr: 3."""
    parts = []
    for i in range(6):
        r = [1 + (i + k) % 3 for k in range(3)]
        leader = r[0]
        isr = [3] if leader == 3 else [b for b in r if b != 3]
        parts.append(P("st.topic.yery.test", i, r, leader, isr))
    parts.append(P("__consumer_offsets", 7, [3, 1, 2], 3, [3]))
    # figures from the post-mortem: 5,589 sockets on :9092 (mostly CLOSE_WAIT) vs 77 / 324; lsof 326,639 vs ~12,800
    probes = [
        HostProbe(1, True, pid=13517, process_alive=True, open_files=12_800, connection_states={"CLOSE_WAIT": 77}),
        HostProbe(2, True, pid=13557, process_alive=True, open_files=12_900, connection_states={"CLOSE_WAIT": 324}),
        HostProbe(3, True, pid=81068, process_alive=True, open_files=326_639, connection_states={"CLOSE_WAIT": 5589}),
    ]
    return snap(parts, probes=probes)


def kinds(findings):
    return [f.kind for f in findings]


def assert_serialisable(findings):
    for f in findings:
        d = f.to_dict()
        assert Finding.from_dict(json.loads(json.dumps(d, allow_nan=False))) == Finding.from_dict(d)


def test_healthy_cluster_has_no_finding():
    s = snap(healthy_partitions(), probes=[HostProbe(b, True, open_files=12_000, connection_states={"CLOSE_WAIT": 3}) for b in (1, 2, 3)])
    assert detect(s) == []


def test_seed001_flags_broker_3_only():
    findings = detect(seed001())
    assert_serialisable(findings)
    unresp = [f for f in findings if f.kind == "broker_unresponsive"]
    assert [f.broker_ids for f in unresp] == [(3,)]
    f = unresp[0]
    assert f.severity is Severity.CRITICAL
    # partitions led by 3 whose ISR is only [3] are named, __consumer_offsets first
    assert f.details["led_with_isr_only_itself"][0] == "__consumer_offsets-7"
    assert set(f.details["led_with_isr_only_itself"]) == {"__consumer_offsets-7", "st.topic.yery.test-2", "st.topic.yery.test-5"}
    assert f.details["dropped_by"] == [1, 2]
    assert f.details["probe"]["close_wait"]["value"] == 5589
    assert f.details["probe"]["close_wait"]["peer_values"] == [77, 324]
    assert f.details["probe"]["open_files"]["value"] == 326_639
    sources = [e.source for e in f.evidence]
    assert "zookeeper:/brokers/topics/st.topic.yery.test/partitions/0/state" in sources
    assert "probe:broker/3" in sources
    state = next(e for e in f.evidence if e.source.endswith("st.topic.yery.test/partitions/0/state"))
    assert json.loads(state.excerpt)["isr"] == [1, 2]
    assert "5589" in f.summary
    # the symptoms are also reported as URP, never as a finding against 1 or 2
    assert "under_replicated_partitions" in kinds(findings)
    assert kinds(findings)[0] == "broker_unresponsive"


def test_isolated_leader_alone_is_blamed_on_the_leader():
    """Exactly seed 001's `kafka-topics --describe`: peers still list 3 in their ISRs, but the
    partitions 3 leads show Isr: 3 -- the broken side is 3, not the followers."""
    parts = [P("t", 0, [1, 2, 3], 1, [1, 2, 3]), P("t", 1, [3, 1, 2], 3, [3]), P("t", 2, [2, 3, 1], 2, [2, 3, 1]), P("t", 3, [3, 2, 1], 3, [3])]
    findings = detect(snap(parts))
    unresp = [f for f in findings if f.kind == "broker_unresponsive"]
    assert [f.broker_ids for f in unresp] == [(3,)]
    assert unresp[0].details["led_with_isr_only_itself"] == ["t-1", "t-3"]


def test_probe_outlier_alone_flags_the_broker():
    probes = [HostProbe(1, True, connection_states={"CLOSE_WAIT": 77}), HostProbe(2, True, connection_states={"CLOSE_WAIT": 324}),
              HostProbe(3, True, connection_states={"CLOSE_WAIT": 5589})]
    findings = detect(snap(healthy_partitions(), probes=probes))
    assert kinds(findings) == ["broker_unresponsive"]
    assert findings[0].broker_ids == (3,)


def test_probe_thresholds_configurable_and_absolute_minimum():
    probes = [HostProbe(1, True, connection_states={"CLOSE_WAIT": 2}), HostProbe(2, True, connection_states={"CLOSE_WAIT": 3}),
              HostProbe(3, True, connection_states={"CLOSE_WAIT": 60})]
    assert detect(snap(healthy_partitions(), probes=probes)) == []  # 20x but below the absolute minimum
    found = detect(snap(healthy_partitions(), probes=probes), Thresholds(close_wait_min=50))
    assert [f.broker_ids for f in found] == [(3,)]


def test_offline_partitions_one_finding():
    parts = healthy_partitions() + [P("orders", 10, [4, 5], 4, [4]), P("orders", 11, [1, 2], -1, [])]
    findings = detect(snap(parts))
    off = [f for f in findings if f.kind == "offline_partitions"]
    assert len(off) == 1
    assert set(off[0].partitions) == {"orders-10", "orders-11"}
    assert off[0].severity is Severity.CRITICAL
    assert off[0].broker_ids == (4,)
    assert_serialisable(findings)


def test_under_replicated_one_finding_lists_partitions():
    parts = healthy_partitions()
    parts[0] = P("orders", 0, [1, 2, 3], 1, [1, 2])
    parts[3] = P("__consumer_offsets", 1, [2, 3, 1], 2, [2, 1])
    s = snap(parts, brokers=(1, 2))  # 3 is not registered: crashed, not "unresponsive while registered"
    findings = detect(s)
    assert "broker_unresponsive" not in kinds(findings)
    urp = [f for f in findings if f.kind == "under_replicated_partitions"]
    assert len(urp) == 1
    assert urp[0].partitions[0] == "__consumer_offsets-1"
    assert "orders-0" in urp[0].partitions


def test_unparsable_and_unreachable_are_reported():
    s = snap(
        healthy_partitions(),
        probes=[HostProbe(2, False, error="timed out"), HostProbe(9, False, error="not a broker")],
        unparsable=["/brokers/topics/x/partitions/0/state: invalid JSON: Expecting value"],
    )
    findings = detect(s)
    assert sorted(kinds(findings)) == ["host_unreachable", "unparsable"]
    unr = next(f for f in findings if f.kind == "host_unreachable")
    assert unr.broker_ids == (2,) and unr.severity is Severity.WARNING and "timed out" in unr.summary
    unp = next(f for f in findings if f.kind == "unparsable")
    assert unp.evidence[0].source == "zookeeper:/brokers/topics/x/partitions/0/state"
    assert_serialisable(findings)


def test_blame_prefers_the_common_broker_and_ties_go_to_probe_then_follower():
    assert blame([(1, 3), (2, 3)]) == [3]
    assert blame([(3, 1), (3, 2)]) == [3]
    assert blame([(1, 3)]) == [3]
    assert blame([(1, 3)], suspects_first=[1]) == [1]
    s = seed001()
    assert set(broken_links(s)) == {(1, 3), (2, 3), (3, 1), (3, 2)}
