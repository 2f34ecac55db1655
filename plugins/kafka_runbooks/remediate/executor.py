"""A broker's restart -- the rolling and the incident restart -- as a unit of the one engine loop (``engine.py``):
:class:`RestartWork`, behind the thin :func:`run` operators call.

Holding the cluster's maintenance lock from the first safety check to the last gate, for each step not already done
(the ledger says; planned -> done): ``checking`` -- prove the host runs the broker it is mapped to (its
``broker.id``), read fresh state -- the brokers' static configs over SSH, the open incidents, ZooKeeper, and a direct
Kafka-protocol check of every holder the stop depends on (``safety.holders_to_check``) and of every broker under the
not-serving waiver -- and check the stop on it; ``stopping`` -- right before the stop command, read ZooKeeper again
and check once more, every holder checked directly again (``last_check``), the intent committed (``stop_gate``);
``stopped``/``starting`` -- ``steps.restart_broker``; ``gating`` -- in sync, coordinators loaded, canary; ``done``.
Every wait of the step and of the gates polls the lock (``guard``): a lost lock halts at once. A failure before the
stop command of a run that restarted nothing is a refusal (``refused``, with its code); any other failure halts --
the cluster is left as it is, described (which broker is down, which partitions are affected), the ledger and the
audit say where and why, and :class:`Halted` carries all of it to the failure callback that pages on-call. A later
run with "resume" continues from the failed step; a step whose worker died (``interrupted_step``) too.

Pure helpers (``engine.describe_state``, :func:`order_refusals`, :func:`plan_changed`, :func:`interrupted_step`)
are apart from the I/O.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot, Plan
from kafka_runbooks.remediate import engine
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.engine import (MAX_LISTED, Execution, Failure, Halted, Records, Refused, Unit, Work,
                                             describe_state)
from kafka_runbooks.remediate.ledger import Reason, StepState as State
from kafka_runbooks.remediate.plan import GATES_ACTION
from kafka_runbooks.remediate.safety import SafetySettings, stop_refusals
from kafka_runbooks.remediate.termination import TERMINATION, TaskTerminated

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- pure

def order_refusals(plan: Plan, snapshot: ClusterSnapshot, remaining: list[int]) -> list[str]:
    """The controller must be restarted last: if it moved to a broker that is not the last one
    still to restart, the plan no longer fits the cluster."""
    c = snapshot.controller_id
    if c is None or c not in remaining or c == remaining[-1] or c in plan.not_serving:
        return []
    return [f"the controller is now broker {c}, which this plan restarts before {remaining[-1]}: the plan no longer "
            "puts the controller last; run again (resume) for a new plan and approval"]


_NOT_HOLDER = re.compile(r"^broker (\d+) is not a holder now")


def _not_holders(plan: Plan) -> list[int]:
    return sorted(int(m.group(1)) for w in plan.warnings if (m := _NOT_HOLDER.match(w)))


def _seen_effects(plan: Plan) -> dict[int, set[str]]:
    """Each step's blast radius lines the plan carries (all of them when computed here), id lists sorted."""
    from kafka_runbooks.remediate.blast import normalized  # deferred: loaded on first use, not when a DAG file is parsed

    full = plan.detail.effects if plan.detail is not None else {}
    return {s.broker_id: {normalized(e) for e in full.get(s.broker_id, s.blast_radius)} for s in plan.steps}


def _blast_changes(approved: Plan, fresh: Plan) -> list[str]:
    """Each step whose whole blast radius differs (by its fingerprint; by its lines for a plan without one): the
    counts, and the lines known to differ."""
    from kafka_runbooks.remediate.blast import KINDS, step_counts  # deferred: loaded on first use, not when a DAG file is parsed

    out = []
    seen, now = _seen_effects(approved), _seen_effects(fresh)
    steps = {s.broker_id: s for s in fresh.steps}
    for a in approved.steps:
        f = steps.get(a.broker_id)
        if f is None:
            continue
        if a.blast_sha256 and f.blast_sha256:
            if a.blast_sha256 == f.blast_sha256:
                continue
            ca, cf = step_counts(a), step_counts(f)
            what = [f"{k} {ca[k]} -> {cf[k]}" for k in ("partitions", *KINDS) if ca[k] != cf[k]] or ["same counts, other partitions"]
            gone = sorted(seen[a.broker_id] - now[a.broker_id])  # the approved plan's lines are a sample: only these are known gone
            new = sorted(now[a.broker_id] - seen[a.broker_id]) if not a.blast_counts or a.partitions_touched == len(a.blast_radius) else []
        else:
            gone, new = sorted(seen[a.broker_id] - now[a.broker_id]), sorted(now[a.broker_id] - seen[a.broker_id])
            if not gone and not new:
                continue
            what = []
        out.append(f"the blast radius of broker {a.broker_id}'s step changed: " + "; ".join(
            what + [f"no longer: {x}" for x in gone[:5]] + [f"now: {x}" for x in new[:5]]))
    return out


