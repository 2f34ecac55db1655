"""The ZooKeeper side of the engine against a REAL ZooKeeper: the in-sync gate woken by watches,
its timeout naming what it still waits for, registration sessions, and the maintenance lock
(contention naming the holder, release on session loss, a dead worker's lock expiring)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from kafka_runbooks.remediate.gates import GateFailed, in_sync_gate
from kafka_runbooks.remediate.lock import LockBusy, LockLost, MaintenanceLock, holders, lock_path
from kafka_runbooks.remediate.steps import registration

pytestmark = pytest.mark.timeout(120)


def j(obj) -> bytes:
    return json.dumps(obj).encode()


def reg(broker_id: int) -> bytes:
    return j({"endpoints": [f"PLAINTEXT://127.0.0.1:{9090 + broker_id}"], "host": "127.0.0.1", "port": 9090 + broker_id,
              "jmx_port": -1, "timestamp": "1700000000000", "version": 4})


def state(leader, isr) -> bytes:
    return j({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 1, "isr": isr})


def cluster_with_3_down(zk):
    zk.create("/brokers/ids/1", reg(1), makepath=True)
    zk.create("/brokers/ids/2", reg(2), makepath=True)
    zk.create("/controller", j({"version": 1, "brokerid": 1, "timestamp": "1"}))
    zk.create("/brokers/topics/orders", j({"version": 1, "partitions": {"0": [1, 2, 3], "1": [3, 2, 1]}}), makepath=True)
    zk.create("/brokers/topics/orders/partitions/0/state", state(1, [1, 2]), makepath=True)
    zk.create("/brokers/topics/orders/partitions/1/state", state(2, [2, 1]), makepath=True)


def in_thread(fn):
    errors = []

    def run():
        try:
            fn()
        except BaseException as exc:  # surfaced by the test, not lost in the thread
            errors.append(exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors


def test_in_sync_gate_is_woken_by_watches_and_reports_progress(zk, zookeeper):
    cluster_with_3_down(zk)
    broker3 = zookeeper.client(zk.chroot_path)  # the restarted broker's own session
    seen: list[list[str]] = []
    try:
        def come_back():
            deadline = time.monotonic() + 30
            while not seen and time.monotonic() < deadline:  # registered only after the first report: the next
                time.sleep(0.05)  # one is held back (at most one per 5 s) and must still come, woken by its timer
            broker3.create("/brokers/ids/3", reg(3), ephemeral=True)
            # wait until the gate has reported the registration before moving the ISRs
            while not any(w and not w[0].startswith("broker 3 to register") for w in seen) and time.monotonic() < deadline:
                time.sleep(0.05)
            broker3.set("/brokers/topics/orders/partitions/0/state", state(1, [1, 2, 3]))
            broker3.set("/brokers/topics/orders/partitions/1/state", state(2, [2, 1, 3]))

        t, errors = in_thread(come_back)
        # poll_s far above the gate's own bound: only ZooKeeper watches can finish it in time
        result = in_sync_gate(zk, "lab", 3, ["orders-0", "orders-1"], timeout_s=60, poll_s=600,
                              progress=lambda waiting, rec: seen.append(list(waiting)), recovery_log=lambda: "")
        t.join(10)
        assert not errors
        assert result.gate == "in_sync" and result.details == {"partitions": 2}
        assert any(w and w[0].startswith("orders-0: broker 3 to rejoin the ISR") for w in seen), seen
    finally:
        broker3.stop()
        broker3.close()


def test_in_sync_gate_fails_naming_what_it_waits_for(zk):
    cluster_with_3_down(zk)
    with pytest.raises(GateFailed) as info:
        in_sync_gate(zk, "lab", 3, ["orders-0", "orders-1", "gone-0"], timeout_s=1.0, poll_s=0.2,
                     progress=lambda *_: None, recovery_log=lambda: "")
    w = info.value.details["waiting_for"]
    assert w[0] == "broker 3 to register in ZooKeeper (/brokers/ids/3)"
    assert any(x.startswith("orders-1: broker 3 to rejoin the ISR") for x in w)
    assert "gone-0: partition state readable in ZooKeeper again" in w
    assert "not back in every ISR after 1s" in str(info.value)


def test_registration_tells_an_old_session_from_a_new_one(zk, zookeeper):
    old, new = zookeeper.client(zk.chroot_path), zookeeper.client(zk.chroot_path)
    try:
        zk.ensure_path("/brokers/ids")
        assert registration(zk, 3) is None
        old.create("/brokers/ids/3", reg(3), ephemeral=True)
        before = registration(zk, 3)
        assert before.session_id == old.client_id[0]
        fired = threading.Event()
        assert registration(zk, 3, watch=lambda *_: fired.set()) == before
        old.stop()  # a closed session takes its ephemeral registration with it, and the watch fires
        assert fired.wait(10)
        assert registration(zk, 3) is None
        new.create("/brokers/ids/3", reg(3), ephemeral=True)
        after = registration(zk, 3)
        assert after.session_id == new.client_id[0] != before.session_id and after.czxid > before.czxid
    finally:
        for c in (old, new):
            c.stop()
            c.close()


# ------------------------------------------------------------------ the maintenance lock

def _lock(client, run, user="alice"):
    return MaintenanceLock(client, "lab", run=run, dag="kafka_rolling_restart", user=user, purpose="rolling_restart")


def test_second_run_refuses_naming_the_holder_then_gets_it_after_release(zk, zookeeper):
    other = zookeeper.client(zk.chroot_path)
    try:
        first = _lock(zk, "run-1")
        identity = first.acquire(0)
        assert identity["run"] == "run-1" and identity["since"]
        first.check()
        with pytest.raises(LockBusy) as info:
            _lock(other, "run-2", user="bob").acquire(1.0)
        msg = str(info.value)
        assert "run 'run-1'" in msg and "'alice'" in msg and identity["since"] in msg and "refusing to act" in msg
        assert [h["run"] for h in holders(zk, "lab")] == ["run-1"]  # the refused contender left nothing behind
        first.release()
        second = _lock(other, "run-2", user="bob")
        second.acquire(5.0)
        assert [h["run"] for h in holders(zk, "lab")] == ["run-2"]
        second.release()
        assert holders(zk, "lab") == []
    finally:
        other.stop()
        other.close()


def test_a_waiting_run_gets_the_lock_when_the_holder_releases(zk, zookeeper):
    other = zookeeper.client(zk.chroot_path)
    try:
        first = _lock(zk, "run-1")
        first.acquire(0)
        got = {}
        t, errors = in_thread(lambda: got.update(identity=_lock(other, "run-2").acquire(60)))
        deadline = time.monotonic() + 30
        while len(holders(zk, "lab")) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [h["run"] for h in holders(zk, "lab")] == ["run-1", "run-2"]  # waiting, in line
        first.release()
        t.join(30)
        assert not errors and got["identity"]["run"] == "run-2"
    finally:
        other.stop()
        other.close()


def test_losing_the_session_means_losing_the_lock(zk, zookeeper):
    client = zookeeper.client(zk.chroot_path)
    lock = _lock(client, "run-1")
    lock.acquire(0)
    client.stop()  # the session is gone: kazoo reports LOST
    with pytest.raises(LockLost):
        lock.check()
    client.close()
    assert holders(zk, "lab") == []


def test_a_dead_workers_lock_goes_with_its_session(zk, zookeeper):
    """A worker process that holds the lock is SIGKILLed: its session expires and another run gets the lock."""
    code = textwrap.dedent(f"""
        import sys, time
        from kafka_runbooks.zookeeper import kazoo_client
        from kafka_runbooks.remediate.lock import MaintenanceLock
        zk = kazoo_client({zookeeper.hosts!r}, {zk.chroot_path!r}, timeout_s=2.0)
        zk.start(timeout=10)
        MaintenanceLock(zk, "lab", run="dead-run", dag="d", user="w", purpose="rolling_restart").acquire(0)
        print("locked", flush=True)
        time.sleep(600)
    """)
    worker = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        for line in worker.stdout:  # its kazoo logs go to stdout too; bounded by the test timeout
            if line.strip() == "locked":
                break
        else:
            pytest.fail(f"the worker exited ({worker.wait()}) without taking the lock")
        assert [h["run"] for h in holders(zk, "lab")] == ["dead-run"]
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait(10)
        # the session timeout (2 s requested) passes; nobody releases anything by hand
        identity = _lock(zk, "next-run").acquire(60)
        assert identity["run"] == "next-run" and [h["run"] for h in holders(zk, "lab")] == ["next-run"]
        assert zk.exists(lock_path("lab"))
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)


def test_a_lock_lost_during_a_long_gate_halts_it_at_the_next_poll(zk, zookeeper):
    """Issue 17 §4: the in-sync gate may wait 15 minutes; a lost maintenance lock is noticed at its next poll, not
    at its end (the gate reads with its own session; the lock's session is the one that goes)."""
    cluster_with_3_down(zk)
    holder = zookeeper.client(zk.chroot_path)
    lock = MaintenanceLock(holder, "c1", run="roll-1", dag="kafka_rolling_restart", user="carol", purpose="rolling_restart")
    lock.acquire(0)
    threading.Timer(1.0, holder.stop).start()  # the worker's ZooKeeper session ends mid-gate
    t0 = time.monotonic()
    with pytest.raises(LockLost, match="suspended or lost"):
        in_sync_gate(zk, "c1", 3, ["orders-0"], timeout_s=60, poll_s=0.2, progress=lambda *a: None,
                     recovery_log=lambda: "", guard=lock.check)
    assert 0.9 < time.monotonic() - t0 < 10
    holder.close()


def test_a_lock_lost_during_a_steps_wait_halts_it(zk, zookeeper):
    """The restart step's waits (old process gone, registration gone, new registration) poll the same guard."""
    from kafka_runbooks.remediate.waits import wait_for

    holder = zookeeper.client(zk.chroot_path)
    lock = MaintenanceLock(holder, "c1", run="roll-2", dag="kafka_rolling_restart", user="carol", purpose="rolling_restart")
    lock.acquire(0)
    threading.Timer(0.5, holder.stop).start()
    t0 = time.monotonic()
    with pytest.raises(LockLost):
        wait_for(lambda: None, timeout_s=60, poll_s=0.2, guard=lock.check)
    assert time.monotonic() - t0 < 10
    holder.close()


def test_a_halted_election_leaves_no_znode_behind(zk):
    """Issue 17 §5: no controller takes the batch (here: none at all) -- the election halts and removes what it wrote, so
    no controller runs it later; somebody else's pending election is never touched."""
    import pytest

    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate.election_run import _elect_znode, remove_our_znode
    from kafka_runbooks.remediate.executor import Halted

    zk.ensure_path("/admin")
    with pytest.raises(Halted) as halted:
        _elect_znode(zk, ["orders-0", "orders-1"], timeout_s=1.5)
    assert "removed again: no controller that reads it from now on runs it; a controller stuck while handling it" in str(halted.value)
    assert zk.exists(E.ZNODE) is None
    theirs = E.znode_payload(["payments-0"])
    zk.create(E.ZNODE, theirs)
    assert remove_our_znode(zk, ["orders-0"]) is False and zk.get(E.ZNODE)[0] == theirs
    with pytest.raises(Halted, match="already exists"):
        _elect_znode(zk, ["orders-0"], timeout_s=1.0)
    assert zk.get(E.ZNODE)[0] == theirs
