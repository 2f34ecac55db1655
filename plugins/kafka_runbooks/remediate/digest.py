"""Digests that bind an approval to exactly what was approved.  Pure.

``state_digest`` fingerprints the cluster state a plan was computed from (registrations with their
sessions, controller and epoch, every partition's replicas/ISR/leader/epoch and overrides,
maintenance in progress, dynamic configs, the evidence behind any waiver). ``plan_digest`` covers
the whole plan, that state digest included: a plan recomputed on another state, or edited on its
way through XCom, has another digest and cannot use the approval.

``execution_binding`` is everything else that decides what will run and that the approver approved: per
broker the argv of the stop, start and kill commands, the broker -> host (SSH connection) map and the
files that identify the broker on it, the gates, the canary switch, the election's settings, the
approvers and the connection whose key seals the decision. ``approval_digest`` covers the plan and the
binding; :func:`binding_changes` names what differs (a Variable or an XCom edited after Approve).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

from kafka_runbooks.model import ClusterSnapshot, Plan


def canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode("ascii")


def sha256(value: Any) -> str:
    return hashlib.sha256(canonical(value)).hexdigest()


def state_digest(snapshot: ClusterSnapshot, not_serving: Mapping[int, str] | None = None) -> str:
    state = {
        "cluster": snapshot.cluster,
        "brokers": sorted((b.id, b.session_id, b.registration_zxid) for b in snapshot.brokers),
        "controller": [snapshot.controller_id, snapshot.controller_epoch],
        # tuples, written as JSON arrays like lists: no new list per partition for the garbage collector to scan
        # (200,000 of them cost ~1 s at 100,000 partitions)
        "partitions": sorted(
            (p.topic, p.index, tuple(p.replicas), tuple(p.isr), p.leader, p.leader_epoch, p.min_insync_replicas, p.unclean_leader_election)
            for p in snapshot.partitions
        ),
        "reassigning": sorted(snapshot.reassigning),
        "preferred_election_pending": sorted(snapshot.preferred_election_pending),
        "broker_configs": {k: dict(v) for k, v in snapshot.broker_configs.items()},
        "unparsable": sorted(snapshot.unparsable),
        "not_serving": {str(k): v for k, v in sorted((not_serving or {}).items())},
    }
    return sha256(state)


def plan_digest(plan: Plan) -> str:
    return sha256(plan.to_dict())


def execution_binding(config, plan: Plan, canary: bool) -> dict[str, Any]:
    """What will run, from the cluster's configuration now (never from XCom) and the run's canary switch."""
    import dataclasses

    brokers = sorted({*plan.broker_order, *plan.completed}) if plan.kind not in ("preferred_election", "demote") else []
    binding: dict[str, Any] = {
        "cluster": config.name,
        "kind": plan.kind,
        "zk_conn_id": config.zk_conn_id,
        "kafka_conn_id": config.kafka_conn_id,
        "listener": config.listener,
        "hosts": {str(b): c for b, c in sorted(config.hosts.items())},
        "commands": {str(b): {w: list(config.argv(f"{w}_command", b)) for w in ("stop", "start", "kill")} for b in brokers},
        "identity": {"process_pattern": config.process_pattern, "server_properties_path": config.server_properties_path,
                     "server_log_path": config.server_log_path},
        "gates": dataclasses.asdict(config.gates),
        "canary": {"enabled": bool(canary), "topic": config.canary.topic, "latency_bound_ms": config.canary.latency_bound_ms,
                   "timeout_s": config.canary.timeout_s},
        "approvers": sorted(config.approvals.approvers),
        "approver_names": dict(sorted(config.approvals.approver_names.items())),
        "seal_key_conn_id": config.approvals.secret_conn_id,
        "min_insync_replicas": config.min_insync_replicas,
        "unclean_leader_election": config.unclean_leader_election,
        "kafka_version": config.kafka_version,
    }
    if plan.kind in ("preferred_election", "demote"):  # a demotion waits for the controller with the election's bounds
        binding["election"] = json.loads(canonical(dataclasses.asdict(config.election)))
    return json.loads(canonical(binding))


def approval_digest(plan: Plan, binding: Mapping[str, Any]) -> str:
    """What an approval is bound to: the plan the approver saw and everything that will run for it."""
    return sha256({"plan": plan.to_dict(), "binding": dict(binding)})


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
        return out or {prefix: {}}
    return {prefix: value}


def binding_changes(approved: Mapping[str, Any], now: Mapping[str, Any], what: str = "") -> list[str]:
    """Every setting that differs between what was approved and what would run now, by its path."""
    a, b = _flat(json.loads(canonical(dict(approved)))), _flat(json.loads(canonical(dict(now))))
    out = []
    for key in sorted(set(a) | set(b)):
        if a.get(key, "<absent>") != b.get(key, "<absent>"):
            out.append(f"{what}{key}: approved {json.dumps(a.get(key, '<absent>'))}, now {json.dumps(b.get(key, '<absent>'))}")
    return out
