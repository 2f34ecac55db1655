"""Faults that stop a real Kafka 2.3 broker from serving while it stays registered: hang, isolate, deadlock;
and a request with an API key the broker does not know. Each test shows Kafka's own reaction."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaException

from kafka_lab import broker_ip, wait_until
from kafka_lab.procs import alive, proc_state
from kafka_lab.topics import CANARY, ORDERS, list_topics_at

from .lab_helpers import LogCursor, jstack, led_by, sockets, thread_blocks

pytestmark = pytest.mark.lab

FETCH_ERROR = (r"WARN \[ReplicaFetcher replicaId={peer}, leaderId={b}, fetcherId=0\] Error in response for fetch request "
               r"\(type=FetchRequest, replicaId={peer}, .*\) \(kafka\.server\.ReplicaFetcherThread\)\n"
               r"java\.io\.IOException: Connection to {b} was disconnected before the response was read\n")


def peers_of(b: int) -> list[int]:
    return [p for p in (1, 2, 3) if p != b]


def wait_peers_fetch_errors(cursors: dict, b: int, timeout: float = 90) -> None:
    for peer, cur in cursors.items():
        cur.wait_for(FETCH_ERROR.format(peer=peer, b=b), timeout)


def assert_not_serving(b: int) -> None:
    with pytest.raises(KafkaException):
        list_topics_at(b, timeout=3)


def test_hang_stays_registered_isr_unchanged_peers_log_disconnects(healthy_lab):
    lab, b = healthy_lab, 3
    before, reg, pid = lab.partitions(), lab.registration(b), lab.broker_pid(b)
    cursors = {p: LogCursor(lab.server_log(p)) for p in peers_of(b)}
    lab.hang(b)
    assert lab.agent_state(b)["active"] == ["requests-held"]
    assert_not_serving(b)
    assert list_topics_at(peers_of(b)[0], timeout=10).brokers  # the peers serve
    wait_peers_fetch_errors(cursors, b)
    # still registered with the same session, process alive and running
    assert lab.registration(b)[1].czxid == reg[1].czxid
    assert alive(pid) and proc_state(pid) in ("S", "R")
    # no ISR shrinks: the stuck leader's log end cannot move (produce requests are never handled) and its own
    # fetchers keep it in its peers' ISRs. The one exception Kafka makes: an offsets partition the stuck broker
    # leads and appends to by itself (its group coordinator expires the members) shrinks to [b].
    after = lab.partitions()
    for k, s in before.items():
        if k[0] in (ORDERS, CANARY):
            assert after[k]["isr"] == s["isr"] and after[k]["leader"] == s["leader"], k
        elif sorted(after[k]["isr"]) != sorted(s["isr"]):
            assert s["leader"] == b and after[k]["isr"] == [b], (k, s, after[k])
    # unread requests pile up: Recv-Q on its sockets, CLOSE_WAIT from clients that gave up
    wait_until(lambda: any(r.recv_q > 0 for port in (9092, 9093) for r in sockets(broker_ip(b), port)), 30, "Recv-Q > 0")
    wait_until(lambda: any(r.state == "CLOSE_WAIT" for port in (9092, 9093) for r in sockets(broker_ip(b), port)), 60,
               "CLOSE_WAIT on the stuck broker's ports")
    lab.unhang(b)
    assert list_topics_at(b, timeout=10).brokers
    wait_until(lambda: not any(r.state == "CLOSE_WAIT" for port in (9092, 9093) for r in sockets(broker_ip(b), port)), 60,
               "CLOSE_WAIT to drain after unhang")
    lab.wait_full_isr(90)
    assert lab.registration(b)[1].czxid == reg[1].czxid


def test_isolate_stops_serving_and_writing_logs_while_registered(healthy_lab):
    lab, b = healthy_lab, 2
    reg, pid = lab.registration(b), lab.broker_pid(b)
    cursors = {p: LogCursor(lab.server_log(p)) for p in peers_of(b)}
    lab.isolate(b)
    assert lab.agent_state(b)["active"] == ["logs-blocked", "requests-held"]
    logs = {name: lab.log_path(b, name) for name in ("server.log", "controller.log", "state-change.log", "kafkaServer.out")}
    frozen = {name: (p.stat().st_size, p.stat().st_mtime) for name, p in logs.items()}
    assert_not_serving(b)
    wait_peers_fetch_errors(cursors, b)  # >= 10 s later, and the peers wrote plenty
    assert {name: (p.stat().st_size, p.stat().st_mtime) for name, p in logs.items()} == frozen
    assert lab.registration(b)[1].czxid == reg[1].czxid and alive(pid) and proc_state(pid) in ("S", "R")
    holder = thread_blocks(jstack(lab, b))["lab-fault-block-logs"]
    assert "(a org.apache.log4j.DailyRollingFileAppender)" in holder and "(a org.apache.log4j.ConsoleAppender)" in holder
    lab.unisolate(b)
    assert list_topics_at(b, timeout=10).brokers
    assert lab.registration(b)[1].czxid == reg[1].czxid


def test_deadlock_is_a_real_java_level_deadlock_kafka_threads_wait_behind(healthy_lab):
    lab, b = healthy_lab, 1
    reg = lab.registration(b)
    lab.deadlock(b)
    assert lab.agent_state(b)["needs_restart"] == "deadlock"
    assert_not_serving(b)

    def all_network_threads_blocked():
        dump = jstack(lab, b)
        m = re.search(r"Found one Java-level deadlock:\n=+\n(.*?)\nFound 1 deadlock\.", dump, re.S)
        assert m, dump[-2000:]
        cycle = m.group(1)
        lock = re.search(r'"lab-fault-deadlock-b":\n  waiting for ownable synchronizer (0x[0-9a-f]+), '
                         r'\(a java\.util\.concurrent\.locks\.ReentrantLock\$NonfairSync\),\n  which is held by "lab-fault-deadlock-a"',
                         cycle)
        assert lock and re.search(r'"lab-fault-deadlock-a":\n  waiting to lock monitor .*a LabFaultAgent\$LabFaultMonitor\),\n'
                                  r'  which is held by "lab-fault-deadlock-b"', cycle), cycle
        threads = thread_blocks(dump)
        parked = f"parking to wait for  <{lock.group(1)}> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)"
        handlers = [t for t in threads if "kafka-request-handler-" in t]
        network = [t for t in threads if "kafka-network-thread-" in t]
        assert len(handlers) == 4 and len(network) == 4
        assert all(parked in threads[t] and "kafka.network.RequestChannel.receiveRequest" in threads[t] for t in handlers)
        return all(parked in threads[t] and "kafka.network.RequestChannel.sendRequest" in threads[t] for t in network)

    # the processors block as soon as each one has a request to queue (the peers fetch every 500 ms)
    wait_until(all_network_threads_blocked, 60, "every network thread blocked behind the deadlock", interval=1)
    assert lab.registration(b)[1].czxid == reg[1].czxid


def test_bad_request_unknown_api_key_is_logged_and_the_socket_closed(healthy_lab):
    lab, b = healthy_lab, 3
    cur = LogCursor(lab.server_log(b))
    r = lab.bad_request(b, api_key=60)
    assert r["closed_by_broker"] and r["response_bytes"] == 0
    src = re.escape(r["source"])
    conn = rf"{re.escape(broker_ip(b))}:9092-{src}-\d+"
    cur.wait_for(rf"^\[[^]]+\] ERROR Closing socket for {conn} because of error \(kafka\.network\.Processor\)\n"
                 r"org\.apache\.kafka\.common\.errors\.InvalidRequestException: Unknown API key 60$", 30)
    cur.wait_for(rf"^\[[^]]+\] ERROR Exception while processing request from {conn} \(kafka\.network\.Processor\)\n"
                 r"org\.apache\.kafka\.common\.errors\.InvalidRequestException: Unknown API key 60$", 30)
    assert r["client_id"] not in cur.new()  # 2.3 rejects the header before reading the client id
    assert list_topics_at(b, timeout=10).brokers


def test_stop_of_a_hung_broker_times_out_without_killing_and_reset_recovers_it(healthy_lab):
    lab = healthy_lab
    b = next(x for x in (2, 1, 3) if x != lab.controller()["brokerid"])  # the controller moves its leaderships
    pid = lab.broker_pid(b)
    cur = LogCursor(lab.server_log(b))
    lab.hang(b)
    p = lab.stop(b, timeout_s=5, check=False)
    # the controlled shutdown succeeds (the controller moves its leaderships away), then Kafka's shutdown hook waits
    # for a network processor parked on the held lock: it never finishes, and kafka-stop says so instead of
    # escalating (SIGKILL is the product's decision)
    assert p.returncode == 1 and f"broker {b} (pid {pid}) is still running 5s after SIGTERM" in p.stderr
    assert alive(pid) and lab.registration(b) is not None
    text = cur.new()
    assert f"INFO [KafkaServer id={b}] Controlled shutdown succeeded (kafka.server.KafkaServer)" in text
    assert f"[KafkaServer id={b}] shut down completed" not in text
    hook = thread_blocks(jstack(lab, b))["kafka-shutdown-hook"]
    assert "at kafka.network.SocketServer.stopProcessingRequests" in hook and "at kafka.network.Processor.shutdown" in hook
    assert not led_by(lab.partitions(), b)
    done = lab.reset()
    assert f"broker {b} finished a pending shutdown" in done and f"started broker {b}" in done
    assert lab.broker_pid(b) != pid and lab.registration(b) is not None
