"""Safety, planner and recovery_status on hand-built snapshots: no I/O."""

from __future__ import annotations

import json

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Broker, ClusterSnapshot, Partition, Plan
from kafka_runbooks.remediate.planner import plan_restart, restart_order
from kafka_runbooks.remediate.recovery import RecoveryTimeout, recovery_status
from kafka_runbooks.remediate.safety import blast_radius, restart_refusals


from snapshot_builders import P, snap  # noqa: E402


CONFIG = ClusterConfig(
    name="c1",
    zk_conn_id="zk_c1",
    hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"},
    restart_command=("sudo", "-n", "systemctl", "restart", "kafka@{broker_id}"),
)

HEALTHY = [
    P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=2),
    P("orders", 1, [2, 3, 1], 2, [2, 3, 1], min_isr=2),
    P("__consumer_offsets", 0, [3, 1, 2], 3, [3, 1, 2]),
]


# ------------------------------------------------------------------ safety

def test_healthy_cluster_any_broker_may_restart():
    for b in (1, 2, 3):
        assert restart_refusals(snap(HEALTHY), b, default_min_isr=2) == []


def test_last_in_sync_holder_of_consumer_offsets_is_refused_and_listed_first():
    parts = [
        P("AAA", 0, [3, 1], 3, [3]),  # "AAA" sorts before "__consumer_offsets" in plain string order
        P("orders", 2, [2, 3], 2, [2, 3], min_isr=2),
        P("__consumer_offsets", 7, [3, 1, 2], 3, [3]),
        P("__consumer_offsets", 19, [1, 2, 3], 1, [1, 2, 3]),
    ]
    refusals = restart_refusals(snap(parts), 3)
    assert refusals[0] == "__consumer_offsets-7: broker 3 is the last in-sync replica (isr=[3])"
    assert refusals[1] == "AAA-0: broker 3 is the last in-sync replica (isr=[3])"
    assert refusals[2] == "orders-2: isr [2,3] would fall to 1 < min.insync.replicas 2"
    assert len(refusals) == 3


def test_incident_002_all_consumer_offsets_holders_dropped_but_one():
    """Only 3 is left in sync for __consumer_offsets-19 (1 and 2 already restarted / out)."""
    parts = [P("__consumer_offsets", 19, [1, 2, 3], 3, [3])]
    assert restart_refusals(snap(parts), 3) == ["__consumer_offsets-19: broker 3 is the last in-sync replica (isr=[3])"]
    assert restart_refusals(snap(parts), 1) == []  # 1 is not in the ISR: restarting it removes nothing


def test_other_isr_member_not_registered_does_not_count():
    parts = [P("__consumer_offsets", 3, [1, 2, 3], 3, [3, 2])]
    (why,) = restart_refusals(snap(parts, brokers=(1, 3)), 3)
    assert why.startswith("__consumer_offsets-3: broker 3 is the last in-sync replica (isr=[3,2])")
    assert "[2] are not registered" in why


def test_min_isr_cluster_default_and_topic_override():
    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2])]
    assert restart_refusals(snap(parts), 2) == []
    assert restart_refusals(snap(parts), 2, default_min_isr=2) == [
        "orders-0: isr [1,2] would fall to 1 < min.insync.replicas 2 (cluster default)"
    ]
    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=3)]
    assert restart_refusals(snap(parts), 2, default_min_isr=1) == [
        "orders-0: isr [1,2,3] would fall to 2 < min.insync.replicas 3"
    ]


def test_deadlocked_broker_not_in_isr_is_allowed():
    """Broker 3 is registered but was dropped from every ISR (deadlocked): restarting it takes
    nothing out of any ISR."""
    parts = [P("orders", i, [1, 2, 3], 1 + i % 2, [1, 2], min_isr=2) for i in range(4)]
    parts.append(P("__consumer_offsets", 0, [3, 1, 2], 1, [1, 2]))
    assert restart_refusals(snap(parts), 3, default_min_isr=2) == []


def test_unknown_broker_refused():
    (why,) = restart_refusals(snap(HEALTHY), 42)
    assert "broker 42 is not registered" in why


def test_unreadable_partition_metadata_refuses():
    s = snap(HEALTHY, unparsable=["/brokers/topics/orders/partitions/9/state: invalid JSON: Expecting value"])
    (why,) = restart_refusals(s, 2)
    assert "cannot verify" in why and "/brokers/topics/orders/partitions/9/state" in why
    # a garbled registration of another broker does not hide any ISR
    assert restart_refusals(snap(HEALTHY, unparsable=["/brokers/ids/abc: broker id 'abc' is not ..."]), 2) == []


