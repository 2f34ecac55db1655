"""What every detector reads: the snapshot, the cluster's health settings and the history. Pure."""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass, field
from typing import Any

from kafka_runbooks import clock
from kafka_runbooks.config import HealthSettings, LeadershipSettings, ZooKeeperHealthSettings
from kafka_runbooks.detect.history import History, Sample, broker_series, zookeeper_series_of
from kafka_runbooks.model import ClusterSnapshot, FetchErrorSeen, HostProbe


@dataclass(frozen=True)
class Context:
    snapshot: ClusterSnapshot
    settings: HealthSettings = field(default_factory=HealthSettings)
    history: History = field(default_factory=dict)
    zk_settings: ZooKeeperHealthSettings = field(default_factory=ZooKeeperHealthSettings)
    leadership: LeadershipSettings = field(default_factory=LeadershipSettings)
    kafka_version: str | None = None  # the cluster's configured version (brokers' own when the Admin API told)
    activity: tuple = ()  # the product's own remediations, running or recent (detect/activity.Activity)

    @property
    def now(self) -> dt.datetime:
        return clock.parse(self.snapshot.taken_at)

    def series(self, broker_id: int) -> list[Sample]:
        """This broker's samples, oldest first, ending with the current snapshot's when the caller
        appended it (the health operator does)."""
        return list(self.history.get(broker_series(broker_id), ()))

    def zk_series(self, address: str) -> list[Sample]:
        """A ZooKeeper server's samples, oldest first (the current one last when appended)."""
        return list(self.history.get(zookeeper_series_of(address), ()))

    def host_of(self, broker_id: int) -> str | None:
        b = self.snapshot.broker(broker_id)
        return b.host if b and b.host else None

    def known_ids(self) -> list[int]:
        s = self.snapshot
        return sorted(s.live_broker_ids | set(s.configured_broker_ids))

    def registration_age_s(self, broker_id: int) -> float | None:
        b = self.snapshot.broker(broker_id)
        if b is None or not b.registered_at:
            return None
        return max(0.0, (self.now - clock.parse(b.registered_at)).total_seconds())

    def last_answered_at(self, broker_id: int) -> dt.datetime | None:
        """When ``broker_id`` last answered a direct check (from the history, this check excluded)."""
        for s in reversed(self.series(broker_id)):
            if s.at != self.snapshot.taken_at and s.get("check_ok") is True:
                return clock.parse(s.at)
        return None

    def peer_fetch_errors(self, broker_id: int) -> dict[int, list[FetchErrorSeen]]:
        """{peer: errors} -- the peers' fetchers that failed to fetch from ``broker_id`` within each
        peer probe's window, after ``broker_id``'s current registration AND after it last answered
        a direct check: errors of an earlier, already-fixed episode never count."""
        b = self.snapshot.broker(broker_id)
        registered_at = clock.parse(b.registered_at) if b and b.registered_at else None
        answered = self.last_answered_at(broker_id)
        if answered is not None:
            registered_at = max(registered_at, answered) if registered_at else answered
        out: dict[int, list[FetchErrorSeen]] = {}
        for probe in self.snapshot.probes:
            if probe.broker_id == broker_id or not probe.reachable:
                continue
            since = clock.parse(probe.fetch_errors_since) if probe.fetch_errors_since else None
            if registered_at is not None:
                since = max(since, registered_at) if since else registered_at
            hits = [e for e in probe.fetch_errors if e.leader_broker_id == broker_id and (since is None or clock.parse(e.at) >= since)]
            if hits:
                out[probe.broker_id] = hits
        return out

    def outlier(self, broker_id: int, figure: str, ratio: float, minimum: int) -> dict[str, Any] | None:
        """A probe figure of ``broker_id`` far above its registered, reachable peers' median."""
        usable = {p.broker_id: p for p in self.snapshot.probes if p.reachable and p.broker_id in self.snapshot.live_broker_ids}
        if broker_id not in usable:
            return None
        value = _figure(usable[broker_id], figure)
        peer_values = [v for q_id, q in usable.items() if q_id != broker_id for v in [_figure(q, figure)] if v is not None]
        if value is None or not peer_values or value < minimum:
            return None
        median = statistics.median(peer_values)
        if median > 0 and value < ratio * median:
            return None
        return {"value": value, "peer_values": peer_values, "peer_median": median,
                "ratio": round(value / median, 1) if median > 0 else None}


def _figure(probe: HostProbe, figure: str) -> int | None:
    if figure == "close_wait":
        return int(probe.connection_states.get("CLOSE_WAIT", 0)) if probe.connection_states else None
    return getattr(probe, figure)
