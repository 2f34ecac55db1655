"""May broker N be stopped now?  Pure decision logic on a fresh ClusterSnapshot.

Modelled on Strimzi's KafkaRoller / KafkaAvailability, stricter where incident 002 taught us to be
(all holders of ``__consumer_offsets`` were restarted together and no group coordinator was left).
Every refusal is one line naming the partition or znode and the reason. The rules, for a stop of
broker B on the state just read (``live`` = registered brokers, ``not_serving`` = brokers with
direct evidence that they are not serving, see :func:`not_serving_evidence`; ``unresponsive`` = other
brokers that did not answer a direct Kafka-protocol check just now, or that an open incident says are not serving,
see :func:`holders_to_check`):

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
   * the serving members of ``after`` fewer than min.insync.replicas -> refuse. A holder that does not answer is
     not a holder (incidents 000/001: registered, in every ISR, serving nothing). Waived only for B not serving on
     direct evidence: B is no holder either, so its stop leaves exactly the serving holders there are now -- the
     partition is no less writable than it is (a hung leader serves nothing; a hung follower holds every acks=all
     write until it leaves the ISR); the plan says it stays below min.insync.replicas until B is back in sync
     (:func:`blast_radius`). Without the waiver the restart of a hung leader whose ISR has one other member would be
     refused, and its partitions would stay down;
   * min.insync.replicas unknown (a replica's server.properties could not be read and neither the topic nor a
     dynamic config decides) -> refuse; never assumed to be 1.
   This is also the offsets rule: every in-sync holder of a ``__consumer_offsets`` /
   ``__transaction_state`` partition is never down at once (they are listed first).
5. unclean.leader.election.enable on for a partition whose ISR would be left empty while an
   out-of-sync replica is registered -> refuse: the controller would elect it and lose the records
   it lacks.  Where it is on, the plan says so (:func:`unclean_warnings`).

min.insync.replicas comes from the topic override; else, for each replica (leadership can move to any
of them), that broker's dynamic override (``/config/brokers/<id>``), else the cluster-wide dynamic
default (``/config/brokers/<default>``), else its static config (server.properties; unknown when it
could not be read), else the cluster setting, else Kafka's default 1 -- the highest over the replicas.
unclean.leader.election.enable: topic override, else per replica the same chain (any replica's
``true`` counts; an unread server.properties counts as on), else Kafka's default for the version
(true before 0.11; true when the version is unknown, to be safe).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kafka_runbooks.model import ClusterSnapshot, Finding, KafkaCheck, Partition, partition_order

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
    # brokers whose server.properties could NOT be read: {broker id: why} (their static values are unknown)
    unread: Mapping[int, str] = field(default_factory=dict)

    @functools.cached_property
    def _effective(self) -> list:
        # [the snapshot's dynamic configs, {(key, replicas): min_isr()/unclean_enabled()}]: the restored snapshots of a
        # plan share their configs; a plan asks once per partition per step, 400,000 times at 100 brokers. One entry:
        # settings shared across snapshots (the default instance) keep no other snapshot's configs alive
        return [None, {}]


def _ids(xs: Iterable[int]) -> str:
    return "[" + ",".join(map(str, xs)) + "]"


# --------------------------------------------------------------------------- effective configs

@functools.lru_cache(maxsize=64)  # asked once per partition of a plan: a cluster has one or two version strings
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


def _replica_value(key: str, r: int, snapshot: ClusterSnapshot, settings: SafetySettings, valid) -> tuple[str | None, str]:
    """One replica's broker-level ``key`` from ZooKeeper and its server.properties: (value, source);
    (None, "unknown ...") when its server.properties could not be read and nothing dynamic decides;
    (None, "") when none of them sets it."""
    own = snapshot.broker_configs.get(str(r), {}).get(key)
    if own is not None and valid(own):
        return own.strip(), f"dynamic config of broker {r}"
    dynamic = snapshot.broker_config(key)
    if dynamic is not None and valid(dynamic):
        return dynamic.strip(), "dynamic broker default"
    static = settings.static_configs.get(r, {}).get(key)
    if static is not None and valid(static):
        return static.strip(), "broker config"
    if r in settings.unread:
        return None, f"unknown for broker {r}: {settings.unread[r]}"
    return None, ""


def _remembered(key: str, p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings, compute):
    """``compute(p, snapshot, settings)``, once per (key, replicas) for these settings and the snapshot's dynamic
    configs (compared by identity: a snapshot is frozen, and its configs are read once)."""
    held = settings._effective
    configs, memo = held
    if configs is not snapshot.broker_configs:
        memo = {}
        held[:] = [snapshot.broker_configs, memo]
    k = (key, p.replicas)
    if k not in memo:
        memo[k] = compute(p, snapshot, settings)
    return memo[k]


def min_isr(p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings) -> tuple[int | None, str]:
    """(min.insync.replicas for ``p``, where the value came from); (None, why) when it cannot be known:
    never assumed to be 1 for a replica whose configuration could not be read."""
    if p.min_insync_replicas is not None:
        return p.min_insync_replicas, "topic override"
    return _remembered(MIN_ISR, p, snapshot, settings, _min_isr)


def _min_isr(p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings) -> tuple[int | None, str]:
    default = (settings.min_isr, "cluster setting") if settings.min_isr is not None else (1, "Kafka default")
    values: list[tuple[int, str]] = []
    unknown: list[str] = []
    for r in p.replicas:
        value, source = _replica_value(MIN_ISR, r, snapshot, settings, lambda v: v.strip().isdigit())
        if value is not None:
            values.append((int(value), source))
        elif source:
            unknown.append(source)
        else:
            values.append(default)
    if unknown:
        return None, "; ".join(unknown)
    if not values:
        return default
    best = max(v for v, _ in values)
    return best, next(src for v, src in values if v == best)


def version_default(settings: SafetySettings) -> tuple[bool, str]:
    """Kafka's default of unclean.leader.election.enable: by the version the brokers report (KIP-106: off since
    0.11), else the configured version, else assumed on (unknown: the branch of 0.9 and 0.10). No recording of an
    unclean election on a pre-0.11 broker is kept (docs/VERSIONS.md)."""
    if settings.version is not None:
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


def unclean_enabled(p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings) -> tuple[bool, str]:
    """(unclean.leader.election.enable for ``p``, where the value came from): on when any replica has it on."""
    if p.unclean_leader_election is not None:
        return p.unclean_leader_election, "topic override"
    return _remembered(UNCLEAN, p, snapshot, settings, _unclean_enabled)


def _unclean_enabled(p: Partition, snapshot: ClusterSnapshot, settings: SafetySettings) -> tuple[bool, str]:
    if settings.unclean is not None:
        default = (settings.unclean, "cluster setting")
    else:
        default = version_default(settings)
    values: list[tuple[bool, str]] = []
    for r in p.replicas:
        value, source = _replica_value(UNCLEAN, r, snapshot, settings, lambda v: v.strip().lower() in ("true", "false"))
        if value is not None:
            values.append((value.lower() == "true", source))
        elif source:
            values.append((True, f"{source}: assumed on"))
        else:
            values.append(default)
    if not values:
        return default
    on = [src for v, src in values if v]
    return (True, on[0]) if on else (False, values[0][1])


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


def holders_to_check(snapshot: ClusterSnapshot, broker_id: int) -> list[int]:
    """Who must be proven serving, by a direct check taken now, before ``broker_id`` stops: every other
    registered in-sync replica of every partition the stop takes an in-sync replica from. ZooKeeper's
    view is not proof: a broker stays registered and in every ISR while it serves nothing (incidents
    000, 001), and a holder that does not answer is no holder (incident 002)."""
    live = snapshot.live_broker_ids
    out: set[int] = set()
    for p in snapshot.partitions:
        if broker_id in p.isr and broker_id in live:
            out.update(r for r in p.isr if r != broker_id and r in live)
    return sorted(out)


def unanswered(checks: Iterable[KafkaCheck]) -> dict[int, str]:
    """Brokers whose direct check failed: {broker: evidence}. A holder that does not answer is not a holder."""
    return {
        c.broker_id: f"did not answer a direct Kafka-protocol check at {c.at or 'now'} on {c.endpoint or 'no endpoint'} "
                     f"({c.error or c.error_code or 'no answer'})"
        for c in checks if not c.ok
    }


# detection's findings that say a registered broker is not serving (detect/serving.py) and the analysis's
INCIDENT_NOT_SERVING_KINDS = ("broker_unresponsive", "broker_check_failed", *NOT_SERVING_FINDING_KINDS)
ENDED_STATUSES = ("closed", "resolved")


def incident_evidence(records: Iterable[Mapping], snapshot: ClusterSnapshot) -> dict[int, str]:
    """Brokers an incident that has not ended says are not serving -- only while the broker has not registered
    again since the incident opened (a restart is its way back): {broker: evidence}."""
    from kafka_runbooks import clock

    out: dict[int, str] = {}
    for r in records:
        trigger = r.get("trigger") or {}
        if r.get("status") in ENDED_STATUSES or not (
            trigger.get("kind") in INCIDENT_NOT_SERVING_KINDS or (trigger.get("details") or {}).get("problem") == "broker_not_serving"
        ):
            continue
        for b in trigger.get("broker_ids") or r.get("broker_ids") or ():
            broker = snapshot.broker(int(b))
            if broker is None:
                continue  # not registered: no holder of anything anyway
            try:
                since = clock.parse(str(r.get("opened_at")))
                again = broker.registered_at is not None and clock.parse(broker.registered_at) > since
            except (TypeError, ValueError):
                again = False
            if not again:
                out.setdefault(int(b), f"open incident {r.get('id')} ({r.get('status')}, opened {r.get('opened_at')}) says it is "
                                       f"not serving: {trigger.get('kind')}: {str(trigger.get('summary') or '')[:200]}")
    return out


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
    for p in sorted(snapshot.not_fully_replicated, key=partition_order):  # the others can give no reason here
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
    unresponsive: Mapping[int, str] | None = None,
) -> list[str]:
    """Rules 4 and 5 for one partition: why stopping ``broker_id`` would hurt ``p``."""
    unresponsive = unresponsive or {}
    live = snapshot.live_broker_ids
    if broker_id not in p.isr or broker_id not in live:
        return []  # B removes nothing from this ISR
    after = [r for r in p.isr if r != broker_id and r in live]
    unregistered = [r for r in p.isr if r != broker_id and r not in live] if len(after) + 1 < len(p.isr) else []
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
    holders = [r for r in after if r not in not_serving and r not in unresponsive] if not_serving or unresponsive else after
    silent = [r for r in after if r not in holders]
    why = "; ".join(f"broker {r}: {not_serving.get(r) or unresponsive.get(r)}" for r in silent) if silent else ""
    if not holders:
        out.append(f"{p.name}: the other in-sync replicas {_ids(after)} are not serving; broker {broker_id} is the last one "
                   f"that serves ({why})")
    if broker_id in not_serving:
        return out  # no holder is removed: the serving holders after the stop are those serving now (rule 4's waiver)
    needed, source = min_isr(p, snapshot, settings)
    if needed is None:
        out.append(f"{p.name}: min.insync.replicas is unknown ({source}): cannot prove the stop keeps the partition writable")
    elif len(holders) < needed and holders:
        if len(after) < needed:
            out.append(f"{p.name}: isr {_ids(p.isr)} would fall to {len(after)} < min.insync.replicas {needed} ({source}){gone}")
        else:
            out.append(f"{p.name}: isr {_ids(p.isr)} would keep {len(holders)} serving replica(s) {_ids(holders)} < "
                       f"min.insync.replicas {needed} ({source}): a holder that does not answer is not a holder ({why})")
    elif len(after) < needed:
        out.append(f"{p.name}: isr {_ids(p.isr)} would fall to {len(after)} < min.insync.replicas {needed} ({source}){gone}")
    return out


def stop_refusals(
    snapshot: ClusterSnapshot,
    broker_id: int,
    settings: SafetySettings = SafetySettings(),
    not_serving: Mapping[int, str] | None = None,
    unresponsive: Mapping[int, str] | None = None,
) -> list[str]:
    """Every reason not to stop ``broker_id`` now ([] = safe), cluster-wide reasons first, then
    partitions with the internal topics first. ``not_serving``: the waiver's evidence (a direct check
    failing now AND a stuck-thread finding); ``unresponsive``: brokers that did not answer a direct check
    now (or an open incident says are not serving) -- never holders, never waived."""
    not_serving = dict(not_serving or {})
    unresponsive = {b: why for b, why in (unresponsive or {}).items() if b != broker_id}
    out = cluster_refusals(snapshot)
    out += under_replicated_refusals(snapshot, broker_id, not_serving)
    for p in sorted(snapshot.partitions_of(broker_id), key=partition_order):
        out += partition_refusals(p, broker_id, snapshot, settings, not_serving, unresponsive)
    return out


# --------------------------------------------------------------------------- what a stop changes

_COORDINATOR = {"__consumer_offsets": "group coordinator", "__transaction_state": "transaction coordinator"}


def blast_radius(snapshot: ClusterSnapshot, broker_id: int, not_serving: Mapping[int, str] | None = None,
                 settings: SafetySettings | None = None) -> list[str]:
    """What changes while ``broker_id`` is down, one line per partition starting with its name,
    internal topics first: in-sync replicas lost, leaderships that move, coordinators that move, and the partitions
    that go OFFLINE for the whole restart -- those whose only live in-sync replica is ``broker_id`` (a stuck leader's
    ISR shrinks to itself once it had appended what its followers never fetched: Kafka 2.3's
    ``Partition.getOutOfSyncReplicas``). ``settings``: to say whether unclean leader election could elect another
    replica for them (the plan's; without it the line does not say)."""
    stopped_stuck = broker_id in (not_serving or {})
    live = snapshot.live_broker_ids
    texts: dict[tuple, str] = {}  # a broker's partitions share few (ISR, leads, role): 3 in 3,000 at 100 brokers
    out = []
    for p in sorted(snapshot.partitions_of(broker_id), key=partition_order):
        leads = p.leader == broker_id
        unclean = None
        if leads and settings is not None and not any(r != broker_id and r in live for r in p.isr):
            unclean = unclean_enabled(p, snapshot, settings)  # few (value, source) pairs: part of the key
        key = (p.isr, leads, _COORDINATOR.get(p.topic), unclean, _below_min_isr(p, snapshot, broker_id, settings, stopped_stuck))
        text = texts.get(key)
        if text is None:
            text = texts[key] = _stop_effects(broker_id, *key, live, stopped_stuck)
        if text:
            out.append(f"{p.name}: {text}")
    return out


def _below_min_isr(p: Partition, snapshot: ClusterSnapshot, broker_id: int, settings: SafetySettings | None,
                   stuck: bool) -> int | None:
    """min.insync.replicas when the stop of a not-serving ``broker_id`` leaves ``p`` below it (rule 4's waiver), else
    None."""
    if not stuck or settings is None or broker_id not in p.isr:
        return None
    after = [r for r in p.isr if r != broker_id and r in snapshot.live_broker_ids]
    needed, _ = min_isr(p, snapshot, settings)
    return needed if after and needed is not None and len(after) < needed else None


def _stop_effects(broker_id: int, isr: tuple[int, ...], leads: bool, role: str | None, unclean: tuple[bool, str] | None,
                  below: int | None, live: frozenset[int], stuck: bool) -> str:
    """One partition's line of :func:`blast_radius` after its name ("" when the stop changes nothing for it)."""
    effects = []
    if broker_id in isr:
        after = [r for r in isr if r != broker_id]
        effects.append(f"loses in-sync replica {broker_id} (isr {_ids(isr)} -> {_ids(after)})")
    if below is not None:
        effects.append(f"below min.insync.replicas {below} until broker {broker_id} is back in sync: acks=all writes are "
                       f"refused (NotEnoughReplicas) meanwhile -- no less writable than now, broker {broker_id} does not serve")
    if leads:
        candidates = [r for r in isr if r != broker_id and r in live]
        what = f"{role} and leadership move" if role else "leadership moves"
        if candidates:
            effects.append(f"{what} off broker {broker_id} (to one of {_ids(candidates)})")
        elif stuck:
            effects.append(
                # the evidence is in the step's reason: a line of the blast radius stays the same on fresh state
                f"already unavailable (leader {broker_id} is not serving); OFFLINE for the whole restart: broker "
                f"{broker_id} is its only live in-sync replica, offline until broker {broker_id} is back" + _unclean_clause(unclean)
            )
        else:
            effects.append(f"leader {broker_id} goes away with no other live in-sync replica: partition offline"
                           + _unclean_clause(unclean))
    return "; ".join(effects)


def _unclean_clause(unclean: tuple[bool, str] | None) -> str:
    if unclean is None:
        return ""
    on, source = unclean
    if on:
        return f" (unclean.leader.election.enable=true, {source}: the controller may elect a replica that is behind)"
    return f" (unclean.leader.election.enable=false, {source}: no other replica may lead it)"


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
