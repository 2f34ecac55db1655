"""Safety rules, the planner and recovery_status on hand-built snapshots: no I/O."""

from __future__ import annotations

import json

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Finding, KafkaCheck, Plan, Severity
from kafka_runbooks.remediate.digest import plan_digest, state_digest
from kafka_runbooks.remediate.plan import plan_restart, restart_order
from kafka_runbooks.remediate.recovery import recovery_status
from kafka_runbooks.remediate.safety import (
    SafetySettings,
    blast_radius,
    min_isr,
    not_serving_evidence,
    stop_refusals,
    unclean_enabled,
)

from snapshot_builders import P, snap  # noqa: E402

CONFIG = ClusterConfig(name="c1", zk_conn_id="zk_c1", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"}, kafka_version="2.3.0")
V23 = SafetySettings(kafka_version="2.3.0")

HEALTHY = [
    P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=2),
    P("orders", 1, [2, 3, 1], 2, [2, 3, 1], min_isr=2),
    P("__consumer_offsets", 0, [3, 1, 2], 3, [3, 1, 2]),
]


# ------------------------------------------------------------------ safety

def test_healthy_cluster_any_broker_may_stop():
    for b in (1, 2, 3):
        assert stop_refusals(snap(HEALTHY), b, SafetySettings(min_isr=2)) == []


def test_last_in_sync_holder_refused_internal_topics_first():
    parts = [
        P("AAA", 0, [3, 1], 3, [3, 1]),
        P("orders", 2, [2, 3], 2, [2, 3], min_isr=2),
        P("__transaction_state", 1, [3], 3, [3]),
        P("__consumer_offsets", 7, [3, 1, 2], 3, [3, 1, 2]),
    ]
    # broker 1 and 2 are not registered: everything broker 3 holds is its alone
    refusals = stop_refusals(snap(parts, brokers=(3,), controller=3), 3)
    body = [r for r in refusals if not r.endswith("are back in sync")]
    assert body[0] == "__consumer_offsets-7: broker 3 is the last in-sync replica (isr=[3,1,2]); isr members [1,2] are not registered"
    assert body[1] == "__transaction_state-1: broker 3 is the only replica (replication factor 1); stopping it takes the partition offline"
    assert body[2].startswith("AAA-0: broker 3 is the last in-sync replica")
    assert body[3] == "orders-2: broker 3 is the last in-sync replica (isr=[2,3]); isr members [2] are not registered"


def test_incident_002_keep_one_offsets_holder():
    """Brokers 1 and 2 were restarted and are still out of sync: 3 holds __consumer_offsets-19 alone."""
    parts = [P("__consumer_offsets", 19, [1, 2, 3], 3, [3])]
    refusals = stop_refusals(snap(parts), 3)
    assert "__consumer_offsets-19: broker 3 is the last in-sync replica (isr=[3])" in refusals
    # and nobody else may be stopped either while the partition is under-replicated
    assert stop_refusals(snap(parts), 1) == ["__consumer_offsets-19 is under-replicated (isr [3], replicas [1,2,3]): wait until [2] are back in sync"]


def test_under_replicated_elsewhere_blocks_but_own_missing_replica_does_not():
    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2]), P("orders", 1, [2, 3, 1], 2, [2, 3, 1])]
    assert stop_refusals(snap(parts), 3) == []  # 3 is the one missing: restarting it is how it comes back
    (why,) = stop_refusals(snap(parts), 2)
    assert why.startswith("orders-0 is under-replicated") and "wait until [3]" in why


def test_dead_broker_may_be_restarted_others_not():
    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2]), P("__consumer_offsets", 0, [3, 1, 2], 1, [1, 2])]
    s = snap(parts, brokers=(1, 2))
    assert stop_refusals(s, 3) == []
    assert all("under-replicated" in r for r in stop_refusals(s, 1))


