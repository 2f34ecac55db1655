"""Mitigate first (issue 30): move leadership off a broker that is registered but not serving, its JVM untouched,
so clients are served again before the diagnosis and the restart. Pure: the plan, its refusals, the znode payloads and
whether the move converged. The I/O is ``remediate/demote_run.py``.

How, as Cruise Control demotes a broker: for every partition broker B leads whose ISR holds another registered,
serving replica, the same replica set is written to ``/admin/reassign_partitions`` reordered -- the chosen new
leader first, B last; once the controller has processed it (it deletes the znode), a preferred-replica election
through ``/admin/preferred_replica_election`` for those partitions. Measured on the lab's Kafka 2.3 with B's request
handlers held (docs/MITIGATE.md): the controller processed both in about a second, also when B was the controller
itself (its ZooKeeper watches and controller-to-broker channels are not its request handlers), and B's JVM kept its
stuck threads for the dumps. Both znodes exist with these meanings on every ZooKeeper-mode version (0.9 to 2.x).

When B is the controller, the controller is moved first (:attr:`DemotePlan.move_controller`): with B's threads
blocked (the lab's ``isolate`` blocks log4j too) its controller event thread reads the reassignment znode and blocks
on its first log line, so nothing is reordered (docs/MITIGATE.md). Its /controller znode is deleted (only while it is
the znode the run's check read and /controller_epoch is unchanged: ``demote_run.move_controller``); every other
registered broker's controller event thread then runs ``elect()`` (Kafka 2.3, KafkaController) and the first to create
/controller wins and, on failover, resumes whatever /admin/reassign_partitions and /admin/preferred_replica_election
hold; B's own re-election waits behind its stuck event. The plan names who may take it (:attr:`DemotePlan.takers`:
registered, not proven not serving) and is refused when nobody could, or /controller_epoch is unknown.

Why the order changes and stays changed until B is back: with B first, the controller's automatic rebalance
(``auto.leader.rebalance.enable``, Kafka's default true) would hand leadership straight back to the hung B. The plan
records the original order (:attr:`DemotePlan.restore`); it is written back only after B's restart has passed its gates,
before the deferred preferred election returns leadership to B.

What cannot move: a partition whose only in-sync replica is B (a leader that appended before it hung shrinks its
ISR to itself after ``replica.lag.time.max.ms``). With unclean election off, no other replica may lead it: it stays
unavailable until B's restart, and the plan says so by name (:attr:`DemotePlan.stays_offline`). A partition whose other
in-sync replicas do not answer either stays too (moving it would move the outage).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot, Partition, partition_order

KIND = "demote"
REASSIGN_ZNODE = "/admin/reassign_partitions"
ELECTION_ZNODE = "/admin/preferred_replica_election"


@dataclass(frozen=True)
class Refusal:
    """Why the move may not run: a stable ``code`` and a sentence naming what and where."""

    code: str
    sentence: str

    def __str__(self) -> str:
        return f"{self.code}: {self.sentence}"


@dataclass(frozen=True)
class Move:
    """One partition B leads: its new replica order (the new leader first, B last), or, where B is not its preferred
    replica, the same order (``reorder`` False: the preferred election alone moves it)."""

    partition: Partition
    replicas: tuple[int, ...]

    @property
    def new_leader(self) -> int:
        return self.replicas[0]

    @property
    def reorder(self) -> bool:
        return tuple(self.replicas) != tuple(self.partition.replicas)

    @property
    def coordinator(self) -> bool:
        """A ``__consumer_offsets`` partition: its groups' coordinator moves with the leadership (the new one loads)."""
        return self.partition.topic == CONSUMER_OFFSETS


@dataclass(frozen=True)
class Stays:
    """A partition B leads that cannot move now, and why."""

    partition: Partition
    why: str


