"""Issue 28's one engine loop (``remediate/engine.py``): the state machine every unit of work goes through, and the
loop's refusals and halts. Pure: the state machine is data; the loop runs with the product's real state database
(SQLite) and a ZooKeeper session, maintenance lock and Kafka check that are small stand-ins (said where they are)."""

from __future__ import annotations

import itertools
import random
from contextlib import contextmanager
from types import SimpleNamespace

import pytest

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Broker, ElectionBatch, KafkaCheck, Plan, Step
from kafka_runbooks.remediate import engine as G
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.ledger import Reason, StepState as S
from snapshot_builders import P, snap

# The diagram the engine implements, written out by hand: the table in engine.py must say exactly this.
DIAGRAM = {
    G.RESTART: """planned>checking planned>done checking>stopping checking>gating checking>refused checking>halted stopping>stopped
                  stopping>refused stopping>halted stopped>starting stopped>halted starting>gating starting>halted
                  gating>done gating>halted""",
    G.ELECTION: """planned>checking checking>electing checking>done checking>refused checking>halted electing>gating
                   electing>halted gating>done gating>halted""",
    G.DEMOTION: """planned>checking checking>moving checking>electing checking>refused checking>halted moving>electing
                   moving>halted electing>gating electing>halted gating>done gating>halted""",
}
WHY = Reason("some_code", "a sentence on-call reads")


def _edges(kind):
    return {tuple(S(x) for x in e.split(">")) for e in DIAGRAM[kind].split()}


def _at(kind, state):
    """A unit of ``kind`` brought to ``state`` along legal moves (None when no path reaches it)."""
    paths = {S.PLANNED: []}
    frontier = [S.PLANNED]
    while frontier:
        s = frontier.pop()
        for t in G.TRANSITIONS[kind].get(s, ()):
            if t not in paths:
                paths[t] = paths[s] + [t]
                frontier.append(t)
    if state not in paths:
        return None
    unit = G.Unit(kind, 1, 1)
    board = G.Board([unit])
    for t in paths[state]:
        board.move(unit, t, WHY if t in G.NEEDS_REASON else None)
    return board, unit


@pytest.mark.parametrize("kind", [G.RESTART, G.ELECTION, G.DEMOTION])
def test_the_table_is_the_diagram(kind):
    table = {(a, b) for a, targets in G.TRANSITIONS[kind].items() for b in targets}
    assert table == _edges(kind)


@pytest.mark.parametrize("kind, src, dst", [(k, a, b) for k in (G.RESTART, G.ELECTION, G.DEMOTION)
                                           for a, b in itertools.product(S, S)])
def test_every_transition_is_allowed_or_forbidden_as_drawn(kind, src, dst):
    reached = _at(kind, src)
    if reached is None:  # a state this kind never reaches (e.g. stopping for an election): it has no moves at all
        assert src not in G.TRANSITIONS[kind] and not any(src in t for t in G.TRANSITIONS[kind].values())
        return
    board, unit = reached
    trace = list(unit.trace)
    if (src, dst) in _edges(kind):
        board.move(unit, dst, WHY if dst in G.NEEDS_REASON else None)
        assert unit.state is dst and unit.trace[-1]["state"] == dst.value
    else:
        with pytest.raises(G.IllegalTransition):
            board.move(unit, dst, WHY)
        assert unit.state is src and unit.trace == trace  # a forbidden move changes nothing


@pytest.mark.parametrize("kind", [G.RESTART, G.ELECTION, G.DEMOTION])
@pytest.mark.parametrize("end", [S.REFUSED, S.HALTED])
def test_every_refusal_and_halt_carries_a_code_and_a_sentence(kind, end):
    board, unit = _at(kind, S.CHECKING)
    for bad in (None, Reason("", "a sentence"), Reason("a_code", ""), "a plain string"):
        with pytest.raises(G.IllegalTransition):
            board.move(unit, end, bad)
        assert unit.state is S.CHECKING
    board.move(unit, end, Reason("lock_lost", "the lock was lost"))
    assert unit.reason == Reason("lock_lost", "the lock was lost")
    assert unit.states[-1] == {"state": end.value, "code": "lock_lost"}


