"""Issue 29 / docs/CHAOS.md: "resuming a step whose broker was already up again restarts it once more" (``starts 2``).

The decision (``remediate/resumption.py``) is pure: an earlier run's unfinished step recorded, with its intent, the
registration it was about to stop (``/brokers/ids/N``'s czxid and session); ZooKeeper's zxid order says whether the
broker registered again since. The engine's wiring runs the real loop (``engine.run`` with ``RestartWork``), the real
state database (SQLite) and the real restart step; the broker is a small simulation of one broker's host and its
ZooKeeper registration, the maintenance lock and the fresh-state reads are stand-ins (as in ``test_engine_states_pure``).
"""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from kafka_runbooks.config import ClusterConfig, GateSettings
from kafka_runbooks.model import Broker, Plan, Step
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate import resumption as R
from kafka_runbooks.remediate.host import ProcessInfo
from snapshot_builders import P, snap

REG5 = {"zxid": 5, "session_id": "0x77"}
OLD_JVM = {"processes": [[4141, "Sun Nov 29 09:00:00 2026"]]}  # the JVM the earlier run's intent saw (its stop's target)
RESUMED = "resumed"  # the ledger entry of the decision (ledger.RESUMED)


def started(run="run-1", broker=2, **kw):
    return {"event": L.STEP_STARTED, "run_id": run, "broker_id": broker, "at": "2026-11-29T10:00:00Z",
            "state": "stopping", **kw}


# --------------------------------------------------------------------------- pure

def test_the_unfinished_step_is_the_last_intent_of_the_broker_never_done():
    cut = started(registration=REG5)
    assert R.unfinished_step([{"event": L.PLANNED}, cut], 2) == R.Unfinished(cut)
    assert R.unfinished_step([cut, {"event": L.HALTED, "broker_id": 2, "cut": True}], 2).how == "the cut"
    failed = {"event": L.STEP_FAILED, "broker_id": 2, "phase": "gate in_sync"}
    assert R.unfinished_step([cut, failed, {"event": L.HALTED}], 2) == R.Unfinished(cut, failed)
    assert R.unfinished_step([cut, failed], 2).how == "the halt"
    assert R.unfinished_step([cut, {"event": L.STEP_DONE, "broker_id": 2}], 2) is None
    assert R.unfinished_step([cut], 1) is None
    assert R.unfinished_step([started(partitions=["orders-0"], registration=REG5)], 2) is None  # an election batch
    again = started(run="run-2", registration={"zxid": 9, "session_id": "0x78"})
    assert R.unfinished_step([cut, {"event": L.STEP_DONE, "broker_id": "2"}, again], 2).started == again


def test_registered_again_after_the_cut_gets_the_gates_only():
    d = R.decide(2, R.Unfinished(started(registration=REG5)), {"zxid": 9, "session_id": "0x78"})
    assert d.action == R.GATES_ONLY and d.code == "registered_again"
    assert d.sentence.startswith("broker 2 registered again (zxid 9, session 0x78) after the cut of run run-1's step")
    assert d.sentence.endswith("(zxid 5 before its stop): not restarted again; gates only")
    halted = R.decide(2, R.Unfinished(started(registration=REG5), {"event": L.STEP_FAILED}), {"zxid": 9, "session_id": "0x78"})
    assert halted.action == R.GATES_ONLY and "after the halt of run run-1's step" in halted.sentence
    # not registered when the intent was recorded: any registration now is "newer" -- that proves nothing (review)
    unproven = R.decide(2, R.Unfinished(started(registration=None)), {"zxid": 9, "session_id": "0x78"})
    assert (unproven.action, unproven.code) == (R.RESTART, "not_registered_then")