def test_min_isr_sources_in_order():
    p = P("orders", 0, [1, 2, 3], 1, [1, 2, 3])
    s = snap([p])
    assert min_isr(p, s, SafetySettings()) == (1, "Kafka default")
    assert min_isr(p, s, SafetySettings(min_isr=2)) == (2, "cluster setting")
    static = SafetySettings(min_isr=1, static_configs={1: {"min.insync.replicas": "2"}, 2: {"min.insync.replicas": "3"}})
    assert min_isr(p, s, static) == (3, "broker config")
    dyn = snap([p], broker_configs={"<default>": {"min.insync.replicas": "2"}})
    assert min_isr(p, dyn, static) == (2, "dynamic broker default")
    q = P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=3)
    assert min_isr(q, dyn, static) == (3, "topic override")
    assert stop_refusals(snap([q]), 2) == ["orders-0: isr [1,2,3] would fall to 2 < min.insync.replicas 3 (topic override)"]
    assert stop_refusals(dyn, 2) == []
    assert stop_refusals(snap([P("orders", 0, [1, 2], 1, [1, 2])], broker_configs={"<default>": {"min.insync.replicas": "2"}}), 2) == [
        "orders-0: isr [1,2] would fall to 1 < min.insync.replicas 2 (dynamic broker default)"
    ]


def test_maintenance_in_progress_and_controller_moving_refuse():
    assert any("reassignment is in progress" in r for r in stop_refusals(snap(HEALTHY, reassigning=("orders-0",)), 2))
    assert any("preferred replica election" in r for r in stop_refusals(snap(HEALTHY, preferred_election_pending=("orders-1",)), 2))
    assert any("controller is moving" in r for r in stop_refusals(snap(HEALTHY, controller=None), 2))
    assert any("controller 7 is not registered" in r for r in stop_refusals(snap(HEALTHY, controller=7), 2))


def test_unreadable_metadata_refuses():
    s = snap(HEALTHY, unparsable=["/brokers/topics/orders/partitions/9/state: invalid JSON: Expecting value"])
    (why,) = stop_refusals(s, 2)
    assert "cannot verify" in why and "/brokers/topics/orders/partitions/9/state" in why
    assert stop_refusals(snap(HEALTHY, unparsable=["/brokers/ids/abc: broker id 'abc' is not ..."]), 2) == []


def test_unclean_election_sources_and_version_default():
    p = P("t", 0, [1, 2], 1, [1, 2])
    assert unclean_enabled(p, snap([p]), SafetySettings(kafka_version="0.10.1.0")) == (True, "Kafka 0.10.1.0 default")
    assert unclean_enabled(p, snap([p]), V23) == (False, "Kafka 2.3.0 default")
    assert unclean_enabled(p, snap([p]), SafetySettings())[0] is True
    assert unclean_enabled(p, snap([p], broker_configs={"<default>": {"unclean.leader.election.enable": "true"}}), V23) == (True, "dynamic broker default")
    q = P("t", 0, [1, 2], 1, [1, 2], unclean=False)
    assert unclean_enabled(q, snap([q], broker_configs={"<default>": {"unclean.leader.election.enable": "true"}}), V23) == (False, "topic override")


def test_blast_radius_names_coordinator_moves():
    lines = blast_radius(snap(HEALTHY), 3)
    assert lines[0] == "__consumer_offsets-0: loses in-sync replica 3 (isr [3,1,2] -> [1,2]); group coordinator and leadership move off broker 3 (to one of [1,2])"
    assert lines[1:] == ["orders-0: loses in-sync replica 3 (isr [1,2,3] -> [1,2])", "orders-1: loses in-sync replica 3 (isr [2,3,1] -> [2,1])"]
    assert blast_radius(snap([P("t", 0, [1, 2, 3], 1, [1, 2])]), 3) == []


# ------------------------------------------------------------------ the not-serving waiver

def _check(b, ok):
    return KafkaCheck(broker_id=b, endpoint=f"kafka{b}:9092", ok=ok, error=None if ok else "timed out")


def _finding(kind, b):
    return Finding(kind=kind, severity=Severity.CRITICAL, summary=f"{kind} on broker {b}", broker_ids=(b,))


def test_waiver_needs_a_failed_check_and_a_stuck_finding_together():
    assert not_serving_evidence([_check(3, False)], [_finding("jvm_deadlock", 3)]).keys() == {3}
    assert not_serving_evidence([_check(3, False)], [_finding("request_handling_stalled", 3)]).keys() == {3}
    assert not_serving_evidence([_check(3, True)], [_finding("jvm_deadlock", 3)]) == {}
    assert not_serving_evidence([_check(3, False)], [_finding("broker_unresponsive", 3), _finding("under_replicated_partitions", 3)]) == {}
    assert not_serving_evidence([_check(3, False)], [_finding("jvm_deadlock", 2)]) == {}
    evidence = not_serving_evidence([_check(3, False)], [_finding("jvm_deadlock", 3)])[3]
    assert "direct check failed (timed out)" in evidence and "jvm_deadlock" in evidence


