"""Is it safe to restart broker N now?  Pure decision logic on a ClusterSnapshot.

Modelled on Strimzi's KafkaRoller/KafkaAvailability: a broker may be rolled only if no partition
it holds loses its last in-sync replica or drops below min.insync.replicas when the broker leaves
the ISR, and every refusal names the partition and the reason.  Incident 002 is the reason this
exists: all holders of ``__consumer_offsets`` were restarted together and no group coordinator was
left -- so ``__consumer_offsets`` is checked and listed first.

Stricter than Strimzi in two places, on purpose:
* a partition whose only in-sync replica is N is refused even when its replication factor is 1 or
  its other replicas are down (restarting N takes it offline);
* when the snapshot could not read some partition's state or a topic's config, the restart is
  refused (we cannot prove it safe) -- see ``snapshot.unparsable``.

A broker that is NOT in a partition's ISR (e.g. dropped because it is deadlocked) takes nothing
away from that ISR by restarting: no refusal for that partition.

A broker confirmed NOT SERVING (``not_serving``: the evidence, e.g. a stuck JVM deadlock or a fresh
``broker_unresponsive`` finding) is the one exception to "last in-sync replica": the partitions
whose only in-sync replica it is are already unavailable, restarting it is their only way back
without an unclean election, and they are listed in the blast radius instead (like KafkaRoller,
which restarts a broker that is already not ready without waiting for it to become available).
min.insync.replicas refusals still apply.
"""

from __future__ import annotations

from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot, Partition

# partition assignments/states and topic configs; a garbled registration does not hide an ISR
_BLOCKING_PREFIXES = ("/brokers/topics", "/config/topics")


def partition_order(p: Partition) -> tuple[int, str, int]:
    """__consumer_offsets first, then by topic and index."""
    return (0 if p.topic == CONSUMER_OFFSETS else 1, p.topic, p.index)


def _ids(xs) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


def partition_refusal(
    p: Partition, broker_id: int, live: frozenset[int], default_min_isr: int | None, not_serving: str | None = None
) -> str | None:
    """Why restarting ``broker_id`` would hurt partition ``p``, or None when it would not."""
    if broker_id not in p.isr:
        return None
    remaining = [r for r in p.isr if r != broker_id and r in live]
    unregistered = [r for r in p.isr if r != broker_id and r not in live]
    if not remaining and not_serving:
        return None  # already unavailable: see blast_radius
    if not remaining:
        if len(p.replicas) == 1:
            return f"{p.name}: broker {broker_id} is the only replica (replication factor 1); restarting takes the partition offline"
        why = f"{p.name}: broker {broker_id} is the last in-sync replica (isr={_ids(p.isr)})"
        if unregistered:
            why += f"; isr members {_ids(unregistered)} are not registered"
        return why
    min_isr = p.min_insync_replicas if p.min_insync_replicas is not None else default_min_isr
    if min_isr is not None and len(remaining) < min_isr:
        source = "" if p.min_insync_replicas is not None else " (cluster default)"
        why = f"{p.name}: isr {_ids(p.isr)} would fall to {len(remaining)} < min.insync.replicas {min_isr}{source}"
        if unregistered:
            why += f"; isr members {_ids(unregistered)} are not registered"
        return why
    return None


def restart_refusals(
    snapshot: ClusterSnapshot, broker_id: int, *, default_min_isr: int | None = None, not_serving: str | None = None
) -> list[str]:
    """Every reason not to restart ``broker_id`` now, each naming what blocks it ([] = safe).

    ``default_min_isr`` is the cluster-wide min.insync.replicas (topic overrides come from the
    snapshot).  Order: unknown broker, unreadable metadata, then partitions with
    ``__consumer_offsets`` first."""
    live = snapshot.live_broker_ids
    if snapshot.broker(broker_id) is None:
        return [f"broker {broker_id} is not registered in ZooKeeper (registered: {sorted(live)}); refusing to act on an unknown broker"]
    refusals = [
        f"cannot verify the restart is safe: ZooKeeper metadata unreadable at {entry}"
        for entry in snapshot.unparsable
        if entry.startswith(_BLOCKING_PREFIXES)
    ]
    for p in sorted(snapshot.partitions_of(broker_id), key=partition_order):
        why = partition_refusal(p, broker_id, live, default_min_isr, not_serving)
        if why:
            refusals.append(why)
    return refusals


def blast_radius(snapshot: ClusterSnapshot, broker_id: int, *, not_serving: str | None = None) -> list[str]:
    """What changes while ``broker_id`` is down: partitions that lose an in-sync replica and/or
    whose leadership moves, ``__consumer_offsets`` first.  One line per partition, starting with
    its name."""
    live = snapshot.live_broker_ids
    out = []
    for p in sorted(snapshot.partitions_of(broker_id), key=partition_order):
        effects = []
        if broker_id in p.isr:
            after = [r for r in p.isr if r != broker_id]
            effects.append(f"loses in-sync replica {broker_id} (isr {_ids(p.isr)} -> {_ids(after)})")
        if p.leader == broker_id:
            candidates = [r for r in p.isr if r != broker_id and r in live]
            if candidates:
                effects.append(f"leadership moves off broker {broker_id} (to one of {_ids(candidates)})")
            elif not_serving:
                effects.append(
                    f"already unavailable (leader {broker_id} is not serving: {not_serving}); offline until broker {broker_id} is back"
                )
            else:
                effects.append(f"leader {broker_id} goes away with no other live in-sync replica: partition offline")
        if effects:
            out.append(f"{p.name}: " + "; ".join(effects))
    return out


def not_serving_from(findings) -> dict[int, str]:
    """Brokers that a FRESH detection shows are not serving, with the evidence, for ``not_serving``.

    Only current detector findings count (never an older analysis): a broker that came back by
    itself must again be protected as the last in-sync replica.
    """
    evidence: dict[int, list[str]] = {}
    for f in findings:
        if f.kind == "broker_unresponsive":
            for b in f.broker_ids:
                evidence.setdefault(int(b), []).append(f.summary)
    return {b: "; ".join(v) for b, v in evidence.items()}
