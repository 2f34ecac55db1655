"""The plan that travels stays within budget at scale (issue 18 §4): counts per kind, the first lines of each kind,
the fingerprint of the whole blast radius; every line and refusal in the plan's detail. Pure, in memory."""

from __future__ import annotations

import dataclasses

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Plan
from kafka_runbooks.remediate import blast
from kafka_runbooks.remediate.briefing import approval_body
from kafka_runbooks.remediate.digest import plan_digest
from kafka_runbooks.remediate.executor import plan_changed
from kafka_runbooks.remediate.plan import plan_restart
from kafka_runbooks.xcom_size import XCOM_BUDGET_BYTES, XComTooBig, assert_xcom_fits, xcom_bytes

from snapshot_builders import P, snap  # noqa: E402

import pytest

BROKERS = 100


def big(partitions: int = 10_000, topics: int = 20, change=None, min_isr=2):
    """``BROKERS`` brokers, RF 3, Kafka's round robin, healthy (``change``: partition index -> its leader instead)."""
    change = change or {}
    parts = []
    for i in range(partitions):
        t, p = divmod(i, partitions // topics)
        replicas = [1 + (t * 7 + p + k) % BROKERS for k in range(3)]
        parts.append(P(f"topic-{t:03d}", p, replicas, change.get(i, replicas[0]), replicas, min_isr=min_isr))
    return snap(parts, brokers=range(1, BROKERS + 1), controller=1)


CONFIG = ClusterConfig(name="c1", zk_conn_id="zk", hosts={b: f"ssh_b{b}" for b in range(1, BROKERS + 1)}, kafka_version="2.3.0")


def test_a_roll_of_100_brokers_travels_in_xcom_and_the_approval_under_1_mb_and_keeps_every_line_in_its_detail():
    s = big()
    plan = plan_restart(s, range(1, BROKERS + 1), CONFIG, roll_id="c1-roll-1")
    digest = plan_digest(plan)
    xcom = {"plan": plan.to_dict(), "digest": digest, "dry_run": False, "canary": False, "findings": [], "notes": []}
    assert_xcom_fits(xcom, "the plan task's XCom")
    body = approval_body([], Plan.from_dict(plan.to_dict()), report_path=None, approval_timeout="1:00:00", digest=digest)
    assert len(body.encode()) < XCOM_BUDGET_BYTES
    # each step carries a sample, and counts every line; the detail has every line
    for step in plan.steps:
        lines = plan.detail.effects[step.broker_id]
        assert len(lines) == step.blast_counts["partitions"] == len(s.partitions_of(step.broker_id)) == 300
        assert len(step.blast_radius) <= blast.SHOWN_PER_KIND * len(blast.KINDS) < len(lines)
        assert set(step.blast_radius) <= set(lines)
        assert step.blast_counts["losing_replica"] == 300 and step.blast_counts["leaderships_moving"] == 100
        assert step.blast_counts["at_min_isr"] == 300  # 3 -> 2 in sync, min.insync.replicas 2
        assert step.blast_sha256 == blast.lines_sha256(lines)
    assert plan.blast_sha256 == blast.plan_blast_sha256(plan.detail.effects)
    # the approval says the whole counts, not the sample's
    assert "300 partition(s) of 20 topic(s): 300 lose an in-sync replica, 100 leaderships move, 300 at min ISR" in body
    assert plan.blast_topic_count == 20 and len(plan.blast_topics) == 20
    # what travels has no detail; read back it is the same plan (same digest)
    back = Plan.from_dict(plan.to_dict())
    assert back.detail is None and plan_digest(back) == digest


def test_the_digest_binds_lines_the_plan_does_not_carry():
    """Two states differing only in a partition beyond every step's sample: same lines carried, other digests, and
    the executor's comparison on fresh state names the step whose blast radius changed."""
    s = big(min_isr=1, partitions=3_000)
    approved = plan_restart(s, [5], CONFIG)
    hidden = next(line for line in reversed(approved.detail.effects[5])  # after every line of each kind carried
                  if line not in approved.steps[0].blast_radius and "leadership" not in line)
    i = next(n for n, p in enumerate(s.partitions) if p.name == hidden.split(":")[0])
    p = s.partitions[i]
    fresh = plan_restart(big(min_isr=1, partitions=3_000, change={i: 5}), [5], CONFIG)  # its leadership moved to broker 5 since
    assert not fresh.refused and len(fresh.detail.effects[5]) == len(approved.detail.effects[5])
    assert hidden not in fresh.detail.effects[5]
    assert fresh.steps[0].blast_radius == approved.steps[0].blast_radius  # the lines carried are the same
    assert plan_digest(fresh) != plan_digest(approved)
    changed = plan_changed(Plan.from_dict(approved.to_dict()), fresh)
    assert any(c.startswith("the blast radius of broker 5's step changed") for c in changed), changed


def test_a_refusal_is_never_truncated_away():
    """A stop refused for 300 partitions: the step carries the first reasons and the count, the plan is refused and
    says how many more; the detail has every one."""
    s = big(change={})
    s = dataclasses.replace(s, partitions=tuple(dataclasses.replace(p, min_insync_replicas=3) for p in s.partitions))
    plan = plan_restart(s, [7], CONFIG)
    step = plan.steps[0]
    assert plan.refused and step.refusals_total == 300 and len(step.refusals) == blast.SHOWN_REFUSALS
    assert len(plan.detail.refusals[7]) == 300
    back = Plan.from_dict(plan.to_dict())
    assert back.refused and back.steps[0].refusals_total == 300
    assert any("and 280 more reason(s)" in r for r in back.refusals)
    body = approval_body([], back, report_path=None, approval_timeout="1:00:00")
    assert "**refused** (300 reason(s))" in body and "... and 280 more" in body


def test_the_xcom_size_check_names_what_is_too_big():
    assert xcom_bytes({"a": "x" * 10}) < 100
    with pytest.raises(XComTooBig, match=r"the thing is [\d,]+ bytes as XCom, over the budget of 1,048,576 \(biggest: big "):
        assert_xcom_fits({"big": "x" * XCOM_BUDGET_BYTES, "small": 1}, "the thing")


def test_an_election_plan_says_its_blast_radius_per_target_broker_not_per_partition():
    from kafka_runbooks.remediate.election import plan_election

    # broker 7 returned: every partition it prefers is led by its second replica
    s0 = big()
    moved = {i: p.replicas[1] for i, p in enumerate(s0.partitions) if p.replicas[0] == 7}
    s = big(change=moved)
    plan = plan_election(s, CONFIG, roll_id="c1-el-1")
    assert not plan.refused, plan.refusals
    names = [n for x in plan.batches for n in x.partitions]
    assert len(names) == len(moved) >= 100  # every partition to move is in a batch: the batches are what runs
    assert plan.blast_radius == (f"leadership of {len(moved)} partition(s) moves to broker 7",), plan.blast_radius
    assert xcom_bytes(plan.to_dict()) < xcom_bytes(plan.to_dict() | {"blast_radius": [f"leader of {n} moves to broker 7" for n in names]}) / 1.5
