"""The plans' detail in the state database (issue 18 §4): kept once per (record, digest), read back whole, and only
when it matches the fingerprint the travelling plan carries."""

from __future__ import annotations

import dataclasses

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Plan
from kafka_runbooks.remediate.digest import plan_digest
from kafka_runbooks.remediate.plan import plan_restart
from kafka_runbooks.state import StateDb
from kafka_runbooks.state.plans import PlanDetails

from snapshot_builders import P, snap  # noqa: E402

CONFIG = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "a", 2: "b", 3: "c"}, kafka_version="2.3.0")


def _plan(n: int = 40):
    s = snap([P("orders", i, [1 + i % 3, 1 + (i + 1) % 3, 1 + (i + 2) % 3], 1 + i % 3, [1, 2, 3], min_isr=2) for i in range(n)])
    return plan_restart(s, [1, 2, 3], CONFIG, roll_id="c1-roll-1")


def test_the_whole_blast_radius_is_kept_and_read_back_for_the_page(tmp_path):
    store = PlanDetails(StateDb.embedded(tmp_path))
    plan = _plan()
    digest = plan_digest(plan)
    assert store.put("c1-roll-1", digest, plan) is True
    assert store.put("c1-roll-1", digest, plan) is False  # the same plan again: nothing new
    travelled = Plan.from_dict(plan.to_dict())
    assert travelled.detail is None and len(travelled.steps[0].blast_radius) < 40
    back = store.with_detail(travelled, "c1-roll-1", digest)
    assert back.detail == plan.detail and len(back.detail.effects[1]) == 40
    assert store.with_detail(travelled, "c1-roll-1").detail == plan.detail  # the latest kept
    assert store.get("c1-roll-1", "0" * 64) is None


def test_a_detail_that_does_not_match_the_plans_fingerprint_is_neither_kept_nor_shown(tmp_path):
    store = PlanDetails(StateDb.embedded(tmp_path))
    plan = _plan()
    other = _plan(41)
    with pytest.raises(ValueError, match="does not match"):
        store.put("c1-roll-1", plan_digest(plan), dataclasses.replace(plan, detail=other.detail))
    with pytest.raises(ValueError, match="as computed"):
        store.put("c1-roll-1", plan_digest(plan), Plan.from_dict(plan.to_dict()))
    store.put("c1-roll-1", plan_digest(other), other)
    assert store.with_detail(Plan.from_dict(plan.to_dict()), "c1-roll-1").detail is None
