"""Incident records, their notes and the audit trail, in the state database (tables ``krb_incident``,
``krb_incident_note``, ``krb_audit``). The lifecycle they follow: ``incidents/store.py``.

Every move is one transaction: a status change writes the record, its note and its audit entry together. An
incident opened for a detected problem carries an ``open_key`` (unique): two health checks racing to open the same
incident open it once, the loser gets :class:`IncidentExists` with the winner's record. The audit trail and the
notes are append-only (the database refuses UPDATE and DELETE on them); a record is never deleted.
"""

from __future__ import annotations

import datetime as _dt
import re
import secrets
from typing import Any, Callable, Mapping, Sequence

import sqlalchemy as sa

from kafka_runbooks import clock
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.db import for_update, insert_ignoring_conflict

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # fullmatch: "$" would let a trailing newline through

OPEN = "open"
RESPONDING = "responding"
CLOSED = "closed"
NEEDS_PERSON = "needs_person"
RESOLVED = "resolved"
STATUSES = (OPEN, RESPONDING, CLOSED, NEEDS_PERSON, RESOLVED)
TERMINAL = (CLOSED, RESOLVED)  # nothing more happens to these
CAPTURE_STARTED = "capture_started"  # the audit entry the hourly cap of captures counts (``start_capture``)


class IncidentError(ValueError):
    pass


class IncidentMismatch(IncidentError):
    """The incident exists but is not this run's: another cluster's, or about other brokers."""


class ResponseRefused(IncidentError):
    """Least power: another response is working on the cluster, or its captures reached the hourly cap."""


