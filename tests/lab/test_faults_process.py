"""Faults on the broker process and its ZooKeeper session: pause, kill then start, controlled stop, session flaps,
and a dead log cleaner thread. Each test shows what Kafka 2.3 and ZooKeeper really do."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kafka_lab import broker_ip, wait_until
from kafka_lab.procs import alive, proc_state

from .lab_helpers import LogCursor, jstack, led_by, listening, thread_blocks

pytestmark = pytest.mark.lab


def test_pause_deregisters_after_session_timeout_process_and_port_stay(healthy_lab):
    lab, b = healthy_lab, 2
    reg = lab.registration(b)
    pid = lab.pause(b)
    lab.wait_unregistered(b, 60)
    assert proc_state(pid) == "T" and listening(broker_ip(b), 9092) and listening(broker_ip(b), 9093)
    # the controller saw the session expire and moved its leaderships
    lab.wait_partitions(lambda ps: not led_by(ps, b) and all(b not in s["isr"] for s in ps.values()), 60,
                        f"leadership and ISR membership away from {b}")
    assert proc_state(pid) == "T" and lab.broker_pid(b) == pid
    lab.resume(b)
    new = wait_until(lambda: lab.registration(b), 60, f"broker {b} to register again")
    assert new[1].czxid != reg[1].czxid and new[1].ephemeralOwner != reg[1].ephemeralOwner
    assert lab.broker_pid(b) == pid  # the same JVM, a new session


def test_kill_then_immediate_start_is_refused_by_kafka_then_start_after_expiry_works(healthy_lab):
    lab, b = healthy_lab, 3
    # The refusal needs the new JVM at its registration before ZooKeeper expires the old session (10 s). On a loaded
    # machine its start can take longer: it then registers in a new session, which is no refusal; try again (ci11, a
    # deployment and Chromium beside it: 3 attempts in a row were too slow; each costs ~30 s).
    for attempt in range(1, 6):
        old = lab.registration(b)
        cur = LogCursor(lab.server_log(b))
        old_pid = lab.broker_pid(b)
        assert "kafka-request-handler" in jstack(lab, b)  # the JVM now has an attach socket
        attach = Path(f"/tmp/.java_pid{old_pid}")
        assert attach.exists()
        lab.kill(b)
        assert not alive(old_pid)
        assert not attach.exists()  # kafka-kill removed it: a later JVM with this pid can still be attached
        lab.start(b, wait=False)  # at once, as a naive restart does; kafka-start returns without waiting
        new_pid = lab.broker_pid(b)
        assert new_pid != old_pid

        def outcome():
            if not alive(new_pid):
                return "exited"
            reg = lab.registration(b)
            return "registered" if reg is not None and reg[1].ephemeralOwner != old[1].ephemeralOwner else None

        if wait_until(outcome, 90, "the new JVM to exit or register") == "exited":
            break
        print(f"attempt {attempt}: the old session expired before the new JVM registered; it started normally")
        lab.wait_full_isr(90)
    else:
        raise AssertionError("5 times the old session expired before the new JVM reached its registration")
    m = cur.wait_for(rf"ERROR Error while creating ephemeral at /brokers/ids/{b}, node already exists and owner '(\d+)' "
                     r"does not match current session '(\d+)' \(kafka\.zk\.KafkaZkClient\$CheckedEphemeral\)", 10)
    assert int(m.group(1)) == old[1].ephemeralOwner and int(m.group(2)) != old[1].ephemeralOwner
    assert re.search(rf"ERROR \[KafkaServer id={b}\] Fatal error during KafkaServer startup. Prepare to shutdown", cur.new())
    assert "org.apache.zookeeper.KeeperException$NodeExistsException: KeeperErrorCode = NodeExists" in cur.new()
    # once the old session expired the registration goes, and a start now succeeds with a new session
    lab.wait_unregistered(b, 60)
    lab.start(b)
    new = lab.registration(b)
    assert new[1].czxid != old[1].czxid and new[1].ephemeralOwner != old[1].ephemeralOwner
    lab.wait_full_isr(90)


def test_stop_is_a_controlled_shutdown_that_moves_leadership_first(healthy_lab):
    lab, b = healthy_lab, next(x for x in (1, 2, 3) if x != healthy_lab.controller()["brokerid"])
    led = led_by(lab.partitions(), b)
    assert led
    cur = LogCursor(lab.server_log(b))
    p = lab.stop(b)
    assert p.returncode == 0 and f"broker {b} stopped" in p.stdout
    text = cur.new()
    assert f"INFO [KafkaServer id={b}] Starting controlled shutdown (kafka.server.KafkaServer)" in text
    assert f"INFO [KafkaServer id={b}] Controlled shutdown succeeded (kafka.server.KafkaServer)" in text
    assert f"INFO [KafkaServer id={b}] shut down completed (kafka.server.KafkaServer)" in text
    # ZooKeeper orders every write: each partition it led got its new leader before its registration was deleted
    kz = lab.kazoo()
    deleted_at = kz.get("/brokers/ids")[1].pzxid  # the last child change: the registration's deletion
    assert lab.registration(b) is None
    for (t, part) in led:
        data, st = kz.get(f"/brokers/topics/{t}/partitions/{part}/state")
        assert '"leader":%d' % b not in data.decode() and st.mzxid < deleted_at, (t, part, data)
    lab.start(b)
    lab.wait_full_isr(90)


def test_zk_flap_expires_the_session_n_times_and_kafka_registers_again_each_time(healthy_lab):
    lab, b, n = healthy_lab, 1, 2
    cur = LogCursor(lab.server_log(b))
    first = lab.registration(b)
    sessions = lab.zk_flap(b, times=n)
    czxids = [s["czxid"] for s in sessions]
    assert len(set(czxids)) == n and first[1].czxid not in czxids
    assert lab.registration(b)[1].czxid == czxids[-1]
    text = cur.new()
    assert text.count("INFO [ZooKeeperClient Kafka server] Session expired. (kafka.zookeeper.ZooKeeperClient)") == n
    assert text.count(f"INFO Creating /brokers/ids/{b} (is it secure? false) (kafka.zk.KafkaZkClient)") == n


def test_kill_cleaner_the_log_cleaner_thread_dies_and_logs_it(healthy_lab):
    lab, b = healthy_lab, 2
    cur = LogCursor(lab.log_path(b, "log-cleaner.log"))
    assert "kafka-log-cleaner-thread-0" in thread_blocks(jstack(lab, b))
    lab.kill_cleaner(b)
    assert "kafka-log-cleaner-thread-0" not in thread_blocks(jstack(lab, b))
    cur.wait_for(r"ERROR \[kafka-log-cleaner-thread-0\]: Error due to \(kafka\.log\.LogCleaner\)\njava\.lang\.ThreadDeath\n", 10)
    cur.wait_for(r"INFO \[kafka-log-cleaner-thread-0\]: Stopped \(kafka\.log\.LogCleaner\)", 10)
    assert lab.registration(b) is not None  # nothing else notices
    lab.reset()  # a restart is the only cure
    assert "kafka-log-cleaner-thread-0" in thread_blocks(jstack(lab, b))
