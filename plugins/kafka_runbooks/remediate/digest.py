"""Digests that bind an approval to exactly what was approved.  Pure.

``state_digest`` fingerprints the cluster state a plan was computed from (registrations with their
sessions, controller and epoch, every partition's replicas/ISR/leader/epoch and overrides,
maintenance in progress, dynamic configs, the evidence behind any waiver). ``plan_digest`` covers
the whole plan, that state digest included: a plan recomputed on another state, or edited on its
way through XCom, has another digest and cannot use the approval.
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
        "partitions": sorted(
            (p.topic, p.index, list(p.replicas), list(p.isr), p.leader, p.leader_epoch, p.min_insync_replicas, p.unclean_leader_election)
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
