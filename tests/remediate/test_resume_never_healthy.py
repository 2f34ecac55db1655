"""Issue 29 (review, hole 1): a resume that decided "gates only" for a broker (registered again since an earlier run's
stop, the JVM that stop targeted gone) and whose gates then FAILED decided "gates only" again on every later resume: a
broker that never became healthy was taken for one restarted and only waiting. Now the next resume restarts it (stop,
start, gates) -- and its plan says so before anyone approves it; a gates-only plan says "gates only, no stop", and an
execution that would need more than the approved gates refuses, nothing stopped.

The engine runs for real (``engine.run`` with ``RestartWork``, the real SQLite state database, the real restart step)
on the simulated broker host and registration of ``test_resumption`` (its ``roll`` fixture: the lock, the fresh-state
reads and the in-sync gate are stand-ins there, said so there).
"""

from __future__ import annotations

import pytest

from kafka_runbooks.model import Plan, Step
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate import resumption as R
from snapshot_builders import P, snap
from test_resumption import OLD_JVM, REG5, roll  # noqa: F401 - the fixture

NOW = {"zxid": 20, "session_id": "0x80"}


def _cut_then_failed_gates(gates_code: str = "gate_in_sync") -> list[dict]:
    """run-1 stopped broker 2 (intent: zxid 5) and halted in its gates; run-2 resumed it gates only and halted in them."""
    return [
        {"event": L.STEP_STARTED, "run_id": "run-1", "broker_id": 2, "registration": REG5, "at": "t1", **{"check": OLD_JVM}},
        {"event": L.STEP_FAILED, "run_id": "run-1", "broker_id": 2, "phase": "gate in_sync", "code": "gate_in_sync",
         "stopped": True},
        {"event": L.HALTED, "run_id": "run-1", "broker_id": 2},
        {"event": "resumed", "run_id": "run-2", "broker_id": 2, "action": R.GATES_ONLY, "code": "registered_again"},
        {"event": L.STEP_FAILED, "run_id": "run-2", "broker_id": 2, "phase": "gate in_sync", "code": gates_code,
         "reason": "broker 2 not back in the ISR of orders-0 within 300s", "stopped": True},
        {"event": L.HALTED, "run_id": "run-2", "broker_id": 2},
    ]


def test_a_broker_whose_gates_only_resume_failed_its_gates_is_restarted_next_not_gated_forever():
    """Pure: red before -- ``decide`` said gates only again (``registered_again``)."""
    entries = _cut_then_failed_gates()
    step = R.unfinished_step(entries, 2)
    assert step.gates_failed is entries[4]
    d = R.decide(2, step, NOW)
    assert (d.action, d.code) == (R.RESTART, "gates_failed_after_resume")
    assert "run run-2's gates-only resume of it failed (gate in_sync: broker 2 not back in the ISR" in d.sentence
    assert "it never became healthy since that restart" in d.sentence and d.sentence.endswith("(stop, start, gates)")
    # a gates-only resume cut by something that concluded nothing about the broker (the lock lost, ZooKeeper away, a
    # termination) is no failed gate: gates only again
    cut = R.decide(2, R.unfinished_step(_cut_then_failed_gates("lock_lost"), 2), NOW)
    assert cut.action == R.GATES_ONLY
    # once restarted by a later run, its new intent is the step that counts
    again = _cut_then_failed_gates() + [{"event": L.STEP_STARTED, "run_id": "run-3", "broker_id": 2,
                                         "registration": NOW, "at": "t3"}]
    assert R.unfinished_step(again, 2).gates_failed is None


def _run(roll, run_id: str, action: str = "restart_broker"):
    from kafka_runbooks.remediate import executor as E

    plan = Plan(cluster="c1", steps=(Step(action, 2, "r"),), roll_id=roll.record["id"])
    ex = E.Execution(config=roll.cfg, plan=plan, record_id=roll.record["id"], dag_id="d", run_id=run_id,
                     task_id="execute", try_number=1, approver="alice", starter="bob", canary=False)
    return E.run(ex)


