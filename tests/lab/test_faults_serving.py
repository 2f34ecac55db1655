"""Faults that stop a real Kafka 2.3 broker from serving while it stays registered: hang, isolate, deadlock;
and a request with an API key the broker does not know. Each test shows Kafka's own reaction."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import KafkaException, Producer

from kafka_lab import broker_ip, wait_until
from kafka_lab.hosts import client_bootstrap
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


SHRINK = re.compile(r"\[Partition (?P<name>\S+) broker=(?P<b>\d+)\] Shrinking ISR from (?P<before>[\d,]+) to (?P<after>[\d,]+)\. "
                    r"Leader: \(highWatermark: (?P<hw>\d+), endOffset: (?P<leo>\d+)\)\. Out of sync replicas: (?P<out>.*?)\. "
                    r"\(kafka\.cluster\.Partition\)")
OUT_OF_SYNC = re.compile(r"\(brokerId: (\d+), endOffset: (\d+)\)")


def log_end_offset(partition_dir) -> int:
    """A replica's log end offset read from its files on disk: the last record batch's base offset + lastOffsetDelta + 1
    in the active (newest) segment, else that segment's base offset (Kafka's record batch v2 header: baseOffset int64,
    batchLength int32, partitionLeaderEpoch int32, magic int8, crc int32, attributes int16, lastOffsetDelta int32)."""
    import struct

    segment = max(partition_dir.glob("*.log"), key=lambda f: int(f.stem))
    data, pos, leo = segment.read_bytes(), 0, int(segment.stem)
    while pos + 27 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break  # a batch still being written (none here: nothing appends to a frozen log)
        leo = base + struct.unpack_from(">i", data, pos + 23)[0] + 1
        pos += 12 + length
    return leo


def shrinks_logged(text: str, b: int) -> dict[tuple[str, int], list[dict]]:
    """Broker b's "Shrinking ISR" lines (Kafka 2.3's Partition.maybeShrinkIsr) per partition, in order."""
    out: dict[tuple[str, int], list[dict]] = {}
    for m in SHRINK.finditer(text):
        if int(m["b"]) != b:
            continue
        topic, _, index = m["name"].rpartition("-")
        out.setdefault((topic, int(index)), []).append({
            "before": [int(x) for x in m["before"].split(",")], "after": [int(x) for x in m["after"].split(",")],
            "leo": int(m["leo"]), "out": {int(r): int(o) for r, o in OUT_OF_SYNC.findall(m["out"])}})
    return out


def test_hang_stays_registered_leader_shrinks_isr_only_where_its_followers_are_behind(healthy_lab, monkeypatch):
    """``hang`` holds broker b's request queue: it stays registered and alive, serves nothing, and its peers' fetches
    from it time out. What Kafka 2.3 does to the ISRs b leads (``Partition.getOutOfSyncReplicas``, run every
    replica.lag.time.max.ms / 2 by b's own scheduler): a follower leaves the ISR when its log end offset as b last saw
    it differs from b's log end offset and it was last caught up more than replica.lag.time.max.ms ago (5 s here).
    So a partition b appended to just before it hung, records its followers had not fetched, shrinks to [b] (the orders
    partitions b leads: a record is written to each while b's followers are paused for that moment; with the load
    alone, whether a partition races the hang is chance), and so does one b appends to by itself after the hang (the
    __consumer_offsets partition of the load's group b coordinates: it expires the member it no longer hears from); a
    partition with nothing appended since its followers caught up (the canary: nothing produces to it) keeps its full
    ISR for as long as b hangs. Every partition b leads is judged by what its replicas hold on disk and by b's own
    "Shrinking ISR" line. Then the product: the plan to restart b names every partition whose ISR is [b] OFFLINE for
    the whole restart (unclean election off), and the approval shows them."""
    from kafka_lab.load import offsets_partition
    from kafka_lab.topics import OFFSETS

    lab, b = healthy_lab, 3
    before, reg, pid = lab.partitions(), lab.registration(b), lab.broker_pid(b)
    cursors = {p: LogCursor(lab.server_log(p)) for p in peers_of(b)}
    own = LogCursor(lab.server_log(b))
    led = sorted(k for k, s in before.items() if s["leader"] == b)
    coordinated = (OFFSETS, offsets_partition(lab.groups[b]))  # the load's group whose coordinator is b
    assert coordinated in led and before[coordinated]["isr"] != [b]
    orders = [k for k in led if k[0] == ORDERS]
    disk = lambda r, k: log_end_offset(lab.host_dir(r) / "data" / f"{k[0]}-{k[1]}")  # noqa: E731
    # b appends just before it hangs what its followers have not fetched, every time (the load alone races the hang):
    # with its followers paused (SIGSTOP) a record goes to each orders partition b leads, acks=1 (b's append only)
    producer = Producer({"bootstrap.servers": client_bootstrap(b), "client.id": "kafka-lab-test-hang", "acks": 1,
                         "retries": 0, "message.timeout.ms": 8000})
    assert producer.list_topics(ORDERS, timeout=10).topics[ORDERS].partitions  # connected to b before the pause
    delivered = []
    for p in peers_of(b):
        lab.pause(p)
    try:
        for t, i in orders:
            producer.produce(t, value=b"appended just before the hang", partition=i, on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(10) == 0 and delivered == [None] * len(orders), delivered
        assert all(disk(b, k) > max(disk(p, k) for p in peers_of(b)) for k in orders)
        lab.hang(b)
    finally:
        for p in peers_of(b):
            lab.resume(p)
    assert lab.agent_state(b)["active"] == ["requests-held"]
    assert_not_serving(b)
    assert list_topics_at(peers_of(b)[0], timeout=10).brokers  # the peers serve
    wait_peers_fetch_errors(cursors, b)
    # still registered with the same session, process alive and running
    assert lab.registration(b)[1].czxid == reg[1].czxid
    assert alive(pid) and proc_state(pid) in ("S", "R")
    # b's coordinator expires the group's member (session.timeout.ms 10 s) and appends the empty group: that
    # partition's followers cannot fetch it, and it shrinks to [b]
    lab.wait_partitions(lambda ps: ps[coordinated]["isr"] == [b], 90, f"{coordinated} to shrink to [{b}]")
    # every log b leads is frozen now (no request is handled; the group is empty): what each replica holds on disk
    leo = {k: {r: disk(r, k) for r in before[k]["replicas"]} for k in led}
    behind = {k: [r for r in before[k]["isr"] if r != b and leo[k][r] < leo[k][b]] for k in led}
    # a follower that lacks what b holds is out of b's view of caught up: out of the ISR within 5 s + 2.5 s
    lab.wait_partitions(lambda ps: all(not set(behind[k]) & set(ps[k]["isr"]) for k in led), 60,
                        f"followers behind broker {b}'s log end to leave its ISRs: {behind}")
    after, shrinks = lab.partitions(), shrinks_logged(own.new(), b)
    for k in led:
        assert after[k]["leader"] == b and b in after[k]["isr"], (k, after[k])
        if after[k]["isr"] == before[k]["isr"]:
            # nothing appended since its followers caught up: every one holds b's log end
            assert k not in shrinks and all(o == leo[k][b] for o in leo[k].values()), (k, leo[k])
            continue
        # Kafka's own line says why: each follower it removed was at another log end offset than b (lower: b's view of
        # it trails what it holds); b's log end then is the one on disk now where only requests append (a coordinator
        # goes on appending to its __consumer_offsets partition by itself)
        said = shrinks[k]
        assert sorted(said[0]["before"]) == sorted(before[k]["isr"]) and sorted(said[-1]["after"]) == sorted(after[k]["isr"]), \
            (k, said, after[k])
        removed = {r: o for s in said for r, o in s["out"].items()}
        assert set(removed) == set(before[k]["isr"]) - set(after[k]["isr"]), (k, said)
        assert all(s["leo"] == leo[k][b] if k[0] != OFFSETS else s["leo"] <= leo[k][b] for s in said), (k, said, leo[k])
        assert all(o < s["leo"] and o <= leo[k][r] for s in said for r, o in s["out"].items()), (k, said, leo[k])
    canary = [k for k in led if k[0] == CANARY]
    assert canary and all(after[k]["isr"] == before[k]["isr"] for k in canary), after  # nothing produces to the canary
    assert after[coordinated]["isr"] == [b] and all(after[k]["isr"] == [b] for k in orders), after
    offline = sorted(k for k in led if after[k]["isr"] == [b])
    print(f"hang {b}: ISR [{b}]: {offline}; kept: {sorted(k for k in led if after[k]['isr'] == before[k]['isr'])}; "
          f"log ends: { {f'{t}-{p}': v for (t, p), v in leo.items() if t != OFFSETS or (t, p) == coordinated} }")
    # the plan to restart b (b proven not serving) names each of them OFFLINE for the whole restart
    plan = plan_for_stuck(lab, b, monkeypatch)
    assert not plan.refused, plan.refusals
    from kafka_runbooks.remediate.blast import offline_names

    named = sorted(offline_names(plan.steps[0].blast_radius))
    assert named == sorted(f"{t}-{p}" for t, p in offline), (named, offline)
    said = [x for x in plan.steps[0].blast_radius if x.partition(": ")[0] in named]
    assert all("OFFLINE for the whole restart: broker 3 is its only live in-sync replica" in x and
               "(unclean.leader.election.enable=false, broker config: no other replica may lead it)" in x for x in said), said
    from kafka_runbooks.remediate.briefing import approval_body

    body = approval_body([], plan, report_path=None, approval_timeout="1h")
    shown = next(x for x in body.splitlines() if "**OFFLINE for the whole restart**" in x)
    assert all(f"`{n}`" in shown for n in named), shown
    assert any(w.startswith(f"broker {b}'s restart takes {len(offline)} partition(s) OFFLINE") for w in plan.warnings), plan.warnings
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


def plan_for_stuck(lab, b: int, monkeypatch):
    """The product's restart plan of broker b as the incident response makes it: the snapshot, the static configs read
    over SSH, the version the brokers report, the direct check of b failing now together with a stalled-request
    finding (the analysis's, written here: the waiver's second half)."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.remediate.host import static_config_state
    from kafka_runbooks.remediate.plan import plan_restart, safety_settings
    from kafka_runbooks.remediate.safety import not_serving_evidence

    for k, v in lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    config = ClusterConfig.from_dict("lab", lab.cluster_settings()["lab"])
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        snapshot = read_snapshot(zk, config.name)
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    kv = hook.kafka_version(snapshot.brokers, 5.0, config.kafka_version)
    check = hook.check_broker(snapshot.broker(b), 3.0)
    assert not check.ok
    stalled = Finding(kind="request_handling_stalled", severity=Severity.CRITICAL, summary=f"broker {b}'s requests are held",
                      broker_ids=(b,))
    static, unread = static_config_state(config)
    assert not unread, unread
    return plan_restart(snapshot, [b], config, kind="incident_restart", not_serving=not_serving_evidence([check], [stalled]),
                        settings=safety_settings(config, static, unread, kv))


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
