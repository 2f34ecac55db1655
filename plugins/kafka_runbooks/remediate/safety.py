"""May broker N be stopped now?  Pure decision logic on a fresh ClusterSnapshot.

Modelled on Strimzi's KafkaRoller / KafkaAvailability, stricter where incident 002 taught us to be
(all holders of ``__consumer_offsets`` were restarted together and no group coordinator was left).
Every refusal is one line naming the partition or znode and the reason. The rules, for a stop of
broker B on the state just read (``live`` = registered brokers, ``not_serving`` = brokers with
direct evidence that they are not serving, see :func:`not_serving_evidence`):

1. ZooKeeper metadata B's safety depends on could not be read -> refuse (cannot prove it safe).
2. A reassignment (``/admin/reassign_partitions``) or a preferred election
   (``/admin/preferred_replica_election``) is in progress, or the controller is moving (no
   ``/controller``, or the controller is not registered) -> refuse.
3. Another partition is already under-replicated -> refuse: a partition missing an in-sync replica
   other than B.  Replicas B itself is missing from are B's to repair; when B is not serving, the
   under-replication of B's own partitions is B's doing too (a stuck leader loses its followers).
4. For each partition where B is a registered in-sync replica, ``after`` = the registered ISR
   without B:
   * ``after`` empty: B is the last live in-sync replica -> refuse, except the "not serving"
     waiver: B not serving on direct evidence and replication factor > 1 (the partition is
     unavailable already; restarting B is its way back without an unclean election);
   * ``after`` not empty but none of it serving -> refuse (the other in-sync replicas are stuck);
   * ``len(after)`` < min.insync.replicas -> refuse; never waived.
   This is also the offsets rule: every in-sync holder of a ``__consumer_offsets`` /
   ``__transaction_state`` partition is never down at once (they are listed first).
5. unclean.leader.election.enable on for a partition whose ISR would be left empty while an
   out-of-sync replica is registered -> refuse: the controller would elect it and lose the records
   it lacks.  Where it is on, the plan says so (:func:`unclean_warnings`).

min.insync.replicas comes from the topic override, else the cluster-wide dynamic default
(``/config/brokers/<default>``), else the brokers' static config (server.properties, highest value
among the partition's replicas), else the cluster setting, else Kafka's default 1.
unclean.leader.election.enable: topic override, dynamic default, static config (any replica's
``true`` counts), cluster setting, else Kafka's default for the version (true before 0.11; true
when the version is unknown, to be safe).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kafka_runbooks.model import INTERNAL_TOPICS, ClusterSnapshot, Finding, KafkaCheck, Partition

# partition assignments/states and topic configs; a garbled registration does not hide an ISR
_BLOCKING_PREFIXES = ("/brokers/topics", "/config/topics", "/config/brokers", "/controller", "/admin")

# analysis findings that prove a broker is stuck (stuck threads, or request handling stalled)
NOT_SERVING_FINDING_KINDS = ("jvm_deadlock", "request_handling_stalled")

MIN_ISR = "min.insync.replicas"
UNCLEAN = "unclean.leader.election.enable"


@dataclass(frozen=True)
class SafetySettings:
    """What the cluster's configuration says, besides what ZooKeeper holds."""

    min_isr: int | None = None  # cluster setting
    unclean: bool | None = None  # cluster setting
    kafka_version: str | None = None  # the setting: used only where nothing was observed (pure callers)
    # the version the brokers report (kafka_runbooks.versions.KafkaVersion); the product's plans always set it, to
    # versions.UNKNOWN when the brokers could not be asked (the conservative branch)
    version: object | None = None
    # static broker configs read from each host's server.properties: {broker id: {key: value}}
    static_configs: Mapping[int, Mapping[str, str]] = field(default_factory=dict)


def partition_order(p: Partition) -> tuple[int, str, int]:
    """Internal topics (__consumer_offsets, __transaction_state) first, then by topic and index."""
    return (0 if p.topic in INTERNAL_TOPICS else 1, p.topic, p.index)


def _ids(xs: Iterable[int]) -> str:
    return "[" + ",".join(str(x) for x in xs) + "]"


# --------------------------------------------------------------------------- effective configs

def _version_tuple(version: str | None) -> tuple[int, ...] | None:
    if not version:
        return None
    parts = []
    for piece in version.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def min_isr(p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings) -> tuple[int, str]:
    """(min.insync.replicas for ``p``, where the value came from)."""
    if p.min_insync_replicas is not None:
        return p.min_insync_replicas, "topic override"
    dynamic = snapshot.broker_config(MIN_ISR)
    if dynamic is not None and dynamic.strip().isdigit():
        return int(dynamic.strip()), "dynamic broker default"
    static = [
        int(v.strip())
        for r in p.replicas
        if (v := settings.static_configs.get(r, {}).get(MIN_ISR)) is not None and v.strip().isdigit()
    ]
    if static:
        return max(static), "broker config"
    if settings.min_isr is not None:
        return settings.min_isr, "cluster setting"
    return 1, "Kafka default"


