"""The practice cluster, end to end on loopback: real ZooKeeper, real sshd, broker stand-in JVMs.

No skips: a missing component (java, javac, zookeeper jars, sshd) fails the lab fixture.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import time

import paramiko
import pytest

from kafka_lab import BROKER_IDS, Lab, default_state_dir, host_address, host_user, wait_until

pytestmark = pytest.mark.lab

KAFKA_THREADS = ["kafka-request-handler-0", "kafka-network-thread-{b}-PLAINTEXT-0", "kafka-socket-acceptor-PLAINTEXT-9092",
                 "executor-Heartbeat", "group-metadata-manager-0", "kafka-scheduler-0", "ZkClient-EventThread-"]


@pytest.fixture(scope="module")
def lab():
    # not under pytest's tmp dir: that is mode 700 and the broker hosts' users must reach the state dir
    lab = Lab(default_state_dir().parent / "lab-test")
    t0 = time.monotonic()
    try:
        lab.up()
        lab.up_duration = time.monotonic() - t0
        yield lab
    finally:
        lab.down()
    assert lab.processes() == []


def ssh(lab: Lab, b: int, command: str, timeout: float = 60) -> tuple[int, str, str]:
    c = paramiko.SSHClient()
    c.load_host_keys(str(lab.known_hosts))
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    c.connect(host_address(b), port=2222, username=host_user(b), key_filename=str(lab.key_file),
              look_for_keys=False, allow_agent=False, timeout=10)
    try:
        _, out, err = c.exec_command(command, timeout=timeout)
        rc = out.channel.recv_exit_status()
        return rc, out.read().decode(), err.read().decode()
    finally:
        c.close()


def close_wait(addr: str) -> int:
    out = subprocess.run(["ss", "-Htn", "state", "close-wait", "src", f"{addr}:9092"], capture_output=True, text=True, check=True).stdout
    return len([l for l in out.splitlines() if l.strip()])


def led_by(parts: dict, b: int) -> dict:
    return {k: v for k, v in parts.items() if v["leader"] == b}


def test_up(lab):
    assert lab.up_duration < 30
    regs = lab.registered_brokers()
    assert sorted(regs) == [1, 2, 3]
    for b, r in regs.items():
        assert r["host"] == host_address(b) and r["port"] == 9092 and r["jmx_port"] == -1
        assert r["endpoints"] == [f"PLAINTEXT://{host_address(b)}:9092"]
        assert re.fullmatch(r"\d{13}", r["timestamp"])
    ctrl = lab.controller()
    assert ctrl["version"] == 1 and ctrl["brokerid"] in BROKER_IDS
    parts = lab.partitions()
    assert len([k for k in parts if k[0] == "__consumer_offsets"]) == 50
    assert len([k for k in parts if k[0] == "orders"]) == 6
    for s in parts.values():
        assert sorted(s["isr"]) == [1, 2, 3] and s["leader"] == s["replicas"][0] and s["leader_epoch"] == 0
    assert {len(led_by(parts, b)) for b in BROKER_IDS} <= {18, 19}
    cfg = lab.kazoo().get("/config/topics/orders")[0]
    assert b'"min.insync.replicas":"2"' in cfg
    for b in BROKER_IDS:
        assert wait_until(lambda b=b: __import__("kafka_lab").port_open(host_address(b), 9092), 5, "port")


def test_ssh_pinned_host_keys_and_jstack_as_host_user(lab):
    for b in BROKER_IDS:
        pid = lab.broker_pid(b)
        rc, out, err = ssh(lab, b, f"id -un; jstack {pid}")
        assert rc == 0, err
        assert out.splitlines()[0] == host_user(b)
        for t in KAFKA_THREADS:
            assert f'"{t.format(b=b)}' in out, t
        for other in BROKER_IDS:
            if other != b:
                assert f'"ReplicaFetcherThread-0-{other}"' in out
    # an unpinned host is refused
    c = paramiko.SSHClient()
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException):
        c.connect(host_address(1), port=2222, username=host_user(1), key_filename=str(lab.key_file),
                  look_for_keys=False, allow_agent=False, timeout=10)
    c.close()


def test_server_log_format(lab):
    log = lab.server_log(1).read_text()
    assert "INFO Kafka version : 0.10.1.0 (org.apache.kafka.common.utils.AppInfoParser)" in log
    assert re.search(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] INFO \[Kafka Server 1\], started \(kafka.server.KafkaServer\)$", log, re.M)
    assert re.search(r"INFO \[Group Metadata Manager on Broker 1\]: Finished loading offsets from \[__consumer_offsets,\d+\] in \d+ milliseconds\.", log)


def test_deadlock_reproduces_incident_001(lab):
    before = {b: lab.partitions() for b in [0]}[0]
    lab.deadlock(3)
    # partitions led by 3 end with ISR [3] (its isr-expiration task keeps running)
    parts = lab.wait_partitions(lambda ps: all(s["isr"] == [3] for s in led_by(ps, 3).values()), 30, "ISR [3] on partitions led by 3")
    assert led_by(parts, 3) and {k for k in led_by(parts, 3)} == {k for k in led_by(before, 3)}
    # it stays registered; nothing else moved
    assert 3 in lab.registered_brokers()
    for k, s in parts.items():
        assert s["leader"] == before[k]["leader"] and s["leader_epoch"] == before[k]["leader_epoch"]
    # peers log the seed's fetch errors
    for b in (1, 2):
        wait_until(lambda b=b: "java.io.IOException: Connection to 3 was disconnected before the response was read" in lab.server_log(b).read_text(),
                   15, f"fetch error in broker {b}'s log")
        log = lab.server_log(b).read_text()
        assert re.search(r"WARN \[ReplicaFetcherThread-0-3\], Error in fetch kafka\.server\.ReplicaFetcherThread\$FetchRequest@[0-9a-f]+ "
                         r"\(kafka\.server\.ReplicaFetcherThread\)\njava\.io\.IOException: Connection to 3 was disconnected before the response was read\n\tat ", log)
    # sockets pile up in CLOSE_WAIT on the stuck broker
    wait_until(lambda: close_wait("127.0.0.13") >= 20, 30, "CLOSE_WAIT on 127.0.0.13:9092")
    assert close_wait("127.0.0.11") <= 2 and close_wait("127.0.0.12") <= 2
    # the JVM: a real Java-level deadlock, visible to jstack run as the host user over SSH
    rc, out, err = ssh(lab, 3, f"jstack {lab.broker_pid(3)}")
    assert rc == 0, err
    m = re.search(r"Found one Java-level deadlock:.*?Found 1 deadlock\.", out, re.S)
    assert m, out[-3000:]
    dl = m.group(0)
    for t in ("executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"):
        assert f'"{t}":' in dl
    assert "a kafka.coordinator.GroupMetadata)" in dl and "a java.util.LinkedList)" in dl


def test_restart_over_ssh_recovers(lab):
    parts_before = lab.partitions()
    old_pid = lab.broker_pid(3)
    argv = [str(lab.script(3, "kafka-restart"))]
    rc, out, err = ssh(lab, 3, shlex.join(argv), timeout=120)
    assert rc == 0, out + err
    assert "SIGKILL" in out  # a deadlocked broker does not finish its shutdown
    new_pid = lab.broker_pid(3)
    assert new_pid != old_pid
    lab.wait_registered([3], 30)
    parts = lab.wait_full_isr(60)
    # partitions that 3 led with ISR [3] went offline (leader -1) and came back with 3: leader_epoch bumped twice.
    # Occasionally (about 1 run in 7) an ISR re-expands during the stand-in's SIGTERM shutdown phase before the
    # SIGKILL, and leadership then moves to that replica instead: one bump, another leader. Both are recoveries.
    for k, s in led_by(parts_before, 3).items():
        assert parts[k]["leader"] in s["replicas"] and parts[k]["leader_epoch"] >= s["leader_epoch"] + 1
    # partitions led by 1/2: 3 left the ISR, removed by the controller when its session expired (epoch + 1)
    # or, first, by the leader's lag check (epoch kept, as in Kafka); then the leader re-expanded the ISR
    for k, s in parts_before.items():
        if s["leader"] != 3:
            assert parts[k]["leader"] == s["leader"] and parts[k]["leader_epoch"] in (s["leader_epoch"], s["leader_epoch"] + 1)


def test_stop_moves_leadership(lab):
    before = lab.partitions()
    lab.stop(2)
    try:
        lab.wait_unregistered(2, 15)
        parts = lab.wait_partitions(lambda ps: all(s["leader"] != 2 and 2 not in s["isr"] for s in ps.values()), 20, "leadership away from 2")
        for k, s in led_by(before, 2).items():
            assert parts[k]["leader"] in (1, 3) and parts[k]["leader_epoch"] == s["leader_epoch"] + 1
        for k, s in before.items():
            if s["leader"] != 2:
                # as in Kafka, a leader may shrink 2 out (epoch kept) before the controller sees the session
                # expire; otherwise the controller removes it (epoch + 1)
                assert parts[k]["leader"] == s["leader"] and parts[k]["leader_epoch"] in (s["leader_epoch"], s["leader_epoch"] + 1)
    finally:
        lab.start(2)
        lab.wait_registered([2], 30)
        lab.wait_full_isr(30)


def test_controller_failover(lab):
    ctrl = lab.controller()["brokerid"]
    epoch = int(lab.kazoo().get("/controller_epoch")[0])
    lab.stop(ctrl)
    new = wait_until(lambda: (c := lab.controller()) and c["brokerid"] != ctrl and c, 20, "a new controller")
    assert new["brokerid"] in BROKER_IDS
    assert int(lab.kazoo().get("/controller_epoch")[0]) == epoch + 1
    lab.start(ctrl)
    lab.wait_full_isr(30)


def test_down_leaves_nothing(lab):
    # run last in this module: the fixture's finalizer also asserts it
    lab.down()
    assert lab.processes() == []
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(lab.state) not in out