def test_a_step_refused_before_its_stop_is_no_unfinished_restart():
    """The review's case: broker 2's intent recorded, then the re-check refused the stop (its registration changed on
    its own): nothing was stopped -- a later resume must not take its newer registration for a restart that happened."""
    cut = started(registration=REG5)
    refused = {"event": L.STEP_FAILED, "broker_id": 2, "stopped": False, "code": "registration_changed"}
    assert R.unfinished_step([cut, refused, {"event": L.REFUSED}], 2) is None
    halted_after_stop = {"event": L.STEP_FAILED, "broker_id": 2, "stopped": True, "phase": "gate in_sync"}
    assert R.unfinished_step([cut, halted_after_stop], 2) == R.Unfinished(cut, halted_after_stop)


def test_a_newer_session_from_the_same_jvm_is_restarted():
    """A newer registration proves a new session, not a new JVM: the process the intent saw must be gone."""
    step = R.Unfinished(started(registration=REG5, check={"processes": [[4242, "Sun Nov 29 10:00:00 2026"]]}))
    gates = R.decide(2, step, {"zxid": 9, "session_id": "0x78"})
    assert gates.action == R.GATES_ONLY
    same_jvm = R.old_process_running(step, [(4242, "Sun Nov 29 10:00:00 2026")], gates)
    assert (same_jvm.action, same_jvm.code) == (R.RESTART, "old_process_running") and "pid 4242" in same_jvm.sentence
    assert R.old_process_running(step, [(4343, "Sun Nov 29 10:05:00 2026")], gates) is None  # a new JVM: gates only
    unknown = R.old_process_running(R.Unfinished(started(registration=REG5)), [], gates)
    assert (unknown.action, unknown.code) == (R.RESTART, "processes_not_recorded")


def test_the_same_registration_is_restarted_and_none_is_started():
    d = R.decide(2, R.Unfinished(started(registration=REG5)), {"zxid": 5, "session_id": "0x77"})
    assert (d.action, d.code) == (R.RESTART, "same_registration") and "its restart did not happen" in d.sentence
    d = R.decide(2, R.Unfinished(started(registration=REG5)), None)
    assert (d.action, d.code) == (R.START, "not_registered")
    assert R.decide(2, None, {"zxid": 9, "session_id": "0x78"}) is None  # nothing unfinished: an ordinary step


def test_an_old_entry_without_a_registration_keeps_the_old_behaviour_and_says_so():
    up = R.decide(2, R.Unfinished(started()), {"zxid": 9, "session_id": "0x78"})
    down = R.decide(2, R.Unfinished(started()), None)
    assert (up.action, down.action) == (R.RESTART, R.START)
    assert up.code == down.code == "no_recorded_registration"
    assert "recorded no registration of broker 2 (an older ledger entry)" in up.sentence and up.sentence.endswith("as before")
    garbled = R.decide(2, R.Unfinished(started(registration="5")), {"zxid": 9, "session_id": "0x78"})
    assert (garbled.action, garbled.code) == (R.RESTART, "unreadable_registration")


def test_an_order_that_contradicts_the_record_does_nothing():
    older = R.decide(2, R.Unfinished(started(registration=REG5)), {"zxid": 3, "session_id": "0x78"})
    other = R.decide(2, R.Unfinished(started(registration=REG5)), {"zxid": 5, "session_id": "0x99"})
    assert older.action == other.action == R.REFUSE and older.code == "registration_order_unknown"
    assert "nothing is done" in older.sentence


# --------------------------------------------------------------------------- the engine


