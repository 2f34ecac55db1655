"""The deferred preferred-replica election's I/O (issue 7): reading whether it may run, and running the approved
batches under the cluster's maintenance lock. Decisions are ``remediate/election.py``'s (pure).

Each batch: fresh state from ZooKeeper; the partitions still not led by their preferred replica are written to
``/admin/preferred_replica_election`` (refused if the znode exists: another election is pending); the controller
deletes the znode when it has processed it (waited for, ``election.znode_timeout_s``); then, within
``election.convergence_s``, ZooKeeper must say the preferred replicas lead, every broker's own metadata must agree,
a canary round (one acks=all record through every leader of the canary topic, read back) must succeed, and no
broker's request queue may be saturated (JmxTool on each broker host, when ``leadership.jmx``).
Each batch is a unit of the one engine loop (``engine.py``, :class:`ElectionWork`: checking -> electing -> gating ->
done). A batch refused on fresh state ends the run with a refusal (``refused``, code ``refused_on_fresh_state``:
nothing of it was written; ``Refused``). Anything else halts: nothing further is elected, the ledger and the audit
say where and why, and ``Halted`` carries the text the failure callback pages on-call with. Every action is audited
in the election's record.

A converged batch is a ``step_done`` with its partitions in the election's ledger (the engine's ledger,
``remediate/ledger.py``): a resumed election (the DAG's ``resume``) re-plans the rest on fresh state, under a new
approval, and never elects those partitions again.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Callable, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import CONSUMER_OFFSETS
from kafka_runbooks.remediate import election as E
from kafka_runbooks.remediate.termination import TERMINATION, TaskTerminated
from kafka_runbooks.remediate import engine
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.engine import Execution, Failure, Halted, Records, Refused, Unit, Work, describe_state
from kafka_runbooks.remediate.ledger import Reason, StepState as State

log = logging.getLogger(__name__)


def read_metrics(config: ClusterConfig, snapshot, replicas: Mapping[int, Any] | None = None,
                 brokers: Iterable[int] | None = None) -> tuple[list, dict[int, int], list[str], list]:
    """Request-path JMX of the registered, configured brokers (all, or ``brokers``; JmxTool over SSH,
    ``detect/leadership_observe``), each broker's queued.max.requests from its server.properties (when set), notes, and
    the followers' state-change lines about ``replicas`` ({broker: [(topic, partition, leader, follower?)]}, whose log end
    offsets and fetcher lags are read in the same JmxTool run)."""
    import dataclasses

    from kafka_runbooks.detect.leadership_observe import read_hosts

    cfg = dataclasses.replace(config, leadership=dataclasses.replace(config.leadership, controller_log=False, jmx=True))
    wanted = None if brokers is None else set(brokers)
    parts = read_hosts(cfg, [b for b in snapshot.brokers if b.id in config.hosts and (wanted is None or b.id in wanted)],
                       set(snapshot.live_broker_ids), None, replicas)
    queued = {}
    for x in parts:
        try:
            queued[x.broker_id] = int((x.static or {})["queued.max.requests"])
        except (KeyError, ValueError):
            pass
    return ([x.metrics for x in parts if x.metrics is not None], queued, [n for x in parts for n in x.notes],
            [line for x in parts for line in x.lines])


def observe_followers(config: ClusterConfig, snapshot, targets: Iterable[int], series: list) -> tuple[dict, list[str]]:
    """The election's targets' replicas out of their ISR: their log end offsets, their leaders', their fetcher lags
    (one JmxTool run on each broker involved) and the followers' own lines about them; the sample is appended to
    ``series`` (kept by the caller across checks). Returns ({(broker, partition): Verdict}, notes)."""
    import dataclasses

    from kafka_runbooks.detect import replicas as RP
    from kafka_runbooks.detect.history import Sample

    targets = {int(b) for b in targets}
    mine = dataclasses.replace(snapshot, partitions=tuple(p for p in snapshot.partitions
                                                          if any(b in targets and b not in p.isr for b in p.replicas)))
    roles: dict[int, list[tuple[str, int, int, bool]]] = {}
    for b, p in RP.out_of_isr(mine):
        if b in targets:
            roles.setdefault(b, []).append((p.topic, p.index, p.leader, True))
            roles.setdefault(p.leader, []).append((p.topic, p.index, p.leader, False))
    if not roles:
        return {}, []
    metrics, _, notes, lines = read_metrics(config, snapshot, roles, brokers=list(roles))
    seen = dataclasses.replace(mine, request_metrics=tuple(metrics), controller_log=tuple(lines))
    series.append(Sample(at=snapshot.taken_at, values=RP.replica_sample(seen)))
    del series[:-200]
    verdicts = RP.verdicts(seen, series, float(config.health.follower_stuck_s), RP.follower_lines(seen))
    return {k: v for k, v in verdicts.items() if k[0] in targets}, notes


def check_ready(config: ClusterConfig, conditions: Mapping[str, Any], series: list | None = None) -> tuple[list[str], dict[str, Any]]:
    """(why it may not run now, what was seen). One ZooKeeper session; JMX when traffic thresholds are set, and on the
    brokers of a target's replicas that are out of their ISR (catching up or stuck: ``seen["stuck"]`` is the give-up
    diagnosis when one is stuck). ``series``: the followers' samples of the earlier checks of this wait."""
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate.lock import holders, zk_now

    with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
        snapshot = read_snapshot(zk, config.name)
        held = holders(zk, config.name)
        now = zk_now(zk, config.name)  # session ages on ZooKeeper's clock, never the worker's
    metrics, notes = [], []
    if conditions.get("max_bytes_in_per_s") is not None or conditions.get("max_requests_per_s") is not None:
        metrics, _, notes, _ = read_metrics(config, snapshot)
    stuck_s = float(conditions.get("stuck_s") or config.health.follower_stuck_s)
    followers, more = observe_followers(_with_stuck_s(config, stuck_s), snapshot, conditions.get("brokers") or (),
                                        series if series is not None else [])
    why = E.readiness(snapshot, conditions, now, lock_holders=held, metrics=metrics, followers=followers)
    return why, {"at": snapshot.taken_at, "notes": notes + more, "controller": snapshot.controller_id,
                 "followers": {f"{b}:{n}": v.to_dict() for (b, n), v in followers.items()},
                 "stuck": E.stuck_diagnosis(conditions, followers)}


