"""wait_for_recovery / poke against a REAL ZooKeeper: a broker stand-in registers (ephemeral) from
its own kazoo session, in another thread, and rejoins the ISR later."""

from __future__ import annotations

import json
import threading
import time

import pytest

from kafka_runbooks.remediate.recovery import RecoveryTimeout, poke, registration_id, wait_for_recovery


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


def test_waits_for_registration_and_isr_via_watches(zk, zookeeper):
    cluster_with_3_down(zk)
    broker3 = zookeeper.client(zk.chroot_path)  # the restarted broker's own session
    try:
        def come_back():
            time.sleep(0.4)
            broker3.create("/brokers/ids/3", reg(3), ephemeral=True)
            time.sleep(0.3)
            broker3.set("/brokers/topics/orders/partitions/0/state", state(1, [1, 2, 3]))
            time.sleep(0.3)
            broker3.set("/brokers/topics/orders/partitions/1/state", state(2, [2, 1, 3]))

        done0, waiting0 = poke(zk, "lab", 3)
        assert not done0 and waiting0[0].startswith("broker 3 to register")
        t, errors = in_thread(come_back)
        started = time.monotonic()
        # poll_s far above the test's duration: only the ZooKeeper watches can wake it in time
        assert wait_for_recovery(zk, "lab", 3, 10.0, expected_partitions=["orders-0", "orders-1"], poll_s=60.0) == []
        elapsed = time.monotonic() - started
        t.join(5)
        assert not errors
        assert 0.9 <= elapsed < 3.0, elapsed
        assert poke(zk, "lab", 3, ["orders-0", "orders-1"]) == (True, [])
    finally:
        broker3.stop()
        broker3.close()
    # the stand-in's session closed: its ephemeral registration is gone at once
    done, waiting = poke(zk, "lab", 3)
    assert not done and waiting == ["broker 3 to register in ZooKeeper (/brokers/ids/3)"]


def test_timeout_says_what_it_still_waits_for(zk):
    cluster_with_3_down(zk)
    started = time.monotonic()
    with pytest.raises(RecoveryTimeout) as info:
        wait_for_recovery(zk, "lab", 3, 1.0, expected_partitions=["orders-0", "orders-1", "gone-0"], poll_s=0.3)
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 2.5, elapsed
    w = info.value.waiting_for
    assert w[0] == "broker 3 to register in ZooKeeper (/brokers/ids/3)"
    assert any(x.startswith("orders-0: broker 3 to rejoin the ISR") for x in w)
    assert any(x.startswith("orders-1: broker 3 to rejoin the ISR") for x in w)
    assert "gone-0: partition state readable in ZooKeeper again" in w
    assert "broker 3 did not recover within 1s" in str(info.value)


def test_old_registration_is_not_mistaken_for_the_new_one(zk, zookeeper):
    cluster_with_3_down(zk)
    old_session = zookeeper.client(zk.chroot_path)
    new_session = zookeeper.client(zk.chroot_path)
    try:
        old_session.create("/brokers/ids/3", reg(3), ephemeral=True)
        for p, (leader, isr) in {"0": (1, [1, 2, 3]), "1": (2, [2, 1, 3])}.items():
            zk.set(f"/brokers/topics/orders/partitions/{p}/state", state(leader, isr))
        before = registration_id(zk, 3)
        assert before is not None
        # a SIGKILLed broker's registration lingers until its session expires
        done, waiting = poke(zk, "lab", 3, previous_registration=before)
        assert not done and waiting == ["broker 3 to re-register (the registration from before the restart is still there)"]

        def restart():
            time.sleep(0.3)
            old_session.stop()  # old session ends: ephemeral node deleted
            new_session.create("/brokers/ids/3", reg(3), ephemeral=True)

        t, errors = in_thread(restart)
        wait_for_recovery(zk, "lab", 3, 10.0, previous_registration=before, poll_s=60.0)
        t.join(5)
        assert not errors
        assert registration_id(zk, 3) not in (None, before)
    finally:
        for c in (old_session, new_session):
            c.stop()
            c.close()
