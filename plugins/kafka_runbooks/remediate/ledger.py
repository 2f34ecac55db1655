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

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kafka_runbooks.state.ledger import APPROVAL, APPROVAL_REQUESTED, APPROVAL_USED, ApprovalMarkerError, ApprovalUsed, LedgerStore

PLANNED = "planned"
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


__all__ = ["APPROVAL", "APPROVAL_REQUESTED", "APPROVAL_USED", "COMPLETED", "HALTED", "PLANNED", "STEP_DONE", "STEP_FAILED",
           "STEP_STARTED", "ApprovalMarkerError", "ApprovalUsed", "Ledger", "Progress", "find_resumable", "progress"]