class Host:
    """Broker 2's host over SSH and its ZooKeeper registration: ``up`` (registration ``reg``), ``down`` (no process, not
    registered), after the stop command gone and unregistered, after the start command running and registered with
    a czxid and session of its own (czxid 20, session 0x80 for the JVM an earlier run started; one more each start
    command). Records every command it is sent."""

    broker_id = 2

    def __init__(self, phase="up", reg=(0x77, 5)):
        self.phase, self.reg, self.commands, self.pid = phase, reg, [], 4242
        self.config = SimpleNamespace(server_log=lambda b: "/var/log/kafka/server.log", kill_command=())

    def identity_refusal(self):
        return None

    def processes(self):
        return [ProcessInfo(self.pid, "Sl", "Sun Nov 29 10:00:00 2026")] if self.phase != "down" else []

    def registration(self):
        return {"up": self.reg, "down": None, "started": (0x80 + self.pid - 4242, 20 + self.pid - 4242)}[self.phase]

    def exists(self, path, watch=None):
        reg = self.registration()
        return None if reg is None else SimpleNamespace(ephemeralOwner=reg[0], czxid=reg[1])

    def run(self, which, timeout):
        from kafka_runbooks.hooks.ssh import CommandResult

        self.commands.append(which)
        self.phase = {"stop_command": "down", "start_command": "started"}.get(which, self.phase)
        self.pid += which == "start_command"  # a new JVM
        return CommandResult((which,), "", b"", b"", 0, None, 0.01)

    def size(self, path):
        return 0

    def tail(self, path, n):
        return ""

    def read_from(self, path, mark):
        return b""

    def last_log_lines(self):
        return {}

    def snapshot(self):
        reg = self.registration()
        brokers = [Broker(b, f"kafka{b}", 9092, session_id=0x10 + b, registration_zxid=b) for b in (1, 3)]
        if reg is not None:
            brokers.append(Broker(2, "kafka2", 9092, session_id=reg[0], registration_zxid=reg[1]))
        s = snap([P("orders", 0, (1, 2, 3), 1, (1, 3) if reg is None else (1, 2, 3))])
        return s.__class__(**{**s.__dict__, "brokers": tuple(sorted(brokers, key=lambda x: x.id))})


@pytest.fixture
def roll(tmp_path, monkeypatch):
    """A roll of broker 2 in a real SQLite state database; the engine's ZooKeeper session and the SSH connection are
    the simulated host; the lock, the fresh-state reads and the in-sync gate are stand-ins."""
    import kafka_runbooks.detect.snapshot as SN
    import kafka_runbooks.hooks.ssh as SSH
    from kafka_runbooks.hooks import zookeeper as Z
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import gates as G
    from kafka_runbooks.remediate import host as H
    from kafka_runbooks.remediate import lock as LK
    from kafka_runbooks.remediate.safety import SafetySettings
    from kafka_runbooks.state.db import StateDb

    StateDb.embedded(tmp_path / "state").engine
    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                         "incident_base": str(tmp_path / "state")})
    import dataclasses

    cfg = dataclasses.replace(cfg, gates=GateSettings(poll_s=0.01, stop_s=2, deregister_s=2, register_s=2))
    store = IncidentStore(cfg)
    record = store.open(cluster="c1", broker_ids=[2], reason="roll", trigger={"kind": "rolling_restart"}, opened_by="t")
    env = SimpleNamespace(cfg=cfg, store=store, record=record, host=Host(), gated=[])

    class Zk:
        def __init__(self, *a, **k):
            pass

        @contextmanager
        def session(self):
            yield env.host

    class Lock:
        def __init__(self, *a, **k):
            pass

        def acquire(self, wait_s):
            return {"lock": "/kafka-runbooks/locks/c1"}

        def check(self):
            pass

        def fence(self):
            return {"owner": "this session"}

        def release(self):
            pass

    @contextmanager
    def ssh(*a, **k):
        yield None

    def fresh(zk, ex, b):
        return E.FreshState(env.host.snapshot(), SafetySettings(min_isr=1), {}, {}, [])

    def in_sync(zk, cluster, b, expected, **kw):
        env.gated.append((b, list(expected), env.host.phase))
        return G.GateResult("in_sync", 0.0)

    monkeypatch.setattr(Z, "ZooKeeperHook", Zk)
    monkeypatch.setattr(LK, "MaintenanceLock", Lock)
    monkeypatch.setattr(SSH, "StrictSSHHook", ssh)
    monkeypatch.setattr(H, "BrokerHost", lambda cfg, b, ssh: env.host)
    monkeypatch.setattr(SN, "read_snapshot", lambda zk, cluster: env.host.snapshot())
    monkeypatch.setattr(E, "read_fresh_state", fresh)
    monkeypatch.setattr(E, "last_check", lambda *a, **k: ([], {}, {}))
    monkeypatch.setattr(E, "stop_refusals", lambda *a, **k: [])
    monkeypatch.setattr(G, "in_sync_gate", in_sync)
    env.ledger = L.Ledger(cfg, record["id"])
    env.ledger.append(L.PLANNED, "run-1", plan={"requested": [2]})

    def resume():
        ex = E.Execution(config=cfg, plan=Plan(cluster="c1", steps=(Step("restart_broker", 2, "r"),), roll_id=record["id"]),
                         record_id=record["id"], dag_id="d", run_id="run-2", task_id="execute", try_number=1,
                         approver="alice", starter="bob", canary=False)
        return E.run(ex)

    env.resume = resume
    env.entries = lambda: [e for e in env.ledger.entries() if e["run_id"] == "run-2"]
    env.audit = lambda: [a for a in store.audit_trail(record["id"]) if a["details"].get("run_id") == "run-2"]
    return env


