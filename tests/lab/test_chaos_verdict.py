"""The chaos table's judgement (kafka_lab/chaos.py), on hand-made timelines and ledgers: what counts as two brokers
down at once, a broker down without a record, a record that is not true."""

from __future__ import annotations

from kafka_lab.chaos import down_without_record, fault_in_record, most_down_at_once, record_truth, verdict


def test_two_brokers_of_the_roll_missing_together_are_seen():
    timeline = [(0.0, [1, 2, 3]), (1.0, [2, 3]), (2.0, [3]), (3.0, [1, 2, 3])]
    assert most_down_at_once(timeline, [1, 2]) == 2
    assert most_down_at_once(timeline, [1, 3]) == 1  # broker 2 is not of the roll


def test_a_broker_down_is_recorded_by_its_open_step_or_a_halt_at_it():
    started = {"event": "step_started", "broker_id": 2, "run_id": "r1"}
    assert down_without_record([2], [started]) == []
    assert down_without_record([2], [started, {"event": "step_done", "broker_id": 2, "run_id": "r1"}]) == [2]
    assert down_without_record([2], [{"event": "halted", "broker_id": 2, "run_id": "r1"}]) == []
    assert down_without_record([1], [started]) == [1]


def test_the_record_is_true_only_closed_naming_every_broker_started_again():
    closed = {"status": "closed", "resolution": "restarted [1, 2] (in order, across every run of this roll)"}
    assert record_truth(closed, [1, 2], {1: 1, 2: 1})[0]
    assert not record_truth(closed, [1, 2, 3], {1: 1, 2: 1, 3: 1})[0]
    assert not record_truth(closed, [1, 2], {1: 1, 2: 0})[0]
    assert not record_truth({"status": "open"}, [1, 2], {1: 1, 2: 1})[0]


def test_the_fault_must_be_in_the_record():
    assert not fault_in_record("lock_deleted", [{"event": "completed"}], "restarted [1, 2]", [1, 2])[0]
    assert fault_in_record("lock_deleted", [{"event": "halted", "code": "lock_lost"}], "", [1, 2])[0]
    assert not fault_in_record("worker_kill", [{"event": "halted", "code": "x"}], "restarted [1, 2]", [1, 2])[0]
    assert fault_in_record("postgres", [{"event": "step_done", "journaled": True}], "", [1, 2])[0]
    late = [{"action": "stop_broker", "details": {"recorded_late": "first tried at ...; kept in the worker's journal"}}]
    assert fault_in_record("postgres", [{"event": "completed"}], "restarted [1, 2]", [1, 2], late)[0]
    assert not fault_in_record("postgres", [{"event": "completed"}], "restarted [1, 2]", [1, 2], [{"action": "stop_broker"}])[0]


def test_verdict_names_every_broken_invariant():
    seen = {"most_down": 2, "down_unrecorded": [3], "resume": "failed", "left_down": [3], "record_ok": False, "record_why": "open"}
    why = verdict(seen)["why"]
    assert not verdict(seen)["ok"] and len(why) == 5, why
    assert verdict({"most_down": 1, "down_unrecorded": [], "resume": "success", "left_down": [], "record_ok": True})["ok"]
