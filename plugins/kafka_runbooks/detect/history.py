"""The health check's memory: a bounded time series per broker (and per ZooKeeper server), and the
state of the findings between checks.

Where it lives: the product's state database (``state/history.py``: tables ``krb_health_sample`` and
``krb_health_state``), reached through the Airflow connection ``kafka_runbooks_db`` or, without it, the embedded
SQLite under the cluster's ``incident_base`` -- never Airflow's metadata database, which Airflow 3 tasks may not
open. Every series keeps the newest ``health.history_samples`` samples; an append and its trim are one transaction,
and the findings' streaks (``detections``, incidents/lifecycle.py) and the leadership map are updated under their
row's lock, so two health runs never lose or interleave samples or state. Build the store from the cluster's
settings: ``HistoryStore(config)``.

Series names: ``broker-<id>`` and ``zookeeper-<host>-<port>`` (the ZooKeeper-server probe --
mntr/srvr/cons -- adds its samples there with :meth:`HistoryStore.append`), and ``leadership``: per check,
the partitions whose leader or leader epoch changed since the previous check and the brokers whose own
metadata disagreed with ZooKeeper (``detect/leadership.py``; the last full leader/epoch map is the state
``leadership``, so a sample holds only what changed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kafka_runbooks.model import ClusterSnapshot
from kafka_runbooks.state.history import HealthHistory, validate_name

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
    return validate_name(name)


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
                # the JVM's own "Kafka version : N" line ("": looked for, none): read once per JVM (observe.logged_versions)
                kafka_version_logged=(probe.kafka_version_logged or "") if probe.kafka_version_log else None,
            )
        values.update(_leadership_values(snapshot, bid))
        out[broker_series(bid)] = Sample(at=snapshot.taken_at, values=values)
    return out


def _leadership_values(snapshot: ClusterSnapshot, bid: int) -> dict[str, Value]:
    """Issue 7's per-broker figures: its own metadata view answered, its canary's error, its request-path JMX."""
    from kafka_runbooks.host.jmxtool import metrics_summary

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


class HistoryStore(HealthHistory):
    """``HistoryStore(config)`` (the cluster's state database, name and ``health.history_samples``), or
    ``HistoryStore(state_db, cluster, max_samples)``. Series come back as :class:`Sample` lists, oldest first."""

    def __init__(self, source: Any, cluster: str | None = None, max_samples: int | None = None) -> None:
        if cluster is None:
            cluster = source.name
        if max_samples is None:
            max_samples = source.health.history_samples
        super().__init__(source, cluster, max_samples)

    def read(self, series: str) -> list[Sample]:
        return [Sample.from_dict(d) for d in self.read_raw(series)]

    def read_all(self) -> dict[str, list[Sample]]:
        return _samples(self.read_all_raw())

    def append(self, samples: Mapping[str, Sample]) -> dict[str, list[Sample]]:
        """Add one sample to each named series; returns every series (bounded, oldest first) as
        stored after the append -- what the detectors get."""
        return _samples(self.append_raw({name: s.to_dict() for name, s in samples.items()}))

    # update_state(fn, name="detections") and state(name="detections"): the detections' state (a JSON object),
    # read-modify-write under its row's lock; ``name`` picks another state (e.g. "leadership": the last leader and
    # epoch of every partition, to record only what changed) -- inherited from state.history.HealthHistory


def _samples(raw: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[Sample]]:
    return {name: [Sample.from_dict(d) for d in rows] for name, rows in raw.items()}