def test_blast_radius_consumer_offsets_first_and_leadership():
    lines = blast_radius(snap(HEALTHY), 3)
    assert lines[0].startswith("__consumer_offsets-0: loses in-sync replica 3 (isr [3,1,2] -> [1,2]); leadership moves off broker 3")
    assert lines[1:] == [
        "orders-0: loses in-sync replica 3 (isr [1,2,3] -> [1,2])",
        "orders-1: loses in-sync replica 3 (isr [2,3,1] -> [2,1])",
    ]
    # a broker out of every ISR and leading nothing has no blast radius
    assert blast_radius(snap([P("t", 0, [1, 2, 3], 1, [1, 2])]), 3) == []


# ------------------------------------------------------------------ planner

def test_plan_controller_last_and_argv():
    plan = plan_restart(snap(HEALTHY, controller=2), [2, 3, 1, 3], CONFIG)
    assert [s.broker_id for s in plan.steps] == [3, 1, 2]
    assert plan.steps[0].command == ("sudo", "-n", "systemctl", "restart", "kafka@3")
    assert all(s.action == "restart_broker" for s in plan.steps)
    assert "controller" in plan.steps[-1].reason
    assert "re-checks" in plan.steps[0].reason
    assert not plan.refused
    assert plan.blast_radius[0].startswith("broker 3 down: __consumer_offsets-0")
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert restart_order(snap(HEALTHY, controller=None), [3, 1]) == [3, 1]


def test_plan_refused_names_broker_and_partition():
    parts = HEALTHY + [P("__consumer_offsets", 7, [3, 1, 2], 3, [3])]
    plan = plan_restart(snap(parts), [3], CONFIG)
    assert plan.refused
    assert plan.refusals == ("broker 3: __consumer_offsets-7: broker 3 is the last in-sync replica (isr=[3])",)
    assert [s.broker_id for s in plan.steps] == [3]  # steps still shown to the human


def test_plan_refuses_missing_ssh_connection_empty_list_and_other_cluster():
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1"})
    plan = plan_restart(snap(HEALTHY), [2], cfg)
    assert any("no SSH connection for broker 2" in r for r in plan.refusals)
    assert plan_restart(snap(HEALTHY), [], CONFIG).refusals == ("no broker to restart",)
    other = ClusterConfig(name="c2", zk_conn_id="zk", hosts={1: "a", 2: "b", 3: "c"})
    assert any("cluster 'c1'" in r for r in plan_restart(snap(HEALTHY), [1], other).refusals)


def test_plan_uses_cluster_default_min_isr():
    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2])]
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "a", 2: "b", 3: "c"}, min_insync_replicas=2)
    plan = plan_restart(snap(parts), [2], cfg)
    assert plan.refusals == ("broker 2: orders-0: isr [1,2] would fall to 1 < min.insync.replicas 2 (cluster default)",)


# ------------------------------------------------------------------ recovery

def test_recovery_status():
    before = ["orders-0", "orders-1", "__consumer_offsets-0"]
    down = snap([P("orders", 0, [1, 2, 3], 1, [1, 2]), P("orders", 1, [2, 3, 1], 2, [2, 1])], brokers=(1, 2))
    done, waiting = recovery_status(down, 3, before)
    assert not done
    assert waiting[0] == "broker 3 to register in ZooKeeper (/brokers/ids/3)"
    assert any(w.startswith("orders-0: broker 3 to rejoin the ISR") for w in waiting)
    assert "__consumer_offsets-0: partition state readable in ZooKeeper again" in waiting

    catching_up = snap(HEALTHY[:1] + [P("orders", 1, [2, 3, 1], 2, [2, 1])] + HEALTHY[2:])
    done, waiting = recovery_status(catching_up, 3, before)
    assert not done and len(waiting) == 1 and waiting[0].startswith("orders-1: broker 3 to rejoin the ISR")

    assert recovery_status(snap(HEALTHY), 3, before) == (True, [])


def test_recovery_timeout_message():
    exc = RecoveryTimeout(3, 2.0, ["orders-1: broker 3 to rejoin the ISR"])
    assert exc.waiting_for == ["orders-1: broker 3 to rejoin the ISR"]
    assert "broker 3 did not recover within 2s" in str(exc) and "orders-1" in str(exc)
