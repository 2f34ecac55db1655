"""Runs an approved plan: the one executor every restart in the product goes through.

Holding the cluster's maintenance lock from the first safety check to the last gate, for each step
not already done (the ledger says): prove the host runs the broker it is mapped to (its ``broker.id``),
read fresh state -- the brokers' static configs over SSH, the open incidents, ZooKeeper, and a direct
Kafka-protocol check of every holder the stop depends on (``safety.holders_to_check``) and of every broker
under the not-serving waiver -- check the stop on it, then, right before the stop command, read ZooKeeper
again and check once more, every holder checked directly again (``last_check``); restart the broker
(``steps.restart_broker``), pass the gates (in sync, coordinators loaded, canary), record it done. Every wait of the step and of the gates polls the
lock (``guard``): a lost lock halts at once. On any failure: halt -- the cluster is left as it is,
described (which broker is down, which partitions are affected), the ledger and the audit say where and
why, and :class:`Halted` carries all of it to the failure callback that pages on-call. A later run with
"resume" continues from the failed step; a step whose worker died (``interrupted_step``) too.

Pure helpers (:func:`describe_state`, :func:`order_refusals`, :func:`plan_changed`, :func:`interrupted_step`)
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
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.safety import SafetySettings, stop_refusals

log = logging.getLogger(__name__)
MAX_LISTED = 20


class Halted(RuntimeError):
    """The run stopped; the message is what on-call reads (reason, cluster state, the broker's last lines)."""


class Refused(RuntimeError):
    """The run did not start changing anything (lock busy, plan changed, no approval); the message says why."""


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
    unclean = lambda p: sorted(w for w in p.warnings if not _NOT_HOLDER.match(w))
    if unclean(approved) != unclean(fresh):
        out.append(f"the warnings changed: approved {unclean(approved)}, now {unclean(fresh)}")
    if out:
        out.append("the plan the approver saw no longer fits the cluster; run again for a new plan and approval")
    return out


def interrupted_step(entries: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The ``step_started`` entry of a step that never ended -- no ``step_done``/``step_failed`` of that broker, no
    ``halted``/``completed`` after it: the worker running it died (killed, lost its machine) with the stop command
    sent. None otherwise. The roll is resumable from that step (``operators/remediate.find_resumable_roll``)."""
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


def interruption_report(step: Mapping[str, Any], snapshot: ClusterSnapshot | None, configured: Iterable[int]) -> list[str]:
    """What on-call reads when a worker died mid-step: which step, since when, and the cluster as it is now."""
    b = step.get("broker_id")
    return [f"the execute task stopped during the step of broker {b} (stop command sent at {step.get('at')} by run "
            f"{step.get('run_id')}) and never finished it: the worker died or was killed",
            *describe_state(snapshot, configured, b),
            f"resume with resume=true: the roll continues from broker {b}'s step (a broker that is down is started, one that is "
            "up is restarted), every stop checked again on fresh state"]


# --------------------------------------------------------------------------- I/O

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
    records = IncidentStore(cfg).records(cfg.name)
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


class Records:
    """The records of one execution, written through one :class:`ledger.Recorder`: the intent before a stop must be
    committed (:meth:`intent`, else nothing is stopped); every other record is best-effort -- a bounded retry, then the
    worker's local journal (``<incident_base>/journal/<record>.jsonl``), replayed when the database is back -- and never
    raises: a failing database never skips a start, a gate or a halt."""

    def __init__(self, ex: "Execution", ledger, store, recorder: L.Recorder | None = None) -> None:
        self.ex, self.ledger, self.store = ex, ledger, store
        self.recorder = recorder or L.Recorder(L.Journal.of(ex.config, ex.record_id), L.store_writer(ledger, store))
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


def stop_gate(records: Records, broker_id: int, check_now, fresh_s: float, *, monotonic=time.monotonic,
              max_checks: int = 5):
    """``before_stop`` of a step: check (``check_now() -> (refusals, details)``: the lock proven in ZooKeeper, the
    state read again, every holder checked directly) -> the intent committed (``step_started``, state ``stopping``) ->
    while the last check is older than ``fresh_s`` (the intent's write took long), check again, writing nothing in
    between: the stop command leaves at most ``fresh_s`` after the last direct check was complete (its age runs from
    when it ended: a check that itself takes longer than ``fresh_s`` on a loaded machine is not stale for that). A refusal, or an intent that
    cannot be committed, raises StepFailed with ``stopped=False``: nothing was stopped."""
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
        try:
            records.intent(L.STEP_STARTED, broker_id=broker_id, state=L.StepState.STOPPING.value, check=details)
        except L.RecordFailed as exc:
            raise StepFailed(broker_id, "intent", str(exc), stopped=False, code="intent_not_recorded") from exc
        checks = 1
        while monotonic() - t > fresh_s:
            if checks >= max_checks:
                raise StepFailed(broker_id, "safety check right before the stop",
                                 f"no direct check of the holders within {fresh_s:g}s of the stop after {checks} tries; "
                                 "nothing was stopped", stopped=False, code="check_not_fresh")
            t, details = checked(False)
            checks += 1
        return {"last_check": details, "checks": checks, "checked_s_before_stop": round(monotonic() - t, 3)}

    return before_stop


def run(ex: Execution) -> dict[str, Any]:
    """Execute ``ex.plan``; returns what was done. Raises Refused (nothing changed) or Halted."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.ssh import StrictSSHHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import gates as G  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate import progress  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.host import BrokerHost  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.lock import LockBusy, LockLost, MaintenanceLock  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.remediate.steps import StepFailed, restart_broker  # deferred: loaded on first use, not when a DAG file is parsed

    cfg = ex.config
    progress.quiet_connection_noise()
    store = IncidentStore(cfg)
    ledger = L.Ledger(cfg, ex.record_id)
    records = Records(ex, ledger, store)
    records.recorder.replay()  # what an earlier run of this record kept in the journal while the database failed
    audit = records.audit

    done: list[int] = []
    with ZooKeeperHook(cfg.zk_conn_id, timeout_s=cfg.capture.connect_timeout_s).session() as zk:
        lock = MaintenanceLock(zk, cfg.name, run=ex.run_id, dag=ex.dag_id, user=ex.starter, purpose=ex.plan.kind)
        try:
            identity = lock.acquire(cfg.gates.lock_wait_s)
        except LockBusy as exc:
            audit("maintenance_lock", "busy", details={"holders": exc.holders})
            records.event(L.REFUSED, state=L.StepState.REFUSED.value, reason=str(exc),
                          code="lock_busy", sentence=str(exc))
            raise Refused(str(exc)) from exc
        audit("maintenance_lock", "acquired", details=identity)
        t_roll = time.monotonic()
        current: int | None = None
        try:
            for step in ex.plan.steps:
                b = step.broker_id
                current = None
                if b in ledger.progress().completed:
                    audit("restart_broker", "skipped", details={"broker_id": b, "why": "already completed by this roll"})
                    continue
                lock.check()
                current = b  # a failure from here on halts at this step (nothing is stopped before the stop command)
                conn_id = cfg.ssh_conn_id(b)
                with StrictSSHHook(conn_id, connect_timeout=cfg.capture.connect_timeout_s) as ssh:
                    host = BrokerHost(cfg, b, ssh)

                    def step_audit(action, outcome, *, command=None, details=None, _b=b, _h=conn_id):
                        audit(action, outcome, host=_h, command=command, details={"broker_id": _b, **(details or {})})

                    wrong = host.identity_refusal()
                    step_audit("host_identity", "refused" if wrong else "ok",
                               details={"reason": wrong} if wrong else {"server_properties": cfg.server_properties(b)})
                    if wrong:
                        raise StepFailed(b, "host identity", wrong, stopped=False, code="host_identity")
                    fresh = read_fresh_state(zk, ex, b)
                    remaining = [s.broker_id for s in ex.plan.steps if s.broker_id not in ledger.progress().completed]
                    refusals = stop_refusals(fresh.snapshot, b, fresh.settings, fresh.not_serving, fresh.unresponsive)
                    refusals += order_refusals(ex.plan, fresh.snapshot, remaining)
                    audit("safety_check", "refused" if refusals else "ok",
                          details={"broker_id": b, "refusals": refusals, "notes": fresh.notes, "not_serving": fresh.not_serving,
                                   "unresponsive": fresh.unresponsive, "checked": _checked(fresh.checked),
                                   "state": describe_state(fresh.snapshot, cfg.hosts, b)})
                    if refusals:
                        raise StepFailed(b, "safety check on fresh state", "; ".join(refusals[:10]) + "; nothing was stopped",
                                         stopped=False, code="refused_on_fresh_state")
                    t0 = time.monotonic()
                    offsets_before = G.offsets_partitions(fresh.snapshot)
                    expected = [p.name for p in fresh.snapshot.partitions_of(b)]

                    def check_now(_b=b, _fresh=fresh, _remaining=remaining):
                        """The lock proven in ZooKeeper, the state re-read, every holder checked again (``last_check``)."""
                        fenced = lock.fence()
                        now = read_snapshot(zk, cfg.name)
                        why, unresponsive, checks = last_check(cfg, ex.plan, now, _b, _fresh, _remaining)
                        return why, {"unresponsive": unresponsive, "checked": _checked(checks), "controller": now.controller_id,
                                     "lock": fenced}

                    before_stop = stop_gate(records, b, check_now, cfg.gates.check_fresh_s)
                    report = restart_broker(zk, host, cfg.gates, step_audit, log, serving=b not in fresh.not_serving,
                                            before_stop=before_stop, guard=lock.check)
                    timing = {"broker_id": b, **{f"{k}_s": round(v, 2) for k, v in report.seconds.items()},
                              "controlled_shutdown": report.controlled_shutdown, "killed": report.killed,
                              "stop_command": report.stop_command}
                    lock.check()
                    gate_t0 = time.monotonic()
                    res = G.in_sync_gate(
                        zk, cfg.name, b, expected, timeout_s=cfg.gates.in_sync_s, poll_s=cfg.gates.poll_s,
                        progress=lambda waiting, rec, _t0=gate_t0: step_audit(
                            "in_sync_progress", "waiting",
                            details={"waiting_for": waiting[:MAX_LISTED], "still_missing": len(waiting), "log_recovery": rec,
                                     "left_s": round(max(0.0, cfg.gates.in_sync_s - (time.monotonic() - _t0)), 1)}),
                        recovery_log=lambda _h=host, _p=cfg.server_log(b): _h.tail(_p, 2000), guard=lock.check,
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
                            broker_log=lambda _h=host, _p=cfg.server_log(b): _h.tail(_p, 5000),
                            led_by_broker=[p for p, leader in offsets_now.items() if leader == b], guard=lock.check,
                            progress=lambda pending, errors, left: step_audit(
                                "coordinator_progress", "waiting", details=coordinator_progress_details(pending, errors, left)),
                        )
                        step_audit("gate_coordinator", "ok", details=res.to_dict())
                        timing["coordinator_s"] = round(res.seconds, 2)
                    if ex.canary:
                        lock.check()
                        why = G.canary_coverage(now, cfg.canary.topic)
                        if why:
                            raise G.GateFailed("canary", "; ".join(why))
                        from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded on first use, not when a DAG file is parsed

                        res = G.canary_gate(
                            KafkaHook(cfg.kafka_conn_id, listener=cfg.listener), lambda: read_snapshot(zk, cfg.name),
                            cfg.canary.topic, latency_bound_ms=cfg.canary.latency_bound_ms,
                            round_timeout_s=cfg.canary.timeout_s, timeout_s=cfg.gates.canary_s, poll_s=cfg.gates.poll_s,
                            guard=lock.check,
                            progress=lambda rounds, last, left: step_audit(
                                "canary_progress", "waiting",
                                details={"failed_rounds": rounds, "last_failure": str(last)[:500], "left_s": round(left, 1)}),
                        )
                        step_audit("gate_canary", "ok", details=res.to_dict())
                        timing["canary_s"] = round(res.seconds, 2)
                timing["total_s"] = round(time.monotonic() - t0, 2)
                ex.timings.append(timing)
                records.event(L.STEP_DONE, broker_id=b, state=L.StepState.DONE.value, report=report.to_dict(), timing=timing)
                step_audit("restart_broker", "ok", details={"report": report.to_dict(), "timing": timing})
                done.append(b)
                current = None
        except (Halted, Refused):
            raise
        except StepFailed as exc:
            if not exc.stopped and not done:
                _refuse(ex, records, exc.broker_id, exc.phase, L.Reason(exc.code or "refused", exc.reason))
            _halt(ex, records, zk, exc.broker_id, exc.phase, exc.reason, exc.logs, stopped=exc.stopped, code=exc.code)
        except G.GateFailed as exc:
            _halt(ex, records, zk, current, f"gate {exc.gate}", exc.reason, {}, exc.details, code=f"gate_{exc.gate}")
        except LockLost as exc:
            _halt(ex, records, zk, current, "maintenance lock", str(exc), {}, code="lock_lost")
        except Exception as exc:  # noqa: BLE001 - SSH, ZooKeeper, Kafka client: anything else halts the same way
            _halt(ex, records, zk, current, "unexpected error", f"{type(exc).__name__}: {exc}", {}, code="unexpected")
        finally:
            try:
                lock.release()
            finally:
                audit("maintenance_lock", "released")  # best-effort: never replaces the exception on its way out
        wall_s = round(time.monotonic() - t_roll, 2)
    records.event(L.COMPLETED, restarted=done, wall_s=wall_s)
    return {"restarted": done, "approved_by": ex.approver, "timings": ex.timings, "record_id": ex.record_id, "wall_s": wall_s}


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


def _refuse(ex: Execution, records: Records, broker_id: int | None, phase: str, reason: L.Reason) -> None:
    """The run ends before any stop of this run: a refusal in the ledger (``refused``, with its code) and the audit;
    nothing was changed. Raises Refused."""
    records.event(L.STEP_FAILED, broker_id=broker_id, phase=phase, reason=reason.sentence, code=reason.code,
                  state=L.StepState.REFUSED.value, stopped=False) if broker_id is not None else None
    records.event(L.REFUSED, broker_id=broker_id, phase=phase, reason=reason.sentence, code=reason.code,
                  state=L.StepState.REFUSED.value)
    records.audit("refused", "refused", details={"broker_id": broker_id, "phase": phase, **reason.to_dict()})
    raise Refused(f"{ex.plan.kind} of cluster {ex.config.name} refused"
                  + (f" at broker {broker_id}" if broker_id is not None else "") + f": {phase}: {reason.sentence}")


def _halt(ex: Execution, records: Records, zk, broker_id: int | None, phase: str, reason: str,
          logs: Mapping[str, str], details: Mapping[str, Any] | None = None, *, stopped: bool = True,
          code: str | None = None) -> None:
    """Halts: the cluster as it is now, described; the ledger and the audit written best-effort (a failing database
    never keeps the halt from being raised). Raises Halted."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded on first use, not when a DAG file is parsed

    try:
        snapshot = read_snapshot(zk, ex.config.name)
    except Exception:  # noqa: BLE001
        snapshot = None
    state = describe_state(snapshot, ex.config.hosts, broker_id)
    code = code or "halted"
    if broker_id is not None:
        records.event(L.STEP_FAILED, broker_id=broker_id, phase=phase, reason=reason, code=code, stopped=stopped,
                      state=(L.StepState.HALTED if stopped else L.StepState.REFUSED).value)
    records.event(L.HALTED, broker_id=broker_id, phase=phase, reason=reason, code=code, state=state, at_step=broker_id)
    records.audit("halt", "failed", details={"broker_id": broker_id, "phase": phase, "reason": reason, "code": code, "state": state,
                                             "logs": {k: v[-4000:] for k, v in logs.items()}, **dict(details or {})})
    text = [f"{ex.plan.kind} of cluster {ex.config.name} HALTED" + (f" at broker {broker_id}" if broker_id is not None else ""),
            f"{phase}: {reason}", "cluster now:", *[f"  {line}" for line in state]]
    for path, tail in logs.items():
        text += [f"last lines of {path}:", *[f"  {line}" for line in tail.splitlines()[-15:]]]
    text.append(f"nothing further was changed; resume with the same form and resume=true (record {ex.record_id}, {clock.now_iso()})")
    raise Halted("\n".join(text))
