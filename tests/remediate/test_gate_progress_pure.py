"""Issue 19 (pure): the coordinator and canary gates say how their wait goes while they wait -- which offsets
partitions still have no loaded coordinator, what those answered, how long is left -- through their ``progress``
callback, at most once per poll, never flooding the audit trail. The Kafka client is a fake of
``confluent_kafka.Consumer`` that answers COORDINATOR_LOAD_IN_PROGRESS a set number of times per probe group."""

from __future__ import annotations

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException

from kafka_runbooks.remediate import gates as G


class FakeConsumer:
    """``committed`` raises COORDINATOR_LOAD_IN_PROGRESS for a group until it was asked ``loading[group]`` times."""

    loading: dict[str, int] = {}
    asked: dict[str, int] = {}
    closed = 0

    def __init__(self, config):
        self.group = config["group.id"]

    def committed(self, partitions, timeout=None):
        n = FakeConsumer.asked[self.group] = FakeConsumer.asked.get(self.group, 0) + 1
        if n <= FakeConsumer.loading.get(self.group, 0):
            raise KafkaException(KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS))
        return partitions

    def poll(self, timeout=None):
        return None

    def close(self):
        FakeConsumer.closed += 1


@pytest.fixture
def fake_kafka(monkeypatch):
    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    FakeConsumer.loading, FakeConsumer.asked, FakeConsumer.closed = {}, {}, 0
    return FakeConsumer


def _gate(partitions, *, timeout_s=30.0, progress=None):
    return G.coordinator_gate(lambda g: {"group.id": g}, partitions, 50, timeout_s=timeout_s, poll_s=0.01,
                              request_timeout_s=0.1, broker_log=lambda: "", led_by_broker=partitions, progress=progress)


def test_the_coordinator_gate_reports_which_partitions_still_load_and_the_time_left(fake_kafka):
    groups = G.probe_groups(50)
    fake_kafka.loading = {groups[3]: 4, groups[7]: 2}  # partition 7 loads first, 3 later; 11 answers at once
    said = []
    result = _gate([3, 7, 11], progress=lambda pending, errors, left: said.append((pending, errors, left)))
    assert result.details["loaded_after_s"].keys() == {"3", "7", "11"}
    # the first round that left some partition waiting is reported at once; the rest are held back (one per 5 s at
    # most when the picture changes), so this fast gate said exactly one line -- not one per poll
    assert len(said) == 1, said
    pending, errors, left = said[0]
    assert pending == [3, 7]
    assert errors == {3: ["COORDINATOR_LOAD_IN_PROGRESS"], 7: ["COORDINATOR_LOAD_IN_PROGRESS"]}
    assert 29.0 < left <= 30.0
    assert result.details["errors_seen"] == {"3": ["COORDINATOR_LOAD_IN_PROGRESS"], "7": ["COORDINATOR_LOAD_IN_PROGRESS"]}
    assert fake_kafka.closed == 3


def test_the_coordinator_gate_reports_again_while_the_wait_goes_on(fake_kafka, monkeypatch):
    groups = G.probe_groups(50)
    fake_kafka.loading = {groups[5]: 10**6}  # never loads
    clock = {"t": 1000.0}

    def monotonic():
        clock["t"] += 1.0  # every look at the clock is a second later: the 30 s heartbeat comes within the test
        return clock["t"]

    monkeypatch.setattr(G.time, "monotonic", monotonic)
    monkeypatch.setattr(G.time, "sleep", lambda s: None)
    said = []
    with pytest.raises(G.GateFailed) as info:
        _gate([5], timeout_s=100.0, progress=lambda pending, errors, left: said.append((pending, left)))
    assert info.value.details["pending"] == [5]
    # reported at the first round, then only every 30 s of the 100 s: a bounded number of audit entries
    assert 2 <= len(said) <= 4, said
    assert all(p == [5] for p, _ in said)
    lefts = [left for _, left in said]
    assert lefts == sorted(lefts, reverse=True) and lefts[0] < 100.0 and all(x >= 0 for x in lefts)


def test_the_coordinator_gate_works_without_a_progress_callback(fake_kafka):
    fake_kafka.loading = {G.probe_groups(50)[2]: 1}
    assert _gate([2]).details["probed"] == [2]


def test_the_canary_gate_reports_its_failed_rounds_and_the_time_left(monkeypatch):
    from snapshot_builders import P, snap

    class Result:
        def __init__(self, ok):
            self.ok, self.broker_id, self.partition = ok, 1, 0
            self.produce_ms, self.consume_ms = 3.0, 4.0
            self.error_code, self.error = (None, None) if ok else ("_MSG_TIMED_OUT", "timed out")

    class Hook:
        rounds = 0

        def canary(self, brokers, partitions, topic, timeout_s):
            Hook.rounds += 1
            return [Result(Hook.rounds > 3)]

    snapshot = snap([P("canary", 0, (1,), 1, (1,))], brokers=(1,))
    monkeypatch.setattr(G.time, "sleep", lambda s: None)
    said = []
    result = G.canary_gate(Hook(), lambda: snapshot, "canary", latency_bound_ms=1000, round_timeout_s=1, timeout_s=60,
                           poll_s=0.01, progress=lambda rounds, last, left: said.append((rounds, last, left)))
    assert result.gate == "canary" and len(result.details["failed_rounds"]) == 3
    # the first failed round is said at once, the next ones at most every 10 s: one line here
    assert len(said) == 1 and said[0][0] == 1 and "leader 1: _MSG_TIMED_OUT timed out" in said[0][1]
    assert 59.0 < said[0][2] <= 60.0
