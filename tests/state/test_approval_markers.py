"""Approval markers in the state database (SQLite and PostgreSQL): an approval is used by one conditional update,
so two workers racing to use it never both do; a used marker, a recorded decision and the audit trail cannot be
changed or deleted, even with SQL."""

from __future__ import annotations

import multiprocessing

import pytest
import sqlalchemy as sa

from kafka_runbooks.incidents.store import IncidentStore
from kafka_runbooks.remediate import approvals as A
from kafka_runbooks.remediate.ledger import APPROVAL, APPROVAL_REQUESTED, APPROVAL_USED, ApprovalMarkerError, ApprovalUsed, Ledger
from kafka_runbooks.state.db import StateDb

SECRET = b"0123456789abcdef-secret"
DAG, RUN = "kafka_rolling_restart", "manual__2026-11-24T00:00:00+00:00"


def decision(try_number: int = 1, chosen: str | None = "Approve", user: str | None = "carol") -> A.Decision:
    return A.Decision(dag_id=DAG, run_id=RUN, task_id="approve", try_number=try_number, plan_digest="d" * 64, chosen=chosen,
                      user_id=user, user_name=user, responded_at="2026-11-24T00:00:01.000Z" if chosen else None,
                      timed_out=False, starter="alice")


def approved(db: StateDb, record_id: str, try_number: int = 1) -> Ledger:
    ledger = Ledger(db, record_id)
    ledger.append(APPROVAL_REQUESTED, RUN, **A.entry_for(decision(try_number, None, None), SECRET), assigned=["carol"])
    ledger.append(APPROVAL, RUN, **A.entry_for(decision(try_number), SECRET))
    return ledger


def use(ledger: Ledger, by_try: int = 1, approval_try: int = 1) -> dict:
    return ledger.append(APPROVAL_USED, RUN, dag_id=DAG, approval_try=approval_try, task_id="execute", by_try=by_try, digest="d" * 64)


def test_an_approval_is_used_once_and_the_marker_says_by_whom(state_db):
    ledger = approved(state_db, "lab-roll-1")
    use(ledger)
    with pytest.raises(ApprovalUsed, match="already used at .* by execute try 1"):
        use(ledger, by_try=2)
    (marker,) = ledger.approvals()
    assert marker["used_at"] and marker["used_by"] == {"task_id": "execute", "by_try": 1, "digest": "d" * 64}
    assert [e["event"] for e in ledger.entries()] == [APPROVAL_REQUESTED, APPROVAL, APPROVAL_USED]
    # the pure check reads the same: a second executor try is refused
    refusals, _ = A.usable_refusals(ledger.entries(), secret=SECRET, dag_id=DAG, run_id=RUN, plan_digest="d" * 64,
                                    approvers=["carol"])
    assert any("already used" in r for r in refusals)


def test_no_decision_no_use_and_a_decision_is_final(state_db):
    ledger = Ledger(state_db, "lab-roll-2")
    ledger.append(APPROVAL_REQUESTED, RUN, **A.entry_for(decision(1, None, None), SECRET))
    with pytest.raises(ApprovalUsed, match="no decision was recorded"):
        use(ledger)
    with pytest.raises(ApprovalUsed, match="no decision was recorded"):
        use(ledger, approval_try=7)  # a try nobody asked
    ledger.append(APPROVAL, RUN, **A.entry_for(decision(1, "Reject"), SECRET))
    with pytest.raises(ApprovalMarkerError, match="final"):
        ledger.append(APPROVAL, RUN, **A.entry_for(decision(1, "Approve"), SECRET))
    assert [e["event"] for e in ledger.entries()] == [APPROVAL_REQUESTED, APPROVAL]  # the refused appends left nothing


def test_markers_and_the_trail_cannot_be_undone_with_sql(state_db):
    """Deleting the 'approval_used' line is not possible, and would not help: the marker is a column the database
    refuses to reset; the audit trail and the ledger refuse UPDATE and DELETE."""
    from kafka_runbooks.state import schema as S

    ledger = approved(state_db, "lab-roll-3")
    use(ledger)
    store = IncidentStore(state_db)
    rec = store.open(cluster="lab", broker_ids=[1], reason="r", opened_by="t")
    store.update(rec["id"], note="a note")
    attempts = [
        sa.update(S.approval).values(used_at=None, used_by=None),
        sa.delete(S.approval),
        sa.delete(S.ledger).where(S.ledger.c.event == APPROVAL_USED),
        sa.update(S.ledger).values(event="step_done"),
        sa.delete(S.audit),
        sa.update(S.audit).values(outcome="forged"),
        sa.delete(S.incident),
        sa.delete(S.incident_note),
        sa.update(S.incident_note).values(text="x"),
    ]
    for stmt in attempts:  # every one touches at least one row
        with pytest.raises(sa.exc.DatabaseError, match="kafka-runbooks"):
            with state_db.write() as c:
                c.execute(stmt)
    with pytest.raises(ApprovalUsed, match="already used"):
        use(ledger, by_try=2)
    assert [e["action"] for e in store.audit_trail(rec["id"])] == ["open_incident"]
    # an unused approval's decision cannot be rewritten either (a Reject made an Approve)
    ledger4 = Ledger(state_db, "lab-roll-4")
    ledger4.append(APPROVAL, RUN, **A.entry_for(decision(1, "Reject"), SECRET))
    with pytest.raises(sa.exc.DatabaseError, match="final"):
        with state_db.write() as c:
            c.execute(sa.update(S.approval).where(S.approval.c.record_id == "lab-roll-4").values(decision={"forged": True}))


def _race(url: str, record_id: str, barrier, by_try: int) -> str:
    """One worker: waits for the other, then uses the approval. 'used' or the refusal."""
    ledger = Ledger(StateDb(url), record_id)
    barrier.wait(60)
    try:
        use(ledger, by_try=by_try)
        return "used"
    except ApprovalUsed as exc:
        return f"refused: {exc}"


def _race_locked(url: str, record_id: str, barrier, by_try: int) -> str:
    """The executor's whole sequence: read the ledger, check it (pure), use it -- in the ledger's transaction."""
    ledger = Ledger(StateDb(url), record_id)
    barrier.wait(60)
    with ledger.locked():
        refusals, _ = A.usable_refusals(ledger.entries(), secret=SECRET, dag_id=DAG, run_id=RUN, plan_digest="d" * 64,
                                        approvers=["carol"])
        if refusals:
            return "refused: " + "; ".join(refusals)
        use(ledger, by_try=by_try)
        return "used"


@pytest.mark.parametrize("worker", [_race, _race_locked], ids=["conditional-update", "executor-sequence"])
def test_two_workers_racing_for_one_approval_never_both_use_it(state_db, worker):
    rounds = 12
    for n in range(rounds):
        approved(state_db, f"lab-race-{n}")
    url = state_db.url.render_as_string(hide_password=False)
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager, ctx.Pool(2) as pool:
        for n in range(rounds):
            barrier = manager.Barrier(2)
            outcomes = [pool.apply_async(worker, (url, f"lab-race-{n}", barrier, t)) for t in (1, 2)]
            got = sorted(o.get(120) for o in outcomes)
            assert got[1] == "used" and got[0].startswith("refused:") and "already used" in got[0], (n, got)
            (marker,) = Ledger(state_db, f"lab-race-{n}").approvals()
            assert marker["used_by"]["by_try"] in (1, 2)
            assert [e["event"] for e in Ledger(state_db, f"lab-race-{n}").entries()].count(APPROVAL_USED) == 1