def test_ends_are_final():
    for kind in (G.RESTART, G.ELECTION, G.DEMOTION):
        for end in G.ENDS:
            assert not G.TRANSITIONS[kind].get(end)


def test_a_restart_never_goes_from_stopping_to_done_without_starting():
    board, unit = _at(G.RESTART, S.STOPPING)
    with pytest.raises(G.IllegalTransition):
        board.move(unit, S.DONE)
    board.move(unit, S.STOPPED)
    with pytest.raises(G.IllegalTransition):
        board.move(unit, S.DONE)
    with pytest.raises(G.IllegalTransition):
        board.move(unit, S.GATING)
    # and no path of the table gets from stopping to done around starting
    seen, frontier = {S.STOPPING}, [S.STOPPING]
    while frontier:
        for t in G.TRANSITIONS[G.RESTART].get(frontier.pop(), ()):
            if t not in seen and t is not S.STARTING:
                seen.add(t)
                frontier.append(t)
    assert S.DONE not in seen


@pytest.mark.parametrize("kind, action", [(G.RESTART, S.STOPPING), (G.ELECTION, S.ELECTING), (G.DEMOTION, S.MOVING)])
def test_two_units_are_never_both_between_their_action_and_their_last_gate(kind, action):
    a, b = G.Unit(kind, 1, 1), G.Unit(kind, 2, 2)
    board = G.Board([a, b])
    for u in (a, b):
        board.move(u, S.CHECKING)
    board.move(a, action)
    with pytest.raises(G.IllegalTransition, match="is not finished"):
        board.move(b, action)
    assert b.state is S.CHECKING
    board.move(b, S.REFUSED, WHY)  # b may still end without acting
    board.move(a, S.HALTED, WHY)
    c = G.Unit(kind, 3, 3)
    board.units.append(c)
    board.move(c, S.CHECKING)
    board.move(c, action)  # a halted unit is no longer active
    assert board.active() == [c]


@pytest.mark.parametrize("kind", [G.RESTART, G.ELECTION, G.DEMOTION])
def test_random_walks_keep_at_most_one_active_unit_and_only_legal_paths(kind):
    rnd = random.Random(28)
    for _ in range(200):
        units = [G.Unit(kind, i, i) for i in range(4)]
        board = G.Board(units)
        for _ in range(40):
            u = rnd.choice(units)
            to = rnd.choice(list(S))
            try:
                board.move(u, to, WHY if to in G.NEEDS_REASON else None)
            except G.IllegalTransition:
                pass
            assert len(board.active()) <= 1
        for u in units:
            path = [S(t["state"]) for t in u.trace]
            assert all((x, y) in _edges(kind) for x, y in zip(path, path[1:])), path
            assert all("code" in t for t in u.trace if t["state"] in ("refused", "halted"))


# --------------------------------------------------------------------------- the loop


class Lock:
    """Stands in for the maintenance lock (``remediate/lock.py``, a kazoo lock recipe): acquired, checked, fenced."""

    def __init__(self, *a, **k):
        self.released = False

    def acquire(self, wait_s):
        return {"lock": "/kafka-runbooks/locks/c1"}

    def check(self):
        pass

    def fence(self):
        return {"owner": "this session"}

    def release(self):
        self.released = True


class Zk:
    """Stands in for the ZooKeeper hook's session (nothing reads it: the snapshot reader is replaced)."""

    def __init__(self, *a, **k):
        pass

    @contextmanager
    def session(self):
        yield SimpleNamespace()