def _with_stuck_s(config: ClusterConfig, stuck_s: float) -> ClusterConfig:
    import dataclasses

    return dataclasses.replace(config, health=dataclasses.replace(config.health, follower_stuck_s=stuck_s))


def _elect_znode(zk, partitions: list[str], timeout_s: float, guard: Callable[[], None] | None = None) -> float:
    """Writes the znode and waits until the controller deletes it; the seconds that took. A znode the controller did not
    take within ``timeout_s`` is removed again (when it is still ours) before halting: a halted election leaves nothing
    behind for a controller that reads it later (one that read it and is stuck keeps it: ``E.STUCK_READER``).
    ``guard`` (the maintenance lock's check) runs at every poll."""
    from kazoo.exceptions import NodeExistsError

    from kafka_runbooks.remediate.waits import Waker, wait_for

    t0 = time.monotonic()
    payload = E.znode_payload(partitions)
    try:
        zk.create(E.ZNODE, payload)
    except NodeExistsError:
        raise Halted(f"{E.ZNODE} already exists: another preferred election is pending; nothing was written", code="znode_exists") from None
    waker = Waker()
    gone = wait_for(lambda: True if zk.exists(E.ZNODE, watch=waker) is None else None, timeout_s=timeout_s, poll_s=1.0, waker=waker,
                    guard=guard)
    if gone is None:
        removed = remove_our_znode(zk, partitions)
        raise Halted(f"the controller did not take {E.ZNODE} within {timeout_s:g} s (no active controller, or it is stuck); "
                     + (f"the znode was removed again: {E.REMOVED}{E.STUCK_READER}" if removed else
                        "the znode is no longer ours or already gone"), code="controller_did_not_take")
    return time.monotonic() - t0


def remove_our_znode(zk, partitions: list[str]) -> bool:
    """Deletes /admin/preferred_replica_election when it holds exactly what this election wrote (at its version); True
    when it was deleted. Somebody else's pending election is never touched."""
    from kazoo.exceptions import BadVersionError, NoNodeError

    try:
        data, stat = zk.get(E.ZNODE)
    except NoNodeError:
        return False
    if data != E.znode_payload(partitions):
        return False
    try:
        zk.delete(E.ZNODE, version=stat.version)
        return True
    except (NoNodeError, BadVersionError):
        return False