SEED_001 = [  # the lab's picture of seed 001: broker 3 deadlocked, peers dropped it, its partitions have ISR [3]
    P("__consumer_offsets", 2, [3, 1, 2], 3, [3]),
    P("__consumer_offsets", 0, [1, 2, 3], 1, [1, 2]),
    P("orders", 2, [3, 1, 2], 3, [3], min_isr=2),
    P("orders", 0, [1, 2, 3], 1, [1, 2], min_isr=2),
]


def test_not_serving_last_holder_may_restart_with_evidence_only():
    assert stop_refusals(snap(SEED_001), 3, V23)  # no evidence: the last in-sync replica is protected
    assert stop_refusals(snap(SEED_001), 3, V23, {3: "stuck"}) == []
    plan = plan_restart(snap(SEED_001), [3], CONFIG, kind="incident_restart", not_serving={3: "stuck"})
    assert not plan.refused and plan.broker_order == (3,)
    radius = "\n".join(plan.steps[0].blast_radius)  # a small plan carries every line
    assert plan.steps[0].blast_radius == plan.detail.effects[3]
    assert "__consumer_offsets-2: loses in-sync replica 3 (isr [3] -> []); already unavailable" in radius
    assert radius.index("__consumer_offsets-2") < radius.index("orders-2")


def test_waiver_never_for_rf1_and_min_isr_waived_only_for_a_broker_that_does_not_serve():
    assert stop_refusals(snap([P("solo", 0, [3], 3, [3])]), 3, V23, {3: "stuck"}) == [
        "solo-0: broker 3 is the only replica (replication factor 1): the not-serving waiver never applies"
    ]
    # a serving broker 3: its stop takes orders-5 below min.insync.replicas -- refused
    assert stop_refusals(snap([P("orders", 5, [1, 3], 1, [1, 3], min_isr=2)]), 3, V23) == [
        "orders-5: isr [1,3] would fall to 1 < min.insync.replicas 2 (topic override)"
    ]
    # broker 3 does not serve (the bench's hung leader: orders-5 led by 3, isr [3,2], min ISR 2): it is no holder, so
    # its stop leaves the serving holders there are now; refused, the restart never followed and the partition stayed
    # down. The plan says it stays below min ISR until 3 is back in sync.
    for leader, isr in ((1, [1, 3]), (3, [3, 2])):
        s = snap([P("orders", 5, [1, 2, 3], leader, isr, min_isr=2)])
        assert stop_refusals(s, 3, V23, {3: "stuck"}) == [], (leader, isr)
        line = blast_radius(s, 3, {3: "stuck"}, V23)[0]
        assert "below min.insync.replicas 2 until broker 3 is back in sync" in line and "acks=all writes are refused" in line
        assert not any("below min.insync" in x for x in blast_radius(s, 3, {}, V23))  # a serving broker is refused instead


def test_waiver_refused_where_unclean_election_would_lose_data():
    s = snap(SEED_001, broker_configs={"<default>": {"unclean.leader.election.enable": "true"}})
    refusals = stop_refusals(s, 3, V23, {3: "stuck"})
    assert refusals and all("unclean.leader.election.enable=true (dynamic broker default)" in r for r in refusals)
    assert refusals[0].startswith("__consumer_offsets-2: ") and "elect out-of-sync replica [1,2]" in refusals[0]


def test_another_stuck_in_sync_replica_does_not_count_as_serving():
    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2, 3])]
    assert stop_refusals(snap(parts), 1, V23, {2: "stuck", 3: "stuck"}) == [
        "orders-0: the other in-sync replicas [2,3] are not serving; broker 1 is the last one that serves "
        "(broker 2: stuck; broker 3: stuck)"
    ]


# ------------------------------------------------------------------ planner