@pytest.fixture
def loop(tmp_path, monkeypatch):
    from kafka_runbooks.hooks import zookeeper as Z
    from kafka_runbooks.remediate import lock as LK
    from kafka_runbooks.state.db import StateDb

    StateDb.embedded(tmp_path / "state").engine  # the schema at head
    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                         "incident_base": str(tmp_path / "state")})
    monkeypatch.setattr(Z, "ZooKeeperHook", Zk)
    monkeypatch.setattr(LK, "MaintenanceLock", Lock)
    from kafka_runbooks.incidents.store import IncidentStore

    store = IncidentStore(cfg)
    record = store.open(cluster="c1", broker_ids=[3], reason="t", trigger={"kind": "t"}, opened_by="t")

    def execution(plan):
        return G.Execution(config=cfg, plan=plan, record_id=record["id"], dag_id="d", run_id="run-1", task_id="execute",
                           try_number=1, approver="alice", starter="bob", canary=False)

    return SimpleNamespace(cfg=cfg, store=store, record=record, execution=execution,
                           entries=lambda: L.Ledger(cfg, record["id"]).entries())


class Illegal(G.Work):
    """A driver with a bug: it jumps from stopping to done."""

    def units(self, ctx):
        return [G.Unit(G.RESTART, 2, 2)]

    def drive(self, ctx, unit):
        ctx.move(unit, S.STOPPING)
        ctx.move(unit, S.DONE)

    def halt_text(self, ctx, unit, failure, state):
        return f"HALTED: {failure.reason.sentence}"

    def finish(self, ctx, wall_s):
        return {}


def test_a_driver_that_skips_a_state_halts_the_run_with_a_code(loop, monkeypatch):
    import kafka_runbooks.detect.snapshot as SN

    monkeypatch.setattr(SN, "read_snapshot", lambda zk, cluster: snap([P("orders", 0, (1, 2, 3), 1, (1, 2, 3))]))
    with pytest.raises(G.Halted, match="no move stopping -> done"):
        G.run(loop.execution(Plan(cluster="c1", steps=(Step("restart_broker", 2, "r"),))), Illegal())
    (halted,) = [e for e in loop.entries() if e["event"] == L.HALTED]
    assert halted["code"] == "unexpected" and [s["state"] for s in halted["states"]] == ["planned", "checking", "stopping", "halted"]
    assert [e["state"] for e in loop.entries() if e["event"] == L.STATE] == ["checking"]


class Raises(Illegal):
    """A driver that halts on its own (as the election's convergence wait does): Halted with a code."""

    def drive(self, ctx, unit):
        ctx.move(unit, S.STOPPING)
        raise G.Halted("the batch did not converge", code="not_converged")


def test_a_drivers_own_halt_is_recorded_and_said_by_the_engine(loop, monkeypatch):
    import kafka_runbooks.detect.snapshot as SN

    monkeypatch.setattr(SN, "read_snapshot", lambda zk, cluster: snap([P("orders", 0, (1, 2, 3), 1, (1, 2, 3))]))
    with pytest.raises(G.Halted, match="^HALTED: the batch did not converge$"):
        G.run(loop.execution(Plan(cluster="c1", steps=(Step("restart_broker", 2, "r"),))), Raises())
    (halted,) = [e for e in loop.entries() if e["event"] == L.HALTED]
    assert halted["code"] == "not_converged" and halted["phase"] == "stopping"
    assert [e["action"] for e in loop.store.audit_trail(loop.record["id"]) if e["action"] == "halt"] == ["halt"]


