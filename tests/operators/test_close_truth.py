"""Issue 29 §3, records that tell the truth, read by the roll's close task (``CloseRollOperator``) from the real
state database (SQLite) of a cluster configured through the clusters file:

- a run that refused after its approval was used is "refused: <reason>; nothing stopped", the record closed and the
  task failed (the DAG run ends failed) -- not "worker lost or killed" with the roll left open for any resume;
- ``resume`` naming a roll takes up that roll only;
- a roll whose first run was cut (worker killed in broker 3's step) and was resumed closes with every broker restarted
  across both runs and says the run was cut, during which broker's step, down from when.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from snapshot_builders import P, snap


@pytest.fixture
def roll(tmp_path, monkeypatch):
    from kafka_runbooks.config import FILE_ENV, load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart

    raw = {"c1": {"zk_conn_id": "krb_test_no_such_zk", "hosts": {"1": "ssh_b1", "2": "ssh_b2", "3": "ssh_b3"},
                  "kafka_version": "2.3.0", "incident_base": str(tmp_path / "state")}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    config = load_cluster("c1")
    store = IncidentStore(config)

    def new_roll(brokers=(1, 3)):
        record = store.open(cluster="c1", broker_ids=list(brokers), reason="roll",
                            trigger={"kind": "rolling_restart", "requested": list(brokers)}, opened_by="alice")
        s = snap([P("orders", 0, [1, 2, 3], 2, [1, 2, 3])], controller=2)
        plan = plan_restart(s, list(brokers), config, roll_id=record["id"])
        ledger = L.Ledger(config, record["id"])
        ledger.append(L.PLANNED, "run-1", plan={**plan.to_dict(), "requested": list(brokers)}, digest=plan_digest(plan))
        return record, plan, ledger

    return SimpleNamespace(config=config, store=store, new_roll=new_roll)


def _close(plan, run_id, result=None):
    from kafka_runbooks.operators.remediate import CloseRollOperator

    op = CloseRollOperator(task_id="close", plan_output={"plan": plan.to_dict(), "digest": "d"},
                           decision={"chosen_options": ["Approve"]}, result=result)
    ti = SimpleNamespace(run_id=run_id, dag_id="kafka_rolling_restart", task_id="close", try_number=1,
                         xcom_pull=lambda *a, **k: None)
    return op.execute({"ti": ti, "run_id": run_id, "dag_run": None})


def test_a_refusal_after_the_approval_was_used_is_a_refusal_and_fails_the_run(roll):
    from airflow.sdk.exceptions import AirflowFailException

    record, plan, ledger = roll.new_roll()
    # what the execute task records when it refuses before any stop (the lock busy; a check that refused)
    ledger.append("refused", "run-1", reason="cluster 'c1' is under maintenance by run 'other'; refusing to act")
    with pytest.raises(AirflowFailException, match=r"refused: cluster 'c1' is under maintenance .*; nothing stopped"):
        _close(plan, "run-1")
    closed = roll.store.get(record["id"])
    assert closed["status"] == "closed" and closed["resolution"].startswith("refused: cluster 'c1' is under maintenance")
    from kafka_runbooks.runbook.restart import find_resumable_roll

    assert find_resumable_roll(roll.store, "c1") is None  # no later resume picks it up


def test_resume_takes_up_only_the_roll_it_names(roll):
    from kafka_runbooks.runbook.restart import find_resumable_roll, resume_target

    first, _, ledger1 = roll.new_roll((1, 3))
    ledger1.append("step_done", "run-1", broker_id=1)
    ledger1.append("halted", "run-1", broker_id=3, reason="gate in_sync")
    second, _, ledger2 = roll.new_roll((2,))
    ledger2.append("halted", "run-2", broker_id=2, reason="gate in_sync")
    assert find_resumable_roll(roll.store, "c1")[0]["id"] == second["id"]  # "resume: true": the latest
    assert find_resumable_roll(roll.store, "c1", first["id"])[0]["id"] == first["id"]
    assert find_resumable_roll(roll.store, "c1", "c1-no-such-roll") is None
    assert resume_target(first["id"]) == first["id"] and resume_target("true") is None and resume_target(False) is None


def test_a_cut_and_resumed_roll_closes_with_every_broker_across_both_runs(roll):
    from airflow.sdk.exceptions import AirflowFailException

    record, plan, ledger = roll.new_roll((1, 3))
    ledger.append("step_started", "run-1", broker_id=1)
    ledger.append("step_done", "run-1", broker_id=1)
    cut = ledger.append("step_started", "run-1", broker_id=3)  # the worker is killed here, broker 3 stopped
    with pytest.raises(AirflowFailException, match="broker 3"):
        _close(plan, "run-1")  # the first run's close: the cut recorded, the roll resumable
    ledger.append("step_started", "run-2", broker_id=3)
    ledger.append("step_done", "run-2", broker_id=3)
    ledger.append("completed", "run-2", restarted=[3])
    out = _close(plan, "run-2", result={"restarted": [3], "approved_by": "carol", "timings": []})
    assert out["restarted"] == [1, 3]
    resolution = roll.store.get(record["id"])["resolution"]
    assert resolution.startswith("restarted [1, 3]")
    assert f"run run-1 was cut during broker 3's step (down from {cut['at']}) and resumed" in resolution
