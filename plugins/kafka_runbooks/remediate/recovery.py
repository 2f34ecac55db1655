"""Has a restarted broker recovered?  Pure ``recovery_status`` plus ZooKeeper I/O around it.

Recovered = the broker is registered again AND every partition whose replica set includes it has
it back in the ISR.  ``expected_partitions`` (names like "orders-2", usually taken from the
snapshot before the restart) must all be readable again too: a partition that is missing from the
new snapshot is still waited for, never assumed fine.
"""

from __future__ import annotations

import threading
import time
from typing import Iterable

from kafka_runbooks.model import ClusterSnapshot



class RecoveryTimeout(TimeoutError):
    """The broker did not recover in time; ``waiting_for`` says what was still missing."""

    def __init__(self, broker_id: int, timeout_s: float, waiting_for: list[str]):
        self.broker_id = broker_id
        self.timeout_s = timeout_s
        self.waiting_for = list(waiting_for)
        shown = "; ".join(self.waiting_for[:10]) + (f"; ... {len(self.waiting_for) - 10} more" if len(self.waiting_for) > 10 else "")
        super().__init__(f"broker {broker_id} did not recover within {timeout_s:g}s; still waiting for: {shown}")


def recovery_status(
    snapshot: ClusterSnapshot, broker_id: int, expected_partitions: Iterable[str] = ()
) -> tuple[bool, list[str]]:
    """(done, waiting_for): each entry of ``waiting_for`` names one thing not yet true."""
    waiting: list[str] = []
    if snapshot.broker(broker_id) is None:
        waiting.append(f"broker {broker_id} to register in ZooKeeper (/brokers/ids/{broker_id})")
    seen = set()
    for p in sorted(snapshot.partitions_of(broker_id), key=lambda p: (p.topic != "__consumer_offsets", p.topic, p.index)):
        seen.add(p.name)
        if broker_id not in p.isr:
            waiting.append(f"{p.name}: broker {broker_id} to rejoin the ISR (isr={list(p.isr)}, leader={p.leader})")
    present = {p.name for p in snapshot.partitions}
    for name in sorted(set(expected_partitions) - seen):
        if name not in present:
            waiting.append(f"{name}: partition state readable in ZooKeeper again")
        # present but no longer assigned to the broker (reassigned): nothing to wait for
    return (not waiting, waiting)


def registration_id(zk, broker_id: int) -> int | None:
    """The czxid of broker ``broker_id``'s current ephemeral registration (None when absent).

    Capture it before a restart and pass it as ``previous_registration``: the old registration can
    outlive a SIGKILLed process by a session timeout, and must not be mistaken for the new one."""
    stat = zk.exists(f"/brokers/ids/{int(broker_id)}")
    return stat.czxid if stat is not None else None


def _stale_registration(zk, broker_id: int, previous_registration: int | None) -> list[str]:
    if previous_registration is None:
        return []
    current = registration_id(zk, broker_id)
    if current is not None and current == previous_registration:
        return [f"broker {broker_id} to re-register (the registration from before the restart is still there)"]
    return []


def poke(
    zk,
    cluster: str,
    broker_id: int,
    expected_partitions: Iterable[str] = (),
    *,
    previous_registration: int | None = None,
) -> tuple[bool, list[str]]:
    """Read ZooKeeper once and evaluate :func:`recovery_status` (for an Airflow sensor's poke)."""
    from kafka_runbooks.detect.snapshot import read_snapshot

    stale = _stale_registration(zk, broker_id, previous_registration)
    done, waiting = recovery_status(read_snapshot(zk, cluster), broker_id, expected_partitions)
    return (done and not stale, stale + waiting)


def wait_for_recovery(
    zk,
    cluster: str,
    broker_id: int,
    timeout_s: float,
    *,
    expected_partitions: Iterable[str] = (),
    previous_registration: int | None = None,
    poll_s: float = 5.0,
) -> list[str]:
    """Block until the broker has recovered, or raise :class:`RecoveryTimeout`.

    Woken by kazoo watches (ChildrenWatch on /brokers/ids, DataWatch on the state znodes of the
    broker's partitions) with a ``poll_s`` safety net; never sleeps a fixed time.  Returns the
    (empty) list it was waiting for, for symmetry with the timeout case.  ``previous_registration``:
    see :func:`registration_id`."""
    from kazoo.recipe.watchers import ChildrenWatch, DataWatch

    from kafka_runbooks.detect.snapshot import read_snapshot

    expected = list(expected_partitions)
    deadline = time.monotonic() + timeout_s
    changed = threading.Event()
    stopped = threading.Event()
    watched: set[str] = set()

    def on_change(*_args) -> bool | None:
        changed.set()
        return False if stopped.is_set() else None  # False ends a kazoo watch

    ChildrenWatch(zk, "/brokers/ids", on_change)
    waiting: list[str] = []
    try:
        while True:
            changed.clear()
            stale = _stale_registration(zk, broker_id, previous_registration)
            snapshot = read_snapshot(zk, cluster)
            done, waiting = recovery_status(snapshot, broker_id, expected)
            waiting = stale + waiting
            if done and not stale:
                return []
            for p in snapshot.partitions_of(broker_id):
                path = f"/brokers/topics/{p.topic}/partitions/{p.index}/state"
                if path not in watched and broker_id not in p.isr:
                    watched.add(path)
                    DataWatch(zk, path, on_change)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RecoveryTimeout(broker_id, timeout_s, waiting)
            changed.wait(min(poll_s, remaining))
    finally:
        stopped.set()