def open_batch(entries: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``step_started`` entry of an election batch that never ended (no ``step_done`` of that batch, no ``halted``
    or ``completed`` after it): its worker died after the batch started. None otherwise. Pure."""
    started: Mapping[str, Any] | None = None
    for e in entries:
        kind = e.get("event")
        if kind == L.STEP_STARTED and "partitions" in e:
            started = e
        elif kind == L.STEP_DONE and started is not None and e.get("batch") == started.get("batch"):
            started = None
        elif kind in (L.HALTED, L.COMPLETED):
            started = None
    return started


def clear_interrupted_batch(zk, entries: Iterable[Mapping[str, Any]]) -> str | None:
    """After a worker died in an election batch: /admin/preferred_replica_election, when it still holds exactly what that
    batch wrote (``remove_our_znode``: compared byte for byte, deleted at its version), is removed -- no controller runs
    it later, unwatched. Somebody else's pending election is left. Returns what was done, or None (no open batch)."""
    batch = open_batch(entries)
    if batch is None:
        return None
    partitions = [str(n) for n in batch.get("partitions") or ()]
    if remove_our_znode(zk, partitions):
        return (f"{E.ZNODE} written by batch {batch.get('batch')} of run {batch.get('run_id')} (its worker died) was still "
                f"pending; it was removed: {E.REMOVED}{E.STUCK_READER}")
    return f"batch {batch.get('batch')} of run {batch.get('run_id')} did not end; {E.ZNODE} holds nothing of it now"


def _elect_admin(config: ClusterConfig, snapshot, partitions: list[str], timeout_s: float) -> float:
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient

    from kafka_runbooks.hooks.kafka import KafkaHook, broker_address, client_config

    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    bootstrap = ",".join(broker_address(b, config.listener) for b in snapshot.brokers)
    admin = AdminClient(client_config(hook.librdkafka_base(snapshot.brokers), bootstrap, timeout_s))
    t0 = time.monotonic()
    tps = [TopicPartition(n.rpartition("-")[0], int(n.rpartition("-")[2])) for n in partitions]
    result = admin.elect_leaders(ElectionType.PREFERRED, tps).result(timeout=timeout_s)  # no kwargs: ENVIRONMENT.md
    errors = {f"{tp.topic}-{tp.partition}": str(err) for tp, err in result.items() if err is not None}
    if errors:
        raise Halted(f"elect_leaders answered errors: {errors}", code="elect_leaders_errors")
    return time.monotonic() - t0


def _converge(zk, ex: Execution, batch: list[str], guard: Callable[[], None] | None = None, progress=None) -> dict[str, Any]:
    """Waits until the batch converged: ZooKeeper and every broker's own metadata agree, a canary round succeeded (when
    the run uses the canary) and every broker's request queue was read and is not saturated (when ``leadership.jmx``).
    Halted with the last reasons otherwise; a failed canary round halts even if a later one passed. ``guard`` (the
    maintenance lock's check) runs at every poll: a lost lock halts the wait at once, not at its end.
    ``progress(waiting_for, left_s)`` is called when what it waits for changed (at most every 5 s) and at least every
    30 s while it waits."""
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.remediate.gates import canary_leaders

    cfg = ex.config
    hook = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener)
    t0 = time.monotonic()
    deadline = t0 + cfg.election.convergence_s
    last: list[str] = []
    canary_failed: list[str] = []
    rounds = 0
    jmx_rounds = 0
    diverged_s = None
    said: dict[str, Any] = {"what": None, "at": None}
    while True:
        if guard is not None:
            guard()
        snapshot = read_snapshot(zk, cfg.name)
        views = hook.metadata_views(snapshot.brokers, cfg.leadership.view_timeout_s)
        last = E.convergence(snapshot, batch, views=views)
        if not last:
            diverged_s = diverged_s if diverged_s is not None else time.monotonic() - t0
            if ex.canary:
                led = canary_leaders(snapshot, cfg.canary.topic)
                brokers = [b for b in (snapshot.broker(x) for x in sorted(led)) if b is not None]
                results = hook.canary(brokers, {b.id: led[b.id] for b in brokers}, cfg.canary.topic, cfg.canary.timeout_s) if brokers else []
                rounds += 1
                bad = [f"leader {r.broker_id} partition {r.partition}: {r.error_code} {r.error}" for r in results if not r.ok]
                if bad or not results:
                    canary_failed += bad or [f"no registered leader of {cfg.canary.topic} to write to"]
                    last = ["canary failed: " + "; ".join(canary_failed[-3:])]
            if not last and cfg.leadership.jmx:
                metrics, queued, _, _ = read_metrics(cfg, snapshot)  # request queues: JmxTool on each broker host
                last = E.convergence(snapshot, batch, views=views, metrics=metrics, queue_ratio=cfg.leadership.queue_ratio,
                                     queued_max=queued)
                jmx_rounds += 1
            if not last:
                break
        if time.monotonic() >= deadline:
            raise Halted(f"batch did not converge within {cfg.election.convergence_s:g} s: " + "; ".join(last[:6]), code="not_converged")
        now = time.monotonic()
        what = [w.split(":", 1)[0] for w in last]  # the kind of each reason, not its changing figures
        if progress is not None and (said["at"] is None or (what != said["what"] and now - said["at"] >= 5) or now - said["at"] >= 30):
            said.update(what=what, at=now)
            progress(list(last), round(deadline - now, 1))
        time.sleep(min(cfg.election.poll_s, 1.0))
    if canary_failed:
        # a failed canary produce is what incident 003's clients saw: never continued past, even if a later round passed
        raise Halted("canary produce/consume failed after the batch: " + "; ".join(canary_failed[:5]), code="canary_failed")
    return {"converged_s": round(diverged_s or 0.0, 2), "canary_rounds": rounds, "canary_failures": len(canary_failed),
            "queue_checks": jmx_rounds, "total_s": round(time.monotonic() - t0, 2)}


