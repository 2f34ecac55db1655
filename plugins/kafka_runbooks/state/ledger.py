"""Remediation ledgers and approval markers in the state database (tables ``krb_ledger``, ``krb_approval``).

The ledger of a record is its append-only list of events (``krb_ledger``; the database refuses UPDATE and DELETE).
The approval events also keep one row per approval task try in ``krb_approval`` -- the marker the executor relies
on -- written in the same transaction as their ledger event:

    approval_requested   the sealed request (plan digest, run, try, starter): the row is created
    approval             the sealed decision: recorded once per try (a second one is refused)
    approval_used        ONE conditional update: ``SET used_at ... WHERE <that try> AND decision IS NOT NULL AND
                         used_at IS NULL``; when it changes no row, the approval was already used (or never decided)
                         and :class:`ApprovalUsed` is raised -- two workers can never both use one approval

A used marker is a column of that row, not a line: the database refuses to change a used row, to change a
recorded request or decision, and to delete a row, so deleting the ``approval_used`` ledger line (were it possible)
would not make the approval usable again. What an approval means, and who may give one: ``remediate/approvals.py``.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

import sqlalchemy as sa

from kafka_runbooks import clock
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.db import insert_ignoring_conflict
from kafka_runbooks.state.incidents import validate_id

APPROVAL_REQUESTED = "approval_requested"
APPROVAL = "approval"
APPROVAL_USED = "approval_used"


class ApprovalMarkerError(RuntimeError):
    """An approval marker cannot be written as asked; the message says why."""


class ApprovalUsed(ApprovalMarkerError):
    """The approval cannot be used: it was used already, or no decision was recorded for it."""


class LedgerStore:
    """The ledger of one record (an incident, a roll, an election): ``LedgerStore(config or state_db, record_id)``."""

    def __init__(self, source: Any, record_id: str) -> None:
        from kafka_runbooks.state import state_of

        self.db = state_of(source)
        self.record_id = validate_id(record_id, "record id")
        self._conn = None

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """One transaction for a read-check-append sequence (e.g. using an approval once): :meth:`entries` and
        :meth:`append` inside it read and write in it, and a second such sequence on the same ledger waits (an
        advisory lock of the record on PostgreSQL; SQLite's write lock)."""
        if self._conn is not None:
            yield
            return
        with self.db.write() as c:
            if c.dialect.name == "postgresql":
                c.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": f"krb_ledger:{self.record_id}"})
            self._conn = c
            try:
                yield
            finally:
                self._conn = None

    @contextlib.contextmanager
    def _tx(self, write: bool):
        if self._conn is not None:
            yield self._conn
        else:
            with (self.db.write() if write else self.db.read()) as c:
                yield c

    def append(self, event: str, run_id: str, *, _locked: bool = False, **fields: Any) -> dict[str, Any]:
        """Appends an event (``_locked`` is accepted for callers written for the file ledger; inside :meth:`locked`
        the append joins its transaction anyway). Approval events also write their marker (see the module)."""
        entry = {"at": clock.now_iso(), "event": str(event), "run_id": str(run_id), **fields}
        with self._tx(write=True) as c:
            if event == APPROVAL_REQUESTED:
                self._request(c, entry)
            elif event == APPROVAL:
                self._decide(c, entry)
            elif event == APPROVAL_USED:
                self._use(c, entry)
            c.execute(sa.insert(S.ledger).values(record_id=self.record_id, at=entry["at"], event=entry["event"],
                                                 run_id=entry["run_id"], entry=entry))
        return entry

    def entries(self) -> list[dict[str, Any]]:
        t = S.ledger
        with self._tx(write=False) as c:
            return [r.entry for r in c.execute(sa.select(t.c.entry).where(t.c.record_id == self.record_id).order_by(t.c.seq))]

    def approvals(self) -> list[dict[str, Any]]:
        """The approval markers of this record, one per approval task try, oldest first."""
        t = S.approval
        with self._tx(write=False) as c:
            rows = c.execute(sa.select(t).where(t.c.record_id == self.record_id).order_by(t.c.id)).all()
        return [dict(r._mapping) for r in rows]

    # ------------------------------------------------------------------ approval markers (inside the transaction)

    def _key(self, dag_id: Any, run_id: Any, try_number: Any) -> dict[str, Any]:
        try:
            number = int(try_number)
        except (TypeError, ValueError):
            raise ApprovalMarkerError(f"an approval marker needs a task try number, not {try_number!r}") from None
        if not dag_id or not run_id:
            raise ApprovalMarkerError("an approval marker needs its DAG and run")
        return {"record_id": self.record_id, "dag_id": str(dag_id), "run_id": str(run_id), "try_number": number}

    def _where(self, key: Mapping[str, Any]):
        t = S.approval
        return sa.and_(*(t.c[k] == v for k, v in key.items()))

    def _request(self, c, entry: Mapping[str, Any]) -> None:
        d = entry.get("decision") or {}
        key = self._key(d.get("dag_id"), d.get("run_id"), d.get("try_number"))
        if not insert_ignoring_conflict(c, S.approval, {**key, "task_id": d.get("task_id"), "requested_at": entry["at"],
                                                        "request": dict(entry)}, index_elements=list(key)):
            # the row exists (a decision recorded without a request); a recorded request is never replaced
            c.execute(sa.update(S.approval).where(self._where(key), S.approval.c.request.is_(None))
                      .values(request=dict(entry), requested_at=entry["at"]))

    def _decide(self, c, entry: Mapping[str, Any]) -> None:
        d = entry.get("decision") or {}
        key = self._key(d.get("dag_id"), d.get("run_id"), d.get("try_number"))
        if insert_ignoring_conflict(c, S.approval, {**key, "task_id": d.get("task_id"), "decided_at": entry["at"],
                                                    "decision": dict(entry)}, index_elements=list(key)):
            return
        done = c.execute(sa.update(S.approval).where(self._where(key), S.approval.c.decision.is_(None))
                         .values(decision=dict(entry), decided_at=entry["at"]))
        if done.rowcount != 1:
            raise ApprovalMarkerError(f"a decision was already recorded for try {key['try_number']} of the approval of run "
                               f"{key['run_id']!r}: a recorded decision is final")

    def _use(self, c, entry: Mapping[str, Any]) -> None:
        key = self._key(entry.get("dag_id"), entry.get("run_id"), entry.get("approval_try"))
        t = S.approval
        used_by = {k: entry.get(k) for k in ("task_id", "by_try", "digest")}
        done = c.execute(sa.update(t).where(self._where(key), t.c.decision.is_not(None), t.c.used_at.is_(None))
                         .values(used_at=entry["at"], used_by=used_by))
        if done.rowcount == 1:
            return
        row = c.execute(sa.select(t.c.used_at, t.c.used_by, t.c.decision).where(self._where(key))).first()
        if row is None or row.decision is None:
            raise ApprovalUsed(f"no decision was recorded for try {key['try_number']} of the approval of run {key['run_id']!r}")
        by = row.used_by or {}
        raise ApprovalUsed(f"this approval (try {key['try_number']}) was already used at {row.used_at} by {by.get('task_id')} "
                           f"try {by.get('by_try')}; a cleared or retried task needs a new approval")
