"""The health check's memory: a bounded time series per broker (and per ZooKeeper server), and the
state of the findings between checks.

Where it lives, and why: Airflow 3 tasks run through the Task SDK and may not open the metadata
database, and a custom ORM model would need a migration of Airflow's schema. The incident store
already keeps its records as files under ``incident_base`` (shared by the workers that run these
DAGs), with flock'd writers; the history sits beside it::

    <incident_base>/_health/<cluster>/series/<series>.jsonl   one sample a line, newest last,
                                                              at most health.history_samples lines
    <incident_base>/_health/<cluster>/detections.json         the findings' streaks (detect/streaks.py)

``_health`` cannot collide with an incident id (those start with a letter or digit). Every write
takes an exclusive flock on the cluster's lock file, rewrites the file atomically and keeps the
newest N samples, so two health runs never lose or interleave samples.

Series names: ``broker-<id>`` and ``zookeeper-<host>-<port>`` (the ZooKeeper-server probe --
mntr/srvr/cons -- adds its samples there with :meth:`HistoryStore.append`), and ``leadership``: per check,
the partitions whose leader or leader epoch changed since the previous check and the brokers whose own
metadata disagreed with ZooKeeper (``detect/leadership.py``; the last full leader/epoch map is the state
file ``leadership.json``, so a sample holds only what changed).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from kafka_runbooks.model import ClusterSnapshot

_SERIES_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
HEALTH_DIR = "_health"

Value = float | int | str | bool | None


@dataclass(frozen=True)
class Sample:
    """The probe figures of one series at one time (``at``: ISO-8601 UTC)."""

    at: str
    values: Mapping[str, Value] = field(default_factory=dict)

    def get(self, key: str) -> Value:
        return self.values.get(key)

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at, "values": dict(self.values)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Sample":
        return cls(at=str(d["at"]), values=dict(d.get("values") or {}))


History = Mapping[str, Sequence[Sample]]  # series name -> samples, oldest first (the current one last)


def broker_series(broker_id: int) -> str:
    return f"broker-{int(broker_id)}"


def zookeeper_series(host: str, port: int) -> str:
    return validate_series(f"zookeeper-{host}-{int(port)}".replace(":", "_"))


def zookeeper_series_of(address: str) -> str:
    """The series of the ZooKeeper server asked at ``"host:port"``."""
    host, _, port = address.rpartition(":")
    return zookeeper_series(host, int(port))


def validate_series(name: str) -> str:
    if not isinstance(name, str) or not _SERIES_RE.fullmatch(name) or ".." in name:
        raise ValueError(f"invalid series name {name!r}")
    return name


# --------------------------------------------------------------------------- samples (pure)


def broker_samples(snapshot: ClusterSnapshot) -> dict[str, Sample]:
    """One sample per broker that is registered, configured or probed, from this snapshot."""
    ids = sorted(snapshot.live_broker_ids | set(snapshot.configured_broker_ids) | {p.broker_id for p in snapshot.probes})
    out: dict[str, Sample] = {}
    for bid in ids:
        b = snapshot.broker(bid)
        probe = snapshot.probe(bid)
        check = snapshot.kafka_check(bid)
        canary = snapshot.canary_of(bid)
        values: dict[str, Value] = {
            "registered": b is not None,
            "session_id": b.session_id if b else None,
            "registered_at": b.registered_at if b else None,
            "endpoints": ",".join(b.endpoints) if b else None,
            "check_ok": check.ok if check else None,
            "check_ms": check.latency_ms if check else None,
            "canary_ok": canary.ok if canary else None,
            "isr_member_of": sum(1 for p in snapshot.partitions if bid in p.isr),
            "leads": sum(1 for p in snapshot.partitions if p.leader == bid),
        }
        if probe is not None:
            values.update(
                reachable=probe.reachable,
                pid=probe.pid,
                process_state=probe.process_state,
                listening=probe.listening,
                close_wait=probe.connection_states.get("CLOSE_WAIT", 0) if probe.connection_states else None,
                established=probe.connection_states.get("ESTABLISHED", 0) if probe.connection_states else None,
                recv_q_bytes=probe.recv_q_bytes,
                recv_q_sockets=probe.recv_q_sockets,
                bytes_received=probe.bytes_received,
                bytes_acked=probe.bytes_acked,
                open_files=probe.open_files,
                log_age_s=probe.server_log_age_s,
                fetch_errors_logged=probe.fetch_errors_total,
                mem_available_bytes=probe.mem_available_bytes,
                process_rss_bytes=probe.process_rss_bytes,
                log_cleaner_threads=probe.log_cleaner_threads,
                loader_read_bytes=probe.loader_read_bytes,
                offsets_segments_max=max((o.data_segments for o in probe.offsets_dirs), default=None),
                unknown_api_requests=len(probe.lines("unknown_api_key")),
            )
        values.update(_leadership_values(snapshot, bid))
        out[broker_series(bid)] = Sample(at=snapshot.taken_at, values=values)
    return out


def _leadership_values(snapshot: ClusterSnapshot, bid: int) -> dict[str, Value]:
    """Issue 7's per-broker figures: its own metadata view answered, its canary's error, its request-path JMX."""
    from kafka_runbooks.detect.jmxtool import metrics_summary

    out: dict[str, Value] = {}
    view = snapshot.view_of(bid)
    if view is not None:
        out["view_ok"] = view.ok
    canary = snapshot.canary_of(bid)
    if canary is not None and not canary.ok:
        out["canary_error"] = canary.error_code
    metrics = snapshot.metrics_of(bid)
    if metrics is not None and metrics.ok:
        out.update(metrics_summary(metrics))
    return out


def zookeeper_samples(snapshot: ClusterSnapshot) -> dict[str, Sample]:
    """One sample per probed ZooKeeper server."""
    out: dict[str, Sample] = {}
    for z in snapshot.zookeeper:
        values: dict[str, Value] = {
            "server": z.server,
            "reachable": z.reachable,
            "serving": z.serving,
            "mode": z.mode,
            "zxid": z.zxid,
            "epoch": z.epoch,
            "connections": z.connections,
            "packets_received": z.packets_received,
            "packets_sent": z.packets_sent,
            "outstanding": z.outstanding,
            "latency_avg_ms": z.latency_avg_ms,
            "uptime_ms": z.uptime_ms,
            "elections": z.elections,
            "learners": z.learners,
            "synced_followers": z.synced_followers,
            "pending_syncs": z.pending_syncs,
        }
        if z.host_reachable is not None:
            values.update(host_reachable=z.host_reachable, pid=z.pid, process_state=z.process_state,
                          process_uptime_s=z.process_uptime_s, load_1m=z.load_1m,
                          cpus=z.cpus, follow_exceptions=len(z.lines("zk_follow_exception")))
        out[zookeeper_series_of(z.address)] = Sample(at=snapshot.taken_at, values=values)
    return out


def health_samples(snapshot: ClusterSnapshot) -> dict[str, Sample]:
    """Everything one health check adds to the history: brokers and ZooKeeper servers."""
    return {**broker_samples(snapshot), **zookeeper_samples(snapshot)}


# --------------------------------------------------------------------------- the store (I/O)


class HistoryStore:
    def __init__(self, incident_base: str | os.PathLike, cluster: str, max_samples: int) -> None:
        if not _SERIES_RE.fullmatch(cluster):
            raise ValueError(f"invalid cluster name {cluster!r}")
        if max_samples < 2:
            raise ValueError("max_samples must be >= 2")
        self.root = Path(incident_base) / HEALTH_DIR / cluster
        self.max_samples = int(max_samples)

    @contextlib.contextmanager
    def locked(self) -> Iterator[Path]:
        (self.root / "series").mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self.root
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _path(self, series: str) -> Path:
        return self.root / "series" / f"{validate_series(series)}.jsonl"

    def _read(self, series: str) -> list[Sample]:
        path = self._path(series)
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(Sample.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                continue  # a torn or hand-edited line is skipped, never fatal
        return out[-self.max_samples:]

    def _write(self, series: str, samples: Sequence[Sample]) -> None:
        path = self._path(series)
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(s.to_dict(), sort_keys=True, default=str) + "\n" for s in samples), encoding="utf-8")
        os.replace(tmp, path)

    def read(self, series: str) -> list[Sample]:
        with self.locked():
            return self._read(series)

    def read_all(self) -> dict[str, list[Sample]]:
        with self.locked():
            return {p.stem: self._read(p.stem) for p in sorted((self.root / "series").glob("*.jsonl"))}

    def append(self, samples: Mapping[str, Sample]) -> dict[str, list[Sample]]:
        """Add one sample to each named series; returns every series (bounded, oldest first) as
        stored after the append -- what the detectors get."""
        with self.locked():
            for series, sample in samples.items():
                kept = [s for s in self._read(series) if s.at != sample.at] + [sample]
                self._write(series, kept[-self.max_samples:])
            return {p.stem: self._read(p.stem) for p in sorted((self.root / "series").glob("*.jsonl"))}

    # the detections' state (a JSON object), read-modify-write under the same lock; ``name`` picks another state
    # file (e.g. "leadership": the last leader and epoch of every partition, to record only what changed)
    def update_state(self, fn: Callable[[dict[str, Any]], dict[str, Any]], name: str = "detections") -> dict[str, Any]:
        with self.locked():
            path = self.root / f"{validate_series(name)}.json"
            try:
                state = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            except ValueError:
                state = {}
            new = fn(state)
            tmp = path.with_suffix(".json.tmp")
            tmp.write_text(json.dumps(new, indent=1, sort_keys=True, default=str), encoding="utf-8")
            os.replace(tmp, path)
            return new

    def state(self) -> dict[str, Any]:
        with self.locked():
            path = self.root / "detections.json"
            try:
                return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
            except ValueError:
                return {}
