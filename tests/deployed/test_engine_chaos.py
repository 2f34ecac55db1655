"""Issue 29 §5, the cases of the chaos table (kafka_lab/chaos.py; ``./run bench chaos`` prints the whole table) that
fit the CI budget, on the deployed suite's deployment and lab: a real rolling restart started through REST, a fault of
the engine's own control plane at a step boundary seen in the world, the first run's end, ``resume`` when needed.

Each asserts the table's outcome: never two brokers of the roll missing from /brokers/ids together, no broker down
without the ledger saying so, ``resume`` completes, the closed record names every broker of the roll.
"""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.deployed, pytest.mark.timeout(1800)]


@pytest.mark.parametrize("fault, boundary", [
    ("postgres", "after_stop"),  # the state database gone while the first broker is down: it is started, the record true
    ("lock_deleted", "in_gate"),  # the lock deleted while the first broker catches up: no second stop under a lost lock
])
def test_chaos_case(deployment, deployed_lab, fault, boundary):
    """A roll of two brokers (neither the controller): the CI budget."""
    from kafka_lab.chaos import run_case, table, two_brokers

    case = run_case(deployment, deployed_lab, fault, boundary, brokers=two_brokers(deployed_lab), outage_s=20.0,
                    say=lambda s: print(f"\n[{s}]"))
    print("\n" + table([case]) + "\n" + json.dumps(case, default=str))
    assert not case.get("error"), case
    assert case["most_down"] <= 1, case
    assert case["down_unrecorded"] == [], case
    assert case["resume"] in ("not needed", "success"), case
    assert case["left_down"] == [], case
    assert case["record_ok"], case
    assert case["ok"], case