def test_a_resumed_step_whose_broker_registered_again_after_the_cut_is_not_restarted_again(roll):
    """The chaos table's ``starts 2``: run-1 recorded its intent (registration zxid 5) and was cut; broker 2 is up again
    with a registration created after it (zxid 20). The resume sends no command to the host, goes checking -> gating ->
    done, and the ledger and the audit say why. On the code before: commands ['stop_command', 'start_command']."""
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.host.phase = "started"  # the cut step's own start command went out before the worker died
    result = roll.resume()
    assert roll.host.commands == []
    assert result["restarted"] == [2] and roll.gated == [(2, ["orders-0"], "started")]
    (decided,) = [e for e in roll.entries() if e["event"] == RESUMED]
    assert decided["action"] == R.GATES_ONLY and decided["code"] == "registered_again"
    assert decided["sentence"].startswith("broker 2 registered again (zxid 20, session 0x80) after the cut")
    assert decided["sentence"].endswith("not restarted again; gates only")
    (done,) = [e for e in roll.entries() if e["event"] == L.STEP_DONE]
    assert [s["state"] for s in done["states"]] == ["planned", "checking", "gating", "done"]
    assert done["report"]["stop_command"].startswith("skipped: broker 2 registered again")
    gating = [e for e in roll.entries() if e["event"] == L.STATE and e["state"] == "gating"]
    assert gating[0]["resumed"] == decided["sentence"]
    actions = [(a["action"], a["outcome"]) for a in roll.audit()]
    assert ("resume_decision", R.GATES_ONLY) in actions and not [a for a in actions if a[0] in ("stop_broker", "start_broker")]
    assert L.STEP_STARTED not in [e["event"] for e in roll.entries()]


def test_a_step_refused_before_its_stop_is_restarted_on_resume_not_taken_as_done(roll):
    """The review's case: run-1 recorded its intent (zxid 5), then refused the stop (the registration changed on its own:
    a session that expired and came back -- zxid 30, the same JVM); nothing was stopped. The resume restarts broker 2;
    red before: no command at all, and the roll said broker 2 was restarted."""
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.ledger.append(L.STEP_FAILED, "run-1", broker_id=2, phase="safety check right before the stop", stopped=False,
                       code="registration_changed")
    roll.ledger.append(L.REFUSED, "run-1", broker_id=2, code="registration_changed")
    roll.host.reg = (0x99, 30)
    roll.resume()
    assert roll.host.commands == ["stop_command", "start_command"]
    assert not [e for e in roll.entries() if e["event"] == RESUMED]  # an ordinary step: nothing was left unfinished


