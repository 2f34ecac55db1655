"""The canary after a move of leadership (issue 30): rounds until ``gates.canary_s``, never through the broker moved off.

Why rounds: Kafka 2.3's new leader marks every in-sync follower caught up when it becomes leader
(``Partition.makeLeader``) and drops one from the ISR only once it has been behind for ``replica.lag.time.max.ms``; the
hung broker never fetches, so an acks=all write to a moved partition waits that long (CI: one 5 s round failed on the
lab, whose lag bound is 5 s). The hook here is a stand-in for ``KafkaHook.canary`` that answers like that leader."""

from __future__ import annotations

import types

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import CanaryResult
from kafka_runbooks.remediate import demote_run as R
from kafka_runbooks.remediate.engine import Halted
from tests.snapshot_builders import P, snap

TOPIC = "kafka-runbooks-canary"


class Leaders:
    """acks=all through each leader: times out until ``isr_shrunk_after`` rounds have passed (the hung broker still in
    the new leader's ISR), then delivers. Records which brokers each round was asked of."""

    def __init__(self, isr_shrunk_after: int):
        self.after = isr_shrunk_after
        self.rounds: list[list[int]] = []

    def canary(self, brokers, led, topic, timeout_s, **_):
        self.rounds.append([b.id for b in brokers])
        ok = len(self.rounds) > self.after
        return [CanaryResult(b.id, topic, led[b.id], ok=ok, produce_ms=3.0 if ok else None, consume_ms=2.0 if ok else None,
                             error=None if ok else "no delivery report within the timeout",
                             error_code=None if ok else "_MSG_TIMED_OUT") for b in brokers]


def _ex(canary_s: float):
    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                         "gates": {"canary_s": canary_s, "poll_s": 0.01}})
    return types.SimpleNamespace(config=cfg)


@pytest.fixture
def moved(monkeypatch):
    """Leadership moved off broker 3: canary-0 led by 1, canary-1 by 2, canary-2 still by 3 (its only ISR member)."""
    s = snap([P(TOPIC, 0, [3, 1, 2], 1, [1, 2, 3]), P(TOPIC, 1, [2, 3, 1], 2, [2, 3, 1]), P(TOPIC, 2, [3, 2, 1], 3, [3])])
    import kafka_runbooks.detect.snapshot as S

    monkeypatch.setattr(S, "read_snapshot", lambda zk, name: s)


def test_a_round_that_waits_on_the_old_isr_is_tried_again_and_the_moved_broker_is_never_written_to(moved):
    hook = Leaders(isr_shrunk_after=2)
    out = R._canary_after_move(None, _ex(60.0), hook, 3, guard=lambda: None)
    assert hook.rounds == [[1, 2]] * 3, hook.rounds
    assert out["gate"] == "canary" and len(out["failed_rounds"]) == 2


def test_no_round_within_canary_s_halts_with_the_rounds_it_saw(moved):
    hook = Leaders(isr_shrunk_after=10**6)
    with pytest.raises(Halted) as exc:
        R._canary_after_move(None, _ex(0.05), hook, 3, guard=lambda: None)
    assert exc.value.code == "canary_failed"
    assert "_MSG_TIMED_OUT" in str(exc.value) and "leader 1" in str(exc.value) and "0.05 s" in str(exc.value)
    assert all(3 not in r for r in hook.rounds)
