"""Issue 29 §1: a record that fails never leaves a broker down.

The store is the product's real state database (SQLite, WAL) made to fail the way it fails in production: another
writer holds its write lock past the busy timeout ("database is locked"). The broker host and its ZooKeeper
registration are a small simulation of one broker (processes before/after the stop and the start, the ephemeral
registration's session), as in ``test_engine_pure``; the restart step is the real ``steps.restart_broker``.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from types import SimpleNamespace

import pytest

from kafka_runbooks.config import ClusterConfig, GateSettings
from kafka_runbooks.remediate.host import ProcessInfo

GATES = GateSettings(poll_s=0.02, stop_s=2, deregister_s=2, register_s=2)


class Broker:
    """One broker as the step sees it over SSH and in ZooKeeper: running with session 0x77 until the stop command,
    gone and unregistered after it, running again with session 0x78 after the start command."""

    broker_id = 2

    def __init__(self, on_stop=None, down=False):
        self.commands: list[str] = ["stop_command (by an earlier run)"] if down else []
        self.on_stop = on_stop
        self.config = SimpleNamespace(server_log=lambda b: f"/var/log/kafka/{b}/server.log", kill_command=())

    @property
    def phase(self) -> str:
        return ("started" if "start_command" in self.commands else
                "stopped" if any(c.startswith("stop_command") for c in self.commands) else "up")

    def processes(self):
        return {"up": [ProcessInfo(4242, "Sl", "Mon Nov 23 10:00:00 2026")], "stopped": [],
                "started": [ProcessInfo(5151, "Sl", "Mon Nov 23 10:05:00 2026")]}[self.phase]

    def size(self, path):
        return 100

    def tail(self, path, n):
        return ""

    def read_from(self, path, mark):
        return b""

    def last_log_lines(self):
        return {}

    def run(self, which, timeout):
        from kafka_runbooks.hooks.ssh import CommandResult

        self.commands.append(which)
        if which == "stop_command" and self.on_stop is not None:
            self.on_stop()
        return CommandResult((which,), "", b"", b"", 0, None, 0.01)

    def exists(self, path, watch=None):  # the ZooKeeper side: /brokers/ids/2
        session = {"up": 0x77, "stopped": None, "started": 0x78}[self.phase]
        return None if session is None else SimpleNamespace(ephemeralOwner=session, czxid=5)


class Blocker:
    """Another writer holding the SQLite database's write lock (``BEGIN IMMEDIATE``) until released."""

    def __init__(self, path: str):
        self.path = path
        self.con = None

    def hold(self):
        self.con = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.con.execute("BEGIN IMMEDIATE")

    def release(self):
        if self.con is not None:
            self.con.execute("ROLLBACK")
            self.con.close()
            self.con = None


