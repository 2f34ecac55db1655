"""One health check into the history: the samples of every series it feeds, appended under the store's lock. The
history itself (``detect/history.py``) knows nothing of the detectors; this module puts their samples together."""

from __future__ import annotations

from typing import Any

from kafka_runbooks.detect.history import HistoryStore, Sample, health_samples
from kafka_runbooks.detect.leadership_state import LEADERSHIP, leadership_sample
from kafka_runbooks.detect.replicas import REPLICAS, replica_sample
from kafka_runbooks.model import ClusterSnapshot


def record_check(store: HistoryStore, snapshot: ClusterSnapshot) -> dict[str, list[Sample]]:
    """Everything one health check adds to the history -- a sample per broker and ZooKeeper server, the ``leadership``
    sample (only what changed since the last check, against the full map kept in the store's ``leadership`` state) and
    the ``replicas`` sample (the replicas out of their ISR, ``detect/replicas.py``) -- appended; returns the history as
    the detectors get it."""
    if snapshot.zookeeper_error:
        # nothing is known of the brokers and partitions (not "unregistered"): only the ensemble's members are
        # recorded, and that ZooKeeper could not be read (the "since when" of zookeeper_unreachable)
        samples = {k: v for k, v in health_samples(snapshot).items() if k.startswith("zookeeper-")}
        return store.append({**samples, LEADERSHIP: Sample(at=snapshot.taken_at, values={"zookeeper_error": snapshot.zookeeper_error})})
    box: dict[str, Sample] = {}

    def advance(previous: dict[str, Any]) -> dict[str, Any]:
        box["sample"], new = leadership_sample(previous, snapshot)
        return new

    store.update_state(advance, LEADERSHIP)
    return store.append({**health_samples(snapshot), LEADERSHIP: box["sample"],
                         REPLICAS: Sample(at=snapshot.taken_at, values=replica_sample(snapshot))})
