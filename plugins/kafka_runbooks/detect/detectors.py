"""Detectors: pure functions from a ClusterSnapshot (ZooKeeper state + host probes) to Findings.

No I/O here.  Every Finding's ``details`` is JSON-serialisable.

broker_unresponsive (incidents 000/001): a broker that is still registered in ZooKeeper but no
longer does its job.  ZooKeeper shows it two ways:

* its peers dropped it from the ISR of partitions they lead (it stopped fetching), and/or
* the partitions it leads shrank to ISR == [itself] (its peers cannot fetch from it -- seed 001:
  "partitions led by 219 have Isr: 219").

Both leave a "broken replica link" (leader L, follower F: F is a live replica of a partition led by
live L, and F is not in its ISR).  One sick broker breaks links with *every* peer while each
healthy peer breaks a link only with the sick one, so blame goes to the brokers that cover the
broken links (greedy vertex cover: most distinct peers first; ties go to the broker the host probe
flags, then to the follower -- the leader is the one Kafka lets judge).  The host probe adds a
second, independent signal: CLOSE_WAIT on the broker port or open files far above the median of
its peers.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from typing import Any, Iterable

from kafka_runbooks.model import (
    CONSUMER_OFFSETS,
    ClusterSnapshot,
    Evidence,
    Finding,
    HostProbe,
    Partition,
    Severity,
)


@dataclass(frozen=True)
class Thresholds:
    """When a host-probe figure counts as 'far above its peers': value >= ratio x median(peers)
    AND value >= the absolute minimum (so 9 vs 3 sockets is not an incident)."""

    close_wait_ratio: float = 3.0
    close_wait_min: int = 100
    open_files_ratio: float = 3.0
    open_files_min: int = 10_000
    max_evidence: int = 20  # evidence items per finding; `details` always has the full lists


DEFAULT_THRESHOLDS = Thresholds()


def partition_order(p: Partition) -> tuple[int, str, int]:
    """__consumer_offsets first, then by topic and index."""
    return (0 if p.topic == CONSUMER_OFFSETS else 1, p.topic, p.index)


def state_source(p: Partition) -> str:
    return f"zookeeper:/brokers/topics/{p.topic}/partitions/{p.index}/state"


def state_excerpt(p: Partition) -> str:
    """The state znode's JSON as Kafka writes it (reconstructed from the snapshot)."""
    return json.dumps(
        {"leader": p.leader, "leader_epoch": p.leader_epoch, "isr": list(p.isr), "replicas": list(p.replicas)},
        separators=(",", ":"),
    )


def _state_evidence(parts: Iterable[Partition], limit: int) -> list[Evidence]:
    return [Evidence(source=state_source(p), excerpt=state_excerpt(p)) for p in sorted(parts, key=partition_order)[:limit]]


# --------------------------------------------------------------------------- replica links

def broken_links(snapshot: ClusterSnapshot) -> dict[tuple[int, int], list[Partition]]:
    """{(leader, follower): partitions} where both are registered, follower is a replica of a
    partition led by leader, and follower is not in its ISR."""
    live = snapshot.live_broker_ids
    links: dict[tuple[int, int], list[Partition]] = {}
    for p in snapshot.partitions:
        if p.leader not in live:
            continue
        for r in p.replicas:
            if r != p.leader and r in live and r not in p.isr:
                links.setdefault((p.leader, r), []).append(p)
    return links


def blame(links: Iterable[tuple[int, int]], suspects_first: Iterable[int] = ()) -> list[int]:
    """Brokers that explain the broken links (greedy vertex cover, see module doc)."""
    uncovered = set(links)
    chosen: list[int] = []
    for b in sorted(set(suspects_first)):
        if any(b in link for link in uncovered):
            chosen.append(b)
            uncovered = {link for link in uncovered if b not in link}
    preferred = set(suspects_first)
    while uncovered:
        peers: dict[int, set[int]] = {}
        as_follower: dict[int, int] = {}
        for leader, follower in uncovered:
            peers.setdefault(leader, set()).add(follower)
            peers.setdefault(follower, set()).add(leader)
            as_follower[follower] = as_follower.get(follower, 0) + 1
        best = max(peers, key=lambda b: (len(peers[b]), b in preferred, as_follower.get(b, 0), -b))
        chosen.append(best)
        uncovered = {link for link in uncovered if best not in link}
    return chosen


# --------------------------------------------------------------------------- probe outliers