def test_a_newer_session_of_the_jvm_the_intent_saw_is_restarted(roll):
    """Cut after the intent, before the stop command; the broker's session expired and it registered again from the same
    JVM (zxid 30): a newer registration, the same process -- restarted, said so. (Review: gates only before.)"""
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5,
                       check={"processes": [[4242, "Sun Nov 29 10:00:00 2026"]]})
    roll.host.reg = (0x99, 30)
    roll.resume()
    assert roll.host.commands == ["stop_command", "start_command"]
    (decided,) = [e for e in roll.entries() if e["event"] == RESUMED]
    assert (decided["action"], decided["code"]) == (R.RESTART, "old_process_running") and "pid 4242" in decided["sentence"]


def test_a_resumed_step_whose_broker_still_holds_the_recorded_registration_is_restarted(roll):
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.resume()
    assert roll.host.commands == ["stop_command", "start_command"]
    (decided,) = [e for e in roll.entries() if e["event"] == RESUMED]
    assert (decided["action"], decided["code"]) == (R.RESTART, "same_registration")
    (intent,) = [e for e in roll.entries() if e["event"] == L.STEP_STARTED]
    assert intent["registration"] == REG5  # this run's own intent records what it stops, too


def test_a_resumed_step_whose_broker_is_down_is_started(roll):
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.host.phase = "down"
    roll.resume()
    assert roll.host.commands == ["start_command"]
    (decided,) = [e for e in roll.entries() if e["event"] == RESUMED]
    assert (decided["action"], decided["code"]) == (R.START, "not_registered")
    (intent,) = [e for e in roll.entries() if e["event"] == L.STEP_STARTED]
    assert intent["registration"] is None  # not registered when this intent was recorded


def test_a_resumed_step_halted_in_its_gates_is_gated_again_not_restarted(roll):
    """The chaos table's ZooKeeper rows (``after_start``, ``in_gate``: halted, then ``starts 2``): run-1's step halted
    after its restart; the resume proves the restart from the registration and runs the gates only."""
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.ledger.append(L.STEP_FAILED, "run-1", broker_id=2, phase="gate in_sync", code="unexpected", stopped=True)
    roll.ledger.append(L.HALTED, "run-1", broker_id=2, code="unexpected", reason="ZooKeeper unreachable")
    roll.host.phase = "started"
    roll.resume()
    assert roll.host.commands == []
    (decided,) = [e for e in roll.entries() if e["event"] == RESUMED]
    assert decided["action"] == R.GATES_ONLY and "after the halt of run run-1's step" in decided["sentence"]


def test_a_resumed_step_from_an_old_ledger_entry_is_restarted_as_before_and_says_so(roll):
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping")
    roll.host.phase = "started"
    roll.resume()
    assert roll.host.commands == ["stop_command", "start_command"]
    (decided,) = [e for e in roll.entries() if e["event"] == RESUMED]
    assert decided["code"] == "no_recorded_registration" and "as before" in decided["sentence"]


def test_the_intent_records_the_registration_it_stops(roll):
    """An ordinary step (nothing unfinished): no decision is recorded; its intent carries the registration read right
    before the stop (zxid 5, session 0x77) -- what a later resume proves from."""
    roll.resume()
    assert roll.host.commands == ["stop_command", "start_command"]
    assert [e for e in roll.entries() if e["event"] == RESUMED] == []
    (intent,) = [e for e in roll.entries() if e["event"] == L.STEP_STARTED]
    assert intent["registration"] == REG5


def test_a_registration_that_changes_between_the_intent_and_the_stop_refuses_the_stop():
    """The intent records the registration the last check saw; when the intent's write took long and the check is taken
    again (``stop_gate``), a broker registered anew meanwhile (it restarted by itself) is not the one recorded: the stop
    is refused, nothing stopped -- a later resume must be able to trust what the intent says it stopped."""
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.steps import StepFailed

    intents, seen = [], [REG5, {"zxid": 9, "session_id": "0x78"}]
    records = SimpleNamespace(audit=lambda *a, **k: None, intent=lambda event, **fields: intents.append(fields))
    clock = iter([0.0, 10.0, 10.0, 10.0, 10.0])  # the first check is 10 s old once the intent is written: checked again
    before_stop = E.stop_gate(records, 2, lambda: ([], {"registration": seen.pop(0)}), fresh_s=5.0,
                              monotonic=lambda: next(clock))
    with pytest.raises(StepFailed) as refused:
        before_stop()
    assert intents[0]["registration"] == REG5
    assert refused.value.stopped is False and refused.value.code == "registration_changed"
    assert "broker 2's registration changed since the intent recorded it" in refused.value.reason


