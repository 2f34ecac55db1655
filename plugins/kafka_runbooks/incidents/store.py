"""Local incident store: one directory per incident with its record and an append-only audit log.

    <incident_base>/<incident_id>/incident.json   the record (rewritten atomically)
    <incident_base>/<incident_id>/audit.jsonl     every action: who, when, what, where, outcome

Writers take an flock on the incident directory, so concurrent tasks never lose an update.

An incident's status, and who moves it (every move is audited as ``status -> <new>``):

    open          opened (by the health check or by hand); no response started yet
    responding    a response run is working on it (``response_run``)
    closed        the response fixed it (approved, done and verified)
    needs_person  the response was rejected, refused or failed: a person owns it now. It no longer
                  holds back the automation: a new detection of the same problem opens a new incident
    resolved      its finding cleared for ``health.clear_checks`` checks in a row, by itself

Only ``responding`` dedupes new detections (detect/: "dedupe only while a response is running").
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from kafka_runbooks import clock

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")

OPEN = "open"
RESPONDING = "responding"
CLOSED = "closed"
NEEDS_PERSON = "needs_person"
RESOLVED = "resolved"
STATUSES = (OPEN, RESPONDING, CLOSED, NEEDS_PERSON, RESOLVED)
TERMINAL = (CLOSED, RESOLVED)  # nothing more happens to these


class IncidentError(ValueError):
    pass


def validate_id(value: str, what: str = "incident id") -> str:
    if not isinstance(value, str) or not _ID_RE.match(value) or ".." in value:
        raise IncidentError(f"invalid {what} {value!r}: letters, digits, '_', '.', '-' only")
    return value


def new_incident_id(cluster: str) -> str:
    validate_id(cluster, "cluster name")
    return f"{cluster}-{clock.stamp()}-{secrets.token_hex(3)}"


class IncidentStore:
    def __init__(self, base: str | os.PathLike[str]):
        self.base = Path(base)

    def _dir(self, incident_id: str) -> Path:
        return self.base / validate_id(incident_id)

    @contextlib.contextmanager
    def _locked(self, incident_id: str) -> Iterator[Path]:
        d = self._dir(incident_id)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield d
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def _write_record(d: Path, record: Mapping[str, Any]) -> None:
        tmp = d / "incident.json.tmp"
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str), encoding="utf-8")
        os.replace(tmp, d / "incident.json")

    def open(
        self,
        *,
        cluster: str,
        broker_ids: Sequence[int],
        reason: str,
        trigger: Mapping[str, Any] | None = None,
        opened_by: str,
        incident_id: str | None = None,
    ) -> dict[str, Any]:
        incident_id = incident_id or new_incident_id(cluster)
        with self._locked(incident_id) as d:
            if (d / "incident.json").exists():
                raise IncidentError(f"incident {incident_id} already exists")
            record = {
                "id": incident_id,
                "cluster": cluster,
                "status": OPEN,
                "broker_ids": sorted({int(b) for b in broker_ids}),
                "reason": reason,
                "trigger": dict(trigger) if trigger else None,
                "opened_at": clock.now_iso(),
                "opened_by": opened_by,
                "closed_at": None,
                "notes": [],
            }
            self._write_record(d, record)
        self.audit(incident_id, actor=opened_by, action="open_incident", outcome="ok", details={"reason": reason})
        return record

    def get(self, incident_id: str) -> dict[str, Any]:
        path = self._dir(incident_id) / "incident.json"
        if not path.exists():
            raise IncidentError(f"no incident {incident_id} in {self.base}")
        return json.loads(path.read_text(encoding="utf-8"))

    def update(self, incident_id: str, **fields: Any) -> dict[str, Any]:
        with self._locked(incident_id) as d:
            record = json.loads((d / "incident.json").read_text(encoding="utf-8"))
            note = fields.pop("note", None)
            record.update(fields)
            if note:
                record.setdefault("notes", []).append({"at": clock.now_iso(), "text": note})
            self._write_record(d, record)
            return record

    def transition(
        self, incident_id: str, status: str, *, actor: str, reason: str, details: Mapping[str, Any] | None = None, **fields: Any
    ) -> dict[str, Any]:
        """Move an incident to ``status`` (recording ``reason`` as a note), audited."""
        if status not in STATUSES:
            raise IncidentError(f"unknown incident status {status!r}")
        previous = self.get(incident_id).get("status")
        now = clock.now_iso()
        extra = {"closed_at": now} if status in TERMINAL else {}
        if status == NEEDS_PERSON:
            extra["needs_person_since"] = now
        record = self.update(incident_id, status=status, status_reason=reason, note=f"{status}: {reason}", **extra, **fields)
        self.audit(incident_id, actor=actor, action=f"status -> {status}", outcome="ok",
                   details={"from": previous, "reason": reason, **dict(details or {})})
        return record

    def close(self, incident_id: str, *, actor: str, resolution: str) -> dict[str, Any]:
        """The response fixed it."""
        record = self.update(incident_id, status=CLOSED, closed_at=clock.now_iso(), resolution=resolution)
        self.audit(incident_id, actor=actor, action="close_incident", outcome="ok", details={"resolution": resolution})
        return record

    def responding(self, incident_id: str, *, actor: str, run_id: str | None) -> dict[str, Any]:
        return self.transition(incident_id, RESPONDING, actor=actor, reason=f"response run {run_id}", response_run=run_id)

    def needs_person(self, incident_id: str, *, actor: str, reason: str, **details: Any) -> dict[str, Any]:
        return self.transition(incident_id, NEEDS_PERSON, actor=actor, reason=reason, details=details)

    def resolve(self, incident_id: str, *, actor: str, reason: str, **details: Any) -> dict[str, Any]:
        return self.transition(incident_id, RESOLVED, actor=actor, reason=reason, details=details, resolution=reason)

    def records(self, cluster: str | None = None) -> list[dict[str, Any]]:
        """Every incident record (of ``cluster``), oldest first."""
        if not self.base.exists():
            return []
        out = []
        for path in sorted(self.base.glob("*/incident.json")):
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if cluster is None or record.get("cluster") == cluster:
                out.append(record)
        return sorted(out, key=lambda r: (str(r.get("opened_at")), str(r.get("id"))))

    def find_open(self, cluster: str, broker_ids: Sequence[int], kind: str) -> dict[str, Any] | None:
        """A not-yet-ended incident (open, responding or needs_person) of this cluster and finding
        kind that covers one of these brokers."""
        wanted = {int(b) for b in broker_ids}
        for record in self.records(cluster):
            trigger_kind = (record.get("trigger") or {}).get("kind")
            if (
                record.get("status") not in TERMINAL
                and trigger_kind == kind
                and (wanted & set(record.get("broker_ids") or ()) or not wanted)
            ):
                return record
        return None

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
        entry = {
            "at": clock.now_iso(),
            "incident_id": incident_id,
            "actor": actor,
            "action": action,
            "host": host,
            "command": list(command) if command is not None else None,
            "outcome": outcome,
            "details": dict(details or {}),
        }
        with self._locked(incident_id) as d:
            with open(d / "audit.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        return entry

    def audit_trail(self, incident_id: str) -> list[dict[str, Any]]:
        path = self._dir(incident_id) / "audit.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
