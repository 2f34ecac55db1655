"""Runs an approved plan: the one executor every restart in the product goes through.

Holding the cluster's maintenance lock from the first safety check to the last gate, for each step
not already done (the ledger says): read fresh state (ZooKeeper, direct Kafka checks of brokers
under the not-serving waiver, the brokers' static configs over SSH), check the stop on it, restart
the broker (``steps.restart_broker``), pass the gates (in sync, coordinators loaded, canary), record
it done. On any failure: halt -- the cluster is left as it is, described (which broker is down,
which partitions are affected), the ledger and the audit say where and why, and :class:`Halted`
carries all of it to the failure callback that pages on-call. A later run with "resume" continues
from the failed step.

Pure helpers (:func:`describe_state`, :func:`order_refusals`) are apart from the I/O.
"""

from __future__ import annotations

import logging
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


def plan_changed(approved: Plan, fresh: Plan) -> list[str]:
    if approved.broker_order != fresh.broker_order:
        return [f"the plan changed since it was approved: approved order {list(approved.broker_order)}, on fresh state "
                f"{list(fresh.broker_order)}; run again for a new approval"]
    return []


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
    not_serving: dict[int, str]
    notes: list[str]


def read_fresh_state(zk, ex: Execution) -> FreshState:
    """Everything the safety rules read, now."""
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.remediate.host import read_static_configs
    from kafka_runbooks.remediate.plan import safety_settings

    cfg = ex.config
    static, notes = read_static_configs(cfg)
    snapshot = read_snapshot(zk, cfg.name)  # read last: the state the stop is checked on is the newest
    not_serving: dict[int, str] = {}
    hook = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener)
    version = hook.kafka_version(snapshot.brokers, cfg.health.kafka_probe_timeout_s, cfg.kafka_version)
    if ex.plan.not_serving:
        for b, evidence in ex.plan.not_serving.items():
            broker = snapshot.broker(b)
            if broker is None:
                continue  # not registered: nothing of it is in any live ISR
            check = hook.check_broker(broker, cfg.health.kafka_probe_timeout_s)
            if check.ok:
                notes.append(f"broker {b} answers again ({check.latency_ms} ms): the not-serving waiver no longer applies")
            else:
                not_serving[b] = f"{evidence}; checked again now: {check.error}"
    return FreshState(snapshot, safety_settings(cfg, static, version), not_serving, notes)


def probe_consumer_config(ex: Execution, snapshot: ClusterSnapshot):
    """consumer_config(group) for the coordinator probes, bootstrapped at the live brokers."""
    from kafka_runbooks.hooks.kafka import KafkaHook, broker_address, client_config

    cfg = ex.config
    hook = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener)
    addresses = []
    for b in snapshot.brokers:
        try:
            addresses.append(broker_address(b, cfg.listener))
        except KeyError:
            continue
    base = client_config(hook.base_config(), ",".join(addresses), cfg.gates.probe_timeout_s)
    return lambda group: {**base, "group.id": group, "enable.auto.commit": False, "session.timeout.ms": 10000}