def test_the_engine_restarts_on_the_next_resume_a_broker_whose_gates_only_resume_failed(roll, monkeypatch):
    """run-1 stopped and started broker 2 and halted in its gates; run-2 (gates only, nothing sent) halts in its gates
    again; run-3 restarts it and says why. Red before: run-3 sent nothing (gates only again), forever."""
    from kafka_runbooks.remediate import gates as G
    from kafka_runbooks.remediate.engine import Halted

    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.ledger.append(L.STEP_FAILED, "run-1", broker_id=2, phase="gate in_sync", code="gate_in_sync", stopped=True)
    roll.ledger.append(L.HALTED, "run-1", broker_id=2, code="gate_in_sync")
    roll.host.phase = "started"  # registered again (zxid 20), a JVM other than the one run-1 stopped

    def never_in_sync(zk, cluster, b, expected, **kw):
        raise G.GateFailed("in_sync", f"broker {b} not back in the ISR of orders-0 within 1s")

    monkeypatch.setattr(G, "in_sync_gate", never_in_sync)
    with pytest.raises(Halted):
        _run(roll, "run-2")
    assert roll.host.commands == []  # gates only: nothing sent

    monkeypatch.setattr(G, "in_sync_gate", lambda *a, **k: G.GateResult("in_sync", 0.0))
    result = _run(roll, "run-3")
    assert roll.host.commands == ["stop_command", "start_command"] and result["restarted"] == [2]
    mine = [e for e in roll.ledger.entries() if e["run_id"] == "run-3"]
    (decided,) = [e for e in mine if e["event"] == "resumed"]
    assert (decided["action"], decided["code"]) == (R.RESTART, "gates_failed_after_resume")
    (intent,) = [e for e in mine if e["event"] == L.STEP_STARTED]  # the restart's own intent, before its stop
    assert intent["registration"] == {"zxid": 20, "session_id": "0x80"}
    (done,) = [e for e in mine if e["event"] == L.STEP_DONE]
    assert [s["state"] for s in done["states"]] == ["planned", "checking", "stopping", "stopped", "starting", "gating", "done"]


def test_an_approved_gates_only_step_that_now_needs_a_restart_is_refused_nothing_stopped(roll):
    """The plan said gates only (``gate_broker``); at execution the JVM the earlier stop targeted still runs (a newer
    session of it): a restart was not approved -- refused, nothing sent, said. Red before: stopped and started."""
    from kafka_runbooks.remediate.engine import Refused

    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5,
                       check={"processes": [[4242, "Sun Nov 29 10:00:00 2026"]]})
    roll.host.reg = (0x99, 30)  # registered again, from the same JVM
    with pytest.raises(Refused) as refused:
        _run(roll, "run-2", action="gate_broker")
    assert roll.host.commands == []
    assert "the approved plan runs only the gates of broker 2 (no stop), but now: broker 2 registered again" in str(refused.value)
    failed = [e for e in roll.ledger.entries() if e["run_id"] == "run-2" and e["event"] == L.STEP_FAILED]
    assert failed[-1]["code"] == "resume_not_as_approved" and failed[-1]["stopped"] is False


def test_the_resume_plan_says_what_will_really_happen_for_each_broker():
    """The plan (and the approval page's headline) of a resume: a gates-only broker's step is ``gate_broker``, says
    "gates only", no stop, nothing down; a never-healthy one says it is restarted and why. Red before: every step was
    "restart broker N ... Controlled shutdown (stop command)", a blast radius as if stopped."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.model import Broker
    from kafka_runbooks.remediate import briefing
    from kafka_runbooks.remediate.executor import plan_changed, resume_decisions
    from kafka_runbooks.remediate.plan import plan_restart

    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "h1", 2: "h2", 3: "h3"})
    s = snap([P("orders", 0, (1, 2, 3), 1, (1, 2, 3)), P("orders", 1, (2, 3, 1), 2, (2, 3, 1))])
    s = s.__class__(**{**s.__dict__, "brokers": (Broker(1, "k1", 9092, session_id=0x11, registration_zxid=1),
                                                 Broker(2, "k2", 9092, session_id=0x80, registration_zxid=20),
                                                 Broker(3, "k3", 9092, session_id=0x13, registration_zxid=3))})
    gated_entries = _cut_then_failed_gates()[:3]  # run-1 halted in its gates: gates only
    resumed = resume_decisions(gated_entries, s, [2, 3])
    assert set(resumed) == {2} and resumed[2].action == R.GATES_ONLY
    plan = plan_restart(s, [2, 3], cfg, resumed=resumed)
    step2, step3 = sorted(plan.steps, key=lambda x: x.broker_id)
    assert step2.action == "gate_broker" and step2.blast_radius == () and step2.partitions_touched == 0
    assert "registered again" in step2.reason and "NOT stopped or started: its gates only" in step2.reason
    assert "Controlled shutdown" not in step2.reason and "restart broker 2" not in step2.reason
    assert step3.action == "restart_broker" and "Controlled shutdown" in step3.reason and step3.blast_radius
    assert briefing.what(plan) == ("Restart broker 3 of cluster c1; gates only (no stop: registered again after an "
                                   "earlier run's stop) for broker 2")
    assert briefing.what(plan_restart(s, [2], cfg, resumed=resumed)).startswith("Gates only (no stop: registered again")

    never = plan_restart(s, [2, 3], cfg, resumed=resume_decisions(_cut_then_failed_gates(), s, [2, 3]))
    step2 = next(x for x in never.steps if x.broker_id == 2)
    assert step2.action == "restart_broker" and "it never became healthy since that restart" in step2.reason
    assert "Controlled shutdown (stop command)" in step2.reason and step2.blast_radius
    assert any("broker 2's step changed: approved gate_broker, on fresh state restart_broker" in c
               for c in plan_changed(plan, never))
