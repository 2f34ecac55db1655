"""Airflow terminating the execute task in the middle of a step (docs/CHAOS.md: a ~20 s outage of Airflow's database;
``remediate/termination.py``): SIGTERM, ``on_kill``, SIGKILL 5 s later.

The first test runs the step in a real subprocess (``sigterm_step.py``: the real restart step, records, stop gate and
operator, Airflow's SIGTERM handler as its task runner installs it; the broker a simulation whose stop command is held
like the chaos driver's ``StopHold``), takes the state database away while the stop command is held (another writer
holds SQLite's write lock, as in ``test_engine_trust``), sends the real SIGTERM, releases the stop, and SIGKILLs the
process 5 s after the SIGTERM if it still runs, as Airflow's supervisor does (``supervisor.kill(SIGTERM, force=True)``).
The host is a simulation, not the lab's sshd (lab tests were not to run before 12:50 UTC when this was written).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from kafka_runbooks.config import ClusterConfig, GateSettings

from test_engine_trust import Blocker, Broker

HERE = Path(__file__).parent
GRACE_S = 5.0  # Airflow: SIGTERM, then SIGKILL after supervisor.kill's escalation_delay


@pytest.fixture(autouse=True)
def no_termination():
    from kafka_runbooks.remediate.termination import TERMINATION

    TERMINATION.clear()
    yield TERMINATION
    TERMINATION.clear()


def _wait_file(path: Path, proc: subprocess.Popen, what: str, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text().strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"the step's process never got to {what} (exit {proc.poll()})")
        time.sleep(0.02)


def test_a_sigterm_after_the_stop_starts_the_broker_before_the_sigkill_and_journals_the_records(tmp_path):
    """On the code before: SIGTERM changed nothing (``on_kill`` did nothing); the step went on at its own pace --
    polling every 2 s, each record retried against the failing database -- and the SIGKILL landed before the start
    command: commands ['stop_command'], the broker left down."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.state.db import StateDb

    db = StateDb.embedded(tmp_path / "state")
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"},
                        incident_base=str(tmp_path / "state"))
    record = IncidentStore(db).open(cluster="c1", broker_ids=[2], reason="roll", trigger={"kind": "rolling_restart"},
                                    opened_by="t")
    blocker = Blocker(db.url.database)
    out = open(tmp_path / "step.log", "wb")
    proc = subprocess.Popen([sys.executable, str(HERE / "sigterm_step.py"), str(tmp_path), record["id"]],
                            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(HERE)})
    killed = False
    try:
        _wait_file(tmp_path / "commands", proc, "its stop command")
        blocker.hold()  # the state database fails while the stop command is held on the host
        proc.send_signal(signal.SIGTERM)
        (tmp_path / "release").write_text("go")  # the stop command runs: the broker shuts down
        try:
            proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # Airflow's SIGKILL
            killed = True
            proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        blocker.release()
        out.close()
    log = (tmp_path / "step.log").read_text(errors="replace")[-3000:]
    assert (tmp_path / "commands").read_text().split() == ["stop_command", "start_command"], (killed, log)
    journal = L.Journal.of(cfg, record["id"]).pending()
    actions = [(j.get("action"), j.get("outcome")) for j in journal if j.get("kind") == "audit"]
    assert ("guard_failed_after_stop", "noted") in actions and ("start_broker", "ok") in actions, (actions, log)
    noted = next(j for j in journal if j.get("action") == "guard_failed_after_stop")
    assert "being terminated by Airflow" in noted["details"]["error"], noted
    assert actions.index(("guard_failed_after_stop", "noted")) < actions.index(("start_broker", "ok"))
    # the intent was committed before the stop, in the database
    (intent,) = [e for e in L.Ledger(db, record["id"]).entries() if e["event"] == L.STEP_STARTED]
    assert intent["registration"] == {"zxid": 5, "session_id": "0x77"}