@dataclass(frozen=True)
class DemotePlan:
    cluster: str
    broker_id: int
    moves: tuple[Move, ...]
    stays_offline: tuple[Stays, ...]
    refusals: tuple[Refusal, ...]
    controller: bool  # B is the controller: it is moved first (``move_controller``), the Admin API is not used
    evidence: str  # why B is taken as not serving
    takers: tuple[int, ...] = ()  # B is the controller: the registered, serving brokers that may take it (one must)

    @property
    def move_controller(self) -> bool:
        """B is the controller: its /controller znode is deleted first and another broker takes it (module doc)."""
        return self.controller

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    @property
    def restore(self) -> dict[str, list[int]]:
        """The original replica order of every moved partition, written back after B's restart."""
        return {m.partition.name: list(m.partition.replicas) for m in self.moves}

    def reassignment(self) -> bytes:
        """``/admin/reassign_partitions`` (version 1, as kafka-reassign-partitions.sh writes it)."""
        return _json({"version": 1, "partitions": [
            {"topic": m.partition.topic, "partition": m.partition.index, "replicas": list(m.replicas)}
            for m in self.moves if m.reorder]})

    @property
    def reorders(self) -> bool:
        return any(m.reorder for m in self.moves)

    def election(self) -> bytes:
        """``/admin/preferred_replica_election`` for the moved partitions."""
        return _json({"version": 1, "partitions": [{"topic": m.partition.topic, "partition": m.partition.index}
                                                    for m in self.moves]})

    def blast_radius(self) -> list[str]:
        """What a person approves: what moves where, which coordinators move, what stays down and why."""
        lines = [f"move leadership of {len(self.moves)} partition(s) off broker {self.broker_id} now; its JVM keeps "
                 f"running for the capture, then the restart"]
        by_leader: dict[int, list[str]] = {}
        for m in self.moves:
            by_leader.setdefault(m.new_leader, []).append(m.partition.name)
        lines += [f"  to broker {b}: {_names(ps)}" for b, ps in sorted(by_leader.items())]
        coord = [m.partition.name for m in self.moves if m.coordinator]
        if coord:
            lines.append(f"  group coordinators move with {_names(coord)}: their groups reload offsets and rejoin")
        for s in self.stays_offline:
            lines.append(f"  STAYS OFFLINE until broker {self.broker_id} is restarted: {s.partition.name} ({s.why})")
        if self.controller:
            lines.insert(0, f"broker {self.broker_id} is the controller: the controller is moved first (its /controller "
                            f"znode deleted, only while it is still broker {self.broker_id}'s and no election came "
                            f"between; another registered broker takes it: one of {list(self.takers)}), then "
                            f"leadership is moved; if no other broker takes it in time, or broker {self.broker_id} "
                            f"takes it again, the run halts")
        return lines


def plan_demote(snapshot: ClusterSnapshot, broker_id: int, not_serving: Mapping[int, str]) -> DemotePlan:
    """The move for ``broker_id`` on ``snapshot`` (fresh), given who is proven not serving ({broker: evidence})."""
    b = int(broker_id)
    refusals = list(_cluster_refusals(snapshot, b, not_serving))
    moves: list[Move] = []
    stays: list[Stays] = []
    for p in sorted((p for p in snapshot.partitions if p.leader == b), key=partition_order):
        target = _new_leader(p, b, snapshot.live_broker_ids, not_serving)
        if isinstance(target, str):
            stays.append(Stays(p, target))
        elif p.replicas[0] == target:
            moves.append(Move(p, tuple(p.replicas)))  # B is not its preferred replica: the election alone moves it
        elif set(p.replicas) <= set(p.isr):
            moves.append(Move(p, (target, *(r for r in p.replicas if r not in (target, b)), b)))
        else:
            lag = sorted(set(p.replicas) - set(p.isr))
            stays.append(Stays(p, f"its replica(s) {lag} are out of its ISR: Kafka completes a reassignment only once every "
                                  f"replica is in sync, and they would catch up from broker {b}, which serves nothing"))
    if not refusals and not moves:
        refusals.append(Refusal("nothing_to_move", f"broker {b} leads no partition that another serving in-sync "
                                                   f"replica could lead" + (f" ({len(stays)} stay offline)" if stays else "")))
    return DemotePlan(snapshot.cluster, b, tuple(moves), tuple(stays), tuple(refusals),
                      snapshot.controller_id == b, str(not_serving.get(b, "")), _takers(snapshot, b, not_serving))


def _takers(snapshot: ClusterSnapshot, b: int, not_serving: Mapping[int, str]) -> tuple[int, ...]:
    """The brokers that may take the controller off B: registered, not B, not proven not serving. (Kafka elects
    whichever registered broker's event thread creates /controller first; these are who can win it.)"""
    if snapshot.controller_id != b:
        return ()
    return tuple(sorted(x for x in snapshot.live_broker_ids if x != b and x not in not_serving))


def controller_move_unapproved(fresh: DemotePlan, approved: bool) -> Refusal | None:
    """Fresh state needs the controller moved but the approval did not cover it: refused (a move the approver did not
    see). Approved but no longer needed (another broker is the controller now): nothing to refuse, it is skipped."""
    if fresh.move_controller and not approved:
        return Refusal("controller_move_not_approved", f"broker {fresh.broker_id} is the controller now; the approved "
                                                       f"plan did not move the controller: it needs a new approval")
    return None


