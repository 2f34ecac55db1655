"""Issue 19 problem 7: when the plan was computed and refused, the run's last task says "refused; nothing changed"
with the plan's one-line summary -- never "the plan was never computed" -- for the rolling restart and the
preferred election alike (the plan task fails and leaves its summary for it under ``summary.REFUSED_KEY``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_runbooks.operators.summary import REFUSED_KEY

REFUSED = {"summary": "refused -- the own metadata of brokers [3] cannot be read", "record_id": "lab-x", "cluster": "lab",
           "kind": "preferred_election", "refusals": 1}


def _context(refused):
    ti = SimpleNamespace(xcom_pull=lambda task_ids, key=None: refused if (task_ids, key) == ("plan", REFUSED_KEY) else None,
                         run_id="manual__1", dag_id="d", task_id="close")
    return {"ti": ti, "run_id": "manual__1"}


@pytest.mark.parametrize("make", ["election", "roll"])
def test_the_close_of_a_refused_plan_says_refused_nothing_changed(make):
    from kafka_runbooks.operators.election import CloseElectionOperator
    from kafka_runbooks.operators.remediate import CloseRollOperator

    if make == "election":
        op = CloseElectionOperator(task_id="close", plan_output=None, decision=None, wait=None, result=None)
    else:
        op = CloseRollOperator(task_id="close", plan_output=None, decision=None, result=None)
    out = op.execute(_context(REFUSED))
    assert out["status"] == "refused" and out["record_id"] == "lab-x"
    assert out["summary"] == "refused; nothing changed. refused -- the own metadata of brokers [3] cannot be read"


def test_without_a_plan_or_a_refusal_the_close_still_fails_saying_so():
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_runbooks.operators.election import CloseElectionOperator

    op = CloseElectionOperator(task_id="close", plan_output=None, decision=None, wait=None, result=None)
    with pytest.raises(AirflowFailException, match="the plan was never computed"):
        op.execute(_context(None))