def _coordinators_loaded(zk, ex: Execution, broker_id: int, partitions: list[int],
                         guard: Callable[[], None] | None = None) -> dict[str, Any]:
    """After moving ``__consumer_offsets`` leadership: the engine's coordinator gate -- each moved partition's new
    coordinator (broker ``broker_id``) answers an OffsetFetch for a probe group of that partition, i.e. it loaded the
    groups' offsets -- within ``gates.coordinator_s``; Halted otherwise (the groups of those partitions have no
    coordinator)."""
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.ssh import StrictSSHHook
    from kafka_runbooks.remediate import gates as G
    from kafka_runbooks.remediate.executor import probe_consumer_config
    from kafka_runbooks.remediate.host import BrokerHost

    cfg = ex.config
    now = read_snapshot(zk, cfg.name)
    offsets_now = G.offsets_partitions(now)
    with StrictSSHHook(cfg.ssh_conn_id(broker_id), connect_timeout=cfg.capture.connect_timeout_s) as ssh:
        host = BrokerHost(cfg, broker_id, ssh)
        try:
            res = G.coordinator_gate(probe_consumer_config(ex, now), partitions, len(offsets_now), timeout_s=cfg.gates.coordinator_s,
                                     poll_s=cfg.gates.poll_s, request_timeout_s=cfg.gates.probe_timeout_s,
                                     broker_log=lambda: host.tail(cfg.server_log(broker_id), 5000),
                                     led_by_broker=[p for p, leader in offsets_now.items() if leader == broker_id], guard=guard)
        except G.GateFailed as exc:
            raise Halted(f"the coordinators of __consumer_offsets {partitions} (now broker {broker_id}) did not load their groups "
                         f"within {cfg.gates.coordinator_s:g} s: {exc.reason}", code="coordinators_not_loaded") from None
    return res.to_dict()


def run(ex: Execution) -> dict[str, Any]:
    """Runs the approved batches through the engine (``engine.run``, :class:`ElectionWork`). Raises Refused (nothing
    of the refused batch changed: a batch refused on fresh state) or Halted (stopped after an action)."""
    return engine.run(ex, ElectionWork())


