"""The deferred preferred-replica election (issue 7, incident 003). Pure: the plan, when it may run, and whether a
batch converged. The I/O is ``remediate/election_run.py``; the DAG ``dags/kafka_preferred_election.py``; on-call's
page ``runbooks/preferred-election.md``.

Plan: every partition whose leader is not its preferred (first) replica, grouped by the broker leadership moves to,
in batches of ``election.batch_size``; ``__consumer_offsets`` partitions in their own smaller batches
(``offsets_batch_size``), after the others -- their group coordinators move with the leadership, so every group of
such a partition reloads its offsets and its members rejoin.

It runs only when all of these hold (:func:`readiness`): each broker leadership moves to is registered, in the ISR
of every partition it hosts, and its ZooKeeper session is older than ``stable_s``; the quiet window is open (the
configured UTC windows, and bytes-in / request rate under the thresholds when configured); nobody holds the
cluster's maintenance lock; no other preferred election is pending in ZooKeeper. It gives up at the deadline.

After each batch (:func:`convergence`): ZooKeeper says every partition of the batch is led by its preferred replica,
every broker's own metadata agrees, the canary succeeded, no broker's request queue is saturated.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig, ElectionSettings
from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot, ElectionBatch, ElectionPlan, Partition, RequestMetrics
from kafka_runbooks.remediate.digest import state_digest
from kafka_runbooks.schedules import in_window, next_open

KIND = "preferred_election"
ZNODE = "/admin/preferred_replica_election"

# What removing an /admin znode the controller did not take cannot undo (Kafka 2.3, KafkaController: the event thread
# reads /admin/reassign_partitions or /admin/preferred_replica_election into memory, then logs before acting; seen in
# the lab's incident 000, the isolated broker being the controller: its controller-event-thread blocked on that log
# line). Shared by election_run and demote_run: one wording.
REMOVED = "no controller that reads it from now on runs it"
STUCK_READER = ("; a controller stuck while handling it (it read the znode, then blocked, e.g. writing its log) keeps "
                "what it read and would still carry it out if it resumed without a restart")
RUNBOOK = "runbooks/preferred-election.md"


def preferred(p: Partition) -> int:
    return p.replicas[0]


def _order(p: Partition) -> tuple[str, int]:
    return (p.topic, p.index)


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def plan_election(snapshot: ClusterSnapshot, config: ClusterConfig, *, brokers: Iterable[int] = (), roll_id: str | None = None,
                  deadline_at: str | None = None, elected: Iterable[str] = (), views: Iterable[Any] | None = None,
                  version=None) -> ElectionPlan:
    """``brokers``: only leadership moving to these (empty: every broker). ``elected``: partitions an earlier run of
    the same election already elected and saw converge (resume, from its ledger): never elected again by it. Refused
    when nothing is to move, the method cannot work on this Kafka, or a target broker has no configured host (the
    product acts only on brokers it knows)."""
    s: ElectionSettings = config.election
    wanted = sorted({int(b) for b in brokers})
    done = sorted(set(elected))
    refusals: list[str] = list(method_refusals(config, version))
    if views is not None:
        refusals += view_refusals(snapshot, views)
    if snapshot.cluster != config.name:
        refusals.append(f"snapshot is of cluster {snapshot.cluster!r} but the config is for {config.name!r}")
    todo = [p for p in snapshot.partitions if p.replicas and p.leader != preferred(p) and (not wanted or preferred(p) in wanted)
            and p.name not in done]
    by_target: dict[int, list[Partition]] = {}
    for p in todo:
        by_target.setdefault(preferred(p), []).append(p)
    chunked: list[tuple[int, list[str], bool]] = []  # (target, partitions, __consumer_offsets?) in the order they run
    for b in sorted(by_target):
        mine = sorted(by_target[b], key=_order)
        plain = [p.name for p in mine if p.topic != CONSUMER_OFFSETS]
        offsets = [p.name for p in mine if p.topic == CONSUMER_OFFSETS]
        chunked += [(b, x, False) for x in chunks(plain, s.batch_size)] + [(b, x, True) for x in chunks(offsets, s.offsets_batch_size)]
    chunked, left = _bounded(chunked, s.max_partitions)
    targets = sorted({b for b, _, _ in chunked})
    batches: list[ElectionBatch] = []
    for i, (b, names, is_offsets) in enumerate(chunked, 1):
        why = (f"batch {i} of {len(chunked)}: move leadership of {len(names)} partition(s) to their preferred replica, broker {b}"
               + (" (__consumer_offsets: the group coordinators of these partitions move to broker "
                  f"{b}; their groups reload offsets and rebalance)" if is_offsets else ""))
        refused = () if b in config.hosts else (
            f"cluster {config.name!r} has no SSH connection for broker {b}; refusing to act on an unknown broker",)
        batches.append(ElectionBatch(b, tuple(names), why, refused))
    if not batches:
        refusals.append("nothing to elect: every partition" + (f" preferring brokers {wanted}" if wanted else "")
                        + " is led by its preferred replica" + (f" or was elected by this election already ({len(done)})" if done else ""))
    refusals += [f"broker {x.target}: {r}" for x in batches for r in x.refusals]
    offline = [p.name for p in todo if p.offline]
    warnings = [f"{len(offline)} partition(s) are offline ({', '.join(offline[:10])}): the election cannot help them"] if offline else []
    if left:
        warnings.append(f"{left} more partition(s) are not led by their preferred replica: one election moves at most "
                        f"election.max_partitions ({s.max_partitions}); the next election (its schedule, or a new run) plans them")
    conditions = {
        "brokers": targets,
        "stable_s": s.stable_s,
        "window": list(s.window),
        "max_bytes_in_per_s": s.max_bytes_in_per_s,
        "max_requests_per_s": s.max_requests_per_s,
        "deadline_s": s.deadline_s,
        "deadline_at": deadline_at,
        "method": election_method(config),
        "batch_size": s.batch_size,
        "offsets_batch_size": s.offsets_batch_size,
        "stuck_s": config.health.follower_stuck_s,
    }
    if done:
        conditions["already_elected"] = done
    return ElectionPlan(
        cluster=config.name, batches=tuple(batches), refusals=tuple(refusals),
        blast_radius=tuple(_moves(batches)),
        kind=KIND, requested=tuple(wanted), computed_at=clock.now_iso(), state_digest=state_digest(snapshot, {}),
        controller_id=snapshot.controller_id, controller_epoch=snapshot.controller_epoch, warnings=tuple(warnings),
        roll_id=roll_id, conditions=conditions,
    )


def _bounded(chunked: list[tuple[int, list[str], bool]], most: int) -> tuple[list[tuple[int, list[str], bool]], int]:
    """(the batches in order up to ``most`` partitions, the last one cut if need be; how many partitions were left)."""
    kept: list[tuple[int, list[str], bool]] = []
    room = most
    for b, names, is_offsets in chunked:
        if room <= 0:
            break
        kept.append((b, names[:room], is_offsets))
        room -= len(kept[-1][1])
    return kept, sum(len(x[1]) for x in chunked) - sum(len(x[1]) for x in kept)


def _moves(batches: list[ElectionBatch]) -> list[str]:
    """The blast radius: one line per broker leadership moves to (the partitions themselves are in the batches; a line
    per partition made a 100,000-partition election's plan megabytes long in XCom and the approval)."""
    out = []
    for b in sorted({x.target for x in batches}):
        names = [n for x in batches if x.target == b for n in x.partitions]
        offsets = [n for n in names if n.rsplit("-", 1)[0] == CONSUMER_OFFSETS]
        out.append(f"leadership of {len(names)} partition(s) moves to broker {b}"
                   + (f", {len(offsets)} of them {CONSUMER_OFFSETS} (their group coordinators move with it)" if offsets else ""))
    return out


def view_refusals(snapshot: ClusterSnapshot, views: Iterable[Any]) -> list[str]:
    """Every batch converges only when every broker's own metadata agrees with ZooKeeper: brokers whose view cannot be
    read now (a SASL listener the direct metadata probe does not speak, a wrong listener, a broker that does not answer)
    would halt the election after its first batch -- refused at plan time instead."""
    views = {v.broker_id: v for v in views}
    bad = {b: (views[b].error if b in views else "not asked") for b in sorted(snapshot.live_broker_ids) if b not in views or not views[b].ok}
    if not bad:
        return []
    return [f"the own metadata of brokers {sorted(bad)} cannot be read ({'; '.join(f'broker {b}: {e}' for b, e in bad.items())[:600]}): "
            "every batch must be checked against each broker's own view, so the election would halt after its first batch"]


def election_method(config: ClusterConfig) -> str:
    """"zookeeper" (the znode; every ZooKeeper-mode Kafka) unless the cluster says "admin" (elect_leaders: Kafka >= 2.2,
    the only way on KRaft). "auto" is the znode: every cluster this product reaches is in ZooKeeper mode."""
    return "admin" if config.election.method == "admin" else "zookeeper"


ADMIN_SINCE = (2, 2)  # ElectPreferredLeaders, API key 43 v0 (KIP-183); v1 with the election type is 2.4 (KIP-460)


def _version(text: str | None) -> tuple[int, int] | None:
    import re

    m = re.match(r"^\s*(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def method_refusals(config: ClusterConfig, version=None) -> list[str]:
    """``admin`` on a Kafka not known to be 2.2 or newer has no API to elect with. On 2.2/2.3 it works for the preferred
    election (measured on the lab's 2.3.0: librdkafka 2.16 sends ElectLeaders v0, the broker elects the preferred
    replicas). ``version``: what the brokers report (``kafka_runbooks.versions.KafkaVersion``, versions' feature
    ``elect_leaders_api``); without it the ``kafka_version`` setting. Nothing known, or brokers not known to have it:
    refused -- the branch that is safe for 0.9 too (API key 43 is one 0.9 does not know: seed 002). The default method,
    the znode, works on every ZooKeeper-mode Kafka (0.9 and 0.10.2.1 included). No recording of ElectLeaders refused
    by a pre-2.2 broker (librdkafka refuses it locally from the ApiVersions answer)."""
    if election_method(config) != "admin":
        return []
    if version is not None and version.brokers:
        if version.has("elect_leaders_api"):
            return []
        why = "is older than 2.2" if version.lacks("elect_leaders_api") else "is not known to be 2.2 or newer"
        return [f"election.method 'admin' needs Kafka >= 2.2 (ElectLeaders, API key 43, KIP-183); cluster {config.name!r}'s "
                f"brokers report {version.describe()}, which {why}: use method 'zookeeper' (or 'auto')"]
    v = _version(config.kafka_version)
    if v is None or v < ADMIN_SINCE:
        runs = f"runs {config.kafka_version}" if v is not None else "has no known version (nothing observed, no kafka_version)"
        return [f"election.method 'admin' needs Kafka >= 2.2 (ElectLeaders, API key 43, KIP-183); cluster {config.name!r} "
                f"{runs}: use method 'zookeeper' (or 'auto')"]
    return []


def znode_payload(partitions: Iterable[str]) -> bytes:
    """The JSON Kafka's controller reads from /admin/preferred_replica_election."""
    out = []
    for name in partitions:
        topic, _, index = name.rpartition("-")
        if not topic or not index.isdigit():
            raise ValueError(f"not a partition name: {name!r}")
        out.append({"topic": topic, "partition": int(index)})
    return json.dumps({"version": 1, "partitions": out}, separators=(",", ":")).encode()


def deadline(approved_at: dt.datetime, settings: ElectionSettings) -> dt.datetime:
    return approved_at + dt.timedelta(seconds=settings.deadline_s)


# --------------------------------------------------------------------------- readiness (the deferred wait)

def rate(m: RequestMetrics | None, key: str) -> float | None:
    from kafka_runbooks.host.jmxtool import metrics_summary

    return None if m is None or not m.ok else metrics_summary(m).get(key)


def readiness(snapshot: ClusterSnapshot, conditions: Mapping[str, Any], now: dt.datetime, *,
              lock_holders: Iterable[Mapping[str, Any]] = (), metrics: Iterable[RequestMetrics] = (),
              followers: Mapping[tuple[int, str], Any] | None = None) -> list[str]:
    """Why the election may not run now; [] when it may. Every reason names what it waits for. ``followers``: the
    verdicts of the target brokers' replicas out of their ISR (``detect/replicas.verdicts``): catching up (with when it
    will be in sync), stuck, or unknown -- never "catching up" for a follower nobody saw progress."""
    why: list[str] = []
    stable_s = float(conditions.get("stable_s") or 0)
    followers = followers or {}
    for b in conditions.get("brokers") or ():
        broker = snapshot.broker(int(b))
        if broker is None:
            why.append(f"broker {b} is not registered in ZooKeeper")
            continue
        missing = sorted((p.name for p in snapshot.partitions_of(int(b)) if int(b) not in p.isr))
        if missing:
            why.append(f"broker {b} is not yet in the ISR of {len(missing)} partition(s) it hosts "
                       f"({', '.join(missing[:8])}{', ...' if len(missing) > 8 else ''}): " + _follower_state(int(b), missing, followers))
        if broker.registered_at is None:
            why.append(f"broker {b}'s registration time is unknown: its session cannot be judged stable")
        else:
            age = (now - clock.parse(broker.registered_at)).total_seconds()
            if age < stable_s:
                why.append(f"broker {b}'s ZooKeeper session {hex(broker.session_id or 0)} is {age:.0f} s old, "
                           f"less than the {stable_s:g} s required to call it stable")
    windows = list(conditions.get("window") or ())
    if windows and not in_window(now, windows):
        nxt = next_open(now, windows)
        why.append(f"outside the quiet window {windows} (UTC); it opens next at {clock.iso(nxt) if nxt else '?'}")
    metrics = list(metrics)
    for key, limit_key, what in (("bytes_in_rate", "max_bytes_in_per_s", "bytes in"), ("request_rate", "max_requests_per_s", "requests")):
        limit = conditions.get(limit_key)
        if limit is None:
            continue
        by = {m.broker_id: rate(m, key) for m in metrics}
        unknown = sorted(b for b in snapshot.live_broker_ids if by.get(b) is None)
        over = {b: v for b, v in sorted(by.items()) if v is not None and v > float(limit)}
        if unknown:
            why.append(f"{what}/s of brokers {unknown} could not be read (JMX): traffic cannot be judged quiet")
        if over:
            why.append(f"traffic not quiet: {what}/s " + ", ".join(f"broker {b} {v:.1f}" for b, v in over.items())
                       + f" above {float(limit):g}")
    holders = list(lock_holders)
    if holders:
        h = holders[0]
        why.append(f"the cluster's maintenance lock is held by run {h.get('run')!r} of {h.get('dag')!r} ({h.get('purpose')})")
    if snapshot.preferred_election_pending:
        why.append(f"another preferred election is pending in ZooKeeper ({ZNODE}: {', '.join(snapshot.preferred_election_pending[:5])})")
    if snapshot.reassigning:
        why.append(f"a partition reassignment is in progress ({', '.join(snapshot.reassigning[:5])})")
    return why


def _follower_state(broker: int, missing: list[str], followers: Mapping[tuple[int, str], Any]) -> str:
    """"catching up (...)", "STUCK (...)" or "not yet known whether it catches up (...)" for the partitions ``missing``."""
    from kafka_runbooks.detect.replicas import CATCHING_UP, STUCK

    verdicts = {n: followers[(broker, n)] for n in missing if (broker, n) in followers}
    stuck = [n for n, v in verdicts.items() if v.kind == STUCK]
    if stuck:
        return f"STUCK on {', '.join(stuck[:6])}: {verdicts[stuck[0]].reason}"
    catching = {n: v for n, v in verdicts.items() if v.kind == CATCHING_UP}
    if catching and len(catching) == len(missing):
        etas = [v.eta_s for v in catching.values() if v.eta_s is not None]
        return "catching up" + (f", in sync in about {max(etas):.0f} s at the current pace" if len(etas) == len(catching) else
                                f" ({next(iter(catching.values())).reason})")
    other = next((v for v in verdicts.values() if v.kind not in (CATCHING_UP,)), None)
    return ("not yet known whether it catches up: " + other.reason) if other else \
        "not yet known whether it catches up (its log end offsets were not read)"


def stuck_diagnosis(conditions: Mapping[str, Any], followers: Mapping[tuple[int, str], Any]) -> str | None:
    """When a target broker is stuck out of an ISR the election would wait for it forever: the give-up reason, with the
    diagnosis and the fix. None while nothing is stuck."""
    from kafka_runbooks.detect.replicas import STUCK

    targets = {int(b) for b in conditions.get("brokers") or ()}
    stuck = {(b, n): v for (b, n), v in followers.items() if v.kind == STUCK and b in targets}
    if not stuck:
        return None
    brokers = sorted({b for b, _ in stuck})
    (b0, n0), v0 = next(iter(sorted(stuck.items())))
    return (f"gave up early: broker(s) {brokers} are stuck out of the ISR of {len(stuck)} partition(s) "
            f"({', '.join(n for _, n in sorted(stuck)[:8])}) and will not catch up by themselves -- {n0} on broker {b0}: {v0.reason}. "
            f"Waiting for them until the deadline would change nothing. Fix: restart broker(s) {brokers} through the engine "
            f"(the health check's follower_stuck incident offers it, approved), then run this election again. Nothing was changed. "
            f"See {RUNBOOK}.")


def batch_refusals(snapshot: ClusterSnapshot, conditions: Mapping[str, Any], now: dt.datetime, target: int, batch: Iterable[str],
                   *, check: Any = None) -> list[str]:
    """Re-checked on fresh state right before each batch is written (the wait said ready once, maybe long ago): the quiet
    window, the target's registration and session age, its presence in the ISR of the batch, the controller, ZooKeeper
    metadata that could not be read, and a direct check that the target serves (``check``: its KafkaCheck). Every
    reason refuses the batch; nothing of it is written."""
    why: list[str] = []
    windows = list(conditions.get("window") or ())
    if windows and not in_window(now, windows):
        why.append(f"the quiet window {windows} (UTC) closed")
    broker = snapshot.broker(int(target))
    if broker is None:
        why.append(f"broker {target} is not registered")
    elif broker.registered_at is None or (now - clock.parse(broker.registered_at)).total_seconds() < float(conditions.get("stable_s") or 0):
        why.append(f"broker {target}'s ZooKeeper session {hex(broker.session_id or 0)} is newer than {float(conditions.get('stable_s') or 0):g} s: "
                   "it re-registered since the wait")
    by_name = {p.name: p for p in snapshot.partitions}
    out = [n for n in batch if n in by_name and int(target) not in by_name[n].isr]
    if out:
        why.append(f"broker {target} is not in the ISR of {', '.join(out[:8])} any more: it is not ready")
    if snapshot.controller_id is None:
        why.append("no active controller (/controller is absent): nobody would run the election")
    elif snapshot.controller_id not in snapshot.live_broker_ids:
        why.append(f"controller {snapshot.controller_id} is not registered: the controller is moving")
    unreadable = [u for u in snapshot.unparsable if u.startswith(("/brokers", "/controller", "/admin"))]
    if unreadable:
        why.append(f"ZooKeeper metadata could not be read: {'; '.join(unreadable[:3])}")
    if check is not None and not check.ok:
        why.append(f"broker {target} does not answer a direct check now ({check.error or check.error_code}): it would lead "
                   "partitions it does not serve")
    return why


def past_deadline(conditions: Mapping[str, Any], now: dt.datetime) -> bool:
    at = conditions.get("deadline_at")
    return bool(at) and now >= clock.parse(str(at))


def seconds_left(conditions: Mapping[str, Any], now: dt.datetime) -> float | None:
    """Seconds until the plan's deadline (None: no deadline)."""
    at = conditions.get("deadline_at")
    return max(0.0, (clock.parse(str(at)) - now).total_seconds()) if at else None


def give_up_reason(conditions: Mapping[str, Any], last: list[str], checks: int) -> str:
    return (f"gave up at the deadline {conditions.get('deadline_at')} after {checks} check(s); still waiting for: "
            + ("; ".join(last) if last else "nothing (the deadline passed between checks)")
            + f". Nothing was changed. See {RUNBOOK}.")


# --------------------------------------------------------------------------- convergence after a batch

def convergence(snapshot: ClusterSnapshot, batch: Iterable[str], *, views: Iterable[Any] = (),
                metrics: Iterable[RequestMetrics] | None = None, queue_ratio: float = 0.8,
                queued_max: Mapping[int, int] | None = None) -> list[str]:
    """Why the batch has not converged; [] when it has. ``views``: MetadataView of every live broker. ``metrics``: None
    when the request queues are not checked (``leadership.jmx`` off); otherwise every registered broker's queue must be
    read and below ``queue_ratio`` of its ``queued.max.requests`` -- a queue that could not be read is unknown, and an
    unknown queue is not a converged one."""
    from kafka_runbooks.host.jmxtool import DEFAULT_QUEUED_MAX_REQUESTS, REQUEST_QUEUE

    why: list[str] = []
    names = list(batch)
    by_name = {p.name: p for p in snapshot.partitions}
    not_preferred = []
    for n in names:
        p = by_name.get(n)
        if p is None:
            why.append(f"{n} is no longer in ZooKeeper")
        elif p.leader != preferred(p):
            not_preferred.append(f"{n} (leader {p.leader}, preferred {preferred(p)})")
    if not_preferred:
        why.append(f"ZooKeeper: {len(not_preferred)} partition(s) not led by the preferred replica: {', '.join(not_preferred[:8])}")
    views = list(views)
    answered = {v.broker_id for v in views if v.ok}
    silent = sorted(snapshot.live_broker_ids - answered)
    if silent:
        why.append(f"brokers {silent} did not answer for their own metadata")
    for v in views:
        if not v.ok:
            continue
        wrong = [f"{n} says {v.leader_of(n)}" for n in names if n in by_name and v.leader_of(n) != by_name[n].leader]
        if wrong:
            why.append(f"broker {v.broker_id}'s own metadata disagrees with ZooKeeper: {', '.join(wrong[:6])}")
    if metrics is None:
        return why
    by_broker = {m.broker_id: m for m in metrics}
    for b in sorted(snapshot.live_broker_ids):
        m = by_broker.get(b)
        q = m.get(REQUEST_QUEUE, "Value") if m is not None and m.ok else None
        if q is None:
            why.append(f"broker {b}'s request queue is unknown ({(m.error if m is not None else None) or 'not read'}): "
                       "the queue check cannot pass on no data")
            continue
        bound = (queued_max or {}).get(b, DEFAULT_QUEUED_MAX_REQUESTS)
        if q >= queue_ratio * bound:
            why.append(f"broker {b}'s request queue is saturated: {q:g} of queued.max.requests {bound}")
    return why