def test_plan_order_not_serving_then_down_then_rest_controller_last():
    parts = [P("orders", 0, [1, 2, 3, 4, 5], 1, [1, 2, 3, 4])]
    s = snap(parts, brokers=(1, 2, 3, 4), controller=2)
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={b: f"h{b}" for b in range(1, 6)})
    assert restart_order(s, [2, 1, 5, 3, 4, 1], {4: "stuck"}) == [4, 5, 1, 3, 2]
    plan = plan_restart(s, [2, 1, 5, 3, 4], cfg, not_serving={4: "stuck"})
    assert plan.broker_order == (4, 5, 1, 3, 2)
    assert "not serving" in plan.steps[0].reason and "not registered" in plan.steps[1].reason and "controller" in plan.steps[-1].reason
    # broker 5 is down: later steps are predicted on the state after it is back, so none is refused for it
    assert not plan.refused, plan.refusals


def test_plan_roundtrip_digest_and_refusals_carry_reasons():
    plan = plan_restart(snap(HEALTHY, controller=2), [2, 3, 1, 3], CONFIG)
    assert plan.broker_order == (3, 1, 2) and not plan.refused
    assert plan.steps[0].blast_radius[0].startswith("__consumer_offsets-0")
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan
    assert plan.state_digest == state_digest(snap(HEALTHY, controller=2))
    other = plan_restart(snap(HEALTHY[:2], controller=2), [2, 3, 1], CONFIG)
    assert other.state_digest != plan.state_digest and plan_digest(other) != plan_digest(plan)

    refused = plan_restart(snap(HEALTHY + [P("__consumer_offsets", 7, [3, 1, 2], 3, [3])]), [3], CONFIG)
    assert refused.refused and refused.steps[0].refusals
    assert "broker 3: __consumer_offsets-7: broker 3 is the last in-sync replica (isr=[3])" in refused.refusals
    assert refused.refusals[0].startswith("broker 3: __consumer_offsets-7 is under-replicated")  # cluster-wide reasons first


def test_plan_refuses_unknown_broker_empty_list_other_cluster_and_completed():
    plan = plan_restart(snap(HEALTHY), [4], CONFIG)
    assert any("no SSH connection for broker 4" in r for r in plan.refusals)
    assert plan_restart(snap(HEALTHY), [], CONFIG).refusals == ("no broker to restart",)
    other = ClusterConfig(name="c2", zk_conn_id="zk", hosts={1: "a", 2: "b", 3: "c"})
    assert any("cluster 'c1'" in r for r in plan_restart(snap(HEALTHY), [1], other).refusals)
    resumed = plan_restart(snap(HEALTHY), [1, 2, 3], CONFIG, completed=[1, 3])
    assert resumed.broker_order == (2,) and resumed.completed == (1, 3)
    assert "already restarted" in plan_restart(snap(HEALTHY), [1], CONFIG, completed=[1]).refusals[0]


def test_plan_warns_what_unclean_election_would_lose():
    plan = plan_restart(snap(HEALTHY), [1], ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "a"}, kafka_version="0.10.1.0"))
    assert plan.warnings and "unclean.leader.election.enable is on (Kafka 0.10.1.0 default) for 3 partition(s)" in plan.warnings[0]
    assert plan_restart(snap(HEALTHY), [1], CONFIG).warnings == ()


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



# ------------------------------------------------------------------ issue 17 §1: a holder must be serving

def _silent(*brokers):
    from kafka_runbooks.remediate.safety import unanswered

    return unanswered(KafkaCheck(b, f"kafka{b}:9092", ok=False, error="no answer within 5s: _TIMED_OUT", at="2024-01-01T00:00:01Z")
                      for b in brokers)


def test_issue_17_registered_in_isr_not_answering_is_no_holder():
    """Brokers {1,2}, __consumer_offsets-0 ISR [2,1], broker 1 hung: stopping 2 leaves no serving holder (incident 002)."""
    from kafka_runbooks.remediate.safety import holders_to_check

    s = snap([P("__consumer_offsets", 0, [2, 1], 2, [2, 1])], brokers=(1, 2), controller=1)
    assert holders_to_check(s, 2) == [1] and holders_to_check(s, 1) == [2]
    (why,) = stop_refusals(s, 2, V23, {}, _silent(1))
    assert why.startswith("__consumer_offsets-0: the other in-sync replicas [1] are not serving; broker 2 is the last one that serves")
    assert "broker 1: did not answer a direct Kafka-protocol check at 2024-01-01T00:00:01Z on kafka1:9092" in why
    assert stop_refusals(s, 1, V23, {}, _silent(1)) == []  # the hung one itself may go: 2 serves
    # min ISR counts only holders that serve
    s3 = snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=2)])
    (why,) = stop_refusals(s3, 2, V23, {}, _silent(1))
    assert why.startswith("orders-0: isr [1,2,3] would keep 1 serving replica(s) [3] < min.insync.replicas 2 (topic override)")
    assert stop_refusals(s3, 2, V23, {}, _silent(3)) != [] and stop_refusals(s3, 2, V23) == []


