"""Mitigate first (issue 30), the I/O: move leadership off a broker that does not serve, under the cluster's
maintenance lock, on fresh state, its JVM untouched. Decisions are ``remediate/demote.py``'s (pure).

One run: the lock; fresh state from ZooKeeper and a direct check of the broker NOW (it must still fail: a broker that
answers again is left alone); the plan again on that state -- only moves that are still needed AND exactly what was
approved run (a partition the approval did not cover needs a new one); the intent in the ledger; when B is the
controller, the controller moved first (``move_controller``: its /controller znode deleted, another broker takes it); the reassignment
(``/admin/reassign_partitions``, refused if one is pending), waited for until the controller deleted it; the
preferred election of the moved partitions (``/admin/preferred_replica_election``); then the gates: every moved
partition led by a registered in-sync broker other than B (ZooKeeper) and each new leader's own metadata agreeing,
the coordinators of moved ``__consumer_offsets`` partitions loaded, a canary round through every serving leader.
Anything else halts, saying where and what the cluster looks like. A znode the controller did not take is removed again
when it is still ours: nothing is left for a controller to run later.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.model import CONSUMER_OFFSETS, Plan
from kafka_runbooks.remediate import demote as D
from kafka_runbooks.remediate import election as E
from kafka_runbooks.remediate import engine
from kafka_runbooks.remediate.termination import TERMINATION, TaskTerminated
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.engine import Execution, Failure, Halted, Refused, Unit, Work
from kafka_runbooks.remediate.ledger import Reason, StepState as State

log = logging.getLogger(__name__)

STUCK_READER = E.STUCK_READER  # what removing a znode the controller did not take cannot undo (election.py)


def to_plan(dplan: D.DemotePlan, snapshot, roll_id: str | None) -> Plan:
    """The demotion as the engine's Plan: nothing restarts (no steps); what the approval binds is in ``conditions``
    (every move's new replica order, what stays offline, the original order to restore)."""
    return Plan(
        cluster=dplan.cluster, steps=(), kind=D.KIND, requested=(dplan.broker_id,), computed_at=snapshot.taken_at,
        refusals=tuple(str(r) for r in dplan.refusals), blast_radius=tuple(dplan.blast_radius()),
        controller_id=snapshot.controller_id, controller_epoch=snapshot.controller_epoch,
        not_serving={dplan.broker_id: dplan.evidence} if dplan.evidence else {}, roll_id=roll_id,
        conditions={"broker_id": dplan.broker_id,
                    "moves": {m.partition.name: list(m.replicas) for m in dplan.moves},
                    "stays_offline": {s.partition.name: s.why for s in dplan.stays_offline},
                    "restore": dplan.restore, "controller": dplan.controller,
                    "move_controller": dplan.move_controller, "controller_takers": list(dplan.takers)},
    )


def approved_moves(plan: Plan) -> dict[str, list[int]]:
    return {str(k): [int(r) for r in v] for k, v in (plan.conditions or {}).get("moves", {}).items()}


def runnable(fresh: D.DemotePlan, approved: Mapping[str, list[int]]) -> tuple[list[D.Move], list[str]]:
    """The fresh moves that were approved as they are now (same partition, same new order), and what is left out."""
    run, left = [], []
    for m in fresh.moves:
        if approved.get(m.partition.name) == list(m.replicas):
            run.append(m)
        else:
            left.append(f"{m.partition.name} -> {list(m.replicas)} was not approved in this form (needs a new approval)")
    gone = sorted(set(approved) - {m.partition.name for m in fresh.moves})
    if gone:
        left.append(f"no longer led by broker {fresh.broker_id} or no longer movable: {', '.join(gone)}")
    return run, left


def write_and_wait(zk, path: str, payload: bytes, timeout_s: float, guard: Callable[[], None] | None = None) -> float:
    """Creates ``path`` (Halted if it exists: somebody else's change is pending) and waits until the controller deletes
    it; the seconds that took. Not taken in time: removed again when still ours, then Halted."""
    from kazoo.exceptions import NodeExistsError

    from kafka_runbooks.remediate.waits import Waker, wait_for  # deferred: loaded on first use, not when a DAG file is parsed

    t0 = time.monotonic()
    try:
        zk.create(path, payload)
    except NodeExistsError:
        raise Halted(f"{path} already exists: another change is pending; nothing was written", code="znode_exists") from None
    waker = Waker()
    gone = wait_for(lambda: True if zk.exists(path, watch=waker) is None else None, timeout_s=timeout_s, poll_s=0.5,
                    waker=waker, guard=guard)
    if gone is None:
        removed = remove_if_ours(zk, path, payload)
        raise Halted(f"the controller did not take {path} within {timeout_s:g} s (no active controller, or it is stuck); "
                     + (f"the znode was removed again: {E.REMOVED}" + STUCK_READER if removed else
                        "the znode is no longer ours or already gone"), code="controller_did_not_take")
    return time.monotonic() - t0


def reorder_and_wait(zk, config, moving: D.DemotePlan, guard: Callable[[], None], *,
                     controller_moved: bool = False) -> tuple[float, list[D.Move], list[str], int]:
    """Writes the reassignment and waits, bounded, until each reordered partition either shows its new order in
    ZooKeeper (done) or lost a replica from its ISR since the plan (stuck: Kafka completes a reassignment only with every
    replica in sync, and they would catch up from the hung broker -- seen on the lab when the hung leader shrank its ISR
    after the plan was read). (seconds, the moves that may be elected, what is stuck, times written again). The
    controller keeps a stuck partition's reassignment pending until its replicas are back in sync (Kafka before 2.4
    cannot cancel one).

    ``controller_moved`` (this run moved the controller just before): a new Kafka 2.3 controller reads the pending
    reassignments when its failover begins and, when it is ready, deletes ``/admin/reassign_partitions`` if it read
    none (``KafkaController.onControllerFailover`` -> ``maybeTriggerPartitionReassignment`` with an empty set); a
    reassignment written in between is dropped unread (CI, lab: the znode written 0.1 s after broker 3's election,
    deleted by it at "Ready to serve", nothing reordered). Then, and only while no partition of it was reordered yet,
    it is written again, once."""
    t0 = time.monotonic()
    payload = moving.reassignment()
    _create_reassignment(zk, payload)
    deadline, rewrites = t0 + config.election.znode_timeout_s, 0
    while True:
        guard()
        pending = zk.exists(D.REASSIGN_ZNODE) is not None  # read before the partitions: gone-then-done is not "dropped"
        done, stuck, now = _reorder_progress(zk, config, moving)
        if len(done) + len(stuck) == len(moving.moves):
            why = [f"{m.partition.name}: ISR now {list(now[m.partition.name].isr)}; its reassignment stays pending in the "
                   f"controller until every replica is in sync again (after broker {moving.broker_id}'s restart)" for m in stuck]
            return time.monotonic() - t0, done, why, rewrites
        reordered = [m for m in done if m.reorder]
        if not pending and controller_moved and not reordered and not stuck and rewrites == 0:
            log.warning("the new controller dropped %s unread (its failover deleted it): written again", D.REASSIGN_ZNODE)
            _create_reassignment(zk, payload)
            rewrites += 1
            continue
        if time.monotonic() >= deadline:
            left = [m.partition.name for m in moving.moves if m not in done and m not in stuck]
            removed = remove_if_ours(zk, D.REASSIGN_ZNODE, payload)  # not taken: no controller may run it later
            raise Halted(f"the controller did not reorder {', '.join(left[:8])} within {config.election.znode_timeout_s:g} s "
                         "(no active controller, or it is stuck); nothing was elected; "
                         + (f"{D.REASSIGN_ZNODE} was removed again" + STUCK_READER if removed else
                            f"{D.REASSIGN_ZNODE} is no longer ours or already gone (the controller may have taken it)")
                         + (f"; written {rewrites + 1} times (a new controller dropped it)" if rewrites else ""),
                         code="not_reordered")
        time.sleep(0.3)


def _create_reassignment(zk, payload: bytes) -> None:
    from kazoo.exceptions import NodeExistsError

    try:
        zk.create(D.REASSIGN_ZNODE, payload)
    except NodeExistsError:
        raise Halted(f"{D.REASSIGN_ZNODE} already exists: another reassignment is pending; nothing was written", code="znode_exists") from None


def _reorder_progress(zk, config, moving: D.DemotePlan):
    """(done: in their new order or nothing to reorder, stuck: a replica out of the ISR, the partitions now)."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed

    now = {p.name: p for p in read_snapshot(zk, config.name).partitions}
    done = [m for m in moving.moves if not m.reorder or tuple(now[m.partition.name].replicas) == tuple(m.replicas)]
    stuck = [m for m in moving.moves if m not in done and not set(m.replicas) <= set(now[m.partition.name].isr)]
    return done, stuck, now


CONTROLLER_ZNODE, CONTROLLER_EPOCH_ZNODE = "/controller", "/controller_epoch"


def controller_znode(zk) -> dict[str, Any] | None:
    """/controller as it is now: the broker it names, the znode's identity (czxid, ephemeral owner = the session of
    the broker that created it), its version, and the version of /controller_epoch read just before it (every
    Kafka 2.x election creates /controller and bumps /controller_epoch in one ZooKeeper transaction). None: no
    controller. Halted (nothing changed) when either cannot be read or parsed."""
    from kazoo.exceptions import NoNodeError

    from kafka_runbooks.detect.snapshot import parse_controller  # deferred: loaded on first use, not when a DAG file is parsed

    try:
        _, estat = zk.get(CONTROLLER_EPOCH_ZNODE)
        data, stat = zk.get(CONTROLLER_ZNODE)
    except NoNodeError:
        if zk.exists(CONTROLLER_EPOCH_ZNODE) is None:
            raise Halted(f"{CONTROLLER_EPOCH_ZNODE} is missing: the controller is not moved; nothing was deleted",
                         code="controller_epoch_unreadable") from None
        return None
    try:
        import json

        broker = parse_controller(json.loads(data.decode("utf-8")))
    except Exception as exc:  # noqa: BLE001 - any unparsable /controller: fail closed, said
        raise Halted(f"{CONTROLLER_ZNODE} could not be parsed ({exc}); nothing was deleted", code="controller_unreadable") from None
    return {"broker_id": broker, "czxid": stat.czxid, "owner": stat.ephemeralOwner, "version": stat.version,
            "epoch_version": estat.version}


def move_controller(zk, b: int, seen: Mapping[str, Any], timeout_s: float, guard: Callable[[], None] | None = None) -> dict[str, Any]:
    """Moves the controller off broker ``b`` (issue 30), ``seen`` being /controller as the fresh check read it
    (:func:`controller_znode`). Deletes /controller ONLY while it names ``b``, is the znode ``seen`` (same czxid and
    ephemeral owner) and /controller_epoch is unchanged since (no election came between), in one ZooKeeper
    transaction; then waits up to ``timeout_s`` for another registered broker to take it.

    Kafka 2.3 (KafkaController, read for this): every broker watches /controller; its deletion puts a ``Reelect``
    event in each broker's controller event queue. Each live broker's event thread resigns if it was active, then
    ``elect()``: creates /controller (ephemeral) and bumps /controller_epoch in one transaction; the first wins, the
    others see it and stop. The stuck broker's own ``Reelect`` waits in its queue behind the event its thread is stuck
    in, so it cannot take it back while stuck; when it resumes, every ZooKeeper write of its old event is made with
    the old /controller_epoch version and fails (ControllerMovedException: it resigns), and brokers reject its requests
    (a controller epoch older than the one they know: STALE_CONTROLLER_EPOCH). The new controller, on failover, reads
    /admin/reassign_partitions and /admin/preferred_replica_election and resumes what they hold. If broker ``b``
    takes /controller again, its event thread is not stuck (a hang of its request handlers only): the move goes on
    through it (``retaken`` True), as it did before. Nobody within ``timeout_s``: Halted ``controller_not_moved``.
    {"from", "to", "took_s", "deleted", "retaken"} otherwise ("deleted" False: another registered broker had taken it
    on its own since the check; nothing was deleted)."""
    from kafka_runbooks.remediate.waits import Waker, wait_for  # deferred: loaded on first use, not when a DAG file is parsed

    now = controller_znode(zk)
    if now is not None and now["broker_id"] != b and zk.exists(f"/brokers/ids/{now['broker_id']}") is not None:
        return {"from": b, "to": now["broker_id"], "took_s": 0.0, "deleted": False}  # moved on its own since the check
    same = ("czxid", "owner", "epoch_version")  # the same znode, and no election since the check read it
    if now is None or now["broker_id"] != b or any(now[k] != seen[k] for k in same):
        raise Halted(f"{CONTROLLER_ZNODE} is no longer the one of broker {b} the check read ({_said(seen)}); now: "
                     f"{_said(now)}; nothing was deleted", code="controller_changed")
    t0 = time.monotonic()
    tx = zk.transaction()
    tx.check(CONTROLLER_EPOCH_ZNODE, seen["epoch_version"])
    tx.delete(CONTROLLER_ZNODE, version=now["version"])
    failed = [r for r in tx.commit() if isinstance(r, Exception)]
    if failed:
        raise Halted(f"{CONTROLLER_ZNODE} or {CONTROLLER_EPOCH_ZNODE} changed while the controller was being moved "
                     f"({type(failed[0]).__name__}); nothing was deleted", code="controller_changed")
    waker = Waker()

    def taken():
        zk.exists(CONTROLLER_ZNODE, watch=waker)
        cur = controller_znode(zk)
        if cur is not None and (cur["broker_id"] == b or zk.exists(f"/brokers/ids/{cur['broker_id']}") is not None):
            return cur
        return None  # nobody yet (or a broker that is not registered: waited on)

    cur = wait_for(taken, timeout_s=timeout_s, poll_s=0.5, waker=waker, guard=guard)
    if cur is None:
        raise Halted(f"{CONTROLLER_ZNODE} of broker {b} was deleted to move the controller first; no registered broker "
                     f"took it within {timeout_s:g} s ({_said(controller_znode(zk))}); no leadership was moved and "
                     "nothing else was written", code="controller_not_moved")
    # broker b won the election again: its controller event thread is not stuck (a hang of its request handlers
    # only: measured, such a controller processes the reassignment and the election, docs/MITIGATE.md), so the move
    # goes on through it -- what it did before the controller was moved first
    return {"from": b, "to": cur["broker_id"], "took_s": round(time.monotonic() - t0, 2), "deleted": True,
            "retaken": cur["broker_id"] == b}


def _said(c: Mapping[str, Any] | None) -> str:
    if c is None:
        return "no /controller"
    return f"broker {c['broker_id']}, czxid {c['czxid']:#x}, session {c['owner']:#x}, epoch version {c['epoch_version']}"


def remove_if_ours(zk, path: str, payload: bytes) -> bool:
    from kazoo.exceptions import BadVersionError, NoNodeError

    try:
        data, stat = zk.get(path)
        if data != payload:
            return False
        zk.delete(path, version=stat.version)
        return True
    except (NoNodeError, BadVersionError):
        return False


def fresh_demote(ex: Execution, zk) -> tuple[Any, D.DemotePlan, Any]:
    """(snapshot, the plan again on it, the direct check of the broker now)."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed

    b = int(ex.plan.conditions["broker_id"])
    snapshot = read_snapshot(zk, ex.config.name)
    broker = snapshot.broker(b)
    check = None
    if broker is not None:
        check = KafkaHook(ex.config.kafka_conn_id, listener=ex.config.listener).check_broker(
            broker, ex.config.health.kafka_probe_timeout_s)
    evidence = {}
    if check is not None and not check.ok and ex.plan.not_serving.get(b):
        evidence[b] = f"direct check failed now ({check.error or check.error_code or 'no answer'}); {ex.plan.not_serving[b]}"
    return snapshot, D.plan_demote(snapshot, b, evidence), check