class IncidentExists(IncidentError):
    """The incident (or one for the same problem: the same ``key``) is already open; ``record`` is that one."""

    def __init__(self, message: str, record: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.record = dict(record)


def validate_id(value: str, what: str = "incident id") -> str:
    if not isinstance(value, str) or not _ID_RE.fullmatch(value) or ".." in value:
        raise IncidentError(f"invalid {what} {value!r}: letters, digits, '_', '.', '-' only")
    return value


def new_incident_id(cluster: str) -> str:
    validate_id(cluster, "cluster name")
    return f"{cluster}-{clock.stamp()}-{secrets.token_hex(3)}"


def _kind(record: Mapping[str, Any]) -> str | None:
    kind = (record.get("trigger") or {}).get("kind")
    return str(kind)[:128] if kind is not None else None


class IncidentStore:
    """``IncidentStore(config)`` (a cluster's ``ClusterConfig``: its state database) or ``IncidentStore(state_db)``."""

    def __init__(self, source: Any) -> None:
        from kafka_runbooks.state import state_of

        self.db = state_of(source)

    # ------------------------------------------------------------------ records

    def open(
        self,
        *,
        cluster: str,
        broker_ids: Sequence[int],
        reason: str,
        trigger: Mapping[str, Any] | None = None,
        opened_by: str,
        incident_id: str | None = None,
        key: str | None = None,
    ) -> dict[str, Any]:
        """Opens an incident (audited ``open_incident``). ``key`` names the problem episode it is opened for: a
        second open with the same key -- a racing health check -- raises :class:`IncidentExists` with the first."""
        validate_id(cluster, "cluster name")
        incident_id = validate_id(incident_id or new_incident_id(cluster))
        now = clock.now_iso()
        record = {
            "id": incident_id,
            "cluster": cluster,
            "status": OPEN,
            "broker_ids": sorted({int(b) for b in broker_ids}),
            "reason": reason,
            "trigger": dict(trigger) if trigger else None,
            "opened_at": now,
            "opened_by": opened_by,
            "closed_at": None,
            "notes": [],
        }
        if key is not None:
            record["open_key"] = str(key)[:512]
        with self.db.write() as c:
            inserted = insert_ignoring_conflict(c, S.incident, {
                "id": incident_id, "cluster": cluster, "status": OPEN, "kind": _kind(record), "open_key": record.get("open_key"),
                "opened_at": now, "closed_at": None, "updated_at": now, "record": _without_notes(record),
            }, index_elements=None)
            if not inserted:
                if c.execute(sa.select(S.incident.c.id).where(S.incident.c.id == incident_id)).first() is not None:
                    raise IncidentExists(f"incident {incident_id} already exists", self._get(c, incident_id))
                other = c.execute(sa.select(S.incident.c.id).where(S.incident.c.open_key == record["open_key"])).scalar_one()
                raise IncidentExists(f"incident {other} is already open for this problem ({record['open_key']})",
                                     self._get(c, other))
            self._audit(c, incident_id, actor=opened_by, action="open_incident", outcome="ok", details={"reason": reason})
        return record

    def get(self, incident_id: str, *, cluster: str | None = None, broker_ids: Sequence[int] | None = None) -> dict[str, Any]:
        """The record; with ``cluster`` (and ``broker_ids``) only if it is that cluster's (and covers those brokers):
        another's is :class:`IncidentMismatch`, never taken over."""
        validate_id(incident_id)
        with self.db.read() as c:
            record = self._get(c, incident_id)
        if cluster is not None and record.get("cluster") != cluster:
            raise IncidentMismatch(f"incident {incident_id} belongs to cluster {record.get('cluster')!r}, not {cluster!r}: "
                                   "a response of one cluster never takes over another's incident")
        extra = sorted({int(b) for b in broker_ids or ()} - {int(b) for b in record.get("broker_ids") or ()})
        if extra:
            raise IncidentMismatch(f"incident {incident_id} is about brokers {sorted(record.get('broker_ids') or [])}, not "
                                   f"{extra}: start a response for those brokers without this incident id")
        return record

    def claim_response(self, incident_id: str, *, cluster: str, actor: str, run_id: str,
                       active: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any]:
        """Marks the incident ``responding`` for ``run_id`` and claimed by it -- unless another incident of the cluster is
        claimed by another run that ``active`` says still runs (queued or running): then :class:`ResponseRefused`
        naming it.
        One response per cluster at a time: the check and the mark are one transaction under the cluster's guard."""
        validate_id(incident_id)
        with self.db.write() as c:
            _cluster_guard(c, cluster)
            t = S.incident
            rows = c.execute(sa.select(t.c.id, t.c.record).where(t.c.cluster == cluster, t.c.status == RESPONDING,
                                                                 t.c.id != incident_id)).all()
            for row in rows:
                other = dict(row.record)
                run = other.get("response_run")
                # only a response that claimed its incident holds the cluster: one the health check marked and queued
                # (two incidents opened by one check) does not, or each of the two would refuse the other
                if run and run != run_id and other.get("response_claimed") == run and active(other):
                    raise ResponseRefused(f"response {other.get('response_run')} is working on cluster {cluster!r} (incident "
                                          f"{row.id}, brokers {other.get('broker_ids')}): one response per cluster at a time")
            current = self._locked_record(c, incident_id)
            if current.get("status") == RESPONDING and current.get("response_run") == run_id:
                # the health check marked it for this run already
                return self._update(c, incident_id, {"response_claimed": run_id})
            previous = current.get("status")
            record = self._update(c, incident_id, {"status": RESPONDING, "status_reason": f"response run {run_id}",
                                                   "note": f"{RESPONDING}: response run {run_id}", "response_run": run_id,
                                                   "response_claimed": run_id})
            self._audit(c, incident_id, actor=actor, action=f"status -> {RESPONDING}", outcome="ok",
                        details={"from": previous, "reason": f"response run {run_id}"})
            return record

    def start_capture(self, incident_id: str, *, cluster: str, actor: str, per_hour: int, details: Mapping[str, Any] | None = None
                      ) -> dict[str, Any]:
        """Records that a capture of ``cluster`` starts (audit ``capture_started``), unless ``per_hour`` captures of the
        cluster started in the last hour: then :class:`ResponseRefused` naming the cap. One transaction under the
        cluster's guard: two racing runs cannot both take the last one."""
        validate_id(incident_id)
        since = clock.iso(clock.now() - _dt.timedelta(hours=1))
        with self.db.write() as c:
            _cluster_guard(c, cluster)
            a, t = S.audit, S.incident
            started = c.execute(sa.select(a.c.at, a.c.incident_id).join(t, t.c.id == a.c.incident_id).where(
                t.c.cluster == cluster, a.c.action == CAPTURE_STARTED, a.c.at >= since).order_by(a.c.at)).all()
            if len(started) >= per_hour:
                raise ResponseRefused(
                    f"capture refused: {len(started)} captures of cluster {cluster!r} started in the last hour (since "
                    f"{started[0].at}, incidents {sorted({r.incident_id for r in started})}), the cap is capture.max_per_hour "
                    f"= {per_hour}; the next is possible after {_plus_hour(started[-per_hour].at)}")
            return self._audit(c, incident_id, actor=actor, action=CAPTURE_STARTED, outcome="ok",
                               details={"cluster": cluster, "this_hour": len(started) + 1, "cap": per_hour, **dict(details or {})})

    def update(self, incident_id: str, **fields: Any) -> dict[str, Any]:
        """Sets ``fields`` on the record; ``note`` adds a note instead."""
        validate_id(incident_id)
        with self.db.write() as c:
            return self._update(c, incident_id, fields)

    def transition(
        self, incident_id: str, status: str, *, actor: str, reason: str, details: Mapping[str, Any] | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Move an incident to ``status`` (recording ``reason`` as a note), audited -- one transaction."""
        if status not in STATUSES:
            raise IncidentError(f"unknown incident status {status!r}")
        validate_id(incident_id)
        with self.db.write() as c:
            previous = self._locked_record(c, incident_id).get("status")
            now = clock.now_iso()
            extra: dict[str, Any] = {"closed_at": now} if status in TERMINAL else {}
            if status == NEEDS_PERSON:
                extra["needs_person_since"] = now
            record = self._update(c, incident_id, {"status": status, "status_reason": reason, "note": f"{status}: {reason}",
                                                   **extra, **fields})
            self._audit(c, incident_id, actor=actor, action=f"status -> {status}", outcome="ok",
                        details={"from": previous, "reason": reason, **dict(details or {})})
            return record

    def close(self, incident_id: str, *, actor: str, resolution: str) -> dict[str, Any]:
        """The response fixed it."""
        validate_id(incident_id)
        with self.db.write() as c:
            record = self._update(c, incident_id, {"status": CLOSED, "closed_at": clock.now_iso(), "resolution": resolution})
            self._audit(c, incident_id, actor=actor, action="close_incident", outcome="ok", details={"resolution": resolution})
            return record

    def responding(self, incident_id: str, *, actor: str, run_id: str | None) -> dict[str, Any]:
        return self.transition(incident_id, RESPONDING, actor=actor, reason=f"response run {run_id}", response_run=run_id)

    def needs_person(self, incident_id: str, *, actor: str, reason: str, **details: Any) -> dict[str, Any]:
        return self.transition(incident_id, NEEDS_PERSON, actor=actor, reason=reason, details=details)

    def resolve(self, incident_id: str, *, actor: str, reason: str, **details: Any) -> dict[str, Any]:
        return self.transition(incident_id, RESOLVED, actor=actor, reason=reason, details=details, resolution=reason)

    def records(self, cluster: str | None = None, *, statuses: Sequence[str] | None = None) -> list[dict[str, Any]]:
        """Every incident record (of ``cluster``; in ``statuses``), oldest first."""
        t = S.incident
        q = sa.select(t.c.id, t.c.record).order_by(t.c.opened_at, t.c.id)
        notes_q = sa.select(S.incident_note.c.incident_id, S.incident_note.c.at, S.incident_note.c.text).order_by(S.incident_note.c.seq)
        if cluster is not None:
            q = q.where(t.c.cluster == cluster)
            notes_q = notes_q.join(t, t.c.id == S.incident_note.c.incident_id).where(t.c.cluster == cluster)
        if statuses is not None:
            q = q.where(t.c.status.in_(list(statuses)))
            notes_q = notes_q.where(S.incident_note.c.incident_id.in_(sa.select(t.c.id).where(t.c.status.in_(list(statuses)))))
        with self.db.read() as c:
            rows = c.execute(q).all()
            notes: dict[str, list[dict[str, str]]] = {}
            for n in c.execute(notes_q):
                notes.setdefault(n.incident_id, []).append({"at": n.at, "text": n.text})
        return [{**r.record, "notes": notes.get(r.id, [])} for r in rows]

    def find_open(self, cluster: str, broker_ids: Sequence[int], kind: str) -> dict[str, Any] | None:
        """A not-yet-ended incident (open, responding or needs_person) of this cluster and finding
        kind that covers one of these brokers."""
        wanted = {int(b) for b in broker_ids}
        for record in self.records(cluster, statuses=[s for s in STATUSES if s not in TERMINAL]):
            if _kind(record) == kind and (wanted & set(record.get("broker_ids") or ()) or not wanted):
                return record
        return None

    # ------------------------------------------------------------------ audit trail

    def audit(
        self,
        incident_id: str,
        *,
        actor: str,
        action: str,
        outcome: str,
        host: str | None = None,
        command: Sequence[str] | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        validate_id(incident_id)
        with self.db.write() as c:
            return self._audit(c, incident_id, actor=actor, action=action, outcome=outcome, host=host, command=command,
                               details=details)

    def audit_trail(self, incident_id: str) -> list[dict[str, Any]]:
        validate_id(incident_id)
        t = S.audit
        with self.db.read() as c:
            rows = c.execute(sa.select(t).where(t.c.incident_id == incident_id).order_by(t.c.seq)).all()
        return [{"at": r.at, "incident_id": r.incident_id, "actor": r.actor, "action": r.action, "host": r.host,
                 "command": r.command, "outcome": r.outcome, "details": r.details} for r in rows]

    # ------------------------------------------------------------------ inside a transaction

    @staticmethod
    def _audit(c, incident_id: str, *, actor: str, action: str, outcome: str, host: str | None = None,
               command: Sequence[str] | None = None, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
        entry = {
            "at": clock.now_iso(),
            "incident_id": incident_id,
            "actor": str(actor),
            "action": str(action),
            "host": host,
            "command": list(command) if command is not None else None,
            "outcome": str(outcome),
            "details": dict(details or {}),
        }
        c.execute(sa.insert(S.audit).values(**entry))
        return entry

    @staticmethod
    def _get(c, incident_id: str) -> dict[str, Any]:
        row = c.execute(sa.select(S.incident.c.record).where(S.incident.c.id == incident_id)).first()
        if row is None:
            raise IncidentError(f"no incident {incident_id}")
        n = S.incident_note
        notes = [{"at": r.at, "text": r.text}
                 for r in c.execute(sa.select(n.c.at, n.c.text).where(n.c.incident_id == incident_id).order_by(n.c.seq))]
        return {**row.record, "notes": notes}

    @staticmethod
    def _locked_record(c, incident_id: str) -> dict[str, Any]:
        row = c.execute(for_update(c, sa.select(S.incident.c.record).where(S.incident.c.id == incident_id))).first()
        if row is None:
            raise IncidentError(f"no incident {incident_id}")
        return dict(row.record)

    def _update(self, c, incident_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        fields = dict(fields)
        note = fields.pop("note", None)
        fields.pop("notes", None)
        record = self._locked_record(c, incident_id)
        record.update(fields)
        now = clock.now_iso()
        c.execute(sa.update(S.incident).where(S.incident.c.id == incident_id).values(
            status=str(record.get("status")), closed_at=record.get("closed_at"), kind=_kind(record), updated_at=now,
            record=_without_notes(record)))
        if note:
            c.execute(sa.insert(S.incident_note).values(incident_id=incident_id, at=now, text=str(note)))
        return self._get(c, incident_id)


def _cluster_guard(c, cluster: str) -> None:
    """Serializes the cluster's least-power checks with their writes: PostgreSQL's transaction-scoped advisory lock
    on the cluster's name; SQLite's writing transaction (BEGIN IMMEDIATE) already holds the database's write lock."""
    if c.dialect.name == "postgresql":
        c.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"kafka_runbooks:cluster:{cluster}"})


def _plus_hour(at: str) -> str:
    try:
        return clock.iso(clock.parse(at) + _dt.timedelta(hours=1))
    except ValueError:
        return "an hour after the oldest"


def _without_notes(record: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != "notes"}
