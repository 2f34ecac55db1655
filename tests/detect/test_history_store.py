"""The history store in the state database (SQLite and PostgreSQL): bounded series, shared by concurrent writers."""

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


def test_series_are_bounded_and_ordered(state_db):
    import sqlalchemy as sa

    from kafka_runbooks.state.schema import health_sample

    store = HistoryStore(state_db, "lab", max_samples=5)
    for i in range(12):
        got = store.append({"broker-3": Sample(at(i), {"close_wait": i})})
    assert [s.get("close_wait") for s in got["broker-3"]] == [7, 8, 9, 10, 11]
    with state_db.read() as c:  # trimmed in the database, not only when read
        assert c.execute(sa.select(sa.func.count()).select_from(health_sample)).scalar_one() == 5
    # the same instant appended twice is one sample
    got = store.append({"broker-3": Sample(at(11), {"close_wait": 99})})
    assert [s.get("close_wait") for s in got["broker-3"]] == [7, 8, 9, 10, 99]
    assert zookeeper_series("127.104.0.1", 2181) == "zookeeper-127.104.0.1-2181"


def test_concurrent_writers_lose_nothing(state_db):
    store = HistoryStore(state_db, "lab", max_samples=1000)

    def write(n):
        for i in range(40):
            store.append({f"broker-{n}": Sample(f"2026-01-01T00:00:{i:02d}.{n:03d}Z", {"i": i})})
            store.update_state(lambda st: {**st, "n": st.get("n", 0) + 1})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert all(len(v) == 40 for v in store.read_all().values())
    assert store.state()["n"] == 160


def test_hostile_names_are_refused(state_db):
    with pytest.raises(ValueError):
        HistoryStore(state_db, "../x", 5)
    with pytest.raises(ValueError):
        HistoryStore(state_db, "lab", 5).append({"../../etc/passwd": Sample(at(0))})
    with pytest.raises(ValueError):
        HistoryStore(state_db, "lab", 5).update_state(dict, "../detections")


def test_clusters_keep_their_own_series_and_state(state_db):
    a, b = HistoryStore(state_db, "a", 5), HistoryStore(state_db, "b", 5)
    a.append({"broker-1": Sample(at(0), {"x": 1})})
    a.update_state(lambda st: {"checks": 1})
    assert b.read_all() == {} and b.state() == {}
    assert a.state() == {"checks": 1} and list(a.read_all()) == ["broker-1"]


def test_a_directory_is_refused_as_a_store(tmp_path):
    """State is never split by a caller that still passes a directory: the store refuses it, naming the fix."""
    with pytest.raises(TypeError, match="ClusterConfig"):
        HistoryStore(tmp_path, "lab", 5)