def test_a_sigterm_before_the_stop_stops_nothing(no_termination):
    """Noticed before the stop command leaves (during the last check): the step refuses, nothing is stopped."""
    from kafka_runbooks.remediate.steps import StepFailed, restart_broker

    broker = Broker()
    with pytest.raises(StepFailed) as failed:
        restart_broker(broker, broker, GateSettings(poll_s=0.02), lambda *a, **k: None, logging.getLogger("t"),
                       before_stop=lambda: no_termination.notice("task execute is being terminated by Airflow"))
    assert broker.commands == []
    assert failed.value.stopped is False and failed.value.code == "task_terminated"


def test_no_intent_is_recorded_once_the_task_is_being_terminated(tmp_path, no_termination):
    """The intent must be committed before a stop; a terminated task records none (so stops nothing), and its other
    records go to the journal at once, without the database's retries."""
    from kafka_runbooks.remediate import ledger as L

    writes, sleeps = [], []
    rec = L.Recorder(L.Journal(tmp_path / "j.jsonl"), writes.append, sleep=sleeps.append,
                     urgent=lambda: no_termination.why)
    rec.must({"kind": "ledger", "event": "step_started"})
    no_termination.notice("task execute is being terminated by Airflow")
    with pytest.raises(L.RecordFailed, match="the intent was not recorded: task execute is being terminated"):
        rec.must({"kind": "ledger", "event": "step_started"})
    assert rec.best({"kind": "audit", "action": "start_broker"}) is False
    assert len(writes) == 1 and sleeps == []
    assert [j["action"] for j in rec.journal.pending()] == ["start_broker"]


def test_a_termination_is_a_halt_with_its_own_code_after_the_stop_and_a_refusal_before_anything(no_termination):
    from kafka_runbooks.remediate import engine as G
    from kafka_runbooks.remediate.ledger import StepState as S
    from kafka_runbooks.remediate.termination import TaskTerminated

    unit = G.Unit(G.RESTART, 2, 2)
    ctx = SimpleNamespace(current=unit, done=[])
    for state in (S.CHECKING, S.STOPPING):
        G.Board([unit]).move(unit, state)
    after = G.Work().failure(ctx, TaskTerminated("task execute is being terminated by Airflow"))
    assert after.reason.code == "task_terminated" and after.acted and not after.refuse
    ctx = SimpleNamespace(current=None, done=[])
    before = G.Work().failure(ctx, TaskTerminated("task execute is being terminated by Airflow"))
    assert before.refuse and not before.acted


def test_the_guard_raises_the_termination_before_the_lock(no_termination):
    from kafka_runbooks.remediate import engine as G
    from kafka_runbooks.remediate.termination import TaskTerminated

    checked = []
    guard = G.Guard(SimpleNamespace(check=lambda: checked.append("lock"), release=lambda: "released"))
    guard.check()
    no_termination.notice("task execute is being terminated by Airflow")
    with pytest.raises(TaskTerminated, match="SIGKILL follows"):
        guard.check()
    assert checked == ["lock"] and guard.release() == "released"


def test_the_execute_operators_on_kill_notes_the_termination(no_termination):
    from kafka_runbooks.operators.remediate import ExecutePlanOperator

    ExecutePlanOperator(task_id="execute", plan_output={}).on_kill()
    assert no_termination.noticed() and "task execute is being terminated by Airflow" in no_termination.why


def test_an_intent_refused_by_the_termination_says_so(tmp_path, no_termination):
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.steps import StepFailed

    recorder = L.Recorder(L.Journal(tmp_path / "j.jsonl"), lambda item: None, urgent=lambda: no_termination.why)
    records = SimpleNamespace(audit=lambda *a, **k: None,
                              intent=lambda event, **f: recorder.must({"kind": "ledger", "event": event, **f}))
    before_stop = E.stop_gate(records, 2, lambda: ([], {}), fresh_s=5.0)
    no_termination.notice("task execute is being terminated by Airflow")
    with pytest.raises(StepFailed) as refused:
        before_stop()
    assert refused.value.stopped is False and refused.value.code == "task_terminated"