@pytest.fixture
def engine(tmp_path, monkeypatch):
    """A roll's record in a real SQLite state database whose busy timeout is short (the test waits it out), the
    execution's records through the engine's recorder, and a blocker for that database."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.model import Plan, Step
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.state import db as D
    from kafka_runbooks.state.db import StateDb

    monkeypatch.setattr(D, "SQLITE_BUSY_TIMEOUT_S", 0.3)
    db = StateDb.embedded(tmp_path / "state")
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"},
                        incident_base=str(tmp_path / "state"))
    store = IncidentStore(db)
    record = store.open(cluster="c1", broker_ids=[2], reason="roll", trigger={"kind": "rolling_restart"}, opened_by="t")
    plan = Plan(cluster="c1", steps=(Step("restart_broker", 2, "r"),), roll_id=record["id"])
    ex = E.Execution(config=cfg, plan=plan, record_id=record["id"], dag_id="d", run_id="run-1", task_id="execute",
                     try_number=1, approver="alice", starter="bob", canary=False)
    blocker = Blocker(db.url.database)
    db.engine  # the schema at head before anything holds the lock
    env = SimpleNamespace(db=db, cfg=cfg, store=store, record=record, ex=ex, blocker=blocker)

    def records():
        from kafka_runbooks.remediate import ledger as L

        env.ledger = L.Ledger(db, record["id"])
        recorder = L.Recorder(L.Journal.of(cfg, record["id"]), L.store_writer(env.ledger, store), attempts=2, pause_s=0.05)
        return E.Records(ex, env.ledger, store, recorder)

    env.make_records = records
    yield env
    blocker.release()


def test_a_failing_audit_after_the_stop_still_sends_the_start(engine):
    """The issue's reproduction: the real ``restart_broker``, its audit the state database's, which fails right after
    the stop command (another writer holds SQLite's lock): the start command is sent all the same, the broker comes
    back registered with a new session. On the code before the fix: commands ['stop_command'], the step raised
    'database is locked'."""
    from kafka_runbooks.remediate.steps import restart_broker

    broker = Broker(on_stop=engine.blocker.hold)

    def audit(action, outcome, *, command=None, details=None):  # the store itself, no journal in between
        engine.store.audit(engine.record["id"], actor="alice", action=action, outcome=outcome, command=command, details=details)

    report = restart_broker(broker, broker, GATES, audit, logging.getLogger("t"))
    assert broker.commands == ["stop_command", "start_command"]
    assert report.new_registration.session_id == 0x78


def test_the_intent_is_committed_before_the_stop_and_records_after_it_go_to_the_journal(engine):
    """Write-ahead: ``step_started`` (state ``stopping``) is in the database before the stop command leaves; the
    database fails right after it; every record of the step after the stop goes to the worker's journal, the start is
    sent, and when the database is back the journal is replayed into it, each entry saying it was recorded late."""
    records = engine.make_records()
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.steps import restart_broker

    seen_at_stop = []

    def on_stop():
        seen_at_stop.extend(e["event"] for e in engine.ledger.entries())
        engine.blocker.hold()

    broker = Broker(on_stop=on_stop)
    before_stop = E.stop_gate(records, 2, lambda: ([], {"checked": {"1": "ok"}}), fresh_s=5.0)

    def step_audit(action, outcome, *, command=None, details=None):
        records.audit(action, outcome, host="ssh_b2", command=command, details={"broker_id": 2, **(details or {})})

    restart_broker(broker, broker, GATES, step_audit, logging.getLogger("t"), before_stop=before_stop)
    records.event(L.STEP_DONE, broker_id=2, state=L.StepState.DONE.value)
    assert broker.commands == ["stop_command", "start_command"]
    assert seen_at_stop == [L.STEP_STARTED]
    journaled = [i.get("action") or i.get("event") for i in records.recorder.journal.pending()]
    assert journaled == ["stop_broker", "broker_stopped", "start_broker", "broker_registered", L.STEP_DONE]
    assert [a["action"] for a in engine.store.audit_trail(engine.record["id"])] == ["open_incident", "safety_check_before_stop"]

    engine.blocker.release()
    assert records.recorder.replay() == 5
    assert records.recorder.journal.pending() == []
    trail = [a for a in engine.store.audit_trail(engine.record["id"]) if a["action"] != "open_incident"]
    assert [a["action"] for a in trail] == ["safety_check_before_stop", "stop_broker", "broker_stopped", "start_broker",
                                            "broker_registered"]
    assert all("recorded_late" in a["details"] for a in trail[1:]) and "recorded_late" not in trail[0]["details"]
    assert L.progress(engine.ledger.entries()).completed == (2,)


def test_an_intent_that_cannot_be_committed_stops_nothing(engine):
    records = engine.make_records()
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.steps import StepFailed, restart_broker

    broker = Broker()
    engine.blocker.hold()
    before_stop = E.stop_gate(records, 2, lambda: ([], {}), fresh_s=5.0)
    with pytest.raises(StepFailed) as failed:
        restart_broker(broker, broker, GATES, lambda *a, **k: None, logging.getLogger("t"), before_stop=before_stop)
    assert broker.commands == []
    assert failed.value.stopped is False and failed.value.code == "intent_not_recorded"
    assert failed.value.reason.startswith("the intent could not be recorded in the state database")
    assert "nothing was done" in failed.value.reason


def test_the_halt_is_raised_without_the_database(engine):
    """``_halt`` with the database failing: Halted (what on-call reads), not 'database is locked'; the halt's records
    wait in the journal."""
    records = engine.make_records()
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import ledger as L

    class DeadZk:
        def get_children(self, *a, **k):
            raise RuntimeError("connection lost")

        get = exists = get_children

    from kafka_runbooks.remediate import engine as G

    unit = G.Unit(G.RESTART, 2, 2)
    ctx = G.Context(engine.ex, E.RestartWork(), engine.store, records.ledger, records, zk=DeadZk(), board=G.Board([unit]),
                    current=unit)
    for state in (L.StepState.CHECKING, L.StepState.STOPPING, L.StepState.STOPPED, L.StepState.STARTING):
        ctx.board.move(unit, state)
    engine.blocker.hold()
    with pytest.raises(E.Halted, match="HALTED at broker 2"):
        G.end(ctx, G.Failure("start", L.Reason("halted", "the start command failed")))
    kinds = [i.get("event") or i.get("action") for i in records.recorder.journal.pending()]
    assert kinds == [L.STEP_FAILED, L.HALTED, "halt"]
    records.audit("maintenance_lock", "released")  # the finally's audit: journaled, never raised


def test_the_stop_leaves_at_most_check_fresh_s_after_the_last_direct_check(engine):
    """The intent's write is slow (another writer holds the database for a while, within the busy timeout): the
    holders are checked again after it, and the stop command leaves after that second check."""
    records = engine.make_records()
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.steps import restart_broker
    from kafka_runbooks.state import db as D

    D._engines.clear()  # a new engine with a busy timeout longer than the other writer holds the lock
    D.SQLITE_BUSY_TIMEOUT_S = 30.0
    events: list[str] = []
    broker = Broker(on_stop=lambda: events.append("stop"))

    def check_now():
        events.append("check")
        if len(events) == 1:  # the first check done: another writer takes the lock for a moment
            engine.blocker.hold()
            threading.Timer(0.6, engine.blocker.release).start()
        return [], {}

    before_stop = E.stop_gate(records, 2, check_now, fresh_s=0.3)
    restart_broker(broker, broker, GATES, lambda *a, **k: None, logging.getLogger("t"), before_stop=before_stop)
    assert events == ["check", "check", "stop"]
    assert [e["event"] for e in engine.ledger.entries()] == ["step_started"]


def test_a_check_slower_than_check_fresh_s_is_not_stale_for_its_own_duration(engine):
    """Seen in the deployed suite (load ~14): the holders' direct checks took longer than gates.check_fresh_s, and the
    gate, which measured the check's age from its start, refused every try ("no direct check of the holders within 5s
    of the stop after 5 tries"). The age runs from when the check was complete."""
    records = engine.make_records()
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.steps import restart_broker

    events: list[str] = []
    broker = Broker(on_stop=lambda: events.append("stop"))

    def slow_check():
        events.append("check")
        time.sleep(0.5)  # longer than fresh_s below
        return [], {}

    before_stop = E.stop_gate(records, 2, slow_check, fresh_s=0.3)
    restart_broker(broker, broker, GATES, lambda *a, **k: None, logging.getLogger("t"), before_stop=before_stop)
    assert events == ["check", "stop"]


def test_a_broker_already_down_is_started_not_stopped_and_the_audit_says_so():
    """Issue 29 §3: the resume of a roll whose worker died after broker 2's stop: broker 2 is down (no process, no
    registration). No stop command is sent and none is audited 'ok'; the audit says it was already down; the broker is
    started and registers. (Before: ``stop_broker -> ok`` for a broker already down.)"""
    from kafka_runbooks.remediate.steps import restart_broker

    broker = Broker(down=True)
    audits = []
    report = restart_broker(broker, broker, GATES, lambda action, outcome, **kw: audits.append((action, outcome)),
                            logging.getLogger("t"))
    assert broker.commands[1:] == ["start_command"]
    assert ("stop_broker", "skipped") in audits and ("stop_broker", "ok") not in audits
    assert report.stop_command.startswith("skipped") and report.new_registration.session_id == 0x78


def test_a_lock_lost_after_the_stop_starts_the_broker_again_before_the_halt():
    """The chaos table (docs/CHAOS.md): the lock deleted, or ZooKeeper unreachable, right after the stop command halted
    the step in its wait for the old process -- the broker stayed down until someone resumed. Now the guard's failure
    after the stop is noted and audited, the broker is started and registered again, and then the run halts with it.
    On the code before: commands ['stop_command'] and the halt raised at once."""
    from kafka_runbooks.remediate.steps import restart_broker

    class LockLost(Exception):
        pass

    broker = Broker()
    audits = []

    def guard():
        if broker.phase != "up":  # the lock node is gone from the moment the stop command was sent
            raise LockLost("the maintenance lock node /kafka-runbooks/locks/c1 is gone")

    with pytest.raises(LockLost):
        restart_broker(broker, broker, GATES, lambda action, outcome, **kw: audits.append((action, outcome)),
                       logging.getLogger("t"), guard=guard)
    assert broker.commands == ["stop_command", "start_command"]
    assert ("guard_failed_after_stop", "noted") in audits and audits.index(("guard_failed_after_stop", "noted")) < audits.index(("start_broker", "ok"))


def test_a_lock_lost_before_the_stop_halts_with_nothing_stopped():
    from kafka_runbooks.remediate.steps import restart_broker

    broker = Broker()

    def before_stop():
        raise RuntimeError("the maintenance lock is lost")  # the fence before the stop: nothing is sent

    with pytest.raises(RuntimeError):
        restart_broker(broker, broker, GATES, lambda *a, **k: None, logging.getLogger("t"), before_stop=before_stop)
    assert broker.commands == []


@pytest.mark.parametrize("cause", ["lock_lost", "driver_halted", "unexpected"])
def test_a_unit_that_fails_while_checking_is_recorded_as_not_stopped(engine, cause):
    """A failure of any kind (a lost lock, a driver's own Halted, an unexpected error) while the unit is still being
    checked: nothing was stopped, and the ledger's ``step_failed`` says ``stopped: false`` (before: the default of a
    failure met further on, ``stopped: true``, for a broker that never saw a stop command)."""
    records = engine.make_records()
    from kafka_runbooks.remediate import engine as G
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.lock import LockLost

    exc = {"lock_lost": LockLost("the maintenance lock node /kafka-runbooks/locks/c1 is gone"),
           "driver_halted": G.Halted("ZooKeeper did not answer", code="zk_unreachable"),
           "unexpected": RuntimeError("connection reset")}[cause]

    class DeadZk:
        def get_children(self, *a, **k):
            raise RuntimeError("connection lost")

        get = exists = get_children

    unit = G.Unit(G.RESTART, 2, 2)
    ctx = G.Context(engine.ex, E.RestartWork(), engine.store, records.ledger, records, zk=DeadZk(), board=G.Board([unit]),
                    current=unit)
    ctx.board.move(unit, L.StepState.CHECKING)
    with pytest.raises((E.Halted, G.Refused)):
        G.end(ctx, ctx.work.failure(ctx, exc))
    (failed,) = [e for e in engine.ledger.entries() if e["event"] == L.STEP_FAILED]
    assert failed["stopped"] is False, failed