def test_issue_17_plan_restarts_a_silent_broker_first_and_says_so():
    s = snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=2)], controller=3)
    refused = plan_restart(s, [2], CONFIG, unresponsive=_silent(1))
    assert refused.refused and "a holder that does not answer is not a holder" in refused.refusals[0]
    assert refused.warnings[0].startswith("broker 1 is not a holder now: did not answer a direct Kafka-protocol check")
    plan = plan_restart(s, [2, 1, 3], CONFIG, unresponsive=_silent(1))
    assert plan.broker_order == (1, 2, 3) and not plan.refused, plan.refusals  # 1 first; then it is expected to serve
    assert "is not a holder now" in plan.steps[0].reason


def test_issue_17_min_isr_unknown_refuses_and_per_broker_overrides_count():
    from kafka_runbooks.remediate.plan import safety_settings

    parts = [P("orders", 0, [1, 2, 3], 1, [1, 2, 3])]
    unread = safety_settings(CONFIG, {1: {}, 2: {}}, {3: "ssh: connection refused"})
    (why,) = stop_refusals(snap(parts), 2, unread)
    assert why == ("orders-0: min.insync.replicas is unknown (unknown for broker 3: ssh: connection refused): cannot prove "
                   "the stop keeps the partition writable")
    assert min_isr(parts[0], snap(parts), unread) == (None, "unknown for broker 3: ssh: connection refused")
    # a dynamic config decides without the file: the broker's own override beats the cluster-wide default
    s = snap(parts, broker_configs={"<default>": {"min.insync.replicas": "1"}, "3": {"min.insync.replicas": "3"}})
    assert min_isr(parts[0], s, unread) == (3, "dynamic config of broker 3")
    assert stop_refusals(s, 2, unread) == ["orders-0: isr [1,2,3] would fall to 2 < min.insync.replicas 3 (dynamic config of broker 3)"]
    assert stop_refusals(snap(parts, broker_configs={"3": {"min.insync.replicas": "2"}}), 2, unread) == []
    # an unread file counts as unclean election on (cannot be proven off)
    assert unclean_enabled(parts[0], snap(parts), unread) == (True, "unknown for broker 3: ssh: connection refused: assumed on")


def test_issue_17_open_incidents_count_until_the_broker_registers_again():
    import dataclasses

    from kafka_runbooks.model import Broker
    from kafka_runbooks.remediate.safety import incident_evidence

    s = snap(HEALTHY)
    s = dataclasses.replace(s, brokers=tuple(dataclasses.replace(b, registered_at="2024-01-01T00:00:00Z") for b in s.brokers))
    record = {"id": "c1-1", "status": "needs_person", "opened_at": "2024-01-01T01:00:00Z",
              "trigger": {"kind": "broker_unresponsive", "broker_ids": [1], "summary": "broker 1 does not answer",
                          "details": {"problem": "broker_not_serving"}}}
    ev = incident_evidence([record], s)
    assert list(ev) == [1] and ev[1].startswith("open incident c1-1 (needs_person, opened 2024-01-01T01:00:00Z) says it is not serving")
    assert incident_evidence([{**record, "status": "resolved"}], s) == {}
    assert incident_evidence([{**record, "trigger": {"kind": "rolling_restart"}}], s) == {}
    later = dataclasses.replace(s, brokers=tuple(Broker(b.id, b.host, b.port, registered_at="2024-01-01T02:00:00Z") for b in s.brokers))
    assert incident_evidence([record], later) == {}  # restarted since: the finding is about its previous life


def test_a_process_reads_as_a_person_reads_it_in_the_kill_line():
    """Issue 32 point 7: the kill line said ``process [{'pid': 7, 'state': 'S', 'started': ...}]``."""
    from kafka_runbooks.remediate.host import parse_ps

    (p,) = parse_ps("  4242 Sl   Sun Nov 29 05:33:01 2026\n")
    assert p.describe() == "pid 4242 (started Sun Nov 29 05:33:01 2026, state Sl)"
    assert "{" not in p.describe()