def run(ex: Execution) -> dict[str, Any]:
    """Execute ``ex.plan``; returns what was done. Raises Refused (nothing changed) or Halted."""
    from kafka_runbooks.hooks.ssh import StrictSSHHook
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import gates as G
    from kafka_runbooks.remediate.host import BrokerHost
    from kafka_runbooks.remediate.lock import LockBusy, LockLost, MaintenanceLock
    from kafka_runbooks.remediate.steps import StepFailed, restart_broker

    cfg = ex.config
    store = IncidentStore(cfg.incident_base)
    ledger = L.Ledger(cfg.incident_base, ex.record_id)
    where = {"run_id": ex.run_id, "dag_id": ex.dag_id, "task_id": ex.task_id, "try": ex.try_number}

    def audit(action: str, outcome: str, *, host: str | None = None, command=None, details: Mapping[str, Any] | None = None) -> None:
        store.audit(ex.record_id, actor=ex.approver, action=action, outcome=outcome, host=host, command=command,
                    details={**(details or {}), **where})

    done: list[int] = []
    with ZooKeeperHook(cfg.zk_conn_id, timeout_s=cfg.capture.connect_timeout_s).session() as zk:
        lock = MaintenanceLock(zk, cfg.name, run=ex.run_id, dag=ex.dag_id, user=ex.starter, purpose=ex.plan.kind)
        try:
            identity = lock.acquire(cfg.gates.lock_wait_s)
        except LockBusy as exc:
            audit("maintenance_lock", "busy", details={"holders": exc.holders})
            ledger.append("refused", ex.run_id, reason=str(exc))
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
                fresh = read_fresh_state(zk, ex)
                remaining = [s.broker_id for s in ex.plan.steps if s.broker_id not in ledger.progress().completed]
                refusals = stop_refusals(fresh.snapshot, b, fresh.settings, fresh.not_serving)
                refusals += order_refusals(ex.plan, fresh.snapshot, remaining)
                audit("safety_check", "refused" if refusals else "ok",
                      details={"broker_id": b, "refusals": refusals, "notes": fresh.notes, "not_serving": fresh.not_serving,
                               "state": describe_state(fresh.snapshot, cfg.hosts, b)})
                if refusals:
                    _halt(ex, ledger, audit, zk, b, "safety check on fresh state", "; ".join(refusals[:10]), {})
                current = b
                ledger.append(L.STEP_STARTED, ex.run_id, broker_id=b)
                t0 = time.monotonic()
                offsets_before = G.offsets_partitions(fresh.snapshot)
                expected = [p.name for p in fresh.snapshot.partitions_of(b)]
                conn_id = cfg.ssh_conn_id(b)
                with StrictSSHHook(conn_id, connect_timeout=cfg.capture.connect_timeout_s) as ssh:
                    host = BrokerHost(cfg, b, ssh)

                    def step_audit(action, outcome, *, command=None, details=None, _b=b, _h=conn_id):
                        audit(action, outcome, host=_h, command=command, details={"broker_id": _b, **(details or {})})

                    report = restart_broker(zk, host, cfg.gates, step_audit, log, serving=b not in fresh.not_serving)
                    timing = {"broker_id": b, **{f"{k}_s": round(v, 2) for k, v in report.seconds.items()}}
                    lock.check()
                    res = G.in_sync_gate(
                        zk, cfg.name, b, expected, timeout_s=cfg.gates.in_sync_s, poll_s=cfg.gates.poll_s,
                        progress=lambda waiting, rec, _b=b: step_audit("in_sync_progress", "waiting",
                                                                       details={"waiting_for": waiting[:MAX_LISTED],
                                                                                "still_missing": len(waiting), "log_recovery": rec}),
                        recovery_log=lambda _h=host, _p=cfg.server_log(b): _h.tail(_p, 2000),
                    )
                    step_audit("gate_in_sync", "ok", details=res.to_dict())
                    timing["in_sync_s"] = round(res.seconds, 2)
                    lock.check()
                    from kafka_runbooks.detect.snapshot import read_snapshot

                    now = read_snapshot(zk, cfg.name)
                    offsets_now = G.offsets_partitions(now)
                    if offsets_now:
                        res = G.coordinator_gate(
                            probe_consumer_config(ex, now), G.partitions_to_probe(offsets_before, offsets_now, b), len(offsets_now),
                            timeout_s=cfg.gates.coordinator_s, poll_s=cfg.gates.poll_s, request_timeout_s=cfg.gates.probe_timeout_s,
                            broker_log=lambda _h=host, _p=cfg.server_log(b): _h.tail(_p, 5000),
                            led_by_broker=[p for p, leader in offsets_now.items() if leader == b],
                        )
                        step_audit("gate_coordinator", "ok", details=res.to_dict())
                        timing["coordinator_s"] = round(res.seconds, 2)
                    if ex.canary:
                        lock.check()
                        why = G.canary_coverage(now, cfg.canary.topic)
                        if why:
                            raise G.GateFailed("canary", "; ".join(why))
                        from kafka_runbooks.hooks.kafka import KafkaHook

                        res = G.canary_gate(
                            KafkaHook(cfg.kafka_conn_id, listener=cfg.listener), lambda: read_snapshot(zk, cfg.name),
                            cfg.canary.topic, latency_bound_ms=cfg.canary.latency_bound_ms,
                            round_timeout_s=cfg.canary.timeout_s, timeout_s=cfg.gates.canary_s, poll_s=cfg.gates.poll_s,
                        )
                        step_audit("gate_canary", "ok", details=res.to_dict())
                        timing["canary_s"] = round(res.seconds, 2)
                timing["total_s"] = round(time.monotonic() - t0, 2)
                ex.timings.append(timing)
                ledger.append(L.STEP_DONE, ex.run_id, broker_id=b, report=report.to_dict(), timing=timing)
                step_audit("restart_broker", "ok", details={"report": report.to_dict(), "timing": timing})
                done.append(b)
                current = None
        except Halted:
            raise
        except StepFailed as exc:
            _halt(ex, ledger, audit, zk, exc.broker_id, exc.phase, exc.reason, exc.logs)
        except G.GateFailed as exc:
            _halt(ex, ledger, audit, zk, current, f"gate {exc.gate}", exc.reason, {}, exc.details)
        except LockLost as exc:
            _halt(ex, ledger, audit, zk, current, "maintenance lock", str(exc), {})
        except Exception as exc:  # noqa: BLE001 - SSH, ZooKeeper, Kafka client: anything else halts the same way
            _halt(ex, ledger, audit, zk, current, "unexpected error", f"{type(exc).__name__}: {exc}", {})
        finally:
            lock.release()
            audit("maintenance_lock", "released")
        wall_s = round(time.monotonic() - t_roll, 2)
    ledger.append(L.COMPLETED, ex.run_id, restarted=done, wall_s=wall_s)
    return {"restarted": done, "approved_by": ex.approver, "timings": ex.timings, "record_id": ex.record_id, "wall_s": wall_s}


def _halt(ex: Execution, ledger, audit, zk, broker_id: int | None, phase: str, reason: str,
          logs: Mapping[str, str], details: Mapping[str, Any] | None = None) -> None:
    from kafka_runbooks.detect.snapshot import read_snapshot

    try:
        snapshot = read_snapshot(zk, ex.config.name)
    except Exception:  # noqa: BLE001
        snapshot = None
    state = describe_state(snapshot, ex.config.hosts, broker_id)
    if broker_id is not None:
        ledger.append(L.STEP_FAILED, ex.run_id, broker_id=broker_id, phase=phase, reason=reason)
    ledger.append(L.HALTED, ex.run_id, broker_id=broker_id, phase=phase, reason=reason, state=state, at_step=broker_id)
    audit("halt", "failed", details={"broker_id": broker_id, "phase": phase, "reason": reason, "state": state,
                                     "logs": {k: v[-4000:] for k, v in logs.items()}, **dict(details or {})})
    text = [f"{ex.plan.kind} of cluster {ex.config.name} HALTED" + (f" at broker {broker_id}" if broker_id is not None else ""),
            f"{phase}: {reason}", "cluster now:", *[f"  {line}" for line in state]]
    for path, tail in logs.items():
        text += [f"last lines of {path}:", *[f"  {line}" for line in tail.splitlines()[-15:]]]
    text.append(f"nothing further was changed; resume with the same form and resume=true (record {ex.record_id}, {clock.now_iso()})")
    raise Halted("\n".join(text))
