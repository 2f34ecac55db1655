"""A partition whose only in-sync replica is the broker being restarted: OFFLINE for the whole restart.

The snapshot is what the lab shows after ``hang 3`` on real Kafka 2.3 (tests/lab/test_faults_serving.py): broker 3 stays
registered and leads; a partition it had appended to just before the hang (orders-2), or that its group coordinator
appended to after it (__consumer_offsets-7: the members it could not hear from expired), has followers behind its log
end that cannot fetch, and Kafka shrinks its ISR to [3] after replica.lag.time.max.ms
(``Partition.getOutOfSyncReplicas``); a partition with nothing appended since its followers caught up keeps the full
ISR (orders-5, the canary). With unclean leader election off, nothing may lead orders-2 or __consumer_offsets-7 while
broker 3 is down: the plan names them OFFLINE, the approval shows them by name, and no count calls them kept up
(at min ISR, leadership or coordinator moving). Pure: no I/O."""

from __future__ import annotations

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.remediate import blast
from kafka_runbooks.remediate.briefing import approval_body
from kafka_runbooks.remediate.plan import plan_restart
from kafka_runbooks.remediate.progress import plan_note
from kafka_runbooks.remediate.safety import SafetySettings

from snapshot_builders import P, snap  # noqa: E402

CONFIG = ClusterConfig(name="c1", zk_conn_id="zk_c1", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"}, kafka_version="2.3.0")
V23 = SafetySettings(kafka_version="2.3.0")
STUCK = {3: "direct check failed (timed out) and request_handling_stalled: broker 3's request queue is not drained"}
CANARY = "kafka-runbooks-canary"

AFTER_HANG = [
    P("__consumer_offsets", 7, [3, 1, 2], 3, [3]),  # its coordinator appended after the hang
    P("__consumer_offsets", 10, [3, 2, 1], 3, [3, 2, 1]),  # no group: nothing appended
    P("__consumer_offsets", 11, [1, 2, 3], 1, [1, 2, 3]),
    P(CANARY, 2, [3, 1, 2], 3, [3, 1, 2], min_isr=2),  # nothing produces to it
    P("orders", 0, [1, 2, 3], 1, [1, 2, 3], min_isr=2),
    P("orders", 2, [3, 1, 2], 3, [3], min_isr=2),  # appended just before the hang
    P("orders", 5, [3, 2, 1], 3, [3, 2, 1], min_isr=2),  # its followers had fetched everything
] + [P("events", i, [3, 1, 2], 3, [3], min_isr=2) for i in range(8)]  # more than a step used to carry of a kind
OFFLINE = ["__consumer_offsets-7", *(f"events-{i}" for i in range(8)), "orders-2"]


def _plan():
    return plan_restart(snap(AFTER_HANG), [3], CONFIG, kind="incident_restart", not_serving=STUCK, settings=V23)


def test_the_plan_names_every_partition_whose_only_in_sync_replica_is_the_restarted_broker_offline():
    plan = _plan()
    assert not plan.refused, plan.refusals  # the not-serving waiver: restarting broker 3 is their way back
    (step,) = plan.steps
    every = plan.detail.effects[3]
    assert blast.offline_names(every) == OFFLINE
    # the step the approval is computed from carries every one of them by name, saying why and for how long
    assert blast.offline_names(step.blast_radius) == OFFLINE
    line = next(x for x in step.blast_radius if x.startswith("orders-2: "))
    assert line == ("orders-2: loses in-sync replica 3 (isr [3] -> []); already unavailable (leader 3 is not serving); "
                    "OFFLINE for the whole restart: broker 3 is its only live in-sync replica, offline until broker 3 is back "
                    "(unclean.leader.election.enable=false, Kafka 2.3.0 default: no other replica may lead it)")
    # the partitions whose ISR stayed full move, as before
    assert any(x.startswith("orders-5: ") and "leadership moves off broker 3 (to one of [2,1])" in x for x in every)
    assert any(x.startswith(f"{CANARY}-2: ") and "leadership moves off broker 3" in x for x in every)
    assert any(x.startswith("__consumer_offsets-10: ") and "group coordinator and leadership move off broker 3" in x for x in every)
    # the plan's warnings say it by name
    (w,) = [x for x in plan.warnings if "OFFLINE" in x]
    assert w.startswith("broker 3's restart takes 10 partition(s) OFFLINE for its whole duration")
    assert all(name in w for name in OFFLINE)


def test_no_count_treats_an_offline_partition_as_kept_up():
    plan = _plan()
    min_isr = {"__consumer_offsets": 1, CANARY: 2, "orders": 2, "events": 2}
    c = blast.step_counts(plan.steps[0], min_isr)
    # offline: the 10 with ISR [3]; at min ISR: orders-5, orders-0, the canary (ISR [x,y] of 2), never an offline one
    assert c["offline"] == 10 and c["at_min_isr"] == 3, c
    assert c["leaderships_moving"] == 3 and c["coordinators_moving"] == 1, c  # orders-5, the canary, __consumer_offsets-10
    rows = {r.topic: r for r in blast.summarize(plan, min_isr)}
    assert (rows["events"].offline, rows["events"].at_min_isr, rows["events"].leaderships_moving) == (8, 0, 0)
    assert (rows["orders"].offline, rows["orders"].at_min_isr) == (1, 2)
    assert (rows["__consumer_offsets"].offline, rows["__consumer_offsets"].coordinators_moving) == (1, 1)
    assert blast.headline(blast.plan_counts(plan, min_isr)).endswith("3 left at min ISR, 10 OFFLINE")


def test_the_approval_and_the_run_note_show_them_offline_by_name():
    plan = _plan()
    body = approval_body([], plan, report_path=None, approval_timeout="1h",
                         min_isr={"__consumer_offsets": 1, CANARY: 2, "orders": 2, "events": 2})
    step = body[body.index("1. `restart_broker` broker 3"):body.index("### Warnings")]
    assert "3 at min ISR, **10 OFFLINE**" in step
    said = next(x for x in step.splitlines() if "**OFFLINE for the whole restart**" in x)
    assert "(10 partition(s): broker 3 is their only live in-sync replica;" in said
    assert all(f"`{name}`" in said for name in OFFLINE)
    assert "10 OFFLINE" in body[:body.index("### Diagnosis")]  # the summary on top says it too
    note = plan_note(plan, "d" * 64, dry_run=True)
    assert "10 OFFLINE for the whole restart (__consumer_offsets-7, events-0" in note
