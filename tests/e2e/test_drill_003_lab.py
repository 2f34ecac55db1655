"""Seed incident 003 on the lab's real Kafka 2.3.0, by drill 003's own code (``./run demo 003``, ``./run demo all``):
the controller's automatic rebalance onto a broker returning under load (hazard, storm and divergence found), then
the deferred preferred election -- either it completes, or it gives up early on a follower stuck out of its ISR,
which is found, explained and restarted through the engine with approval, and the election then restores the
preferred leadership. No canary record is lost.

It runs in ``./run test``'s second lane (after the deployed suite), where there is room for its ~10 minutes."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.spark, pytest.mark.airflow, pytest.mark.third_lane, pytest.mark.timeout(2400)]


def test_drill_003_rebalance_hazard_then_deferred_election(lab_settings, airflow_db):
    from kafka_lab.drill_003 import run_003

    lab, _ = lab_settings
    ok, figures = run_003(lab)
    first = figures["deferred"].get("first_election") or {}
    assert ok, figures
    assert figures["deferred"]["canary_failures"] == 0 and figures["deferred"]["restored"], figures
    if first.get("gave_up"):  # the stuck-follower path: said as stuck, fixed through the engine
        assert "stuck" in first["gave_up"] and figures["deferred"]["fix"]["status"] == "closed", figures
