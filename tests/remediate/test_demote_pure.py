"""Mitigate first (issue 30): the pure plan that moves leadership off a broker that does not serve."""

from __future__ import annotations

import json

from kafka_runbooks.remediate.demote import plan_demote, converged
from tests.snapshot_builders import P, snap

HUNG = {3: "direct check failed (timed out) and jvm_deadlock: broker 3"}


def test_moves_every_partition_the_hung_broker_leads_to_a_serving_in_sync_replica_keeping_it_last():
    s = snap([P("orders", 0, [3, 1, 2], 3, [3, 1, 2]), P("orders", 1, [1, 2, 3], 1, [1, 2, 3]),
              P("orders", 2, [3, 2, 1], 3, [3, 1, 2])], controller=1)
    plan = plan_demote(s, 3, HUNG)
    assert not plan.refused
    assert [(m.partition.name, m.replicas) for m in plan.moves] == [("orders-0", (1, 2, 3)), ("orders-2", (2, 1, 3))]
    assert json.loads(plan.reassignment()) == {"version": 1, "partitions": [
        {"topic": "orders", "partition": 0, "replicas": [1, 2, 3]}, {"topic": "orders", "partition": 2, "replicas": [2, 1, 3]}]}
    assert json.loads(plan.election())["partitions"] == [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 2}]
    assert plan.restore == {"orders-0": [3, 1, 2], "orders-2": [3, 2, 1]}


def test_a_partition_whose_only_in_sync_replica_is_the_hung_broker_stays_offline_by_name():
    """Kafka 2.3: a leader that appended just before it hung shrinks its ISR to itself (seen on the lab: orders-2 [3])."""
    s = snap([P("orders", 2, [3, 1, 2], 3, [3]), P("orders", 5, [3, 2, 1], 3, [3, 2, 1])])
    plan = plan_demote(s, 3, HUNG)
    assert [m.partition.name for m in plan.moves] == ["orders-5"]
    assert [s.partition.name for s in plan.stays_offline] == ["orders-2"]
    text = "\n".join(plan.blast_radius())
    assert "STAYS OFFLINE until broker 3 is restarted: orders-2 (its only in-sync replica is broker 3" in text


def test_never_moves_leadership_to_another_broker_that_does_not_serve():
    s = snap([P("orders", 0, [3, 2, 1], 3, [3, 2, 1]), P("orders", 1, [3, 2], 3, [3, 2])])
    plan = plan_demote(s, 3, {**HUNG, 2: "did not answer"})
    assert [(m.partition.name, m.new_leader) for m in plan.moves] == [("orders-0", 1)]
    assert [s.partition.name for s in plan.stays_offline] == ["orders-1"]


def test_refuses_without_direct_evidence_or_with_a_reassignment_or_election_pending_or_no_controller():
    parts = [P("orders", 0, [3, 1, 2], 3, [3, 1, 2])]
    assert [r.code for r in plan_demote(snap(parts), 3, {}).refusals] == ["serving"]
    assert [r.code for r in plan_demote(snap(parts, reassigning=("orders-0",)), 3, HUNG).refusals] == ["reassignment_pending"]
    assert [r.code for r in plan_demote(snap(parts, preferred_election_pending=("x-1",)), 3, HUNG).refusals] == ["election_pending"]
    assert [r.code for r in plan_demote(snap(parts, controller=None), 3, HUNG).refusals] == ["no_controller"]
    assert [r.code for r in plan_demote(snap(parts, brokers=(1, 2)), 3, HUNG).refusals] == ["not_registered"]
    assert [r.code for r in plan_demote(snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3])]), 3, HUNG).refusals] == ["nothing_to_move"]


def test_when_the_hung_broker_is_the_controller_the_plan_moves_the_controller_first_and_says_so_by_name():
    """Issue 30: a controller whose event thread is stuck never processes the reassignment (docs/MITIGATE.md)."""
    plan = plan_demote(snap([P("orders", 0, [3, 1, 2], 3, [3, 1, 2])], controller=3, controller_epoch=7), 3, HUNG)
    assert not plan.refused and plan.controller and plan.move_controller
    assert plan.takers == (1, 2)
    assert plan.blast_radius()[0].startswith(
        "broker 3 is the controller: the controller is moved first (its /controller znode deleted, only while it is "
        "still broker 3's and no election came between; another registered broker takes it: one of [1, 2]), then "
        "leadership is moved")
    # another broker being the controller: nothing about moving it
    other = plan_demote(snap([P("orders", 0, [3, 1, 2], 3, [3, 1, 2])], controller=1, controller_epoch=7), 3, HUNG)
    assert not other.move_controller and other.takers == ()
    assert not any("controller" in line for line in other.blast_radius())