def _cluster_refusals(snapshot: ClusterSnapshot, b: int, not_serving: Mapping[int, str]):
    if snapshot.zookeeper_error:
        yield Refusal("zookeeper_unreadable", f"the cluster's state could not be read: {snapshot.zookeeper_error}")
    bad = [u for u in snapshot.unparsable if u.startswith(("/brokers/topics", "/controller", "/admin"))]
    if bad:
        yield Refusal("metadata_unreadable", f"ZooKeeper metadata the move depends on could not be read: {bad[0]}")
    if b not in snapshot.live_broker_ids:
        yield Refusal("not_registered", f"broker {b} is not registered: the controller has moved its leadership already")
    if b not in not_serving:
        yield Refusal("serving", f"broker {b} has no direct evidence of not serving: leadership is moved only off a broker "
                                 f"that failed a direct check corroborated by a not-serving finding")
    if snapshot.reassigning:
        yield Refusal("reassignment_pending", f"a reassignment is in progress ({_names(snapshot.reassigning)})")
    if snapshot.preferred_election_pending:
        yield Refusal("election_pending", f"a preferred election is pending ({_names(snapshot.preferred_election_pending)})")
    if snapshot.controller_id is None or snapshot.controller_id not in snapshot.live_broker_ids:
        yield Refusal("no_controller", "no registered controller: nobody would process the move")
    elif snapshot.controller_id == b:
        yield from _controller_refusals(snapshot, b, not_serving)


def _controller_refusals(snapshot: ClusterSnapshot, b: int, not_serving: Mapping[int, str]):
    """B is the controller: it is moved first, which needs another broker to take it and /controller_epoch read (the
    run deletes /controller only while /controller_epoch is unchanged: no election came between)."""
    if not _takers(snapshot, b, not_serving):
        yield Refusal("no_controller_taker", f"broker {b} is the controller and no other registered, serving broker could "
                                             f"take it: deleting /controller would leave the cluster without one")
    if snapshot.controller_epoch is None:
        yield Refusal("controller_epoch_unreadable", f"broker {b} is the controller but /controller_epoch could not be "
                                                     f"read: the controller cannot be moved safely")


def _new_leader(p: Partition, b: int, live: frozenset[int], not_serving: Mapping[int, str]) -> int | str:
    """The first replica (in assignment order) that is registered, in the ISR and serving; else why none. (Measured on
    Kafka 2.3: a reassignment of a partition whose ISR lacks a replica waits for it to catch up -- from the hung leader,
    never -- so only partitions with every replica in sync are reordered: ``plan_demote``.)"""
    others = [r for r in p.isr if r != b]
    if not others:
        return f"its only in-sync replica is broker {b}; with unclean election off no other replica may lead it"
    serving = [r for r in p.replicas if r in others and r in live and r not in not_serving]
    if not serving:
        return f"its other in-sync replica(s) {sorted(others)} are not registered or not serving"
    return serving[0]


def restore_payload(restore: Mapping[str, list[int]], snapshot: ClusterSnapshot) -> tuple[bytes | None, list[str]]:
    """``/admin/reassign_partitions`` that writes the original replica order back (after B's restart passed its gates):
    only partitions whose replica SET is still the one moved (an order nobody else changed since), every replica
    registered and in the ISR (the reassignment completes at once; nothing is copied). (payload or None, what is
    left out and why)."""
    now = {p.name: p for p in snapshot.partitions}
    back, left = [], []
    for name, order in sorted(restore.items()):
        p = now.get(name)
        if p is None:
            left.append(f"{name}: gone from ZooKeeper")
        elif sorted(p.replicas) != sorted(order):
            left.append(f"{name}: its replicas changed since the move ({list(p.replicas)}): left as they are")
        elif list(p.replicas) == list(order):
            continue
        elif not set(order) <= set(p.isr) or not set(order) <= snapshot.live_broker_ids:
            left.append(f"{name}: not every replica is registered and in its ISR yet ({list(p.isr)})")
        else:
            back.append({"topic": p.topic, "partition": p.index, "replicas": list(order)})
    return (_json({"version": 1, "partitions": back}) if back else None), left


def converged(snapshot: ClusterSnapshot, plan: DemotePlan) -> list[str]:
    """What still keeps the move from being done (empty: done): each moved partition led by a registered broker other
    than B that is in its ISR, per ZooKeeper."""
    now = {p.name: p for p in snapshot.partitions}
    left = []
    for m in plan.moves:
        p = now.get(m.partition.name)
        if p is None:
            left.append(f"{m.partition.name}: gone from ZooKeeper")
        elif p.leader == plan.broker_id or p.leader not in snapshot.live_broker_ids or p.leader not in p.isr:
            left.append(f"{p.name}: led by {p.leader}, ISR {list(p.isr)}")
    return left


def _names(names) -> str:
    names = list(names)
    return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")


def _json(doc) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")