def _gates(zk, ex: Execution, dplan: D.DemotePlan, moves: list[D.Move], guard) -> dict[str, Any]:
    """ZooKeeper and the new leaders' own metadata agree that B leads none of the moved partitions; coordinators loaded;
    a canary round through every serving leader. Halted otherwise."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.election_run import _coordinators_loaded  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ex.config
    hook = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener)
    moved = D.DemotePlan(dplan.cluster, dplan.broker_id, tuple(moves), (), (), dplan.controller, dplan.evidence)
    t0 = time.monotonic()
    deadline = t0 + cfg.election.convergence_s
    while True:
        guard()
        snapshot = read_snapshot(zk, cfg.name)
        left = D.converged(snapshot, moved)
        if not left:
            serving = [b for b in snapshot.brokers if b.id != dplan.broker_id]
            left = _views_disagree(hook.metadata_views(serving, cfg.leadership.view_timeout_s), moved)
        if not left:
            break
        if time.monotonic() >= deadline:
            raise Halted(f"leadership did not leave broker {dplan.broker_id} within {cfg.election.convergence_s:g} s: "
                         + "; ".join(left[:6]), code="not_converged")
        time.sleep(0.5)
    out: dict[str, Any] = {"moved_s": round(time.monotonic() - t0, 2)}
    by_leader: dict[int, list[int]] = {}
    for m in moves:
        if m.coordinator:
            by_leader.setdefault(m.new_leader, []).append(m.partition.index)
    for leader, parts in sorted(by_leader.items()):
        guard()
        out.setdefault("coordinators", {})[leader] = _coordinators_loaded(zk, ex, leader, sorted(parts), guard=guard)
    if ex.canary:
        out["canary"] = _canary_after_move(zk, ex, hook, dplan.broker_id, guard)
    return out


def _canary_after_move(zk, ex: Execution, hook, b: int, guard) -> dict[str, Any]:
    """Canary rounds through every serving leader (B left out) until one passes, within ``gates.canary_s``; Halted
    otherwise. Rounds, not one: a new leader keeps B in the ISR of what it took over until B has been out of date for
    ``replica.lag.time.max.ms`` (Kafka sets its followers caught up when it becomes leader, and B, hung, never fetches),
    so an acks=all write waits that long after the move -- as every client's does (docs/MITIGATE.md)."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import gates as G  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ex.config

    def serving():
        snap = read_snapshot(zk, cfg.name)
        return dataclasses.replace(snap, brokers=tuple(x for x in snap.brokers if x.id != b))

    try:
        res = G.canary_gate(hook, serving, cfg.canary.topic, latency_bound_ms=cfg.canary.latency_bound_ms,
                            round_timeout_s=cfg.canary.timeout_s, timeout_s=cfg.gates.canary_s, poll_s=cfg.gates.poll_s,
                            guard=guard)
    except G.GateFailed as exc:
        raise Halted(f"canary produce/consume failed after the move for {cfg.gates.canary_s:g} s: {exc.reason}; "
                     + "; ".join(exc.details.get("failed_rounds", [])[-2:]), code="canary_failed") from None
    return res.to_dict()


