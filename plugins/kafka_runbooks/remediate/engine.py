"""The one engine loop every change to a cluster goes through (issue 28): a broker's restart (the rolling and the
incident restart, ``executor.py``), a preferred election's batch (``election_run.py``) and a demotion -- leadership
moved off a broker that does not serve (``demote_run.py``). Modelled on Strimzi's KafkaRoller: each unit of work is in
one named state at a time, and only the moves of ``TRANSITIONS`` exist::

    restart:  planned -> checking -> stopping -> stopped -> starting -> gating -> done
    election: planned -> checking -> electing -> gating -> done          (checking -> done: nothing left to elect)
    demotion: planned -> checking [-> moving] -> electing -> gating -> done
    every state after planned and before done -> halted; checking (and a restart's stopping: its stop command not yet
    sent) -> refused; a restart's planned -> done: restarted by an earlier run of the roll (a resume); a restart's
    checking -> gating: its broker registered again after an earlier run's unfinished step stopped it (a resume:
    ``resumption``), not stopped again

Every refusal and every halt carries a typed :class:`Reason` (a stable ``code`` and the sentence on-call reads). At
most one unit of a run is between its action and its last gate (``ACTIVE``) at any time: :class:`Board` refuses the
move that would make a second one active. The ledger records the transitions: a ``state`` entry where no action is
announced (checking, gating), the intent (``step_started``, committed before the action) for stopping/electing/moving,
and each unit's whole path (``states``: state, code) in the entry that ends it (``step_done``, ``step_failed``,
``halted``, ``refused``).

:func:`run` is the loop: the records (``Records``: the intent committed or nothing is done; everything else
best-effort with a journal), the cluster's maintenance lock (busy: refused), each unit driven by its kind's
:class:`Work`, and on any failure a refusal or a halt -- recorded, the cluster described, raised as :class:`Refused`
or :class:`Halted` for the failure callback that pages on-call. The lock is released whatever happened.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot, Plan
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.ledger import Reason, StepState as State
from kafka_runbooks.remediate.termination import TERMINATION, TaskTerminated

# a unit in these states has taken no action yet (no stop command sent, no znode written)
NOT_BEGUN = (State.PLANNED, State.CHECKING)

log = logging.getLogger(__name__)
MAX_LISTED = 20

RESTART, ELECTION, DEMOTION = "restart", "election", "demotion"  # the kinds of unit

_BAD = (State.HALTED,)
TRANSITIONS: dict[str, dict[State, frozenset[State]]] = {
    RESTART: {
        State.PLANNED: frozenset({State.CHECKING, State.DONE}),
        # checking -> gating: a resumed step whose broker registered again after an earlier run stopped it
        # (``resumption``): not stopped again, its gates only
        State.CHECKING: frozenset({State.STOPPING, State.GATING, State.REFUSED, *_BAD}),
        State.STOPPING: frozenset({State.STOPPED, State.REFUSED, *_BAD}),  # refused: the stop command never left
        State.STOPPED: frozenset({State.STARTING, *_BAD}),
        State.STARTING: frozenset({State.GATING, *_BAD}),
        State.GATING: frozenset({State.DONE, *_BAD}),
    },
    ELECTION: {
        State.PLANNED: frozenset({State.CHECKING}),
        State.CHECKING: frozenset({State.ELECTING, State.DONE, State.REFUSED, *_BAD}),
        State.ELECTING: frozenset({State.GATING, *_BAD}),
        State.GATING: frozenset({State.DONE, *_BAD}),
    },
    DEMOTION: {
        State.PLANNED: frozenset({State.CHECKING}),
        State.CHECKING: frozenset({State.MOVING, State.ELECTING, State.REFUSED, *_BAD}),
        State.MOVING: frozenset({State.ELECTING, *_BAD}),
        State.ELECTING: frozenset({State.GATING, *_BAD}),
        State.GATING: frozenset({State.DONE, *_BAD}),
    },
}
ACTIVE = frozenset({State.STOPPING, State.STOPPED, State.STARTING, State.MOVING, State.ELECTING, State.GATING})
ENDS = frozenset({State.DONE, State.REFUSED, State.HALTED})
NEEDS_REASON = frozenset({State.REFUSED, State.HALTED})


class Halted(RuntimeError):
    """The run stopped; the message is what on-call reads (reason, cluster state, the broker's last lines). ``code``:
    the stable code of the reason, where a driver raises it (the engine's own Halted carries the run's)."""

    def __init__(self, *args: Any, code: str | None = None) -> None:
        super().__init__(*args)
        self.code = code


class Refused(RuntimeError):
    """The run did not start changing anything (lock busy, plan changed, no approval); the message says why. ``code``:
    the stable code of the reason, where known (the engine's own Refused carries the run's)."""

    def __init__(self, *args: Any, code: str | None = None) -> None:
        super().__init__(*args)
        self.code = code


class IllegalTransition(RuntimeError):
    """A move the state machine does not have (a bug in a driver): the engine halts on it, it never carries on."""


@dataclass
class Unit:
    """One unit of work: ``kind`` (RESTART, ELECTION, DEMOTION), its ``key`` (the broker restarted, the batch's number,
    the broker demoted), its target broker, its state and the path it took (``trace``: state and code, in order)."""

    kind: str
    key: int
    broker_id: int | None
    state: State = State.PLANNED
    reason: Reason | None = None
    trace: list[dict[str, str]] = field(default_factory=lambda: [{"state": State.PLANNED.value}])

    @property
    def states(self) -> list[dict[str, str]]:
        return [dict(t) for t in self.trace]


class Board:
    """The units of one run and the only way their states change (:meth:`move`): a move not in ``TRANSITIONS``, a
    refusal or halt without a :class:`Reason`, or a second unit entering ``ACTIVE`` raises IllegalTransition."""

    def __init__(self, units: Iterable[Unit]) -> None:
        self.units = list(units)

    def active(self) -> list[Unit]:
        return [u for u in self.units if u.state in ACTIVE]

    def move(self, unit: Unit, to: State, reason: Reason | None = None) -> dict[str, str]:
        to = State(to)
        if to not in TRANSITIONS[unit.kind].get(unit.state, frozenset()):
            raise IllegalTransition(f"{unit.kind} unit {unit.key}: no move {unit.state.value} -> {to.value}")
        if to in NEEDS_REASON and not (isinstance(reason, Reason) and reason.code and reason.sentence):
            raise IllegalTransition(f"{unit.kind} unit {unit.key}: {to.value} needs a reason with a code and a sentence")
        if to in ACTIVE and any(u is not unit for u in self.active()):
            busy = ", ".join(f"{u.kind} {u.key} ({u.state.value})" for u in self.active() if u is not unit)
            raise IllegalTransition(f"{unit.kind} unit {unit.key} cannot become {to.value}: {busy} is not finished")
        unit.state = to
        step = {"state": to.value, **({"code": reason.code} if reason is not None else {})}
        unit.trace.append(step)
        if reason is not None:
            unit.reason = reason
        return step


@dataclass(frozen=True)
class Failure:
    """How a unit ended badly: where (``phase``), why (``reason``), whether its action was taken (``acted``: a stop
    command sent, a znode written), the broker's last lines and what else on-call reads."""

    phase: str
    reason: Reason
    acted: bool = True
    logs: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    refuse: bool = False  # a refusal (nothing of this unit changed), not a halt


# --------------------------------------------------------------------------- pure

def describe_state(snapshot: ClusterSnapshot | None, configured: Iterable[int], focus: int | None = None) -> list[str]:
    """What on-call needs to know about the cluster right now, in a few lines."""
    if snapshot is None:
        return ["cluster state unknown: ZooKeeper could not be read"]
    live = snapshot.live_broker_ids
    down = sorted(set(configured) - live)
    lines = [
        f"registered brokers: {sorted(live)}; down (configured, not registered): {down or 'none'}",
        f"controller: {snapshot.controller_id} (epoch {snapshot.controller_epoch})",
    ]
    offline = sorted(p.name for p in snapshot.partitions if p.offline)
    urp = sorted(p.name for p in snapshot.partitions if p.under_replicated and not p.offline)
    if focus is not None:
        missing = sorted(p.name for p in snapshot.partitions_of(focus) if focus not in p.isr)
        lines.append(f"broker {focus} is {'registered' if focus in live else 'NOT registered'}; "
                     f"partitions without it in their ISR: {len(missing)}" + (f" ({', '.join(missing[:MAX_LISTED])})" if missing else ""))
        offsets = sorted(p.index for p in snapshot.partitions if p.topic == CONSUMER_OFFSETS and focus in p.replicas)
        if offsets:
            lines.append(f"__consumer_offsets partitions with a replica on broker {focus}: {len(offsets)}")
    lines.append(f"offline partitions: {len(offline)}" + (f" ({', '.join(offline[:MAX_LISTED])})" if offline else ""))
    lines.append(f"under-replicated partitions: {len(urp)}" + (f" ({', '.join(urp[:MAX_LISTED])})" if urp else ""))
    return lines


# --------------------------------------------------------------------------- records

@dataclass
class Execution:
    config: ClusterConfig
    plan: Plan
    record_id: str
    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    approver: str
    starter: str | None
    canary: bool
    timings: list[dict[str, Any]] = field(default_factory=list)


class Records:
    """The records of one execution, written through one :class:`ledger.Recorder`: the intent before a stop must be
    committed (:meth:`intent`, else nothing is stopped); every other record is best-effort -- a bounded retry, then the
    worker's local journal (``<incident_base>/journal/<record>.jsonl``), replayed when the database is back -- and never
    raises: a failing database never skips a start, a gate or a halt."""

    def __init__(self, ex: "Execution", ledger, store, recorder: L.Recorder | None = None) -> None:
        self.ex, self.ledger, self.store = ex, ledger, store
        self.recorder = recorder or L.Recorder(L.Journal.of(ex.config, ex.record_id), L.store_writer(ledger, store))
        if self.recorder.urgent is None:  # the task being terminated: no intent, every other record to the journal
            self.recorder.urgent = lambda: TERMINATION.why
        self.where = {"run_id": ex.run_id, "dag_id": ex.dag_id, "task_id": ex.task_id, "try": ex.try_number}

    def _audit_item(self, action: str, outcome: str, host, command, details) -> dict[str, Any]:
        return {"kind": "audit", "record_id": self.ex.record_id, "at": clock.now_iso(), "actor": self.ex.approver,
                "action": action, "outcome": outcome, "host": host, "command": list(command) if command is not None else None,
                "details": {**(details or {}), **self.where}}

    def audit(self, action: str, outcome: str, *, host: str | None = None, command=None,
              details: Mapping[str, Any] | None = None) -> None:
        from kafka_runbooks.remediate import progress  # deferred: loaded on first use, not when a DAG file is parsed

        self.recorder.best(self._audit_item(action, outcome, host, command, details))
        try:
            progress.say(log, action, outcome, details)  # the same entry as one readable log line
        except Exception:  # noqa: BLE001 - a log line never stops the engine
            log.exception("could not log %s %s", action, outcome)

    def event(self, event: str, **fields: Any) -> None:
        """A ledger entry after an action (best-effort)."""
        self.recorder.best({"kind": "ledger", "event": event, "run_id": self.ex.run_id, "at": clock.now_iso(), **fields})

    def intent(self, event: str, **fields: Any) -> None:
        """A ledger entry that must be committed before the action it announces (``RecordFailed`` otherwise)."""
        self.recorder.must({"kind": "ledger", "event": event, "run_id": self.ex.run_id, "at": clock.now_iso(), **fields})


# --------------------------------------------------------------------------- the loop

class Work:
    """What one kind of run does; :func:`run` calls these. ``purpose``: the lock's purpose; ``units``: the run's units
    in order; ``skip``: why a unit needs nothing now (done by an earlier run), else None; ``drive``: the unit from
    ``checking`` to ``done`` (moving it with ``ctx.move``), raising on any failure; ``failure``: an exception as a
    :class:`Failure` (``refuses``: whether it is a refusal); ``refusal_text``/``halt_text``: what Refused/Halted say;
    ``cleanup``: before a halt is recorded (e.g. the election's znode removed); ``finish``: the run's result."""

    unit_kind = RESTART
    unit_field = "broker_id"  # how the ledger names a unit (``batch`` for an election)

    def purpose(self, ctx: "Context") -> str:
        return ctx.ex.plan.kind

    def units(self, ctx: "Context") -> list[Unit]:
        raise NotImplementedError

    def skip(self, ctx: "Context", unit: Unit) -> str | None:
        return None

    def drive(self, ctx: "Context", unit: Unit) -> None:
        raise NotImplementedError

    def failure(self, ctx: "Context", exc: BaseException) -> Failure:
        # Airflow terminates the task (``termination``), or the state database cannot be read where the run decides
        # (``Context.read``): nothing new is begun; a refusal if nothing was done yet, else a halt that says so
        if isinstance(exc, (TaskTerminated, L.StateUnavailable)):
            unit = ctx.current
            begun = unit is not None and unit.state not in NOT_BEGUN
            return Failure(unit.state.value if unit is not None else "between units", Reason(exc.code, str(exc)),
                           acted=begun, refuse=not begun and not ctx.done)
        if isinstance(exc, Halted):  # a driver's own halt: recorded and said by the engine like any other
            return Failure(ctx.current.state.value if ctx.current is not None else "checking",
                           Reason(exc.code or "halted", str(exc)))
        return Failure("unexpected error", Reason("unexpected", f"{type(exc).__name__}: {exc}"))

    def refuses(self, ctx: "Context", failure: Failure) -> bool:
        return failure.refuse

    def cleanup(self, ctx: "Context", unit: Unit | None, failure: Failure) -> Failure:
        return failure

    def refusal_text(self, ctx: "Context", unit: Unit | None, failure: Failure) -> str:
        raise NotImplementedError

    def halt_text(self, ctx: "Context", unit: Unit | None, failure: Failure, state: list[str]) -> str:
        raise NotImplementedError

    step_failed = False  # a unit's end is also its own ``step_failed`` entry (a restart: what resume reads)

    def names(self, ctx: "Context", unit: Unit | None) -> dict[str, Any]:
        """How the ledger and the audit name the unit (``{"broker_id": 2}``, ``{"batch": 1}``)."""
        return {self.unit_field: unit.key if unit is not None else None}

    def stopped(self, ctx: "Context", unit: Unit | None, failure: Failure) -> dict[str, Any]:
        """What a halted unit's ``step_failed`` says about its stop: whether THIS run took the unit's action."""
        return {"stopped": failure.acted}

    def focus(self, unit: Unit | None) -> int | None:
        """The broker the halt's description of the cluster looks at (None: the cluster as a whole)."""
        return None

    def halt_fields(self, ctx: "Context", unit: Unit | None) -> dict[str, Any]:
        return {}

    def finish(self, ctx: "Context", wall_s: float) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class Context:
    """One run: the execution, its records, its ZooKeeper session and lock, its board, what it finished."""

    ex: Execution
    work: Work
    store: Any
    ledger: Any
    records: Records
    zk: Any = None
    lock: Any = None
    board: Board = field(default_factory=lambda: Board(()))
    current: Unit | None = None
    done: list[Unit] = field(default_factory=list)
    result: dict[str, Any] = field(default_factory=dict)  # what the drivers gathered for ``finish``

    @property
    def config(self) -> ClusterConfig:
        return self.ex.config

    def audit(self, action: str, outcome: str, details: Mapping[str, Any] | None = None, **kw: Any) -> None:
        self.records.audit(action, outcome, details=details, **kw)  # never raises

    def read(self, what: str, read):
        """A read of the state database the run decides on (the ledger's progress, the entries a resume proves from):
        retried, bounded (``ledger.read_retrying``); then ``ledger.StateUnavailable`` -- the run refuses or halts
        saying "state database unavailable", nothing begun on a guess."""
        return self.records.recorder.read(read, what)

    def move(self, unit: Unit, to: State, reason: Reason | None = None, *, record: bool = False, **fields: Any) -> None:
        """The unit's next state; ``record``: a ``state`` entry in the ledger (best-effort: never where an action's
        intent or its end is written, which carry the state themselves)."""
        step = self.board.move(unit, to, reason)
        if record:
            self.records.event(L.STATE, **self.work.names(self, unit), unit=unit.kind, **step, **fields)


def open_run(ex: Execution, work: Work) -> Context:
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import progress  # deferred: loaded on first use, not when a DAG file is parsed

    progress.quiet_connection_noise()
    store = IncidentStore(ex.config)
    ledger = L.Ledger(ex.config, ex.record_id)
    records = Records(ex, ledger, store)
    records.recorder.replay()  # what an earlier run of this record kept in the journal while the database failed
    return Context(ex, work, store, ledger, records)


def run(ex: Execution, work: Work) -> dict[str, Any]:
    """The loop: lock, each unit driven from ``planned`` to ``done``, lock released; Refused or Halted otherwise."""
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ex.config
    ctx = open_run(ex, work)
    with ZooKeeperHook(cfg.zk_conn_id, timeout_s=cfg.capture.connect_timeout_s).session() as zk:
        ctx.zk = zk
        _acquire(ctx)
        t0 = time.monotonic()
        try:
            ctx.board = Board(work.units(ctx))
            for unit in ctx.board.units:
                _drive(ctx, unit)
        except Exception as exc:  # noqa: BLE001 - SSH, ZooKeeper, Kafka client, a gate, a driver's Halted: one way out
            end(ctx, work.failure(ctx, exc))
        finally:
            try:
                ctx.lock.release()
            finally:
                ctx.audit("maintenance_lock", "released")  # best-effort: never replaces the exception on its way out
        wall_s = round(time.monotonic() - t0, 2)
    return work.finish(ctx, wall_s)


def _acquire(ctx: Context) -> None:
    from kafka_runbooks.remediate.lock import LockBusy, MaintenanceLock  # deferred: loaded on first use, not when a DAG file is parsed

    ex, cfg = ctx.ex, ctx.config
    ctx.lock = MaintenanceLock(ctx.zk, cfg.name, run=ex.run_id, dag=ex.dag_id, user=ex.starter, purpose=ctx.work.purpose(ctx))
    try:
        identity = ctx.lock.acquire(cfg.gates.lock_wait_s)
    except LockBusy as exc:
        ctx.audit("maintenance_lock", "busy", {"holders": exc.holders})
        ctx.records.event(L.REFUSED, state=State.REFUSED.value, reason=str(exc), code="lock_busy", sentence=str(exc))
        raise Refused(str(exc)) from exc
    ctx.audit("maintenance_lock", "acquired", identity)
    ctx.lock = Guard(ctx.lock)


class Guard:
    """The maintenance lock as the drivers and their waits see it: :meth:`check` raises :class:`TaskTerminated` once
    Airflow terminates the task (``termination``), then the lock's own check; everything else is the lock's."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def check(self) -> None:
        TERMINATION.check()
        self.lock.check()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.lock, name)


def _drive(ctx: Context, unit: Unit) -> None:
    why = ctx.work.skip(ctx, unit)
    if why is not None:
        ctx.move(unit, State.DONE, Reason("already_done", why))
        return
    ctx.lock.check()
    ctx.current = unit  # a failure from here on ends at this unit (nothing is changed before its action)
    ctx.move(unit, State.CHECKING, record=True)
    ctx.work.drive(ctx, unit)
    if unit.state is not State.DONE:
        raise IllegalTransition(f"{unit.kind} unit {unit.key} ended its drive in {unit.state.value}, not done")
    ctx.done.append(unit)
    ctx.current = None


def end(ctx: Context, failure: Failure) -> None:
    """The run ends at ``ctx.current``: refused (nothing of it changed) or halted. Raises Refused or Halted."""
    work, unit = ctx.work, ctx.current
    if failure.acted and unit is not None and unit.state in NOT_BEGUN:
        # whatever failed (a lost lock, a driver's Halted, an unexpected error), a unit still checking took no action:
        # its record says so (``stopped: false``), never the default of a failure that came from further on
        failure = dataclasses.replace(failure, acted=False)
    if work.refuses(ctx, failure):
        _mark(ctx, unit, State.REFUSED, failure.reason)
        refuse(ctx, unit, failure)
    failure = work.cleanup(ctx, unit, failure)
    _mark(ctx, unit, State.HALTED if failure.acted else State.REFUSED, failure.reason)
    halt(ctx, unit, failure)


def _mark(ctx: Context, unit: Unit | None, to: State, reason: Reason) -> None:
    if unit is None or unit.state in ENDS:
        return
    try:
        ctx.board.move(unit, to, reason)
    except IllegalTransition:  # e.g. "refused" after the action was taken: it is a halt, said as one
        ctx.board.move(unit, State.HALTED, reason)


def refuse(ctx: Context, unit: Unit | None, failure: Failure) -> None:
    """A refusal in the ledger (``refused``, with its code and the unit's path) and the audit; nothing was changed.
    Raises Refused."""
    work, r = ctx.work, failure.reason
    names = work.names(ctx, unit)
    path = {"states": unit.states} if unit is not None else {}
    if unit is not None and work.step_failed:
        ctx.records.event(L.STEP_FAILED, **names, phase=failure.phase, reason=r.sentence, code=r.code,
                          state=State.REFUSED.value, stopped=False, **path)
    ctx.records.event(L.REFUSED, **names, phase=failure.phase, reason=r.sentence, code=r.code, state=State.REFUSED.value,
                      **path)
    ctx.audit("refused", "refused", {**names, "phase": failure.phase, **r.to_dict(), **path})
    raise Refused(work.refusal_text(ctx, unit, failure), code=r.code)


def halt(ctx: Context, unit: Unit | None, failure: Failure) -> None:
    """Halts: the cluster as it is now, described; the ledger and the audit written best-effort (a failing database
    never keeps the halt from being raised). Raises Halted."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed

    try:
        snapshot = read_snapshot(ctx.zk, ctx.config.name)
    except Exception:  # noqa: BLE001 - describe_state says "unknown"
        snapshot = None
    work, r = ctx.work, failure.reason
    state = describe_state(snapshot, ctx.config.hosts, work.focus(unit))
    names = work.names(ctx, unit)
    path = {"states": unit.states} if unit is not None else {}
    if unit is not None and work.step_failed:
        ctx.records.event(L.STEP_FAILED, **names, phase=failure.phase, reason=r.sentence, code=r.code,
                          **work.stopped(ctx, unit, failure), state=unit.state.value, **path)
    ctx.records.event(L.HALTED, **names, **work.halt_fields(ctx, unit), phase=failure.phase, reason=r.sentence,
                      code=r.code, state=state, **path)
    ctx.audit("halt", "failed", {**names, "phase": failure.phase, "reason": r.sentence, "code": r.code, "state": state,
                                 "logs": {k: v[-4000:] for k, v in failure.logs.items()}, **dict(failure.details), **path})
    raise Halted(work.halt_text(ctx, unit, failure, state), code=r.code)