def plan_changed(approved: Plan, fresh: Plan) -> list[str]:
    """What differs between the plan the approver saw and the same plan computed on fresh state, in anything the
    approver saw: the order, the waiver, who is no holder, each step's blast radius, the warnings, refusals."""
    out: list[str] = []
    if fresh.refused:
        out.append("on fresh state the plan is refused: " + "; ".join(fresh.refusals[:10]))
    if approved.broker_order != fresh.broker_order:
        out.append(f"the order changed: approved {list(approved.broker_order)}, on fresh state {list(fresh.broker_order)}")
    if list(approved.completed) != list(fresh.completed):
        out.append(f"brokers already done changed: approved {list(approved.completed)}, now {list(fresh.completed)}")
    for b in sorted(set(approved.not_serving) - set(fresh.not_serving)):
        out.append(f"broker {b} was approved for restart under the not-serving waiver, but its direct check does not fail now "
                   "(it answers again, or is no longer registered): the waiver no longer applies")
    for b in sorted(set(fresh.not_serving) - set(approved.not_serving)):
        out.append(f"broker {b} is now not serving ({fresh.not_serving[b]}); the approved plan did not say so")
    before, now = _not_holders(approved), _not_holders(fresh)
    if before != now:
        out.append(f"brokers that are no holder (no answer to a direct check, or an open incident): approved {before}, now {now}")
    out += _blast_changes(approved, fresh)
    actions = {s.broker_id: s.action for s in fresh.steps}
    for a in approved.steps:
        if a.broker_id in actions and actions[a.broker_id] != a.action:
            out.append(f"broker {a.broker_id}'s step changed: approved {a.action}, on fresh state {actions[a.broker_id]} "
                       "(what a resume does with the step an earlier run left unfinished)")
    unclean = lambda p: sorted(w for w in p.warnings if not _NOT_HOLDER.match(w))
    if unclean(approved) != unclean(fresh):
        out.append(f"the warnings changed: approved {unclean(approved)}, now {unclean(fresh)}")
    if out:
        out.append("the plan the approver saw no longer fits the cluster; run again for a new plan and approval")
    return out


