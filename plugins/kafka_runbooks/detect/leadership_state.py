"""What each health check adds to the ``leadership`` history series (issue 7, ``detect/leadership.py``), apart from
the detectors so that the history can build its samples without them. Pure."""

from __future__ import annotations

from typing import Any, Mapping

from kafka_runbooks.detect.history import Sample
from kafka_runbooks.model import partition_order
from kafka_runbooks.model import ClusterSnapshot

LEADERSHIP = "leadership"  # the history series
NOT_LEADER = ("NOT_LEADER_FOR_PARTITION", "NOT_LEADER_OR_FOLLOWER")


def leadership_sample(previous: Mapping[str, Any], s: ClusterSnapshot) -> tuple[Sample, dict[str, Any]]:
    """(this check's ``leadership`` sample, the new full state). The sample holds the partitions whose leader or
    epoch changed since ``previous`` ({p: [old leader, old epoch, new leader, new epoch]}), the partitions some
    broker's own metadata disagreed on ({p: {"zk": [leader, epoch], "views": {broker: [leader, epoch] | None}}}),
    and the brokers whose canary got NOT_LEADER_FOR_PARTITION."""
    before = previous.get("partitions") or {}
    now = {p.name: [p.leader, p.leader_epoch] for p in s.partitions}
    changes = {name: [*before[name], *cur] for name, cur in now.items() if name in before and list(before[name]) != cur}
    values: dict[str, Any] = {"changes": changes, "partitions": len(now), "controller": s.controller_id,
                              "controller_epoch": s.controller_epoch, "diverged": divergence(s),
                              "canary_not_leader": sorted(c.broker_id for c in s.canary if (c.error_code or "") in NOT_LEADER)}
    return Sample(at=s.taken_at, values=values), {"at": s.taken_at, "partitions": now}


def divergence(s: ClusterSnapshot) -> dict[str, dict[str, Any]]:
    """Partitions on which at least one broker's own metadata disagrees with ZooKeeper's state znode about the
    leader: {p: {"zk": [leader, epoch], "views": {broker: [leader, epoch] or None (partition unknown to it)}}}."""
    views = [v for v in s.metadata_views if v.ok]
    out: dict[str, dict[str, Any]] = {}
    if not views:
        return out
    for p in sorted(s.partitions, key=partition_order):
        if p.leader < 0:
            continue
        seen = {str(v.broker_id): (list(v.leaders[p.name]) if p.name in v.leaders else None) for v in views}
        if any(x is None or x[0] != p.leader for x in seen.values()):
            out[p.name] = {"zk": [p.leader, p.leader_epoch], "views": seen}
    return out