def test_a_gates_only_resume_that_halts_says_it_stopped_nothing_and_the_earlier_stop_stays_unfinished(roll, monkeypatch):
    """Issue 28/29 "the record true": run-1's step stopped broker 2 and was cut; broker 2 registered again; run-2's
    resume runs its gates only and the in-sync gate fails. run-2 stopped nothing: its ``step_failed`` says
    ``stopped`` False (red before: True) and ``gates_only``; a later resume still sees run-1's unfinished stop and
    that run-2's gates failed on it (``resumption.unfinished_step``)."""
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import gates as G

    def in_sync(zk, cluster, b, expected, **kw):
        raise G.GateFailed("in_sync", "orders-0 not back in sync within 2 s")

    monkeypatch.setattr(G, "in_sync_gate", in_sync)
    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.host.phase = "started"
    with pytest.raises(E.Halted):
        roll.resume()
    assert roll.host.commands == []
    (failed,) = [e for e in roll.entries() if e["event"] == L.STEP_FAILED]
    assert failed["stopped"] is False and failed["gates_only"] is True and failed["code"] == "gate_in_sync"
    assert [s["state"] for s in failed["states"]] == ["planned", "checking", "gating", "halted"]
    step = R.unfinished_step(roll.ledger.entries(), 2)
    assert step is not None and step.started["run_id"] == "run-1" and step.gates_failed == failed


def test_a_step_halted_after_this_runs_own_stop_still_says_stopped():
    """The other side of ``stopped``: a restart unit that went through ``stopping`` and halted did stop its broker."""
    from kafka_runbooks.remediate import engine
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.ledger import Reason

    failure = engine.Failure("start", Reason("start_timeout", "not registered"))
    gated = engine.Unit(engine.RESTART, 2, 2, trace=[{"state": s} for s in ("planned", "checking", "gating")])
    restarted = engine.Unit(engine.RESTART, 2, 2, trace=[{"state": s} for s in ("planned", "checking", "stopping",
                                                                                   "stopped", "starting", "gating")])
    assert E.RestartWork().stopped(None, restarted, failure) == {"stopped": True}
    assert E.RestartWork().stopped(None, gated, failure) == {"stopped": False, "gates_only": True}


def test_a_gates_only_resume_is_audited_as_gates_only_and_counted_as_no_restart(roll):
    """Issue 28/29: the gates-only unit restarted nothing; its audit says ``gates_only`` (red before:
    ``restart_broker`` ok) and the metrics' restarts (``metrics.restarted``) do not count it, while a real restart of
    the same roll is counted once."""
    from kafka_runbooks import metrics

    roll.ledger.append(L.STEP_STARTED, "run-1", broker_id=2, state="stopping", registration=REG5, check=OLD_JVM)
    roll.host.phase = "started"
    roll.resume()
    actions = [(a["action"], a["outcome"]) for a in roll.audit()]
    assert ("gates_only", "ok") in actions and ("restart_broker", "ok") not in actions
    real = {"action": "restart_broker", "outcome": "ok", "at": "2026-11-29T06:01:30+00:00",
            "details": {"broker_id": 1, "timing": {"broker_id": 1, "total_s": 40.0}}}
    trail = [real, *roll.audit()]
    assert metrics.restarted(trail) == [real]
    # an audit trail written before this change: the gates-only unit as ``restart_broker`` ok, its timing saying so
    old = [real, *({**a, "action": "restart_broker"} if a["action"] == "gates_only" else a for a in roll.audit())]
    assert metrics.restarted(old) == [real]
