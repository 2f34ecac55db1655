"""ISR-shape signals: corroboration only.

A real Kafka 2.3 broker whose request handling is stuck does NOT drop out of ISRs when no data
flows, and a stuck leader's followers stay in its ISR (Kafka shrinks only followers that fall
behind the leader's log end); so the ISR shape can confirm a suspicion, never raise one alone.

A "broken replica link" is (leader L, follower F): F is a registered replica of a partition led by
registered L, and F is not in its ISR. One sick broker breaks links with *every* peer while each
healthy peer breaks a link only with the sick one, so blame goes to the brokers that cover the
broken links (greedy vertex cover: most distinct peers first; ties go to suspects named by other
signals, then to the follower).
"""

from __future__ import annotations

from typing import Any, Iterable

from kafka_runbooks.model import partition_order
from kafka_runbooks.model import ClusterSnapshot, Partition


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


def isr_shape(snapshot: ClusterSnapshot, broker_id: int) -> dict[str, Any]:
    """What the ISRs say about one broker (empty lists when nothing points at it)."""
    links = broken_links(snapshot)
    dropped = sorted({p for (l, f), ps in links.items() if f == broker_id for p in ps}, key=partition_order)
    isolated = sorted(
        [p for p in snapshot.partitions if p.leader == broker_id and p.isr == (broker_id,) and len(p.replicas) > 1],
        key=partition_order,
    )
    led_broken = sorted({p for (l, f), ps in links.items() if l == broker_id for p in ps}, key=partition_order)
    return {
        "dropped_from_isr": [p.name for p in dropped],
        "dropped_by": sorted({p.leader for p in dropped}),
        "led_with_isr_only_itself": [p.name for p in isolated],
        "led_partitions_missing_followers": [p.name for p in led_broken],
        "_partitions": dropped + [p for p in led_broken if p not in dropped],
    }


def isr_suspects(snapshot: ClusterSnapshot, suspects_first: Iterable[int] = ()) -> list[int]:
    return blame(broken_links(snapshot), suspects_first)