def _outlier(value: int | None, peer_values: list[int], ratio: float, minimum: int) -> dict[str, Any] | None:
    if value is None or not peer_values or value < minimum:
        return None
    median = statistics.median(peer_values)
    if median > 0 and value < ratio * median:
        return None
    return {
        "value": value,
        "peer_values": peer_values,
        "peer_median": median,
        "ratio": round(value / median, 1) if median > 0 else None,
    }


def probe_signals(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> dict[int, dict[str, Any]]:
    """{broker_id: {"close_wait": {...}, "open_files": {...}}} for registered brokers whose probe
    figures are far above the median of their peers' (only reachable probes are compared)."""
    live = snapshot.live_broker_ids
    usable = {p.broker_id: p for p in snapshot.probes if p.reachable and p.broker_id in live}
    out: dict[int, dict[str, Any]] = {}
    for bid, probe in usable.items():
        peers = [q for q_id, q in usable.items() if q_id != bid]
        sig: dict[str, Any] = {}
        cw = _outlier(
            _close_wait(probe),
            [v for v in (_close_wait(q) for q in peers) if v is not None],
            thresholds.close_wait_ratio,
            thresholds.close_wait_min,
        )
        if cw:
            sig["close_wait"] = cw
        of = _outlier(
            probe.open_files,
            [q.open_files for q in peers if q.open_files is not None],
            thresholds.open_files_ratio,
            thresholds.open_files_min,
        )
        if of:
            sig["open_files"] = of
        if sig:
            out[bid] = sig
    return out


def _close_wait(probe: HostProbe) -> int | None:
    if not probe.connection_states:
        return None
    return int(probe.connection_states.get("CLOSE_WAIT", 0))


def _probe_evidence(probe: HostProbe, signal: dict[str, Any], host: str | None) -> Evidence:
    parts = []
    if "close_wait" in signal:
        s = signal["close_wait"]
        parts.append(f"CLOSE_WAIT on broker port: {s['value']} (peers {s['peer_values']}, median {s['peer_median']})")
    if "open_files" in signal:
        s = signal["open_files"]
        parts.append(f"open files: {s['value']} (peers {s['peer_values']}, median {s['peer_median']})")
    states = ", ".join(f"{k}={v}" for k, v in sorted(probe.connection_states.items()))
    if states:
        parts.append(f"connection states: {states}")
    return Evidence(source=f"probe:broker/{probe.broker_id}", excerpt="; ".join(parts), host=host)


# --------------------------------------------------------------------------- detectors

def detect_unresponsive(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    links = broken_links(snapshot)
    probes = probe_signals(snapshot, thresholds)
    suspects = set(blame(links, suspects_first=probes)) | set(probes)
    findings = []
    for bid in sorted(suspects):
        dropped = sorted({p for (l, f), ps in links.items() if f == bid for p in ps}, key=partition_order)
        isolated = sorted(
            [p for p in snapshot.partitions if p.leader == bid and p.isr == (bid,) and len(p.replicas) > 1],
            key=partition_order,
        )
        led_broken = sorted({p for (l, f), ps in links.items() if l == bid for p in ps}, key=partition_order)
        signal = probes.get(bid, {})
        reasons = []
        if dropped:
            dropped_by = sorted({p.leader for p in dropped})
            reasons.append(f"dropped from the ISR of {len(dropped)} partition(s) led by broker(s) {dropped_by}")
        if isolated:
            reasons.append(f"leads {len(isolated)} partition(s) whose ISR shrank to [{bid}] alone")
        elif led_broken:
            reasons.append(f"{len(led_broken)} partition(s) it leads lost followers from their ISR")
        if "close_wait" in signal:
            s = signal["close_wait"]
            reasons.append(f"{s['value']} CLOSE_WAIT sockets on the broker port vs peer median {s['peer_median']}")
        if "open_files" in signal:
            s = signal["open_files"]
            reasons.append(f"{s['value']} open files vs peer median {s['peer_median']}")
        b = snapshot.broker(bid)
        host = b.host if b and b.host else None
        evidence = _state_evidence(dropped + [p for p in led_broken if p not in dropped], thresholds.max_evidence)
        probe = snapshot.probe(bid)
        if probe is not None and signal:
            evidence.append(_probe_evidence(probe, signal, host))
        findings.append(
            Finding(
                kind="broker_unresponsive",
                severity=Severity.CRITICAL,
                summary=f"Broker {bid} is registered in ZooKeeper but unresponsive: " + "; ".join(reasons),
                broker_ids=(bid,),
                partitions=tuple(p.name for p in sorted(set(dropped) | set(led_broken), key=partition_order)),
                evidence=tuple(evidence),
                details={
                    "broker_id": bid,
                    "host": host,
                    "registered": True,
                    "dropped_from_isr": [p.name for p in dropped],
                    "dropped_by": sorted({p.leader for p in dropped}),
                    "led_with_isr_only_itself": [p.name for p in isolated],
                    "led_partitions_missing_followers": [p.name for p in led_broken],
                    "probe": signal,
                    "is_controller": snapshot.controller_id == bid,
                },
            )
        )
    return findings


def detect_under_replicated(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    urp = sorted((p for p in snapshot.partitions if p.under_replicated and not p.offline), key=partition_order)
    if not urp:
        return []
    missing = sorted({r for p in urp for r in p.replicas if r not in p.isr})
    return [
        Finding(
            kind="under_replicated_partitions",
            severity=Severity.WARNING,
            summary=f"{len(urp)} under-replicated partition(s); replicas out of ISR: brokers {missing}",
            broker_ids=tuple(missing),
            partitions=tuple(p.name for p in urp),
            evidence=tuple(_state_evidence(urp, thresholds.max_evidence)),
            details={
                "count": len(urp),
                "partitions": [
                    {"partition": p.name, "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader}
                    for p in urp
                ],
                "under_min_isr": [
                    p.name for p in urp if p.min_insync_replicas is not None and len(p.isr) < p.min_insync_replicas
                ],
            },
        )
    ]


def detect_offline(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    live = snapshot.live_broker_ids
    off = sorted((p for p in snapshot.partitions if p.offline or p.leader not in live), key=partition_order)
    if not off:
        return []
    gone_leaders = sorted({p.leader for p in off if p.leader >= 0})
    return [
        Finding(
            kind="offline_partitions",
            severity=Severity.CRITICAL,
            summary=f"{len(off)} offline partition(s) (no leader, or leader not registered"
            + (f": brokers {gone_leaders}" if gone_leaders else "")
            + ")",
            broker_ids=tuple(gone_leaders),
            partitions=tuple(p.name for p in off),
            evidence=tuple(_state_evidence(off, thresholds.max_evidence)),
            details={
                "count": len(off),
                "partitions": [
                    {
                        "partition": p.name,
                        "leader": p.leader,
                        "leader_registered": p.leader in live,
                        "replicas": list(p.replicas),
                        "isr": list(p.isr),
                    }
                    for p in off
                ],
                "live_brokers": sorted(live),
            },
        )
    ]


def detect_unparsable(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    if not snapshot.unparsable:
        return []
    evidence = []
    for entry in snapshot.unparsable[: thresholds.max_evidence]:
        path, _, why = entry.partition(": ")
        evidence.append(Evidence(source=f"zookeeper:{path}", excerpt=why))
    return [
        Finding(
            kind="unparsable",
            severity=Severity.WARNING,
            summary=f"{len(snapshot.unparsable)} ZooKeeper znode(s) could not be understood; "
            "the snapshot is incomplete there",
            evidence=tuple(evidence),
            details={"entries": list(snapshot.unparsable)},
        )
    ]


def detect_unreachable(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    live = snapshot.live_broker_ids
    findings = []
    for probe in sorted(snapshot.probes, key=lambda p: p.broker_id):
        if probe.reachable or probe.broker_id not in live:
            continue
        b = snapshot.broker(probe.broker_id)
        host = b.host if b and b.host else None
        findings.append(
            Finding(
                kind="host_unreachable",
                severity=Severity.WARNING,
                summary=f"Broker {probe.broker_id} is registered in ZooKeeper but its host"
                + (f" {host}" if host else "")
                + f" could not be probed: {probe.error or 'unreachable'}",
                broker_ids=(probe.broker_id,),
                evidence=(
                    Evidence(source=f"probe:broker/{probe.broker_id}", excerpt=probe.error or "unreachable", host=host),
                ),
                details={"broker_id": probe.broker_id, "host": host, "error": probe.error},
            )
        )
    return findings


DETECTORS = (detect_unresponsive, detect_offline, detect_under_replicated, detect_unreachable, detect_unparsable)


def detect(snapshot: ClusterSnapshot, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> list[Finding]:
    """All findings for one snapshot, most severe first (stable within a severity)."""
    findings = [f for d in DETECTORS for f in d(snapshot, thresholds)]
    rank = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(findings, key=lambda f: rank[f.severity])