def _views_disagree(views, moved: D.DemotePlan) -> list[str]:
    """Each serving broker's own metadata must show no moved partition led by B (a stale view routes clients to B)."""
    names = {m.partition.name for m in moved.moves}
    out = []
    for v in views:
        if not v.ok:
            out.append(f"broker {v.broker_id}'s metadata could not be read: {v.error}")
            continue
        still = sorted(n for n in names if v.leader_of(n) == moved.broker_id)
        if still:
            out.append(f"broker {v.broker_id} still says broker {moved.broker_id} leads {', '.join(still[:5])}")
    return out


def run(ex: Execution) -> dict[str, Any]:
    """Runs the approved demotion through the engine (``engine.run``, :class:`DemotionWork`). Raises Refused (nothing
    changed) or Halted (stopped after an action)."""
    return engine.run(ex, DemotionWork())


class DemoteRefused(RuntimeError):
    """Refused on fresh state, before anything was written."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.sentence)
        self.reason = reason


class DemotionWork(Work):
    """A demotion as the engine's one unit: checking (the broker's direct check now, the plan again, only what was
    approved) -> moving (the reassignment: B last, when B is a preferred replica) -> electing -> gating (B leads none of
    the moved partitions in ZooKeeper and in the new leaders' own metadata, coordinators, canary) -> done."""

    unit_kind, unit_field = engine.DEMOTION, "broker_id"

    def purpose(self, ctx) -> str:
        return D.KIND

    def units(self, ctx) -> list[Unit]:
        b = int(ctx.ex.plan.conditions["broker_id"])
        return [Unit(engine.DEMOTION, b, b)]

    def drive(self, ctx, unit: Unit) -> None:
        _demote_unit(ctx, unit)

    def refuses(self, ctx, failure: Failure) -> bool:
        return failure.refuse or not failure.acted

    def failure(self, ctx, exc: BaseException) -> Failure:
        from kafka_runbooks.remediate.lock import LockLost  # deferred: loaded on first use, not when a DAG file is parsed

        phase = ctx.current.state.value if ctx.current is not None else "checking"
        if isinstance(exc, DemoteRefused):
            return Failure(phase, exc.reason, acted=False, refuse=True)
        if isinstance(exc, L.RecordFailed):
            return Failure(phase, Reason(_not_recorded_code(), str(exc)), acted=False)
        if isinstance(exc, TaskTerminated):
            return Failure(phase, Reason(TaskTerminated.code, str(exc)))
        if isinstance(exc, (Halted, LockLost)):
            return Failure(phase, Reason("lock_lost" if isinstance(exc, LockLost) else exc.code or "halted", str(exc)))
        return Failure(phase, Reason("unexpected", f"unexpected error: {type(exc).__name__}: {exc}"))

    def refusal_text(self, ctx, unit: Unit | None, failure: Failure) -> str:
        b = unit.key if unit is not None else ctx.ex.plan.conditions.get("broker_id")
        return f"move of leadership off broker {b} refused on fresh state: {failure.reason.sentence}; nothing was changed"

    def halt_text(self, ctx, unit: Unit | None, failure: Failure, state: list[str]) -> str:
        ex = ctx.ex
        b = unit.key if unit is not None else ex.plan.conditions.get("broker_id")
        return "\n".join([f"move of leadership off broker {b} of cluster {ex.config.name} HALTED while {failure.phase}",
                          failure.reason.sentence, "cluster now:", *[f"  {line}" for line in state],
                          f"broker {b}'s JVM was not touched (record {ex.record_id}); capture and the restart go on"])

    def finish(self, ctx, wall_s: float) -> dict[str, Any]:
        ex, r = ctx.ex, ctx.result
        moves, moving, stuck = r["moves"], r["moving"], r["stuck"]
        ctx.records.event(L.COMPLETED, moved=[m.partition.name for m in moves])
        return {"broker_id": moving.broker_id, "moved": [m.partition.name for m in moves],
                "new_leaders": {m.partition.name: m.new_leader for m in moves},
                "stays_offline": {**{s.partition.name: s.why for s in moving.stays_offline},
                                  **{w.split(":", 1)[0]: w.split(":", 1)[1].strip() for w in stuck}}, "left_out": r["left"],
                "restore": r["restore"], "timing": r["timing"], "approved_by": ex.approver, "record_id": ex.record_id,
                "at": clock.now_iso()}


def _demote_check(ctx, unit: Unit) -> tuple[D.DemotePlan, list[D.Move], list[str], dict[str, Any] | None]:
    """``checking``: the plan again on fresh state, only the moves approved as they are now, and /controller as read
    now when B is the controller (moved first only if the approval covered it); DemoteRefused otherwise."""
    b = unit.key
    _, fresh, check = fresh_demote(ctx.ex, ctx.zk)
    moves, left = runnable(fresh, approved_moves(ctx.ex.plan))
    unapproved = D.controller_move_unapproved(fresh, bool((ctx.ex.plan.conditions or {}).get("move_controller")))
    refusals = [str(r) for r in (*fresh.refusals, *([unapproved] if unapproved else []))]
    seen = None
    if fresh.move_controller and not refusals:
        try:
            seen = controller_znode(ctx.zk)
        except Halted as exc:  # unreadable now: refused, nothing was written yet
            refusals.append(f"{exc.code}: {exc}")
        else:
            if seen is None or seen["broker_id"] != b:
                refusals.append(f"controller_changed: /controller no longer names broker {b} ({_said(seen)})")
    ctx.audit("demote_check", "refused" if refusals or not moves else "ok",
              {"broker_id": b, "refusals": refusals, "left_out": left, "moves": len(moves),
               "direct_check": check.to_dict() if check is not None else None})
    if refusals or not moves:
        code = "refused_on_fresh_state" if refusals else "nothing_to_move"
        raise DemoteRefused(Reason(code, "; ".join(refusals or left or ["nothing left to move"])))
    return fresh, moves, left, seen


def _demote_unit(ctx, unit: Unit) -> None:
    """The demotion, from ``checking`` to ``done``; raises on any failure (the engine refuses or halts)."""
    cfg, zk, lock, b = ctx.config, ctx.zk, ctx.lock, unit.key
    fresh, moves, left, seen = _demote_check(ctx, unit)
    moving = D.DemotePlan(fresh.cluster, b, tuple(moves), fresh.stays_offline, (), fresh.controller, fresh.evidence, fresh.takers)
    first = State.MOVING if moving.reorders else State.ELECTING
    ctx.records.intent(L.STEP_STARTED, broker_id=b, phase="reassigning", partitions=[m.partition.name for m in moves],
                       restore=moving.restore, state=first.value,
                       move_controller=_said(seen) if seen else None)  # committed before anything is written, or nothing is
    ctx.move(unit, first)
    moved = {}
    if seen is not None:  # B is the controller: moved first (move_controller), or nothing else is written
        moved = move_controller(zk, b, seen, cfg.election.znode_timeout_s, guard=lock.check)
        ctx.audit("controller_move", "ok", {"broker_id": b, **moved})
    took_r, stuck, restore = 0.0, [], moving.restore  # every reorder asked for: a stuck one completes later
    if moving.reorders:  # partitions B is the preferred replica of: B last first (none: the election alone)
        took_r, moves, stuck, rewrites = reorder_and_wait(zk, cfg, moving, lock.check, controller_moved=bool(moved))
        ctx.audit("reassign", "ok" if not stuck else "partial",
                  {"broker_id": b, "reordered": sum(m.reorder for m in moves), "stuck": stuck, "controller_s": round(took_r, 2),
                   "written": 1 + rewrites})
        if not moves:
            raise Halted("no partition could be reordered: " + "; ".join(stuck[:6]), code="not_reordered")
        moving = D.DemotePlan(fresh.cluster, b, tuple(moves), fresh.stays_offline, (), fresh.controller, fresh.evidence, fresh.takers)
        ctx.move(unit, State.ELECTING)
    took_e = write_and_wait(zk, D.ELECTION_ZNODE, moving.election(), cfg.election.znode_timeout_s, guard=lock.check)
    ctx.audit("elect", "ok", {"broker_id": b, "partitions": len(moves), "controller_s": round(took_e, 2)})
    ctx.move(unit, State.GATING, record=True)
    gates = _gates(zk, ctx.ex, moving, moves, lock.check)
    timing = {"broker_id": b, "reassign_s": round(took_r, 2), "elect_s": round(took_e, 2), **gates,
              **({"controller_to": moved["to"], "controller_move_s": moved["took_s"]} if moved else {})}
    ctx.audit("gates", "ok", timing)
    ctx.move(unit, State.DONE)
    ctx.records.event(L.STEP_DONE, broker_id=b, partitions=[m.partition.name for m in moves], timing=timing,
                      state=State.DONE.value, states=unit.states)
    ctx.result.update(moves=moves, moving=moving, stuck=stuck, left=left, restore=restore, timing=timing)


def restore_order(zk, config, restore: Mapping[str, list[int]], guard: Callable[[], None] | None = None) -> dict[str, Any]:
    """After B's restart passed its gates: the original replica order written back (``demote.restore_payload``), so the
    deferred preferred election returns leadership to B. {"restored": [...], "left": [...], "controller_s"}."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed

    payload, left = D.restore_payload(restore, read_snapshot(zk, config.name))
    if payload is None:
        return {"restored": [], "left": left, "controller_s": 0.0}
    took = write_and_wait(zk, D.REASSIGN_ZNODE, payload, config.election.znode_timeout_s, guard=guard)
    import json

    restored = [f"{p['topic']}-{p['partition']}" for p in json.loads(payload)["partitions"]]
    return {"restored": restored, "left": left, "controller_s": round(took, 2)}


def _not_recorded_code() -> str:
    """An intent that could not be written: because Airflow is terminating the task (``termination``), or not."""
    return TaskTerminated.code if TERMINATION.noticed() else "intent_not_recorded"
