"""The progress ledger of one remediation: planned, approval requested/decided/used, each step started/done/failed,
halted, completed -- an append-only list of events in the product's state database (``state/ledger.py``: table
``krb_ledger``, with the approval markers in ``krb_approval``). Build it from the cluster's settings:
``Ledger(config, record_id)``.

The record is the incident (incident restarts), the roll's own record (rolling restarts) or the election's own
record (preferred elections) in the incident store, so the ledger sits beside the audit trail of the same actions.
A later run with "resume" reads it (:func:`find_resumable`) to continue from the failed step: a broker with
``step_done`` is never restarted again by that roll; a partition in a ``step_done`` that carries ``partitions`` (an
election batch that converged) is never elected again by that election. ``Ledger.locked()`` is one transaction for a
read-check-append sequence; an approval is used by one conditional update of its marker (``ApprovalUsed`` when
another worker used it first). Reducing the entries (:func:`progress`) is pure.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kafka_runbooks.state.ledger import APPROVAL, APPROVAL_REQUESTED, APPROVAL_USED, ApprovalMarkerError, ApprovalUsed, LedgerStore

PLANNED = "planned"
STEP_STARTED = "step_started"
STEP_DONE = "step_done"
STEP_FAILED = "step_failed"
HALTED = "halted"
COMPLETED = "completed"
REFUSED = "refused"  # the run changed nothing: it ended before any stop (lock busy, plan changed, a check refused)
CUT = "cut"  # the worker running the step died: the close task or the resume records it (``executor.interrupted_step``)
RESUMED = "resumed"  # a resumed restart step's decision on a broker an earlier run's unfinished step stopped (``resumption``)
STATE = "state"  # a unit of work entered a state (``engine.Board.move``): where the action-free transitions are recorded

log = logging.getLogger(__name__)


class StepState(str, Enum):
    """The state of one unit of work (a broker's restart, an election batch, a demotion), as the ledger records it
    (``state`` of an entry). Which state may follow which: ``remediate/engine.py`` (``TRANSITIONS``)."""

    PLANNED = "planned"
    CHECKING = "checking"
    STOPPING = "stopping"  # the intent: committed before the stop command leaves
    STOPPED = "stopped"
    STARTING = "starting"
    MOVING = "moving"  # a demotion's reassignment (its intent committed before it is written)
    ELECTING = "electing"  # an election batch or a demotion's election (its intent committed before the znode is written)
    GATING = "gating"
    DONE = "done"
    REFUSED = "refused"  # ended before its stop command: nothing stopped
    HALTED = "halted"  # ended after its stop command: the cluster is left as it is, described
    CUT = "cut"  # its worker died mid-step


@dataclass(frozen=True)
class Reason:
    """Why a unit of work was refused or halted: a stable ``code`` and the sentence on-call reads."""

    code: str
    sentence: str

    def to_dict(self) -> dict[str, str]:
        return {"code": self.code, "sentence": self.sentence}

    def __str__(self) -> str:
        return self.sentence


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
        elif kind == REFUSED and (completed or partitions_done) and not done:  # a refused run after some work: resumable
            halted = e
    return Progress(tuple(completed), failed, halted, done, requested, tuple(runs), tuple(partitions_done))


class Ledger(LedgerStore):
    """``Ledger(config or state_db, record_id)``: ``append``, ``entries``, ``locked`` (``state/ledger.py``), ``progress``."""

    def progress(self) -> Progress:
        return progress(self.entries())


def find_resumable(store, cluster: str, kind: str) -> tuple[dict[str, Any], Progress] | None:
    """The latest open record of ``cluster`` started as ``kind`` (its trigger) whose ledger says it halted."""
    found = []
    for record in store.records(cluster, statuses=["open"]):
        if record.get("status") == "open" and (record.get("trigger") or {}).get("kind") == kind:
            p = Ledger(store.db, record["id"]).progress()
            if p.resumable:
                found.append((record.get("opened_at") or "", record, p))
    if not found:
        return None
    _, record, p = max(found, key=lambda x: x[0])
    return record, p


class PlanNotRecorded(RuntimeError):
    """No plan with that digest was recorded by the plan task of this record: nothing is approved or run from XCom."""


def recorded_plan(entries: Iterable[Mapping[str, Any]], digest: str):
    """(the plan, the findings recorded with it) of the ``planned`` entry with ``digest`` -- the plan the plan task
    computed and recorded in the state database, whatever XCom carries. The digest is computed again from the recorded
    plan. PlanNotRecorded otherwise."""
    from kafka_runbooks.model import Plan  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.digest import plan_digest  # deferred: loaded on first use, not when a DAG file is parsed

    for e in entries:
        if e.get("event") == PLANNED and e.get("digest") == digest and isinstance(e.get("plan"), Mapping):
            plan = Plan.from_dict(e["plan"])
            if plan_digest(plan) != digest:
                raise PlanNotRecorded(f"the recorded plan does not match its digest {str(digest)[:12]}")
            return plan, list(e.get("findings") or [])
    raise PlanNotRecorded(f"no plan with digest {str(digest)[:12]} was recorded for this record by its plan task")


def waiver_refusals(plan, findings: Iterable[Any]) -> list[str]:
    """The not-serving waiver computed again from the findings recorded with the plan (``model.Finding``, or the dicts
    the ledger holds): a waived broker needs a recorded stuck-thread / stalled-request finding naming it (the direct
    check is taken again at execute time)."""
    from kafka_runbooks.remediate.safety import NOT_SERVING_FINDING_KINDS  # deferred: loaded on first use, not when a DAG file is parsed

    def kind_and_brokers(f) -> tuple[Any, Any]:
        return (f.get("kind"), f.get("broker_ids")) if isinstance(f, Mapping) else (f.kind, f.broker_ids)

    named = {int(b) for k, ids in map(kind_and_brokers, findings) if k in NOT_SERVING_FINDING_KINDS for b in ids or ()}
    return [f"broker {b} is under the not-serving waiver, but no not-serving finding recorded with the plan names it: "
            "the waiver is not honoured" for b in sorted(plan.not_serving) if int(b) not in named]


# --------------------------------------------------------------------------- records that outlive a failing database

class RecordFailed(RuntimeError):
    """A record that must be committed before an action (the intent) could not be: the action is not taken."""


class StateUnavailable(RuntimeError):
    """The state database could not be read (after a bounded retry) where the engine decides what to do next: nothing
    is begun on a guess; the run refuses or halts saying so."""

    code = "state_db_unavailable"


READ_WAIT_S = 30.0  # how long a read the engine decides on is retried (a PostgreSQL restart or failover, SQLite busy)


def read_retrying(read: Callable[[], Any], what: str, *, wait_s: float = READ_WAIT_S, pause_s: float = 0.5,
                  sleep: Callable[[float], None] = time.sleep, monotonic: Callable[[], float] = time.monotonic,
                  urgent: Callable[[], str | None] | None = None) -> Any:
    """``read()`` (``what`` it reads, for the message), retried while it fails for at most ``wait_s`` (pauses growing
    from ``pause_s``, at most 5 s); then StateUnavailable naming what, how often and the last error. One try only when
    ``urgent()`` says there is no time (the task being terminated)."""
    deadline = monotonic() + max(0.0, wait_s)
    tries = 0
    while True:
        tries += 1
        try:
            return read()
        except Exception as exc:  # noqa: BLE001 - any failure of the database: retried, bounded, then said
            hurry = urgent() if urgent is not None else None
            left = deadline - monotonic()
            if hurry or left <= 0:
                raise StateUnavailable(
                    f"state database unavailable: {what} could not be read ({tries} tr{'y' if tries == 1 else 'ies'}"
                    f"{'' if hurry else f' over {wait_s:g} s'}; {type(exc).__name__}: {str(exc)[:300]})") from exc
            log.warning("state database unavailable reading %s (%s: %s); trying again", what, type(exc).__name__,
                        str(exc)[:200])
            sleep(min(left, pause_s * tries, 5.0))


class Journal:
    """A local file of records the state database did not take (one JSON line each, appended and fsynced), under the
    cluster's state directory: ``<incident_base>/journal/<record>.jsonl``. :meth:`replay` writes them to the database
    when it is back (each with the time it was first tried) and keeps only those it still could not write."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    @classmethod
    def of(cls, config: Any, record_id: str) -> "Journal":
        from kafka_runbooks.state.incidents import validate_id  # deferred: loaded on first use, not when a DAG file is parsed

        return cls(Path(config.incident_base) / "journal" / f"{validate_id(record_id, 'record id')}.jsonl")

    def add(self, kind: str, payload: Mapping[str, Any]) -> None:
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, (json.dumps({"kind": kind, **payload}, default=str, sort_keys=True) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def pending(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut by a crash while it was written: nothing of it was acted on
                continue
        return out

    def replay(self, write: Callable[[Mapping[str, Any]], None]) -> int:
        """Writes every pending record in order with ``write``; stops at the first that fails (the order is kept) and
        leaves it and the rest in the file. Returns how many were written."""
        with self._lock:
            items = self.pending()
            n = 0
            for item in items:
                try:
                    write(item)
                except Exception as exc:  # noqa: BLE001 - still down: the rest waits in the file
                    log.warning("the journal %s could not be replayed yet: %s", self.path, exc)
                    break
                n += 1
            if n == len(items):
                self.path.unlink(missing_ok=True)
            elif n:
                tmp = self.path.with_suffix(".tmp")
                tmp.write_text("".join(json.dumps(i, default=str, sort_keys=True) + "\n" for i in items[n:]))
                os.chmod(tmp, 0o600)
                os.replace(tmp, self.path)
            return n


class Recorder:
    """How the engine writes its records. The intent (:meth:`must`): a bounded retry, then :class:`RecordFailed` --
    the action it announces is not taken. Everything after an action (:meth:`best`): a bounded retry, then the local
    :class:`Journal`; it never raises, so a failing database never skips the start, a gate or a halt. Records go to the
    database in order: while the journal holds any, a new one is journaled behind them (after one replay try)."""

    def __init__(self, journal: Journal, write: Callable[[Mapping[str, Any]], None], *, attempts: int = 3,
                 pause_s: float = 0.5, sleep: Callable[[float], None] = time.sleep,
                 urgent: Callable[[], str | None] | None = None) -> None:
        self.journal = journal
        self.write = write  # one record (kind "ledger" or "audit") to the database; raises when it cannot
        self.attempts = max(1, int(attempts))
        self.pause_s = pause_s
        self.sleep = sleep
        # why there is no time for the database (the task is being terminated, ``termination``), else None: then no
        # intent is recorded (nothing new is done) and every other record goes to the journal at once
        self.urgent = urgent
        self.read_wait_s = READ_WAIT_S

    def _try(self, item: Mapping[str, Any]) -> Exception | None:
        last: Exception | None = None
        for i in range(self.attempts):
            try:
                if self.journal.pending() and self.journal.replay(self.write) == 0 and self.journal.pending():
                    raise RecordFailed("earlier records are still waiting in the journal")
                self.write(item)
                return None
            except Exception as exc:  # noqa: BLE001 - any failure of the database is retried, bounded
                last = exc
                if i + 1 < self.attempts and not self._hurry():  # no time left for retries: to the journal
                    self.sleep(self.pause_s * (i + 1))
                elif i + 1 < self.attempts:
                    break
        return last

    def _hurry(self) -> str | None:
        try:
            return self.urgent() if self.urgent is not None else None
        except Exception:  # noqa: BLE001 - a failing probe is no reason to hurry
            return None

    def must(self, item: Mapping[str, Any]) -> None:
        hurry = self._hurry()
        if hurry:
            raise RecordFailed(f"the intent was not recorded: {hurry}; nothing was done")
        failed = self._try(item)
        if failed is not None:
            raise RecordFailed(f"the intent could not be recorded in the state database ({type(failed).__name__}: "
                               f"{str(failed)[:300]}); nothing was done") from failed

    def best(self, item: Mapping[str, Any]) -> bool:
        """True when written to the database; False when it went to the journal (or, the disk failing too, only to
        the log)."""
        hurry = self._hurry()
        failed = RecordFailed(f"no time for the database: {hurry}") if hurry else self._try(item)
        if failed is None:
            return True
        log.error("%s (%s: %s): %s kept in the journal %s", "state database not used" if hurry else
                  "state database unavailable", type(failed).__name__, str(failed)[:300], item.get("kind"), self.journal.path)
        try:
            self.journal.add(str(item.get("kind")), {**{k: v for k, v in item.items() if k != "kind"}, "journaled": True})
        except Exception as exc:  # noqa: BLE001 - the record is in the log line above and below
            log.error("the journal %s could not be written either (%s); the record: %s", self.journal.path, exc,
                      json.dumps(dict(item), default=str)[:4000])
        return False

    def replay(self) -> int:
        return self.journal.replay(self.write) if self.journal.pending() else 0

    def read(self, read: Callable[[], Any], what: str) -> Any:
        """A read the engine decides on (``read_retrying``, with this recorder's pause, sleep and urgency)."""
        return read_retrying(read, what, wait_s=self.read_wait_s, pause_s=self.pause_s, sleep=self.sleep,
                             urgent=self._hurry)


def store_writer(ledger: "LedgerStore", store: Any) -> Callable[[Mapping[str, Any]], None]:
    """Writes a journaled record: a ledger entry (its original ``at`` kept) or an audit entry (its ``at`` in details)."""

    def write(item: Mapping[str, Any]) -> None:
        item = dict(item)
        kind = item.pop("kind", None)
        if kind == "ledger":
            event, run_id = item.pop("event"), item.pop("run_id")
            ledger.append(event, run_id, **item)
        elif kind == "audit":
            record_id = item.pop("record_id")
            at = item.pop("at", None)
            details = dict(item.pop("details", None) or {})
            if at and item.pop("journaled", False):
                details["recorded_late"] = f"first tried at {at}; kept in the worker's journal while the database failed"
            store.audit(record_id, details=details, **item)
        else:
            raise ValueError(f"unknown journal record {kind!r}")

    return write


__all__ = ["APPROVAL", "APPROVAL_REQUESTED", "APPROVAL_USED", "COMPLETED", "CUT", "HALTED", "PLANNED", "REFUSED", "STEP_DONE",
           "STEP_FAILED", "STEP_STARTED", "ApprovalMarkerError", "ApprovalUsed", "Journal", "Ledger", "PlanNotRecorded", "Progress", "Reason",
           "RecordFailed", "RESUMED", "StateUnavailable", "read_retrying", "STATE", "recorded_plan", "waiver_refusals", "Recorder", "StepState", "find_resumable", "progress", "store_writer"]
