"""Has a restarted broker recovered?  Pure.

Recovered = the broker is registered again AND every partition whose replica set includes it has
it back in the ISR.  ``expected_partitions`` (names like "orders-2", usually taken from the
snapshot before the restart) must all be readable again too: a partition that is missing from the
new snapshot is still waited for, never assumed fine. The waiting itself is ``gates.in_sync_gate``.
"""

from __future__ import annotations

from typing import Iterable

from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot


def recovery_status(
    snapshot: ClusterSnapshot, broker_id: int, expected_partitions: Iterable[str] = ()
) -> tuple[bool, list[str]]:
    """(done, waiting_for): each entry of ``waiting_for`` names one thing not yet true."""
    waiting: list[str] = []
    if snapshot.broker(broker_id) is None:
        waiting.append(f"broker {broker_id} to register in ZooKeeper (/brokers/ids/{broker_id})")
    seen = set()
    for p in sorted(snapshot.partitions_of(broker_id), key=lambda p: (p.topic != CONSUMER_OFFSETS, p.topic, p.index)):
        seen.add(p.name)
        if broker_id not in p.isr:
            waiting.append(f"{p.name}: broker {broker_id} to rejoin the ISR (isr={list(p.isr)}, leader={p.leader})")
    present = {p.name for p in snapshot.partitions}
    for name in sorted(set(expected_partitions) - seen):
        if name not in present:
            waiting.append(f"{name}: partition state readable in ZooKeeper again")
        # present but no longer assigned to the broker (reassigned): nothing to wait for
    return (not waiting, waiting)