def unclean_enabled(p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings) -> tuple[bool, str]:
    """(unclean.leader.election.enable for ``p``, where the value came from)."""
    if p.unclean_leader_election is not None:
        return p.unclean_leader_election, "topic override"
    dynamic = snapshot.broker_config(UNCLEAN)
    if dynamic is not None and dynamic.strip().lower() in ("true", "false"):
        return dynamic.strip().lower() == "true", "dynamic broker default"
    static = [
        v.strip().lower()
        for r in p.replicas
        if (v := settings.static_configs.get(r, {}).get(UNCLEAN)) is not None and v.strip().lower() in ("true", "false")
    ]
    if static:
        return "true" in static, "broker config"
    if settings.unclean is not None:
        return settings.unclean, "cluster setting"
    if settings.version is not None:  # what the brokers report (kafka_runbooks.versions, KIP-106)
        kv = settings.version
        if kv.has("unclean_off_by_default"):
            return False, f"Kafka {kv.describe()} default, as the brokers report their version (off since 0.11, KIP-106)"
        if kv.lacks("unclean_off_by_default"):
            return True, f"Kafka {kv.describe()} default, as the brokers report their version (on before 0.11, KIP-106)"
        return True, f"Kafka default (version {kv.describe()}: assumed on, as before 0.11)"
    version = _version_tuple(settings.kafka_version)
    if version is None:
        return True, "Kafka default (version unknown: assumed on, as before 0.11)"
    return version < (0, 11), f"Kafka {settings.kafka_version} default"


# --------------------------------------------------------------------------- the waiver

def not_serving_evidence(checks: Iterable[KafkaCheck], findings: Iterable[Finding]) -> dict[int, str]:
    """Brokers proven not serving: a failed direct Kafka-protocol check of that broker (taken now)
    TOGETHER with this run's stuck-thread or stalled-request finding naming it. Anything less
    (an older analysis, a check that answers, an ISR shape) is not evidence."""
    failed = {c.broker_id: c for c in checks if not c.ok}
    evidence: dict[int, list[str]] = {}
    for f in findings:
        if f.kind not in NOT_SERVING_FINDING_KINDS:
            continue
        for b in f.broker_ids:
            check = failed.get(int(b))
            if check is not None:
                evidence.setdefault(int(b), []).append(f"{f.kind}: {f.summary}")
    return {
        b: f"direct check failed ({failed[b].error or 'no answer'}) and " + "; ".join(sorted(set(why)))
        for b, why in evidence.items()
    }


# --------------------------------------------------------------------------- the rules

def cluster_refusals(snapshot: ClusterSnapshot) -> list[str]:
    """Rules 1 and 2: reasons no broker may be stopped now, whichever it is."""
    out = [
        f"cannot verify the stop is safe: ZooKeeper metadata unreadable at {entry}"
        for entry in snapshot.unparsable
        if entry.startswith(_BLOCKING_PREFIXES)
    ]
    if snapshot.reassigning:
        out.append("a partition reassignment is in progress (/admin/reassign_partitions: " + ", ".join(snapshot.reassigning[:10]) + ")")
    if snapshot.preferred_election_pending:
        out.append(
            "a preferred replica election is in progress (/admin/preferred_replica_election: "
            + ", ".join(snapshot.preferred_election_pending[:10]) + ")"
        )
    if snapshot.controller_id is None:
        out.append("no active controller (/controller is absent): the controller is moving")
    elif snapshot.controller_id not in snapshot.live_broker_ids:
        out.append(f"controller {snapshot.controller_id} is not registered: the controller is moving")
    return out


def under_replicated_refusals(snapshot: ClusterSnapshot, broker_id: int, not_serving: Mapping[int, str]) -> list[str]:
    """Rule 3: partitions already under-replicated (or offline) for a reason other than ``broker_id``."""
    out = []
    for p in sorted(snapshot.partitions, key=partition_order):
        missing = [r for r in p.replicas if r not in p.isr]
        if broker_id in p.replicas and broker_id in not_serving:
            continue  # a stuck broker breaks its own partitions' replication
        others = [r for r in missing if r != broker_id]
        if others:
            out.append(
                f"{p.name} is under-replicated (isr {_ids(p.isr)}, replicas {_ids(p.replicas)}): "
                f"wait until {_ids(others)} are back in sync"
            )
        elif p.offline and broker_id not in p.replicas:
            out.append(f"{p.name} is offline (no leader; replicas {_ids(p.replicas)})")
    return out


