"""Issue 29 §2, the maintenance lock fenced, on a real ZooKeeper (tests/detect/zkserver.py; no brokers needed: the
broker is the one-broker simulation of ``test_engine_trust``). kazoo's local flags do not see a lock node someone
deleted; ``MaintenanceLock.fence`` -- run before every stop -- proves with a round trip that the node exists and is
owned by this session."""

from __future__ import annotations

import logging

import pytest

from kafka_runbooks.remediate.lock import LockLost, MaintenanceLock, holders, lock_path


def _lock(client, run):
    return MaintenanceLock(client, "lab", run=run, dag="kafka_rolling_restart", user="alice", purpose="rolling_restart")


def test_a_deleted_lock_node_halts_the_roll_before_its_next_stop(zk, zookeeper):
    """Someone runs ``rmr`` on the lock: kazoo still says the lock is held (``check`` passes), a second run takes the
    lock -- and the first run's next stop is refused by the fence: no stop command is sent."""
    from test_engine_trust import GATES, Broker

    from kafka_runbooks.remediate.steps import restart_broker

    other = zookeeper.client(zk.chroot_path)
    try:
        first = _lock(zk, "run-1")
        first.acquire(0)
        proven = first.fence()
        assert proven["node"].startswith(lock_path("lab") + "/") and int(proven["session"], 16) == zk.client_id[0]
        other.delete(lock_path("lab"), recursive=True)
        first.check()  # kazoo's flags: still "acquired"
        second = _lock(other, "run-2")
        second.acquire(5.0)
        assert [h["run"] for h in holders(zk, "lab")] == ["run-2"]
        broker = Broker()
        with pytest.raises(LockLost, match="no longer exists in ZooKeeper"):
            restart_broker(broker, broker, GATES, lambda *a, **k: None, logging.getLogger("t"),
                           before_stop=lambda: first.fence())
        assert broker.commands == []
        second.fence()  # the second run's own lock is proven
        second.release()
    finally:
        other.stop()
        other.close()


def test_the_lock_path_has_an_acl_when_the_client_authenticates(zk, zookeeper):
    """With digest auth configured, the lock path is created creator-all / world-read: a client without that identity
    cannot delete the holder's node (NoAuth), the holder's fence still proves it."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    authed = KazooClient(hosts=zookeeper.hosts + zk.chroot_path, auth_data=[("digest", "kafka-runbooks:s3cret")], timeout=5.0)
    authed.start(timeout=10)
    anonymous = zookeeper.client(zk.chroot_path)
    try:
        lock = _lock(authed, "run-1")
        lock.acquire(0)
        acls, _ = authed.get_acls(lock_path("lab"))
        assert {(a.id.scheme, a.perms) for a in acls} == {("digest", 31), ("world", 1)}
        with pytest.raises(NoAuthError):
            anonymous.delete(lock.node())
        assert lock.fence()["node"] == lock.node()
        lock.release()
    finally:
        for c in (authed, anonymous):
            c.stop()
            c.close()
