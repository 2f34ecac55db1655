"""Plan a rolling restart.  Pure: snapshot + config in, Plan out.

One ``restart_broker`` Step per broker, one at a time, the controller last (restarting it forces
a controller election; doing that once, at the end, moves leadership the fewest times).  Each
broker is checked against the *current* snapshot: brokers are restarted one at a time and the
executor waits for recovery (registered again, back in every ISR) and re-checks safety against a
fresh snapshot before each step, so a plan approved now is never executed blind.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from kafka_runbooks.config import ClusterConfig, ConfigError
from kafka_runbooks.model import ClusterSnapshot, Plan, Step
from kafka_runbooks.remediate.safety import blast_radius, restart_refusals


def restart_order(snapshot: ClusterSnapshot, broker_ids: Iterable[int]) -> list[int]:
    """The requested brokers, de-duplicated, in the given order, with the controller moved last."""
    ids: list[int] = []
    for b in broker_ids:
        b = int(b)
        if b not in ids:
            ids.append(b)
    if snapshot.controller_id in ids:
        ids.remove(snapshot.controller_id)
        ids.append(snapshot.controller_id)
    return ids


def plan_restart(
    snapshot: ClusterSnapshot,
    broker_ids: Iterable[int],
    config: ClusterConfig,
    *,
    not_serving: Mapping[int, str] | None = None,
) -> Plan:
    """``not_serving``: broker id -> the evidence that it is not serving now (see safety)."""
    not_serving = dict(not_serving or {})
    ids = restart_order(snapshot, broker_ids)
    refusals: list[str] = []
    radius: list[str] = []
    steps: list[Step] = []
    if not ids:
        refusals.append("no broker to restart")
    if snapshot.cluster != config.name:
        refusals.append(f"snapshot is of cluster {snapshot.cluster!r} but the config is for {config.name!r}")
    for n, bid in enumerate(ids, 1):
        for why in restart_refusals(snapshot, bid, default_min_isr=config.min_insync_replicas, not_serving=not_serving.get(bid)):
            refusals.append(f"broker {bid}: {why}")
        try:
            config.ssh_conn_id(bid)
        except ConfigError as exc:
            refusals.append(f"broker {bid}: {exc}")
        radius.extend(f"broker {bid} down: {line}" for line in blast_radius(snapshot, bid, not_serving=not_serving.get(bid)))
        role = " (the controller: restarted last)" if bid == snapshot.controller_id else ""
        reason = (
            f"restart broker {bid}{role}, step {n} of {len(ids)}; "
            + ("after the previous broker is registered again and back in every ISR; " if n > 1 else "")
            + "the executor re-checks safety on a fresh snapshot before running it"
        )
        steps.append(Step(action="restart_broker", broker_id=bid, command=config.restart_argv(bid), reason=reason))
    return Plan(cluster=config.name, steps=tuple(steps), refusals=tuple(refusals), blast_radius=tuple(radius))