def partition_refusals(
    p: Partition,
    broker_id: int,
    snapshot: ClusterSnapshot,
    settings: SafetySettings,
    not_serving: Mapping[int, str],
) -> list[str]:
    """Rules 4 and 5 for one partition: why stopping ``broker_id`` would hurt ``p``."""
    live = snapshot.live_broker_ids
    if broker_id not in p.isr or broker_id not in live:
        return []  # B removes nothing from this ISR
    after = [r for r in p.isr if r != broker_id and r in live]
    unregistered = [r for r in p.isr if r != broker_id and r not in live]
    gone = f"; isr members {_ids(unregistered)} are not registered" if unregistered else ""
    out: list[str] = []
    if not after:
        if broker_id not in not_serving:
            if len(p.replicas) == 1:
                return [f"{p.name}: broker {broker_id} is the only replica (replication factor 1); stopping it takes the partition offline"]
            return [f"{p.name}: broker {broker_id} is the last in-sync replica (isr={_ids(p.isr)}){gone}"]
        if len(p.replicas) == 1:
            return [f"{p.name}: broker {broker_id} is the only replica (replication factor 1): the not-serving waiver never applies"]
        unclean, source = unclean_enabled(p, snapshot, settings)
        behind = [r for r in p.replicas if r != broker_id and r in live and r not in p.isr]
        if unclean and behind:
            out.append(
                f"{p.name}: unclean.leader.election.enable=true ({source}): with broker {broker_id} stopped the controller "
                f"would elect out-of-sync replica {_ids(behind)} and lose every record written since it left the ISR"
            )
        return out
    serving = [r for r in after if r not in not_serving]
    if not serving:
        out.append(f"{p.name}: the other in-sync replicas {_ids(after)} are not serving; broker {broker_id} is the last one that serves")
    needed, source = min_isr(p, snapshot, settings)
    if len(after) < needed:
        out.append(f"{p.name}: isr {_ids(p.isr)} would fall to {len(after)} < min.insync.replicas {needed} ({source}){gone}")
    return out


def stop_refusals(
    snapshot: ClusterSnapshot,
    broker_id: int,
    settings: SafetySettings = SafetySettings(),
    not_serving: Mapping[int, str] | None = None,
) -> list[str]:
    """Every reason not to stop ``broker_id`` now ([] = safe), cluster-wide reasons first, then
    partitions with the internal topics first."""
    not_serving = dict(not_serving or {})
    out = cluster_refusals(snapshot)
    out += under_replicated_refusals(snapshot, broker_id, not_serving)
    for p in sorted(snapshot.partitions_of(broker_id), key=partition_order):
        out += partition_refusals(p, broker_id, snapshot, settings, not_serving)
    return out


# --------------------------------------------------------------------------- what a stop changes

def blast_radius(snapshot: ClusterSnapshot, broker_id: int, not_serving: Mapping[int, str] | None = None) -> list[str]:
    """What changes while ``broker_id`` is down, one line per partition starting with its name,
    internal topics first: in-sync replicas lost, leaderships that move, coordinators that move."""
    not_serving = dict(not_serving or {})
    live = snapshot.live_broker_ids
    out = []
    for p in sorted(snapshot.partitions_of(broker_id), key=partition_order):
        effects = []
        if broker_id in p.isr:
            after = [r for r in p.isr if r != broker_id]
            effects.append(f"loses in-sync replica {broker_id} (isr {_ids(p.isr)} -> {_ids(after)})")
        if p.leader == broker_id:
            candidates = [r for r in p.isr if r != broker_id and r in live]
            role = {"__consumer_offsets": "group coordinator", "__transaction_state": "transaction coordinator"}.get(p.topic)
            what = f"{role} and leadership move" if role else "leadership moves"
            if candidates:
                effects.append(f"{what} off broker {broker_id} (to one of {_ids(candidates)})")
            elif broker_id in not_serving:
                effects.append(
                    f"already unavailable (leader {broker_id} is not serving: {not_serving[broker_id]}); "
                    f"offline until broker {broker_id} is back"
                )
            else:
                effects.append(f"leader {broker_id} goes away with no other live in-sync replica: partition offline")
        if effects:
            out.append(f"{p.name}: " + "; ".join(effects))
    return out


def unclean_warnings(snapshot: ClusterSnapshot, broker_ids: Iterable[int], settings: SafetySettings) -> list[str]:
    """Where unclean leader election is on for partitions the plan touches: what it would lose."""
    ids = set(broker_ids)
    by_source: dict[str, list[str]] = {}
    for p in sorted(snapshot.partitions, key=partition_order):
        if not ids & set(p.replicas):
            continue
        on, source = unclean_enabled(p, snapshot, settings)
        if on:
            by_source.setdefault(source, []).append(p.name)
    out = []
    for source, names in sorted(by_source.items()):
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        out.append(
            f"unclean.leader.election.enable is on ({source}) for {len(names)} partition(s) ({shown}): while a broker "
            f"restarts and catches up, losing the remaining in-sync replicas would let the controller elect a replica "
            f"that is behind, and the records it lacks would be lost; steps that would leave an ISR empty are refused"
        )
    return out