def test_an_election_batch_refused_on_fresh_state_is_a_refusal_not_a_halt(loop, monkeypatch):
    """Issue 29 §3 (its open item for the election): the target broker does not answer a direct check when its batch is
    checked -- nothing of the batch is written, and the run ends with a refusal (code, the unit's path), not a halt."""
    import kafka_runbooks.detect.snapshot as SN
    import kafka_runbooks.hooks.kafka as K
    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate import election_run as R
    from kafka_runbooks.remediate import lock as LK

    now = clock.parse("2024-01-01T12:00:00Z")
    s = snap([P("orders", i, (3, 1, 2), 1, (3, 1, 2)) for i in range(3)])
    s = s.__class__(**{**s.__dict__, "brokers": tuple(Broker(b, f"kafka{b}", 9092, registered_at="2024-01-01T00:00:00Z",
                                                              session_id=b) for b in (1, 2, 3))})

    class Hook:  # stands in for KafkaHook: broker 3 registered, in every ISR, and silent (incident 003's hung broker)
        def __init__(self, *a, **k):
            pass

        def check_broker(self, broker, timeout_s):
            return KafkaCheck(broker.id, f"kafka{broker.id}:9092", False, error="timed out", error_code="_TIMED_OUT")

    written = []
    monkeypatch.setattr(SN, "read_snapshot", lambda zk, cluster: s)
    monkeypatch.setattr(K, "KafkaHook", Hook)
    monkeypatch.setattr(LK, "zk_now", lambda zk, cluster: now)
    monkeypatch.setattr(R, "_elect_znode", lambda *a, **k: written.append(a))
    plan = Plan(cluster="c1", steps=(), kind=E.KIND, conditions={"stable_s": 0},
                batches=(ElectionBatch(3, ("orders-0", "orders-1", "orders-2"), "preferred replica 3"),))
    with pytest.raises(R.Refused) as refused:
        R.run(loop.execution(plan))
    text = str(refused.value)
    assert "refused at batch 1 of 1" in text and "does not answer a direct check now" in text
    assert "nothing of this batch was elected" in text and "HALTED" not in text
    assert written == []
    entries = loop.entries()
    assert [e["event"] for e in entries if e["event"] in (L.REFUSED, L.HALTED, L.STEP_STARTED)] == [L.REFUSED]
    (end,) = [e for e in entries if e["event"] == L.REFUSED]
    assert end["code"] == "refused_on_fresh_state" and end["batch"] == 1
    assert [x["state"] for x in end["states"]] == ["planned", "checking", "refused"]
    trail = loop.store.audit_trail(loop.record["id"])
    assert [e["details"]["code"] for e in trail if e["action"] == "refused"] == ["refused_on_fresh_state"]
    assert not [e for e in trail if e["action"] == "halt"]


def test_restart_and_election_plans_are_types_of_their_own():
    """Issue 28: the plan builders give a RestartPlan and an ElectionPlan; what XCom or the state database carries comes
    back as the same type (by its kind), equal field by field, with the same digest; a demotion's stays a Plan."""
    from kafka_runbooks.model import ElectionPlan, RestartPlan
    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart

    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}})
    s = snap([P("orders", i, (1, 2, 3), 1, (1, 2, 3)) for i in range(3)])
    restart = plan_restart(s, [2], cfg)
    moved = snap([P("orders", i, (3, 1, 2), 1, (3, 1, 2)) for i in range(3)])
    election = E.plan_election(moved, cfg)
    assert type(restart) is RestartPlan and restart.steps and not restart.batches
    assert type(election) is ElectionPlan and election.batches and election.steps == ()
    for plan in (restart, election):
        back = Plan.from_dict(plan.to_dict())
        assert type(back) is type(plan) and back == plan and plan_digest(back) == plan_digest(plan)
    demotion = Plan.from_dict({**restart.to_dict(), "kind": "demote", "steps": []})
    assert type(demotion) is Plan
    assert Plan(**{f: getattr(restart, f) for f in ("cluster", "steps", "kind")}) != restart  # fields differ: unequal


def test_an_election_refused_after_converged_batches_stays_resumable():
    """A batch refused on fresh state after earlier batches of the same election converged: the election is not
    finished and resume takes it up (as a halted one was); refused before anything was elected: nothing to resume."""
    after = [{"event": L.PLANNED, "run_id": "r1", "plan": {"requested": [3]}},
             {"event": L.STEP_DONE, "run_id": "r1", "batch": 1, "broker_id": 3, "partitions": ["orders-0"]},
             {"event": L.REFUSED, "run_id": "r1", "batch": 2, "code": "refused_on_fresh_state", "reason": "..."}]
    assert L.progress(after).resumable and L.progress(after).partitions_done == ("orders-0",)
    assert not L.progress([after[0], after[2]]).resumable
