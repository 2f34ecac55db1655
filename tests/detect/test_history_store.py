"""The history store: bounded series under incident_base, flock'd, shared by concurrent writers."""

from __future__ import annotations

import threading

import pytest

from detect_builders import at, snapshot
from kafka_runbooks.detect.history import HistoryStore, Sample, broker_samples, zookeeper_series


def test_samples_from_a_snapshot_carry_the_probe_figures():
    samples = broker_samples(snapshot())
    assert sorted(samples) == ["broker-1", "broker-2", "broker-3"]
    v = samples["broker-3"].values
    assert samples["broker-3"].at == at(0)
    assert v["registered"] is True and v["check_ok"] is True and v["process_state"] == "sleeping"
    assert v["close_wait"] == 0 and v["established"] == 20 and v["endpoints"].startswith("CLIENT://")


def test_series_are_bounded_and_ordered(tmp_path):
    store = HistoryStore(tmp_path, "lab", max_samples=5)
    for i in range(12):
        got = store.append({"broker-3": Sample(at(i), {"close_wait": i})})
    assert [s.get("close_wait") for s in got["broker-3"]] == [7, 8, 9, 10, 11]
    assert (tmp_path / "_health" / "lab" / "series" / "broker-3.jsonl").read_text().count("\n") == 5
    # the same instant appended twice is one sample
    got = store.append({"broker-3": Sample(at(11), {"close_wait": 99})})
    assert [s.get("close_wait") for s in got["broker-3"]] == [7, 8, 9, 10, 99]
    assert zookeeper_series("127.104.0.1", 2181) == "zookeeper-127.104.0.1-2181"


def test_concurrent_writers_lose_nothing(tmp_path):
    store = HistoryStore(tmp_path, "lab", max_samples=1000)

    def write(n):
        for i in range(40):
            store.append({f"broker-{n}": Sample(f"2026-01-01T00:00:{i:02d}.{n:03d}Z", {"i": i})})
            store.update_state(lambda st: {**st, "n": st.get("n", 0) + 1})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert all(len(v) == 40 for v in store.read_all().values())
    assert store.state()["n"] == 160


def test_hostile_names_are_refused(tmp_path):
    with pytest.raises(ValueError):
        HistoryStore(tmp_path, "../x", 5)
    with pytest.raises(ValueError):
        HistoryStore(tmp_path, "lab", 5).append({"../../etc/passwd": Sample(at(0))})