class BatchRefused(RuntimeError):
    """A batch refused on fresh state, before anything of it was written: the run ends with a refusal, not a halt."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(reason.sentence)
        self.reason = reason


class ElectionWork(Work):
    """An election batch as the engine's unit: checking (fresh state, the batch's refusals, the target's direct check)
    -> electing (the intent, then the znode or ``elect_leaders``) -> gating (converged, coordinators loaded) -> done;
    checking -> done when nothing of the batch is left to elect."""

    unit_kind, unit_field = engine.ELECTION, "batch"

    def purpose(self, ctx) -> str:
        return E.KIND

    def units(self, ctx) -> list[Unit]:
        ctx.result.update(elected=[], pending=[], at_batch=0, method=E.election_method(ctx.config),
                          already=set(ctx.read("the election's progress", ctx.ledger.progress).partitions_done))  # converged earlier: never again
        return [Unit(engine.ELECTION, n, b.target) for n, b in enumerate(ctx.ex.plan.batches, 1)]

    def skip(self, ctx, unit: Unit) -> str | None:
        ctx.result["at_batch"] = unit.key
        return None

    def names(self, ctx, unit: Unit | None) -> dict[str, Any]:
        return {"batch": unit.key if unit is not None else ctx.result.get("at_batch", 0)}

    def drive(self, ctx, unit: Unit) -> None:
        _batch_unit(ctx, unit)

    def refuses(self, ctx, failure: Failure) -> bool:
        """A batch refused on fresh state is a refusal; so is an intent that could not be recorded before this run
        elected anything (nothing was written)."""
        return failure.refuse or (not failure.acted and not ctx.done)

    def failure(self, ctx, exc: BaseException) -> Failure:
        from kafka_runbooks.remediate.lock import LockLost  # deferred: loaded on first use, not when a DAG file is parsed

        phase = ctx.current.state.value if ctx.current is not None else "checking"
        if isinstance(exc, BatchRefused):
            return Failure(phase, exc.reason, acted=False, refuse=True)
        if isinstance(exc, (Halted, LockLost)):
            return Failure(phase, Reason("lock_lost" if isinstance(exc, LockLost) else exc.code or "halted", str(exc)))
        if isinstance(exc, L.RecordFailed):
            return Failure(phase, Reason(_not_recorded_code(), f"{exc}; nothing of this batch was written"), acted=False)
        if isinstance(exc, TaskTerminated):
            return Failure(phase, Reason(TaskTerminated.code, str(exc)))
        if isinstance(exc, L.StateUnavailable):  # read where the run decides: nothing of this batch was begun
            return Failure(phase, Reason(exc.code, f"{exc}; nothing of this batch was written"), acted=False)
        return Failure(phase, Reason("unexpected", f"unexpected error: {type(exc).__name__}: {exc}"))

    def cleanup(self, ctx, unit: Unit | None, failure: Failure) -> Failure:
        pending, extra = ctx.result.get("pending"), ""
        if pending:
            try:
                if remove_our_znode(ctx.zk, pending):
                    extra = f"; {E.ZNODE} (this batch) removed again: {E.REMOVED}{E.STUCK_READER}"
            except Exception as exc:  # noqa: BLE001 - said, never hidden
                extra = f"; {E.ZNODE} could not be checked for removal ({type(exc).__name__}: {exc}): look at it by hand"
        r = failure.reason
        return dataclasses.replace(failure, reason=Reason(r.code, r.sentence + extra)) if extra else failure

    def refusal_text(self, ctx, unit: Unit | None, failure: Failure) -> str:
        ex = ctx.ex
        return (f"preferred election of cluster {ex.config.name} refused at batch {self.names(ctx, unit)['batch']} of "
                f"{len(ex.plan.batches)}: {failure.reason.sentence} (record {ex.record_id}; code {failure.reason.code}); "
                f"resume with the same form and resume=true when the cluster allows it; see {E.RUNBOOK}")

    def halt_text(self, ctx, unit: Unit | None, failure: Failure, state: list[str]) -> str:
        ex = ctx.ex
        return "\n".join([
            f"preferred election of cluster {ex.config.name} HALTED at batch {self.names(ctx, unit)['batch']} of "
            f"{len(ex.plan.batches)}", failure.reason.sentence, "cluster now:", *[f"  {line}" for line in state],
            f"nothing further was elected (record {ex.record_id}, {clock.now_iso()}); resume with the same form and "
            f"resume=true (the converged batches are not elected again; the rest is re-planned and approved again); see {E.RUNBOOK}"])

    def finish(self, ctx, wall_s: float) -> dict[str, Any]:
        ex, elected = ctx.ex, ctx.result.get("elected", [])
        ctx.records.event(L.COMPLETED, elected=elected, wall_s=wall_s)
        return {"elected": elected, "batches": len(ex.plan.batches), "approved_by": ex.approver, "timings": ex.timings,
                "canary_failures": sum(t.get("canary_failures", 0) for t in ex.timings), "record_id": ex.record_id,
                "wall_s": wall_s}


def _batch_check(ctx, unit: Unit, batch) -> tuple[list[str], Any, dict[str, Any]]:
    """``checking``: the batch's partitions still to elect on fresh state; BatchRefused when the batch may not run now
    (``election.batch_refusals``: the target's session, its direct check, ...). (todo, snapshot, where)."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.lock import zk_now  # deferred: loaded on first use, not when a DAG file is parsed

    cfg, ex, zk = ctx.config, ctx.ex, ctx.zk
    snapshot = read_snapshot(zk, cfg.name)
    by_name = {p.name: p for p in snapshot.partitions}
    todo = [n for n in batch.partitions
            if n in by_name and n not in ctx.result["already"] and by_name[n].leader != E.preferred(by_name[n])]
    target = snapshot.broker(batch.target)
    check = (KafkaHook(cfg.kafka_conn_id, listener=cfg.listener).check_broker(target, cfg.health.kafka_probe_timeout_s)
             if target is not None and todo else None)
    refusals = E.batch_refusals(snapshot, ex.plan.conditions, zk_now(zk, cfg.name), batch.target, todo,
                                check=check) if todo else []
    at = {"batch": unit.key, "batches": len(ex.plan.batches), "broker_id": batch.target}
    ctx.audit("batch_check", "refused" if refusals else "ok",
              {**at, "partitions": len(todo), "refusals": refusals,
               "direct_check": check.to_dict() if check is not None else None})
    if refusals:
        raise BatchRefused(Reason("refused_on_fresh_state", f"batch {unit.key}: refused on fresh state: "
                                  + "; ".join(refusals) + "; nothing of this batch was elected"))
    return todo, snapshot, at


def _batch_unit(ctx, unit: Unit) -> None:
    """One batch, from ``checking`` to ``done``; raises on any failure (the engine refuses or halts)."""
    cfg, ex, zk, lock = ctx.config, ctx.ex, ctx.zk, ctx.lock
    batch = ex.plan.batches[unit.key - 1]
    todo, snapshot, at = _batch_check(ctx, unit, batch)
    if not todo:
        ctx.audit("elect_batch", "skipped", {**at, "why": "already led by the preferred replica, or elected by this election before"})
        ctx.move(unit, State.DONE)
        ctx.records.event(L.STEP_DONE, batch=unit.key, broker_id=batch.target, partitions=[], skipped=True, states=unit.states)
        return
    lock.fence()  # the lock proven in ZooKeeper before the batch is written
    ctx.records.intent(L.STEP_STARTED, batch=unit.key, broker_id=batch.target, partitions=todo,
                       state=State.ELECTING.value)  # committed before the znode is written, or nothing is
    ctx.move(unit, State.ELECTING)
    t0 = time.monotonic()
    method = ctx.result["method"]
    if method == "zookeeper":
        ctx.result["pending"][:] = todo
        took = _elect_znode(zk, todo, cfg.election.znode_timeout_s, guard=lock.check)
        ctx.result["pending"][:] = []
    else:
        took = _elect_admin(cfg, snapshot, todo, cfg.election.znode_timeout_s)
    ctx.audit("elect_batch", "ok", {**at, "partitions": todo, "method": method,
                                    "znode": E.ZNODE if method == "zookeeper" else None, "controller_s": round(took, 2)})
    lock.check()
    ctx.move(unit, State.GATING, record=True)
    conv = _converge(zk, ex, todo, guard=lock.check, progress=lambda waiting, left_s: ctx.audit(
        "convergence_progress", "waiting", {**at, "waiting_for": waiting[:10], "left_s": left_s}))
    offsets = sorted(int(n.rpartition("-")[2]) for n in todo if n.rpartition("-")[0] == CONSUMER_OFFSETS)
    if offsets:
        lock.check()
        conv["coordinator"] = _coordinators_loaded(zk, ex, batch.target, offsets, guard=lock.check)
    timing = {"batch": unit.key, "batches": len(ex.plan.batches), "broker_id": batch.target, "partitions": len(todo),
              "elect_s": round(took, 2), **conv, "batch_s": round(time.monotonic() - t0, 2)}
    ex.timings.append(timing)
    ctx.audit("convergence", "ok", timing)
    ctx.move(unit, State.DONE)
    ctx.records.event(L.STEP_DONE, batch=unit.key, broker_id=batch.target, partitions=todo, timing=timing,
                      state=State.DONE.value, states=unit.states)
    ctx.result["elected"] += todo


def _not_recorded_code() -> str:
    """An intent that could not be written: because Airflow is terminating the task (``termination``), or not."""
    return TaskTerminated.code if TERMINATION.noticed() else "intent_not_recorded"
