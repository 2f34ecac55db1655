"""One maintenance lock per cluster: a kazoo ``Lock`` in the cluster's own ZooKeeper.

    /kafka-runbooks/locks/<cluster>      (under the cluster's chroot, beside Kafka's znodes)

Taken by every change the product makes to a cluster -- incident restarts, rolling restarts,
preferred elections -- from the first safety check to the last gate. The identifier names the
holder (run, user, purpose, since when), so a second run that cannot get the lock within its wait
refuses naming who holds it. The lock is an ephemeral sequential znode: a worker that dies loses
its ZooKeeper session and the lock with it. A holder whose session is suspended or lost stops
holding the lock (:meth:`MaintenanceLock.check` raises) and must halt.

:meth:`MaintenanceLock.fence` proves the lock with a ZooKeeper round trip -- its znode still exists and its
``ephemeralOwner`` is this client's session -- and runs before every stop: kazoo's local flags do not see a lock node
someone deleted (``rmr``), after which a second run may take the lock while this one still believes it holds it. When
the ZooKeeper client authenticates (``auth_data``), the lock path is created with an ACL (all rights to its creator,
read to everyone), so only the product's identity can delete a holder's node.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Mapping

from kafka_runbooks import clock
from kafka_runbooks.incidents.store import validate_id

ROOT = "/kafka-runbooks/locks"


class LockBusy(RuntimeError):
    """Someone else holds the cluster's maintenance lock; ``holders`` says who."""

    def __init__(self, cluster: str, holders: list[Mapping[str, Any]], waited_s: float):
        self.cluster = cluster
        self.holders = holders
        holder = holders[0] if holders else {}
        who = (
            f"run {holder.get('run')!r} of {holder.get('dag')!r} ({holder.get('purpose')}) started by "
            f"{holder.get('user')!r}, holding it since {holder.get('since')}"
            if holder
            else "a holder that just released it"
        )
        super().__init__(f"cluster {cluster!r} is under maintenance by {who}; waited {waited_s:g}s; refusing to act")


class LockLost(RuntimeError):
    """The ZooKeeper session that held the lock was suspended or lost: stop acting."""


def lock_path(cluster: str) -> str:
    return f"{ROOT}/{validate_id(cluster, 'cluster name')}"


def holders(zk, cluster: str) -> list[dict[str, Any]]:
    """Who holds (first) and waits for the cluster's lock, from the lock's own znodes."""
    from kazoo.recipe.lock import Lock

    out = []
    for ident in Lock(zk, lock_path(cluster)).contenders():
        try:
            out.append(json.loads(ident))
        except ValueError:
            out.append({"identifier": str(ident)[:200]})
    return out


def lock_acl(zk) -> list | None:
    """The lock path's ACL when the client authenticates to the ensemble (``auth_data``): all rights to the creator
    (the authenticated identity), read to anyone; None without auth (ZooKeeper's open ACL: nothing to tie it to)."""
    from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE) if getattr(zk, "auth_data", None) else None


CLOCK_ROOT = "/kafka-runbooks/clock"


def zk_now(zk, cluster: str):
    """ZooKeeper's clock now: a scratch znode of the cluster written and its ``mtime`` read (the leader's time, the
    clock every ``ctime`` of a registration is on). Ages of ZooKeeper sessions are computed against this, never against
    the worker's clock (a worker 11 minutes fast would call a 0-second-old session stable)."""
    path = f"{CLOCK_ROOT}/{validate_id(cluster, 'cluster name')}"
    acl = lock_acl(zk)
    try:
        stat = zk.set(path, b"")
    except Exception:  # noqa: BLE001 - NoNodeError the first time: created, then written
        zk.ensure_path(path, acl=acl)
        stat = zk.set(path, b"")
    return clock.from_millis(stat.mtime)


class MaintenanceLock:
    def __init__(self, zk, cluster: str, *, run: str, dag: str, user: str | None, purpose: str) -> None:
        from kazoo.recipe.lock import Lock

        self.zk = zk
        self.cluster = cluster
        self.identity = {"run": run, "dag": dag, "user": user, "purpose": purpose, "since": None}
        self._lock: Lock | None = None
        self._lost = threading.Event()
        self._Lock = Lock

    def _listener(self, state) -> None:
        from kazoo.protocol.states import KazooState

        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self._lost.set()

    def acquire(self, wait_s: float) -> dict[str, Any]:
        from kazoo.exceptions import LockTimeout

        self.identity["since"] = clock.now_iso()
        acl = lock_acl(self.zk)
        if acl is not None:
            self.zk.ensure_path(lock_path(self.cluster), acl=acl)
        self._lock = self._Lock(self.zk, lock_path(self.cluster), json.dumps(self.identity, sort_keys=True))
        try:
            got = self._lock.acquire(blocking=wait_s > 0, timeout=wait_s if wait_s > 0 else None)
        except LockTimeout:
            got = False
        if not got:
            self._lock.cancel()
            raise LockBusy(self.cluster, holders(self.zk, self.cluster), wait_s)
        self.zk.add_listener(self._listener)
        return dict(self.identity)

    def check(self) -> None:
        if self._lock is None or not self._lock.is_acquired:
            raise LockLost(f"the maintenance lock of cluster {self.cluster!r} is not held")
        if self._lost.is_set():
            raise LockLost(
                f"the ZooKeeper session holding the maintenance lock of cluster {self.cluster!r} was suspended or lost; "
                "another run may hold it now: halting"
            )

    def node(self) -> str | None:
        """The full path of this holder's lock znode (None before it was created)."""
        name = getattr(self._lock, "node", None) if self._lock is not None else None
        return f"{lock_path(self.cluster)}/{name}" if name else None

    def fence(self) -> dict[str, Any]:
        """:meth:`check`, then a ZooKeeper round trip proving the lock: this holder's znode exists and is owned by this
        session (``ephemeralOwner == client_id[0]``). LockLost otherwise. Returns what was proven (for the record)."""
        self.check()
        node = self.node()
        session = (getattr(self.zk, "client_id", None) or (None,))[0]
        stat = self.zk.exists(node) if node else None
        if stat is None:
            raise LockLost(f"the maintenance lock node {node} of cluster {self.cluster!r} no longer exists in ZooKeeper (deleted "
                           "by someone): another run may hold the lock now; halting before the next stop")
        if session is None or int(stat.ephemeralOwner) != int(session):
            raise LockLost(f"the maintenance lock node {node} of cluster {self.cluster!r} is owned by session "
                           f"{hex(int(stat.ephemeralOwner))}, not this run's {hex(int(session or 0))}: halting before the next stop")
        return {"node": node, "session": hex(int(session)), "mzxid": int(stat.mzxid)}

    def release(self) -> None:
        if self._lock is not None:
            try:
                self.zk.remove_listener(self._listener)
            except Exception:  # noqa: BLE001
                pass
            try:
                self._lock.release()
            except Exception:  # noqa: BLE001 - a lost session released it already
                pass

    def __enter__(self) -> "MaintenanceLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