def test_moving_the_controller_is_refused_when_no_other_serving_broker_could_take_it_or_its_epoch_is_unknown():
    parts = [P("orders", 0, [3, 1, 2], 3, [3, 1, 2])]
    # broker 1 is not registered and broker 2 is proven not serving too: nobody could take the controller
    lone = plan_demote(snap(parts, brokers=(2, 3), controller=3, controller_epoch=7), 3, {**HUNG, 2: "did not answer"})
    assert "no_controller_taker" in [r.code for r in lone.refusals]
    assert "deleting /controller would leave the cluster without one" in str(lone.refusals[0])
    no_epoch = plan_demote(snap(parts, controller=3), 3, HUNG)
    assert [r.code for r in no_epoch.refusals] == ["controller_epoch_unreadable"]
    unreadable = plan_demote(snap(parts, controller=3, controller_epoch=7, unparsable=("/controller",)), 3, HUNG)
    assert "metadata_unreadable" in [r.code for r in unreadable.refusals]


def test_the_approval_binds_the_controller_move_and_a_fresh_state_needing_an_unapproved_one_is_refused():
    from kafka_runbooks.remediate.demote import controller_move_unapproved
    from kafka_runbooks.remediate.demote_run import to_plan
    from kafka_runbooks.remediate.digest import plan_digest

    parts = [P("orders", 0, [3, 1, 2], 3, [3, 1, 2])]
    s3 = snap(parts, controller=3, controller_epoch=7)
    plan = to_plan(plan_demote(s3, 3, HUNG), s3, None)
    assert plan.conditions["move_controller"] is True and plan.conditions["controller_takers"] == [1, 2]
    edited = plan.to_dict()
    edited["conditions"] = {**edited["conditions"], "move_controller": False}
    from kafka_runbooks.model import Plan

    assert plan_digest(Plan.from_dict(edited)) != plan_digest(plan)  # an edit of the approved plan loses the approval
    # approved while broker 1 was the controller; broker 3 took it since: the fresh plan needs a move nobody approved
    fresh = plan_demote(s3, 3, HUNG)
    assert controller_move_unapproved(fresh, approved=False).code == "controller_move_not_approved"
    assert controller_move_unapproved(fresh, approved=True) is None
    s1 = snap(parts, controller=1, controller_epoch=8)
    assert controller_move_unapproved(plan_demote(s1, 3, HUNG), approved=True) is None  # less than approved: skipped


def test_coordinators_move_with_offsets_partitions_and_converged_reads_zookeeper():
    s = snap([P("__consumer_offsets", 7, [3, 1, 2], 3, [3, 1, 2]), P("orders", 0, [3, 1, 2], 3, [3, 1, 2])])
    plan = plan_demote(s, 3, HUNG)
    assert [m.coordinator for m in plan.moves] == [True, False]
    assert any("group coordinators move with __consumer_offsets-7" in line for line in plan.blast_radius())
    assert len(converged(s, plan)) == 2
    after = snap([P("__consumer_offsets", 7, [1, 2, 3], 1, [1, 2]), P("orders", 0, [1, 2, 3], 3, [1, 2, 3])])
    assert converged(after, plan) == ["orders-0: led by 3, ISR [1, 2, 3]"]


def test_the_original_order_is_written_back_only_where_the_set_is_unchanged_and_every_replica_is_in_sync():
    from kafka_runbooks.remediate.demote import restore_payload

    restore = {"orders-0": [3, 1, 2], "orders-1": [3, 2, 1], "orders-2": [3, 1, 2], "orders-3": [3, 1, 2]}
    now = snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3]), P("orders", 1, [2, 1, 3], 2, [2, 1]),
                P("orders", 2, [1, 2, 4], 1, [1, 2, 4]), P("orders", 3, [3, 1, 2], 3, [3, 1, 2])], brokers=(1, 2, 3, 4))
    payload, left = restore_payload(restore, now)
    assert json.loads(payload)["partitions"] == [{"topic": "orders", "partition": 0, "replicas": [3, 1, 2]}]
    assert left == ["orders-1: not every replica is registered and in its ISR yet ([2, 1])",
                    "orders-2: its replicas changed since the move ([1, 2, 4]): left as they are"]


def test_a_partition_with_a_replica_out_of_sync_is_not_reordered_unless_the_election_alone_moves_it():
    """Seen on the lab (Kafka 2.3, controller hung): the reassignment of __consumer_offsets-18, whose ISR lacked a
    replica, waited for it to catch up from the hung leader; the znode stayed until the leader was released."""
    s = snap([P("__consumer_offsets", 18, [1, 2, 3], 1, [1, 2]), P("orders", 4, [2, 1, 3], 1, [1, 2])], controller=1)
    plan = plan_demote(s, 1, {1: "hung"})
    assert [(m.partition.name, m.replicas, m.reorder) for m in plan.moves] == [("orders-4", (2, 1, 3), False)]
    assert [st.partition.name for st in plan.stays_offline] == ["__consumer_offsets-18"]
    assert "are out of its ISR" in plan.stays_offline[0].why
    assert json.loads(plan.reassignment())["partitions"] == [] and not plan.reorders
    assert json.loads(plan.election())["partitions"] == [{"topic": "orders", "partition": 4}]
