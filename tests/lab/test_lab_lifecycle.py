"""down() leaves no process; the rebalance profile (issue 7) makes the controller move leadership back by itself.

It takes the session's lab down and brings it up again, once in the rebalance profile and then (in ``finally``,
whatever happened) back in the default one: the tests that run after it, in any order, find the usual lab.
"""

from __future__ import annotations

import subprocess

import pytest

from kafka_lab import BROKER_IDS, Lab, LabError

from .lab_helpers import LogCursor, led_by

pytestmark = pytest.mark.lab


def assert_nothing_left(lab: Lab) -> None:
    assert lab.processes() == []
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert lab.marker not in out


def test_down_leaves_no_process_and_the_rebalance_profile_moves_leadership_back(lab):
    try:
        lab.down()
        assert_nothing_left(lab)
        lab.up(profile="rebalance")
        props = (lab.host_dir(1) / "config" / "server.properties").read_text()
        assert "auto.leader.rebalance.enable=true\n" in props and "leader.imbalance.check.interval.seconds=10\n" in props
        ctrl = lab.controller()["brokerid"]
        b = next(x for x in BROKER_IDS if x != ctrl)
        led = set(led_by(lab.partitions(), b))
        cur = LogCursor(lab.log_path(ctrl, "controller.log"))
        assert lab.stop(b).returncode == 0
        lab.wait_partitions(lambda ps: not led_by(ps, b), 30, f"leadership away from {b}")
        lab.start(b)
        # nobody asks for an election: the controller's imbalance check moves leadership back to b until at most
        # leader.imbalance.per.broker.percentage (10) of its preferred partitions are led by others -- Kafka's rule:
        # a partition whose election came before b rejoined its ISR may stay put (1 of ~19 is under 10 %)
        try:
            lab.wait_partitions(lambda ps: len(led & set(led_by(ps, b))) >= 0.9 * len(led), 120,
                                f"the controller to give {b} its leaderships back")
        except LabError:
            ps = lab.partitions()
            lines = [ln for ln in cur.new().splitlines() if "imbalance ratio" in ln or "Starting preferred" in ln]
            pytest.fail(f"still led elsewhere: { {k: ps[k] for k in led if ps[k]['leader'] != b} }\n" + "\n".join(lines[-10:]))
        text = cur.new()
        assert f"INFO [Controller id={ctrl}] Processing automatic preferred replica leader election (kafka.controller.KafkaController)" in text
        assert f"TRACE [Controller id={ctrl}] Leader imbalance ratio for broker {b} is 1.0 (kafka.controller.KafkaController)" in text
        assert f"INFO [Controller id={ctrl}] Starting preferred replica leader election for partitions " in text
    finally:
        lab.down()
        assert_nothing_left(lab)
        lab.up(profile="default")