def interrupted_step(entries: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``step_started`` entry of a step that never ended -- no ``step_done``/``step_failed`` of that broker, no
    ``halted``/``completed`` after it: the worker running it died (killed, lost its machine) with the stop command
    sent. None otherwise. The roll is resumable from that step (``runbook/restart.find_resumable_roll``)."""
    open_step: Mapping[str, Any] | None = None
    for e in entries:
        kind = e.get("event")
        if kind == L.STEP_STARTED and "partitions" not in e:
            open_step = e
        elif kind in (L.STEP_DONE, L.STEP_FAILED) and open_step is not None and e.get("broker_id") == open_step.get("broker_id"):
            open_step = None
        elif kind in (L.HALTED, L.COMPLETED):
            open_step = None
    return open_step


def registration_now(snapshot: ClusterSnapshot, broker_id: int) -> dict[str, Any] | None:
    """Broker ``broker_id``'s ZooKeeper registration in ``snapshot`` as the ledger records it (``resumption``)."""
    from kafka_runbooks.remediate.resumption import registration_of  # deferred: loaded on first use, not when a DAG file is parsed

    broker = snapshot.broker(broker_id)
    return registration_of(broker.registration_zxid, broker.session_id) if broker is not None else None


def resume_decisions(entries: Iterable[Mapping[str, Any]], snapshot: ClusterSnapshot, brokers: Iterable[int]) -> dict:
    """Per broker of ``brokers`` whose step an earlier run of the roll left unfinished (``entries``: its ledger), what a
    resume does with it on ``snapshot`` (``resumption.decide``: gates only, start, restart, refuse); the plan says it,
    the approver approves it, the execution decides again on fresh state and refuses what was not approved."""
    from kafka_runbooks.remediate import resumption as R  # deferred: loaded on first use, not when a DAG file is parsed

    entries = list(entries)
    out = {}
    for b in brokers:
        decision = R.decide(int(b), R.unfinished_step(entries, int(b)), registration_now(snapshot, int(b)))
        if decision is not None:
            out[int(b)] = decision
    return out


def interruption_report(step: Mapping[str, Any], snapshot: ClusterSnapshot | None, configured: Iterable[int]) -> list[str]:
    """What on-call reads when a worker died mid-step: which step, since when, and the cluster as it is now."""
    b = step.get("broker_id")
    return [f"the execute task stopped during the step of broker {b} (stop command sent at {step.get('at')} by run "
            f"{step.get('run_id')}) and never finished it: the worker died or was killed",
            *describe_state(snapshot, configured, b),
            f"resume with resume=true: the roll continues from broker {b}'s step (a broker that is down is started; one "
            "registered again since that step's stop gets its gates only; one still registered as before the stop is "
            "restarted), every stop checked again on fresh state"]


# --------------------------------------------------------------------------- I/O

@dataclass
class FreshState:
    snapshot: ClusterSnapshot
    settings: SafetySettings
    not_serving: dict[int, str]  # the waiver: still failing its direct check now
    unresponsive: dict[int, str]  # holders that are no holders: no answer to a direct check now, or an open incident
    notes: list[str]
    checked: dict[int, Any] = field(default_factory=dict)  # broker -> KafkaCheck taken for this decision
    records: list[dict[str, Any]] = field(default_factory=list)  # the cluster's incident records, read with it


def check_brokers(config: ClusterConfig, snapshot: ClusterSnapshot, broker_ids: Iterable[int]) -> dict[int, Any]:
    """Direct Kafka-protocol checks of the registered brokers among ``broker_ids``, in parallel, each bounded by
    ``health.kafka_probe_timeout_s`` (``KafkaHook.check_all``): {broker: KafkaCheck}."""
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed

    brokers = [snapshot.broker(b) for b in sorted(set(broker_ids))]
    brokers = [b for b in brokers if b is not None]
    if not brokers:
        return {}
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    return {c.broker_id: c for c in hook.check_all(brokers, config.health.kafka_probe_timeout_s)}


def serving_evidence(config: ClusterConfig, snapshot: ClusterSnapshot, stopping: Iterable[int], waived: Mapping[int, str],
                     records: Iterable[Mapping[str, Any]], checked: Mapping[int, Any] | None = None, check=None):
    """Who serves, proven now, for stopping each of ``stopping``: every other registered in-sync replica of every
    partition a stop takes a replica from is checked directly (``safety.holders_to_check``), and so is every
    broker under the not-serving waiver (``waived``). Returns (not_serving, unresponsive, checks, notes):
    the waiver where its broker still fails its check; every broker that did not answer, or that an open
    incident says is not serving (``records``), as no holder. ``checked``: checks already taken for this decision.
    ``check``: how the brokers are checked (``check_brokers``: the KafkaHook, bounded, in parallel)."""
    from kafka_runbooks.remediate.safety import holders_to_check, incident_evidence, unanswered  # deferred: loaded on first use, not when a DAG file is parsed

    stopping = list(stopping)
    wanted = set(waived) | {h for b in stopping for h in holders_to_check(snapshot, b)}
    checks = dict(checked or {})
    taken = (check or check_brokers)(config, snapshot, wanted - set(checks))
    checks.update(taken)
    not_serving: dict[int, str] = {}
    notes: list[str] = []
    for b, evidence in waived.items():
        check = checks.get(b)
        if check is None:
            continue  # not registered: nothing of it is in any live ISR
        if check.ok:
            notes.append(f"broker {b} answers again ({check.latency_ms} ms): the not-serving waiver no longer applies")
        else:
            not_serving[b] = f"{evidence}; checked again now: {check.error}" if b in taken else evidence
    silent = unanswered(c for c in checks.values() if c.broker_id not in not_serving)
    unresponsive = {**{b: why for b, why in incident_evidence(records, snapshot).items() if b not in not_serving}, **silent}
    return not_serving, unresponsive, checks, notes


def read_fresh_state(zk, ex: Execution, broker_id: int) -> FreshState:
    """Everything the safety rules read for stopping ``broker_id``, now: the brokers' static configs over SSH, the
    open incidents, ZooKeeper, direct checks of every holder -- then ZooKeeper again (the state the stop is
    checked on is the newest; holders that appeared meanwhile are checked too)."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.host import static_config_state  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.plan import safety_settings  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.safety import holders_to_check  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ex.config
    static, unread = static_config_state(cfg)
    records = L.read_retrying(lambda: IncidentStore(cfg).records(cfg.name), f"the open incidents of cluster {cfg.name}",
                              urgent=lambda: TERMINATION.why)
    snapshot = read_snapshot(zk, cfg.name)
    not_serving, unresponsive, checks, notes = serving_evidence(cfg, snapshot, [broker_id], ex.plan.not_serving, records)
    version = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener).kafka_version(
        snapshot.brokers, cfg.health.kafka_probe_timeout_s, cfg.kafka_version)
    snapshot = read_snapshot(zk, cfg.name)  # read last: the state the stop is checked on is the newest
    if set(holders_to_check(snapshot, broker_id)) - set(checks):
        not_serving, unresponsive, checks, more = serving_evidence(cfg, snapshot, [broker_id], ex.plan.not_serving, records, checks)
        notes += more
    unread = {**unread, **unconfigured_replicas(cfg, snapshot)}
    return FreshState(snapshot, safety_settings(cfg, static, unread, version), not_serving, unresponsive, notes, checks, records)


def last_check(config: ClusterConfig, plan: Plan, now: ClusterSnapshot, broker_id: int, fresh: FreshState,
               remaining: list[int], check=None) -> tuple[list[str], dict[int, str], dict[int, Any]]:
    """The safety rules once more on ``now`` (ZooKeeper read right before the stop command), with EVERY holder the stop
    depends on and every waived broker checked directly again, now -- none of ``fresh``'s checks, taken seconds earlier,
    is reused: a holder that stopped answering since is no holder and refuses the stop, named. Returns (refusals,
    unresponsive, checks taken now). ``check``: see ``serving_evidence``."""
    not_serving, unresponsive, checks, _ = serving_evidence(config, now, [broker_id], plan.not_serving, fresh.records, check=check)
    why = stop_refusals(now, broker_id, fresh.settings, not_serving, unresponsive) + order_refusals(plan, now, remaining)
    return why, unresponsive, checks


def _checked(checks: Mapping[int, Any]) -> dict[str, str]:
    return {str(b): ("ok" if c.ok else f"NO ANSWER: {c.error}") + f" at {c.at}" for b, c in sorted(checks.items())}


def unconfigured_replicas(config: ClusterConfig, snapshot: ClusterSnapshot) -> dict[int, str]:
    """Replicas on brokers with no host in the configuration: their server.properties cannot be read."""
    return {r: f"no SSH connection configured for broker {r}" for p in snapshot.partitions for r in p.replicas
            if r not in config.hosts}


def probe_consumer_config(ex: Execution, snapshot: ClusterSnapshot):
    """consumer_config(group) for the coordinator probes, bootstrapped at the live brokers."""
    from kafka_runbooks.hooks.kafka import KafkaHook, broker_address, client_config  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ex.config
    hook = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener)
    addresses = []
    for b in snapshot.brokers:
        try:
            addresses.append(broker_address(b, cfg.listener))
        except KeyError:
            continue
    # no ApiVersions from librdkafka where a broker may be older than 0.10.0 (versions.asking, seed 002)
    base = client_config(hook.librdkafka_base(snapshot.brokers), ",".join(addresses), cfg.gates.probe_timeout_s)
    return lambda group: {**base, "group.id": group, "enable.auto.commit": False, "session.timeout.ms": 10000}


def stop_gate(records: Records, broker_id: int, check_now, fresh_s: float, *, monotonic=time.monotonic,
              max_checks: int = 5, on_intent=None):
    """``before_stop`` of a step: check (``check_now() -> (refusals, details)``: the lock proven in ZooKeeper, the
    state read again, every holder checked directly) -> the intent committed (``step_started``, state ``stopping``) ->
    while the last check is older than ``fresh_s`` (the intent's write took long), check again, writing nothing in
    between: the stop command leaves at most ``fresh_s`` after the last direct check was complete (its age runs from
    when it ended: a check that itself takes longer than ``fresh_s`` on a loaded machine is not stale for that). A refusal, or an intent that
    cannot be committed, raises StepFailed with ``stopped=False``: nothing was stopped. ``on_intent()``: called once the
    intent is committed (the engine's unit enters ``stopping``)."""
    from kafka_runbooks.remediate.steps import StepFailed  # deferred: loaded on first use, not when a DAG file is parsed

    def checked(first: bool):
        why, details = check_now()
        t = monotonic()  # when the check's evidence was complete: its own duration (slow on a loaded host) is not its age
        if why:
            records.audit("safety_check_before_stop", "refused", details={"broker_id": broker_id, "refusals": why, **details})
            raise StepFailed(broker_id, "safety check right before the stop", "; ".join(why[:10]) + "; nothing was stopped",
                             stopped=False, code="refused_before_stop")
        if first:  # a check again (below) is recorded with the stop command: nothing is written between it and the stop
            records.audit("safety_check_before_stop", "ok", details={"broker_id": broker_id, **details})
        return t, details

    def before_stop() -> dict[str, Any]:
        t, details = checked(True)
        # the registration it is about to stop (``resumption``: a resume proves from it whether the restart happened)
        registered = {"registration": details["registration"]} if "registration" in details else {}
        try:
            records.intent(L.STEP_STARTED, broker_id=broker_id, state=L.StepState.STOPPING.value, check=details,
                           **registered)
        except L.RecordFailed as exc:  # the database failing, or Airflow terminating the task (``termination``)
            raise StepFailed(broker_id, "intent", str(exc), stopped=False,
                             code=TaskTerminated.code if TERMINATION.noticed() else "intent_not_recorded") from exc
        if on_intent is not None:
            on_intent()
        checks = 1
        while monotonic() - t > fresh_s:
            if checks >= max_checks:
                raise StepFailed(broker_id, "safety check right before the stop",
                                 f"no direct check of the holders within {fresh_s:g}s of the stop after {checks} tries; "
                                 "nothing was stopped", stopped=False, code="check_not_fresh")
            t, details = checked(False)
            checks += 1
            if registered and details.get("registration") != registered["registration"]:
                raise StepFailed(broker_id, "safety check right before the stop",
                                 f"broker {broker_id}'s registration changed since the intent recorded it "
                                 f"({registered['registration']} -> {details.get('registration')}); nothing was stopped",
                                 stopped=False, code="registration_changed")
        return {"last_check": details, "checks": checks, "checked_s_before_stop": round(monotonic() - t, 3)}

    return before_stop


def run(ex: Execution) -> dict[str, Any]:
    """Execute ``ex.plan`` through the engine (``engine.run``, :class:`RestartWork`); returns what was done. Raises
    Refused (nothing changed) or Halted."""
    return engine.run(ex, RestartWork())


class RestartWork(Work):
    """A broker's restart as the engine's unit: checking (host identity, fresh state, the safety rules) -> stopping
    (the last check and the intent, ``stop_gate``) -> stopped -> starting (``steps.restart_broker``) -> gating (in
    sync, coordinators loaded, canary) -> done."""

    unit_kind, unit_field, step_failed = engine.RESTART, "broker_id", True

    def units(self, ctx) -> list[Unit]:
        return [Unit(engine.RESTART, s.broker_id, s.broker_id) for s in ctx.ex.plan.steps]

    def skip(self, ctx, unit: Unit) -> str | None:
        progress = ctx.read(f"the roll's progress before broker {unit.key}'s step", ctx.ledger.progress)
        if unit.key not in progress.completed:
            return None
        ctx.audit("restart_broker", "skipped", {"broker_id": unit.key, "why": "already completed by this roll"})
        return "already completed by this roll"

    def drive(self, ctx, unit: Unit) -> None:
        _restart_unit(ctx, unit)

    def focus(self, unit: Unit | None) -> int | None:
        return unit.broker_id if unit is not None else None

    def stopped(self, ctx, unit: Unit | None, failure: Failure) -> dict[str, Any]:
        if unit is not None and gates_only(unit):
            # registered again after an earlier run's stop: this run stopped nothing (``stopped`` is this run's truth);
            # that earlier stop is still unfinished (``resumption.unfinished_step`` reads ``gates_only``)
            return {"stopped": False, "gates_only": True}
        return super().stopped(ctx, unit, failure)

    def halt_fields(self, ctx, unit: Unit | None) -> dict[str, Any]:
        return {"at_step": unit.key if unit is not None else None}

    def failure(self, ctx, exc: BaseException) -> Failure:
        from kafka_runbooks.remediate.gates import GateFailed  # deferred: loaded on first use, not when a DAG file is parsed
        from kafka_runbooks.remediate.lock import LockLost  # deferred: loaded on first use, not when a DAG file is parsed
        from kafka_runbooks.remediate.steps import StepFailed  # deferred: loaded on first use, not when a DAG file is parsed

        if isinstance(exc, StepFailed):
            refuse = not exc.stopped and not ctx.done
            return Failure(exc.phase, Reason(exc.code or ("refused" if refuse else "halted"), exc.reason), exc.stopped,
                           exc.logs, refuse=refuse)
        if isinstance(exc, GateFailed):
            return Failure(f"gate {exc.gate}", Reason(f"gate_{exc.gate}", exc.reason), details=exc.details or {})
        if isinstance(exc, LockLost):
            return Failure("maintenance lock", Reason("lock_lost", str(exc)))
        return super().failure(ctx, exc)

    def refusal_text(self, ctx, unit: Unit | None, failure: Failure) -> str:
        ex = ctx.ex
        return (f"{ex.plan.kind} of cluster {ex.config.name} refused" + (f" at broker {unit.key}" if unit is not None else "")
                + f": {failure.phase}: {failure.reason.sentence}")

    def halt_text(self, ctx, unit: Unit | None, failure: Failure, state: list[str]) -> str:
        ex = ctx.ex
        text = [f"{ex.plan.kind} of cluster {ex.config.name} HALTED" + (f" at broker {unit.key}" if unit is not None else ""),
                f"{failure.phase}: {failure.reason.sentence}", "cluster now:", *[f"  {line}" for line in state]]
        if ctx.done:  # what this run finished before it halted (restarted, or gated, and through every gate)
            text.insert(2, f"done by this run: broker{'s' if len(ctx.done) > 1 else ''} "
                           f"{', '.join(str(u.key) for u in ctx.done)}")
        for path, tail in failure.logs.items():
            text += [f"last lines of {path}:", *[f"  {line}" for line in tail.splitlines()[-15:]]]
        text.append(f"nothing further was changed; resume with the same form and resume=true (record {ex.record_id}, "
                    f"{clock.now_iso()})")
        return "\n".join(text)

    def finish(self, ctx, wall_s: float) -> dict[str, Any]:
        ex, done = ctx.ex, [u.key for u in ctx.done]
        ctx.records.event(L.COMPLETED, restarted=done, wall_s=wall_s)
        return {"restarted": done, "approved_by": ex.approver, "timings": ex.timings, "record_id": ex.record_id,
                "wall_s": wall_s}


GATES_ONLY_AUDIT = "gates_only"  # the audit action of a resumed step that ran its gates only (no stop, no start)


def gates_only(unit: Unit) -> bool:
    """A restart unit that went from ``checking`` to ``gating`` (a resume's gates only): it sent no stop command."""
    states = [t.get("state") for t in unit.trace]
    return State.GATING.value in states and State.STOPPING.value not in states


def _step_audit(records: Records, b: int, conn_id: str):
    def step_audit(action, outcome, *, command=None, details=None):
        records.audit(action, outcome, host=conn_id, command=command, details={"broker_id": b, **(details or {})})

    return step_audit


def _restart_unit(ctx, unit: Unit) -> None:
    """One broker's restart, from ``checking`` to ``done``; raises on any failure (the engine refuses or halts)."""
    from kafka_runbooks.hooks.ssh import StrictSSHHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import gates as G  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.host import BrokerHost  # deferred: loaded on first use, not when a DAG file is parsed

    cfg, b = ctx.config, unit.key
    conn_id = cfg.ssh_conn_id(b)
    with StrictSSHHook(conn_id, connect_timeout=cfg.capture.connect_timeout_s) as ssh:
        host = BrokerHost(cfg, b, ssh)
        step_audit = _step_audit(ctx.records, b, conn_id)
        _check_identity(ctx, unit, host, step_audit)
        resumed = _resumption(ctx, unit, host, step_audit)
        t0 = time.monotonic()
        if resumed is not None:  # registered again since an earlier run's stop of it: not stopped again
            snapshot, report, decision = resumed
            timing = {"broker_id": b, "resumed": "gates only", "stop_command": report.stop_command}
        else:
            fresh, remaining = _check_unit(ctx, unit, host, step_audit)
            snapshot = fresh.snapshot
            report = _stop_and_start(ctx, unit, host, fresh, remaining, step_audit)
            timing = {"broker_id": b, **{f"{k}_s": round(v, 2) for k, v in report.seconds.items()},
                      "controlled_shutdown": report.controlled_shutdown, "killed": report.killed,
                      "stop_command": report.stop_command}
        offsets_before = G.offsets_partitions(snapshot)
        expected = [p.name for p in snapshot.partitions_of(b)]
        ctx.lock.check()
        ctx.move(unit, State.GATING, record=True,
                 **({"resumed": decision.sentence, "resumed_code": decision.code} if resumed is not None else {}))
        timing.update(_restart_gates(ctx, b, host, expected, offsets_before, step_audit))
    timing["total_s"] = round(time.monotonic() - t0, 2)
    ctx.ex.timings.append(timing)
    ctx.move(unit, State.DONE)
    ctx.records.event(L.STEP_DONE, broker_id=b, state=State.DONE.value, report=report.to_dict(), timing=timing,
                      states=unit.states)
    # audited as what happened: a gates-only resume restarted nothing (``metrics`` counts ``restart_broker`` only)
    step_audit(GATES_ONLY_AUDIT if resumed is not None else "restart_broker", "ok",
               details={"report": report.to_dict(), "timing": timing})


def _check_identity(ctx, unit: Unit, host, step_audit) -> None:
    """``checking``: the host runs the broker it is mapped to; StepFailed (nothing stopped) otherwise."""
    from kafka_runbooks.remediate.steps import StepFailed  # deferred: loaded on first use, not when a DAG file is parsed

    b = unit.key
    wrong = host.identity_refusal()
    step_audit("host_identity", "refused" if wrong else "ok",
               details={"reason": wrong} if wrong else {"server_properties": ctx.config.server_properties(b)})
    if wrong:
        raise StepFailed(b, "host identity", wrong, stopped=False, code="host_identity")


def _resumption(ctx, unit: Unit, host, step_audit):
    """``checking`` of a step an earlier run of the roll started and never finished (cut, or halted after its intent):
    its broker's registration now against the one recorded with that intent (``resumption.decide``), the decision
    recorded (ledger ``resumed``, audit ``resume_decision``) before anything is done. Registered again since: (the
    snapshot read, a report saying no stop was sent, the decision) is returned -- the unit goes to ``gating``; a
    contradiction refuses (StepFailed, nothing stopped); otherwise None: the step goes on as any other (restarted if
    up, started if down)."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import resumption as R  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.steps import Registration, RestartReport, StepFailed  # deferred: loaded on first use

    b = unit.key
    step = R.unfinished_step(ctx.read(f"the roll's ledger before broker {b}'s step", ctx.ledger.entries), b)
    approved = approved_action(ctx.ex.plan, b)
    if step is None:
        if approved == GATES_ACTION:  # approved: gates only; nothing left unfinished proves it: a restart is not approved
            raise StepFailed(b, "resume", f"the approved plan runs only the gates of broker {b} (no stop), but no step of "
                             "it is left unfinished now; nothing was stopped: resume again for a new plan and approval",
                             stopped=False, code="resume_not_as_approved")
        return None
    snapshot = read_snapshot(ctx.zk, ctx.config.name)
    decision = R.decide(b, step, registration_now(snapshot, b))
    if decision.action == R.GATES_ONLY:  # a new session; the JVM the intent saw must be gone too
        decision = R.old_process_running(step, [(p.pid, str(p.started)) for p in host.processes()], decision) or decision
    ctx.records.event(L.RESUMED, broker_id=b, **decision.to_dict(), step_run=step.started.get("run_id"))
    step_audit("resume_decision", decision.action, details=decision.to_dict())
    if decision.action == R.REFUSE:
        raise StepFailed(b, "resume", decision.sentence, stopped=False, code=decision.code)
    if approved == GATES_ACTION and decision.action != R.GATES_ONLY:  # more than approved: never done
        raise StepFailed(b, "resume", f"the approved plan runs only the gates of broker {b} (no stop), but now: "
                         f"{decision.sentence}; nothing was stopped: resume again for a new plan and approval",
                         stopped=False, code="resume_not_as_approved")
    if decision.action != R.GATES_ONLY:
        return None
    broker = snapshot.broker(b)
    report = RestartReport(broker_id=b, new_registration=Registration(int(broker.session_id), int(broker.registration_zxid)),
                           stop_command=f"skipped: {decision.sentence}")
    return snapshot, report, decision


def approved_action(plan: Plan, broker_id: int) -> str | None:
    """The action the approved plan has for ``broker_id``'s step (``restart_broker``, ``gate_broker``), None: no step."""
    return next((s.action for s in plan.steps if s.broker_id == int(broker_id)), None)


def _check_unit(ctx, unit: Unit, host, step_audit) -> tuple[FreshState, list[int]]:
    """``checking``: the stop checked on fresh state. StepFailed (nothing stopped) otherwise."""
    from kafka_runbooks.remediate.steps import StepFailed  # deferred: loaded on first use, not when a DAG file is parsed

    cfg, ex, b = ctx.config, ctx.ex, unit.key
    fresh = read_fresh_state(ctx.zk, ex, b)
    completed = ctx.read(f"the roll's progress before broker {b}'s stop", ctx.ledger.progress).completed
    remaining = [s.broker_id for s in ex.plan.steps if s.broker_id not in completed]
    refusals = stop_refusals(fresh.snapshot, b, fresh.settings, fresh.not_serving, fresh.unresponsive)
    refusals += order_refusals(ex.plan, fresh.snapshot, remaining)
    ctx.audit("safety_check", "refused" if refusals else "ok",
              {"broker_id": b, "refusals": refusals, "notes": fresh.notes, "not_serving": fresh.not_serving,
               "unresponsive": fresh.unresponsive, "checked": _checked(fresh.checked),
               "state": describe_state(fresh.snapshot, cfg.hosts, b)})
    if refusals:
        raise StepFailed(b, "safety check on fresh state", "; ".join(refusals[:10]) + "; nothing was stopped",
                         stopped=False, code="refused_on_fresh_state")
    return fresh, remaining


def _stop_and_start(ctx, unit: Unit, host, fresh: FreshState, remaining: list[int], step_audit):
    """``stopping`` (the last check, the intent) -> ``stopped`` -> ``starting``: ``steps.restart_broker``."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import steps  # deferred: loaded on first use, not when a DAG file is parsed

    cfg, b, lock = ctx.config, unit.key, ctx.lock

    def check_now():
        """The lock proven in ZooKeeper, the state re-read, every holder checked again (``last_check``)."""
        fenced = lock.fence()
        now = read_snapshot(ctx.zk, cfg.name)
        why, unresponsive, checks = last_check(cfg, ctx.ex.plan, now, b, fresh, remaining)
        return why, {"unresponsive": unresponsive, "checked": _checked(checks), "controller": now.controller_id,
                     "lock": fenced, "registration": registration_now(now, b),
                     "processes": [[p.pid, str(p.started)] for p in host.processes()]}

    before_stop = stop_gate(ctx.records, b, check_now, cfg.gates.check_fresh_s,
                            on_intent=lambda: ctx.move(unit, State.STOPPING))
    return steps.restart_broker(ctx.zk, host, cfg.gates, step_audit, log, serving=b not in fresh.not_serving,
                                before_stop=before_stop, guard=lock.check, on_state=lambda s: ctx.move(unit, State(s)))


def _restart_gates(ctx, b: int, host, expected: list[str], offsets_before, step_audit) -> dict[str, Any]:
    """``gating``: in sync, the coordinators loaded, the canary; GateFailed (a halt) otherwise. The gates' seconds."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import gates as G  # deferred: loaded on first use, not when a DAG file is parsed

    cfg, zk, lock, ex = ctx.config, ctx.zk, ctx.lock, ctx.ex
    timing: dict[str, Any] = {}
    gate_t0 = time.monotonic()
    res = G.in_sync_gate(
        zk, cfg.name, b, expected, timeout_s=cfg.gates.in_sync_s, poll_s=cfg.gates.poll_s,
        progress=lambda waiting, rec: step_audit(
            "in_sync_progress", "waiting",
            details={"waiting_for": waiting[:MAX_LISTED], "still_missing": len(waiting), "log_recovery": rec,
                     "left_s": round(max(0.0, cfg.gates.in_sync_s - (time.monotonic() - gate_t0)), 1)}),
        recovery_log=lambda: host.tail(cfg.server_log(b), 2000), guard=lock.check,
    )
    step_audit("gate_in_sync", "ok", details=res.to_dict())
    timing["in_sync_s"] = round(res.seconds, 2)
    lock.check()
    now = read_snapshot(zk, cfg.name)
    offsets_now = G.offsets_partitions(now)
    if offsets_now:
        res = G.coordinator_gate(
            probe_consumer_config(ex, now), G.partitions_to_probe(offsets_before, offsets_now, b), len(offsets_now),
            timeout_s=cfg.gates.coordinator_s, poll_s=cfg.gates.poll_s, request_timeout_s=cfg.gates.probe_timeout_s,
            broker_log=lambda: host.tail(cfg.server_log(b), 5000),
            led_by_broker=[p for p, leader in offsets_now.items() if leader == b], guard=lock.check,
            other_logs=lambda: other_leader_logs(cfg, offsets_now, G.partitions_to_probe(offsets_before, offsets_now, b), b),
            progress=lambda pending, errors, left: step_audit(
                "coordinator_progress", "waiting", details=coordinator_progress_details(pending, errors, left)),
        )
        step_audit("gate_coordinator", "ok", details=res.to_dict())
        timing["coordinator_s"] = round(res.seconds, 2)
    if ex.canary:
        lock.check()
        timing["canary_s"] = _canary_gate(ctx, now, step_audit)
    return timing


def other_leader_logs(cfg, leaders: Mapping[int, int], probed: Iterable[int], b: int) -> dict[int, tuple[list[int], str]]:
    """{broker: (the probed offsets partitions it leads, its server.log tail)} for the brokers other than ``b`` that lead
    one: where a stopped broker's coordinators moved, and where a load can fail (ci19: Kafka 2.3.0 on broker 2, the
    stopped one 3). A log that cannot be read is said in its place, and reads as no failure."""
    from kafka_runbooks.hooks.ssh import StrictSSHHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.host import BrokerHost  # deferred: loaded on first use, not when a DAG file is parsed

    by_leader: dict[int, list[int]] = {}
    for p in sorted(probed):
        leader = leaders.get(p)
        if leader is not None and leader >= 0 and leader != b:
            by_leader.setdefault(leader, []).append(p)
    out = {}
    for n, parts in sorted(by_leader.items()):
        try:
            with StrictSSHHook(cfg.ssh_conn_id(n), connect_timeout=cfg.capture.connect_timeout_s) as ssh:
                out[n] = (parts, BrokerHost(cfg, n, ssh).tail(cfg.server_log(n), 5000))
        except Exception as exc:  # noqa: BLE001 - an unreadable log is said, never a failure invented
            out[n] = (parts, f"(could not read broker {n}'s server.log: {type(exc).__name__}: {exc})")
    return out


def _canary_gate(ctx, now: ClusterSnapshot, step_audit) -> float:
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import gates as G  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ctx.config
    why = G.canary_coverage(now, cfg.canary.topic)
    if why:
        raise G.GateFailed("canary", "; ".join(why))
    res = G.canary_gate(
        KafkaHook(cfg.kafka_conn_id, listener=cfg.listener), lambda: read_snapshot(ctx.zk, cfg.name),
        cfg.canary.topic, latency_bound_ms=cfg.canary.latency_bound_ms,
        round_timeout_s=cfg.canary.timeout_s, timeout_s=cfg.gates.canary_s, poll_s=cfg.gates.poll_s,
        guard=ctx.lock.check,
        progress=lambda rounds, last, left: step_audit(
            "canary_progress", "waiting",
            details={"failed_rounds": rounds, "last_failure": str(last)[:500], "left_s": round(left, 1)}),
    )
    step_audit("gate_canary", "ok", details=res.to_dict())
    return round(res.seconds, 2)


def coordinator_progress_details(pending: list[int], errors: Mapping[int, list[str]], left_s: float) -> dict[str, Any]:
    """The audit details of one ``coordinator_progress`` entry, bounded: at most ``MAX_LISTED`` partitions named."""
    named = sorted(pending)[:MAX_LISTED]
    answered: dict[str, int] = {}
    for p in pending:
        for name in set(errors.get(p) or []):
            answered[str(name)] = answered.get(str(name), 0) + 1
    return {"waiting_for": [f"{CONSUMER_OFFSETS}-{p}" for p in named], "still_pending": len(pending),
            "errors_seen": {str(p): list(errors.get(p) or [])[:5] for p in named if errors.get(p)},
            "answered": dict(sorted(answered.items())[:10]), "left_s": round(max(0.0, left_s), 1)}
