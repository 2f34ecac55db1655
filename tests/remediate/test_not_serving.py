"""A broker confirmed not serving may be restarted although it is the last in-sync replica of the
partitions it leads (they are unavailable already); a serving one may not."""

from kafka_runbooks.model import Finding, Severity
from kafka_runbooks.remediate.planner import plan_restart
from kafka_runbooks.remediate.safety import not_serving_from, restart_refusals

from snapshot_builders import P, snap
from test_remediate_pure import CONFIG

# seed 001 on brokers 1,2,3: broker 3 deadlocked; peers dropped it, its own partitions have ISR [3]
SEED_001 = [
    P("__consumer_offsets", 2, [3, 1, 2], 3, [3]),
    P("__consumer_offsets", 0, [1, 2, 3], 1, [1, 2]),
    P("orders", 2, [3, 1, 2], 3, [3], min_isr=2),
    P("orders", 0, [1, 2, 3], 1, [1, 2], min_isr=2),
]


def unresponsive(broker):
    return Finding(kind="broker_unresponsive", severity=Severity.CRITICAL, summary=f"broker {broker} is registered but not serving", broker_ids=(broker,))


def test_serving_last_holder_is_refused_naming_consumer_offsets_first():
    refusals = restart_refusals(snap(SEED_001), 3)
    assert refusals[0].startswith("__consumer_offsets-2: broker 3 is the last in-sync replica")
    assert any(r.startswith("orders-2:") for r in refusals)


def test_not_serving_broker_is_allowed_and_its_partitions_are_in_the_blast_radius():
    evidence = not_serving_from([unresponsive(3)])
    assert restart_refusals(snap(SEED_001), 3, not_serving=evidence[3]) == []
    plan = plan_restart(snap(SEED_001), [3], CONFIG, not_serving=evidence)
    assert not plan.refused and [s.broker_id for s in plan.steps] == [3]
    radius = "\n".join(plan.blast_radius)
    assert "__consumer_offsets-2: loses in-sync replica 3 (isr [3] -> []); already unavailable" in radius
    assert "orders-2: loses in-sync replica 3 (isr [3] -> []); already unavailable" in radius
    assert radius.index("__consumer_offsets-2") < radius.index("orders-2")


def test_only_fresh_unresponsive_findings_count_as_not_serving():
    other = Finding(kind="jvm_deadlock", severity=Severity.CRITICAL, summary="old analysis", broker_ids=(3,))
    urp = Finding(kind="under_replicated_partitions", severity=Severity.WARNING, summary="urp", broker_ids=(3,))
    assert not_serving_from([other, urp]) == {}
    assert restart_refusals(snap(SEED_001), 3, not_serving=not_serving_from([other, urp]).get(3))


def test_not_serving_does_not_waive_min_insync_on_partitions_still_holding_it():
    parts = [P("orders", 5, [1, 3], 1, [1, 3], min_isr=2)]
    assert restart_refusals(snap(parts), 3, not_serving="stuck") == ["orders-5: isr [1,3] would fall to 1 < min.insync.replicas 2"]
