"""The health check's memory in the state database: bounded series of samples per cluster (``krb_health_sample``:
one row per series and instant, the newest ``max_samples`` kept) and named JSON state per cluster
(``krb_health_state``: ``detections`` -- the findings' streaks, ``leadership`` -- the last leader and epoch of every
partition). What goes into them: ``detect/history.py``.

An append and its trim are one transaction; a state update is a read-modify-write of its row under the row's lock
(``SELECT ... FOR UPDATE`` on PostgreSQL, the write lock on SQLite), so two health checks never lose or interleave
an update.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import sqlalchemy as sa

from kafka_runbooks import clock
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.db import for_update, insert_ignoring_conflict, upsert

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
DETECTIONS = "detections"

RawSample = Mapping[str, Any]  # {"at": ISO-8601, "values": {...}}


def validate_name(name: str, what: str = "series name") -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or ".." in name:
        raise ValueError(f"invalid {what} {name!r}")
    return name


class HealthHistory:
    """One cluster's series and state: ``HealthHistory(config or state_db, cluster, max_samples)``."""

    def __init__(self, source: Any, cluster: str, max_samples: int) -> None:
        from kafka_runbooks.state import state_of

        self.cluster = validate_name(cluster, "cluster name")
        if int(max_samples) < 2:
            raise ValueError("max_samples must be >= 2")
        self.max_samples = int(max_samples)
        self.db = state_of(source)

    # ------------------------------------------------------------------ series

    def read_raw(self, series: str) -> list[dict[str, Any]]:
        with self.db.read() as c:
            return self._series(c, [validate_name(series)]).get(series, [])

    def read_all_raw(self) -> dict[str, list[dict[str, Any]]]:
        with self.db.read() as c:
            return self._series(c, None)

    def append_raw(self, samples: Mapping[str, RawSample]) -> dict[str, list[dict[str, Any]]]:
        """One sample more in each named series (a sample at the same instant replaces it), each trimmed to the
        newest ``max_samples``; returns every series as stored after the append, oldest first."""
        for series in samples:
            validate_name(series)
        t = S.health_sample
        with self.db.write() as c:
            for series, sample in samples.items():
                at = str(sample["at"])
                upsert(c, t, {"cluster": self.cluster, "series": series, "at": at, "data": dict(sample.get("values") or {})},
                       ["cluster", "series", "at"], ["data"])
                keep = (sa.select(t.c.id).where(t.c.cluster == self.cluster, t.c.series == series)
                        .order_by(t.c.at.desc(), t.c.id.desc()).limit(self.max_samples))
                c.execute(sa.delete(t).where(t.c.cluster == self.cluster, t.c.series == series, t.c.id.not_in(keep)))
            return self._series(c, None)

    def _series(self, c, names: list[str] | None) -> dict[str, list[dict[str, Any]]]:
        t = S.health_sample
        q = sa.select(t.c.series, t.c.at, t.c.data).where(t.c.cluster == self.cluster).order_by(t.c.series, t.c.at, t.c.id)
        if names is not None:
            q = q.where(t.c.series.in_(names))
        out: dict[str, list[dict[str, Any]]] = {}
        for r in c.execute(q):
            out.setdefault(r.series, []).append({"at": r.at, "values": r.data})
        return {k: v[-self.max_samples:] for k, v in out.items()}

    # ------------------------------------------------------------------ state

    def update_state(self, fn: Callable[[dict[str, Any]], dict[str, Any]], name: str = DETECTIONS) -> dict[str, Any]:
        """Read-modify-write of the named state under its row's lock; ``fn`` gets the current state ({} at first)."""
        validate_name(name, "state name")
        t = S.health_state
        where = (t.c.cluster == self.cluster, t.c.name == name)
        with self.db.write() as c:
            insert_ignoring_conflict(c, t, {"cluster": self.cluster, "name": name, "updated_at": clock.now_iso(), "state": {}},
                                     index_elements=["cluster", "name"])
            current = c.execute(for_update(c, sa.select(t.c.state).where(*where))).scalar_one()
            new = fn(dict(current or {}))
            c.execute(sa.update(t).where(*where).values(state=new, updated_at=clock.now_iso()))
            return new

    def state(self, name: str = DETECTIONS) -> dict[str, Any]:
        validate_name(name, "state name")
        t = S.health_state
        with self.db.read() as c:
            found = c.execute(sa.select(t.c.state).where(t.c.cluster == self.cluster, t.c.name == name)).scalar_one_or_none()
        return dict(found or {})
