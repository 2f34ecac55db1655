"""The progress ledger of one remediation: planned, approved, each step started/done/failed, halted.

    <incident_base>/<record id>/remediation.jsonl    append-only JSON lines, one per event

The record is the incident (incident restarts), the roll's own record (rolling restarts) or the election's own
record (preferred elections) in the incident store, so the ledger sits beside the audit trail of the same actions.
A later run with "resume" reads it (:func:`find_resumable`) to continue from the failed step: a broker with
``step_done`` is never restarted again by that roll; a partition in a ``step_done`` that carries ``partitions`` (an
election batch that converged) is never elected again by that election. Writers take an flock on the file; reading
and reducing (:func:`progress`) is pure.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from kafka_runbooks import clock
from kafka_runbooks.incidents.store import validate_id

FILE_NAME = "remediation.jsonl"

PLANNED = "planned"
APPROVAL = "approval"
APPROVAL_USED = "approval_used"
STEP_STARTED = "step_started"
STEP_DONE = "step_done"
STEP_FAILED = "step_failed"
HALTED = "halted"
COMPLETED = "completed"


@dataclass(frozen=True)
class Progress:
    completed: tuple[int, ...] = ()  # brokers restarted and through every gate, in order
    failed: Mapping[str, Any] | None = None  # the last step_failed entry not followed by that broker's step_done
    halted: Mapping[str, Any] | None = None
    done: bool = False  # a "completed" entry after the last halt
    requested: tuple[int, ...] = ()  # brokers of the first plan (what the roll was asked to do)
    runs: tuple[str, ...] = field(default_factory=tuple)
    partitions_done: tuple[str, ...] = ()  # partitions of the steps done that name them (election batches that converged)

    @property
    def resumable(self) -> bool:
        return not self.done and (self.halted is not None or self.failed is not None)


def progress(entries: Iterable[Mapping[str, Any]]) -> Progress:
    completed: list[int] = []
    failed: Mapping[str, Any] | None = None
    halted: Mapping[str, Any] | None = None
    done = False
    requested: tuple[int, ...] = ()
    runs: list[str] = []
    partitions_done: list[str] = []
    for e in entries:
        kind = e.get("event")
        if e.get("run_id") and e["run_id"] not in runs:
            runs.append(e["run_id"])
        if kind == PLANNED and not requested:
            requested = tuple(int(b) for b in (e.get("plan") or {}).get("requested") or ())
        elif kind == STEP_DONE and "partitions" in e:  # a step over partitions (an election batch): the broker goes on
            partitions_done += [str(n) for n in e.get("partitions") or () if str(n) not in partitions_done]
        elif kind == STEP_DONE:
            b = int(e["broker_id"])
            if b not in completed:
                completed.append(b)
            if failed is not None and int(failed["broker_id"]) == b:
                failed = None
        elif kind == STEP_FAILED:
            failed = e
        elif kind == HALTED:
            halted, done = e, False
        elif kind == COMPLETED:
            done, halted, failed = True, None, None
    return Progress(tuple(completed), failed, halted, done, requested, tuple(runs), tuple(partitions_done))


class Ledger:
    def __init__(self, incident_base: str | os.PathLike[str], record_id: str):
        self.record_id = validate_id(record_id, "record id")
        self.path = Path(incident_base) / self.record_id / FILE_NAME

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive access for a read-check-append sequence (e.g. using an approval once)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _write(self, entry: Mapping[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, sort_keys=True, default=str) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def append(self, event: str, run_id: str, *, _locked: bool = False, **fields: Any) -> dict[str, Any]:
        entry = {"at": clock.now_iso(), "event": event, "run_id": run_id, **fields}
        if _locked:
            self._write(entry)
        else:
            with self.locked():
                self._write(entry)
        return entry

    def entries(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for n, line in enumerate(self.path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"event": "unparsable", "line": n, "text": line[:200]})
        return out

    def progress(self) -> Progress:
        return progress(self.entries())


def find_resumable(store, cluster: str, kind: str) -> tuple[dict[str, Any], Progress] | None:
    """The latest open record of ``cluster`` started as ``kind`` (its trigger) whose ledger says it halted."""
    found = []
    for record in store.records(cluster):
        if record.get("status") == "open" and (record.get("trigger") or {}).get("kind") == kind:
            p = Ledger(store.base, record["id"]).progress()
            if p.resumable:
                found.append((record.get("opened_at") or "", record, p))
    if not found:
        return None
    _, record, p = max(found, key=lambda x: x[0])
    return record, p
