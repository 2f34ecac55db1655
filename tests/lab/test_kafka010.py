"""The lab on Kafka 0.10.2.1 (the seed incidents' era): the same cluster, its own profile, and every fault, each test
showing what a real 0.10.2.1 broker does -- where it differs from 2.3 (tests/lab/test_faults_*.py), lab/README.md
says so. These run after every 2.3.0 test (one lab per slot: tests/conftest.py switches once)."""

from __future__ import annotations

import json
import re
import time

import pytest
from confluent_kafka import KafkaException

from kafka_lab import broker_ip, wait_until
from kafka_lab.procs import alive, proc_state
from kafka_lab.topics import CANARY, ORDERS, list_topics_at
from kafka_runbooks.detect import replicas as R
from kafka_runbooks.detect.broker_log import lines_of_interest

from .lab_helpers import LogCursor, jstack, led_by, listening, sockets, thread_blocks

pytestmark = pytest.mark.lab

# 0.10's fetcher wording (the seed post-mortems 000 and 001 quote it)
FETCH_ERROR = (r"WARN \[ReplicaFetcherThread-0-{b}\], Error in fetch kafka\.server\.ReplicaFetcherThread\$FetchRequest@[0-9a-f]+ "
               r"\(kafka\.server\.ReplicaFetcherThread\)\n"
               r"java\.io\.IOException: Connection to {b} was disconnected before the response was read\n")


def peers_of(b: int) -> list[int]:
    return [p for p in (1, 2, 3) if p != b]


def assert_not_serving(b: int) -> None:
    with pytest.raises(KafkaException):
        list_topics_at(b, timeout=3)


def test_010_lab_runs_real_0_10_2_1_brokers_with_their_own_profile(lab010):
    lab = lab010
    assert lab.kafka == "0.10.2.1" and lab.cluster_settings()["lab"]["kafka_version"] == "0.10.2.1"
    for b in (1, 2, 3):
        props = (lab.host_dir(b) / "config" / "server.properties").read_text()
        # 0.11+ names are left out; unclean leader election is off explicitly (0.10's default is on: profile.py)
        for key in ("group.initial.rebalance.delay.ms", "transaction.state.log"):
            assert key not in props
        assert "unclean.leader.election.enable=false" in props
        out = lab.log_text(b, "kafkaServer.out")
        # 0.10's log4j.properties sends org.apache.kafka.* (AppInfoParser) to stdout only: the version line is not in server.log
        assert "INFO Kafka version : 0.10.2.1 (org.apache.kafka.common.utils.AppInfoParser)" in out
        assert "Kafka version" not in lab.log_text(b)
        log = lab.log_text(b)
        assert f"INFO [Kafka Server {b}], started (kafka.server.KafkaServer)" in log
        assert re.search(rf"INFO Registered broker {b} at path /brokers/ids/{b} with addresses: "
                         rf"EndPoint\({re.escape(broker_ip(b))},9092,ListenerName\(CLIENT\),PLAINTEXT\),"
                         rf"EndPoint\(kafka-lab-s\d+-b{b},9093,ListenerName\(REPLICATION\),PLAINTEXT\) \(kafka\.utils\.ZkUtils\)", log)
        assert re.search(r"INFO \[Group Metadata Manager on Broker \d\]: Removed 0 expired offsets in \d+ milliseconds\. "
                         r"\(kafka\.coordinator\.GroupMetadataManager\)", log)
        reg, _ = lab.registration(b)
        assert reg["version"] == 4 and reg["jmx_port"] == 9999  # the same schema as 2.3's: a floor, not a version
    # the offsets partitions a broker leads were loaded, in 0.10's wording
    log = lab.log_text(1)
    m = re.search(r"INFO \[Group Metadata Manager on Broker 1\]: Loading offsets and group metadata from __consumer_offsets-(\d+) "
                  r"\(kafka\.coordinator\.GroupMetadataManager\)", log)
    assert m and re.search(rf"INFO \[Group Metadata Manager on Broker 1\]: Finished loading offsets from __consumer_offsets-{m.group(1)} "
                           r"in \d+ milliseconds\. \(kafka\.coordinator\.GroupMetadataManager\)", log)
    # the load runs cleanly on the running lab: no produce error in a window after it is up (a write that timed out
    # while three JVMs started on a starved CPU, before this test, is the lab's start, not the 0.10 brokers' service)
    before = lab.wait_load(120)
    time.sleep(10)
    after = lab.wait_load(60)
    assert after["produced_ok"] > before["produced_ok"] and after["produce_errors"] == before["produce_errors"], (before, after)


def test_010_hang_stays_registered_not_serving_peers_log_the_seed_wording(healthy_lab010):
    lab, b = healthy_lab010, 3
    before, reg, pid = lab.partitions(), lab.registration(b), lab.broker_pid(b)
    cursors = {p: LogCursor(lab.server_log(p)) for p in peers_of(b)}
    lab.hang(b)
    assert lab.agent_state(b)["active"] == ["requests-held"]
    assert_not_serving(b)
    for cur in cursors.values():
        cur.wait_for(FETCH_ERROR.format(b=b), 90)
    assert lab.registration(b)[1].czxid == reg[1].czxid and alive(pid) and proc_state(pid) in ("S", "R")
    # unlike 2.3, 0.10 shrinks the ISR of every partition the stuck broker leads to the broker alone, idle ones too:
    # its followers' fetches are never answered, so their last caught-up time stops (replica.lag.time.max.ms later
    # its isr-expiration thread, which does not need the request queue, writes the shrink). Seed 001: "Isr: 219".
    led = [k for k, s in before.items() if s["leader"] == b]
    lab.wait_partitions(lambda ps: all(ps[k]["isr"] == [b] and ps[k]["leader"] == b for k in led), 60,
                        f"the ISR of every partition broker {b} leads to shrink to [{b}]")
    after = lab.partitions()
    for k, s in before.items():
        if s["leader"] != b:
            assert after[k]["leader"] == s["leader"] and b in after[k]["isr"], (k, after[k])  # its own fetchers still fetch
    wait_until(lambda: any(r.state == "CLOSE_WAIT" for port in (9092, 9093) for r in sockets(broker_ip(b), port)), 60,
               "CLOSE_WAIT on the stuck broker's ports")
    lab.unhang(b)
    assert list_topics_at(b, timeout=10).brokers
    lab.wait_full_isr(90)


def test_010_isolate_stops_serving_and_writing_logs_while_registered(healthy_lab010):
    lab, b = healthy_lab010, 2
    reg = lab.registration(b)
    cursors = {p: LogCursor(lab.server_log(p)) for p in peers_of(b)}
    lab.isolate(b)
    logs = {name: lab.log_path(b, name) for name in ("server.log", "controller.log", "state-change.log", "kafkaServer.out")}
    frozen = {name: (p.stat().st_size, p.stat().st_mtime) for name, p in logs.items()}
    assert_not_serving(b)
    for cur in cursors.values():
        cur.wait_for(FETCH_ERROR.format(b=b), 90)
    assert {name: (p.stat().st_size, p.stat().st_mtime) for name, p in logs.items()} == frozen
    assert lab.registration(b)[1].czxid == reg[1].czxid
    holder = thread_blocks(jstack(lab, b))["lab-fault-block-logs"]
    assert "(a org.apache.log4j.DailyRollingFileAppender)" in holder and "(a org.apache.log4j.ConsoleAppender)" in holder
    lab.unisolate(b)
    assert list_topics_at(b, timeout=10).brokers


def test_010_deadlock_kafka_0_10_thread_names_wait_behind_the_cycle(healthy_lab010):
    lab, b = healthy_lab010, 1
    lab.deadlock(b)
    assert_not_serving(b)

    def all_blocked():
        dump = jstack(lab, b)
        m = re.search(r"Found one Java-level deadlock:\n=+\n(.*?)\nFound 1 deadlock\.", dump, re.S)
        assert m, dump[-2000:]
        lock = re.search(r'"lab-fault-deadlock-b":\n  waiting for ownable synchronizer (0x[0-9a-f]+), ', m.group(1))
        threads = thread_blocks(dump)
        parked = f"parking to wait for  <{lock.group(1)}> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)"
        # 0.10.2.1's names: kafka-request-handler-N, kafka-network-thread-<broker>-ListenerName(X)-PLAINTEXT-N (no data-plane-)
        handlers = [t for t in threads if re.fullmatch(r"kafka-request-handler-\d", t)]
        network = [t for t in threads if re.fullmatch(rf"kafka-network-thread-{b}-ListenerName\((CLIENT|REPLICATION)\)-PLAINTEXT-\d", t)]
        assert len(handlers) == 4 and len(network) == 4 and not any(t.startswith("data-plane") for t in threads)
        assert all(parked in threads[t] and "kafka.network.RequestChannel.receiveRequest" in threads[t] for t in handlers)
        return all(parked in threads[t] and "kafka.network.RequestChannel.sendRequest" in threads[t] for t in network)

    wait_until(all_blocked, 60, "every network thread blocked behind the deadlock", interval=1)


def test_010_bad_request_a_0_11_api_key_closes_only_that_connection(healthy_lab010):
    """Incident 002a on its own era: 0.10.2 knows API keys 0..20; a newer client's DescribeConfigs (32, Kafka 0.11)
    is refused with 0.10's wording, naming the connection; unlike 0.9's ArrayIndexOutOfBoundsException nothing else
    in the poll is dropped."""
    lab, b = healthy_lab010, 3
    cur = LogCursor(lab.server_log(b))
    r = lab.bad_request(b, api_key=32)
    assert r["closed_by_broker"] and r["response_bytes"] == 0
    conn = rf"{re.escape(broker_ip(b))}:9092-{re.escape(r['source'])}"  # 0.10's connection id has no "-N" index
    cur.wait_for(rf"^\[[^]]+\] ERROR Closing socket for {conn} because of error \(kafka\.network\.Processor\)\n"
                 r"org\.apache\.kafka\.common\.errors\.InvalidRequestException: Error getting request for apiKey: 32 and apiVersion: 0\n"
                 r"Caused by: java\.lang\.IllegalArgumentException: Unexpected ApiKeys id `32`, it should be between `0` and `20` \(inclusive\)\n"
                 r"\tat org\.apache\.kafka\.common\.protocol\.ApiKeys\.forId", 30)
    assert "Exception while processing request" not in cur.new()  # 2.3's second line does not exist in 0.10
    assert list_topics_at(b, timeout=10).brokers


def test_010_stop_of_a_hung_broker_fails_its_controlled_shutdown_then_waits_in_socket_server_shutdown(healthy_lab010):
    lab = healthy_lab010
    b = next(x for x in (2, 1, 3) if x != lab.controller()["brokerid"])
    pid = lab.broker_pid(b)
    led = sorted(k for k, s in lab.partitions().items() if s["leader"] == b)
    cur = LogCursor(lab.server_log(b))
    lab.hang(b)
    lab.wait_partitions(lambda ps: all(ps[k]["isr"] == [b] for k in led), 60, f"broker {b}'s partitions to shrink to [{b}]")
    p = lab.stop(b, timeout_s=5, check=False)
    assert p.returncode == 1 and f"broker {b} (pid {pid}) is still running 5s after SIGTERM" in p.stderr
    # the controller cannot move a leadership whose ISR is the stopping broker alone (state-change.log: "No other
    # replicas in ISR b for [t,p] besides shutting down brokers b"): 0.10 retries (controlled.shutdown.max.retries=3,
    # 5 s apart), then gives up -- where 2.3, whose ISRs did not shrink, said "Controlled shutdown succeeded"
    m = cur.wait_for(rf"INFO \[Kafka Server {b}\], Remaining partitions to move: (\S+) \(kafka\.server\.KafkaServer\)", 60)
    assert {tuple(x.rsplit("-", 1)) for x in m.group(1).split(",")} <= {(t, str(i)) for t, i in led}
    cur.wait_for(rf"WARN \[Kafka Server {b}\], Proceeding to do an unclean shutdown as all the controlled shutdown attempts "
                 r"failed \(kafka\.server\.KafkaServer\)", 90)

    def hook_waits_for_a_processor():
        # 0.10's shutdown hook is an unnamed thread (class kafka.Kafka$$anon$1): it waits for a processor parked on the lock
        threads = thread_blocks(jstack(lab, b))
        hook = next((t for t, block in threads.items() if "at kafka.network.SocketServer.shutdown" in block), None)
        return hook and re.fullmatch(r"Thread-\d+", hook) and "at kafka.network.AbstractServerThread.shutdown" in threads[hook]
    wait_until(hook_waits_for_a_processor, 30, "the shutdown hook to wait in SocketServer.shutdown", interval=1)
    assert f"[Kafka Server {b}], shut down completed" not in cur.new() and alive(pid)
    assert lab.registration(b) is not None and led_by(lab.partitions(), b)  # still registered, still the leader
    done = lab.reset()
    assert f"broker {b} finished a pending shutdown" in done and f"started broker {b}" in done


def test_010_kill_cleaner_logs_0_10s_wording_and_a_restart_cures_it(healthy_lab010):
    lab, b = healthy_lab010, 2
    cur = LogCursor(lab.log_path(b, "log-cleaner.log"))
    lab.kill_cleaner(b)
    assert "kafka-log-cleaner-thread-0" not in thread_blocks(jstack(lab, b))
    cur.wait_for(r"ERROR \[kafka-log-cleaner-thread-0\], Error due to  \(kafka\.log\.LogCleaner\)\njava\.lang\.ThreadDeath\n", 10)
    cur.wait_for(r"INFO \[kafka-log-cleaner-thread-0\], Stopped  \(kafka\.log\.LogCleaner\)", 10)
    lab.reset()
    assert "kafka-log-cleaner-thread-0" in thread_blocks(jstack(lab, b))


def test_010_pause_then_kill_and_immediate_start_refused_with_0_10s_message(healthy_lab010):
    lab = healthy_lab010
    b = 2
    reg = lab.registration(b)
    pid = lab.pause(b)
    lab.wait_unregistered(b, 60)
    assert proc_state(pid) == "T" and listening(broker_ip(b), 9092)
    lab.resume(b)
    new = wait_until(lambda: lab.registration(b), 60, f"broker {b} to register again")
    assert new[1].czxid != reg[1].czxid and lab.broker_pid(b) == pid
    lab.wait_full_isr(90)

    # a killed broker started at once, while its old session's registration lives on: on an idle machine the new JVM
    # reaches its registration within the 6 s session timeout; on a starved CPU it may not, and then registers
    # cleanly. The old registration's part is played by an ephemeral znode of a ZooKeeper session of this test's own
    # (the same data, held until the new JVM is refused), so the refusal is what is tested, not the race.
    b = 3
    old = lab.registration(b)
    cur = LogCursor(lab.server_log(b))
    lab.kill(b)
    lab.wait_unregistered(b, 60)
    holder = lab_kazoo_session()
    try:
        holder.create(f"/brokers/ids/{b}", json.dumps(old[0]).encode(), ephemeral=True)
        lab.start(b, wait=False)
        new_pid = lab.broker_pid(b)
        wait_until(lambda: not alive(new_pid), 180, "the new JVM to exit")
    finally:
        holder.stop()
        holder.close()
    # 0.10 has no owner/session comparison (2.3's KafkaZkClient$CheckedEphemeral): it refuses with this
    cur.wait_for(rf"FATAL \[Kafka Server {b}\], Fatal error during KafkaServer startup\. Prepare to shutdown \(kafka\.server\.KafkaServer\)\n"
                 rf"java\.lang\.RuntimeException: A broker is already registered on the path /brokers/ids/{b}\. ", 10)
    lab.wait_unregistered(b, 60)
    lab.start(b)
    assert lab.registration(b)[1].czxid != old[1].czxid
    lab.wait_full_isr(90)


def test_010_controlled_stop_and_zk_flap_in_0_10s_words(healthy_lab010):
    lab = healthy_lab010
    b = next(x for x in (1, 2, 3) if x != lab.controller()["brokerid"])
    cur = LogCursor(lab.server_log(b))
    p = lab.stop(b)
    assert p.returncode == 0
    text = cur.new()
    for line in (f"INFO [Kafka Server {b}], Starting controlled shutdown (kafka.server.KafkaServer)",
                 f"INFO [Kafka Server {b}], Controlled shutdown succeeded (kafka.server.KafkaServer)",
                 f"INFO [Kafka Server {b}], shut down completed (kafka.server.KafkaServer)"):
        assert line in text
    lab.start(b)
    lab.wait_full_isr(90)

    cur, out = LogCursor(lab.server_log(b)), LogCursor(lab.log_path(b, "kafkaServer.out"))
    sessions = lab.zk_flap(b, times=1)
    assert lab.registration(b)[1].czxid == sessions[-1]["czxid"]
    # the ZooKeeper client's lines go to kafkaServer.out only (0.10's log4j.properties); Kafka's own to server.log
    out.wait_for(r"INFO zookeeper state changed \(Expired\) \(org\.I0Itec\.zkclient\.ZkClient\)", 30)
    cur.wait_for(rf"INFO re-registering broker info in ZK for broker {b} \(kafka\.server\.KafkaHealthcheck\$SessionExpireListener\)", 30)
    cur.wait_for(rf"INFO Registered broker {b} at path /brokers/ids/{b} with addresses: ", 30)


def test_010_zk_stall_and_the_leadership_faults_work_on_0_10(healthy_lab010):
    """zk-stall (ZooKeeper only: the brokers stay registered), hold-fetchers and hold-controller-requests (drill 003):
    the agent finds 0.10's ReplicaFetcherThread and Controller-C-to-broker-N-send-thread by the same fields as 2.3's."""
    from kafka_lab.zookeeper import quorum_modes

    lab = healthy_lab010
    follower = next(z for z, m in quorum_modes().items() if m == "follower")
    fcur = LogCursor(lab.zk_log(follower))
    lab.zk_stall(follower)
    fcur.wait_for(r"FOLLOWING - LEADER ELECTION TOOK - \d+ MS", 30)
    assert set(lab.registered_brokers()) == {1, 2, 3}

    ctrl = lab.controller()["brokerid"]
    other = next(b for b in (1, 2, 3) if b != ctrl)
    state = lab.hold_fetchers(other)
    assert "holding the partitionMapLock of" in state["message"]
    lab.release_fetchers(other)
    held = lab.hold_controller_requests(other)
    assert held["controller"] == ctrl and f"Controller-{ctrl}-to-broker-{other}-send-thread" in held["message"]
    assert lab.release_controller_requests() == [ctrl]
    lab.wait_full_isr(90)
    assert json.loads(lab.kazoo().get("/controller")[0])["brokerid"] == ctrl


def test_010_fence_fetcher_removes_the_partition_and_the_follower_ignores_the_same_epoch(healthy_lab010):
    """fence-fetcher (drill 003's stuck follower): 0.10.2 has no onPartitionFenced (no FENCED_LEADER_EPOCH before 2.1),
    so the agent calls the fetcher's own removePartitions, as ReplicaFetcherManager does when a broker stops following
    a partition. The broker keeps its leader epoch and leaves the ISR of a partition with writes; after its session
    flaps, the controller's LeaderAndIsr of that epoch is ignored in 0.10's words (WARN, not 2.3's DEBUG "matches")
    and it stays out, its log end not moving; reset() restarts it (needs_restart)."""
    lab = healthy_lab010
    b = next(x for x in (1, 2, 3) if x != lab.controller()["brokerid"])
    topic, p = wait_until(lambda: [k for k in lab.followed_by(b) if k[0] == ORDERS], 60, f"broker {b} following an orders partition")[0]
    state = lab.fence_fetcher(b, topic, p)
    assert f".removePartitions({topic}-{p})" in state["message"] and state["needs_restart"] == "fetcher-fenced"
    wait_until(lambda: b not in lab.partitions()[(topic, p)]["isr"], 90, f"broker {b} out of the ISR of {topic}-{p}", interval=0.5)
    log_dir = lab.host_dir(b) / "data" / f"{topic}-{p}"
    size = sum(f.stat().st_size for f in log_dir.glob("*.log"))

    changes = LogCursor(lab.log_path(b, "state-change.log"))
    lab.zk_flap(b, times=1)
    m = changes.wait_for(rf"^.*WARN Broker {b} ignoring LeaderAndIsr request from controller \d+ with correlation id \d+ epoch \d+ "
                         rf"for partition \[{topic},{p}\] since its associated leader epoch (\d+) is not higher than the current "
                         rf"leader epoch \1 \(state\.change\.logger\)$", 60)
    # the product reads it as the stuck follower's evidence (the health check's state-change.log tail, detect/replicas.py)
    (seen,) = lines_of_interest(m.group(0) + "\n", source="state-change.log", only=("leader_and_isr_ignored",))
    assert seen.attrs["partition_name"] == f"{topic}-{p}" and R.fence_lines_of([seen], b, f"{topic}-{p}", None) == [seen]
    time.sleep(8)  # > replica.lag.time.max.ms: a follower that fetched would be back in the ISR by now
    assert b not in lab.partitions()[(topic, p)]["isr"]
    assert sum(f.stat().st_size for f in log_dir.glob("*.log")) == size  # nothing fetched: its log did not grow
    assert "fetcher-fenced" in " ".join(lab.reset())
    assert b in lab.partitions()[(topic, p)]["isr"]


def lab_kazoo_session():
    """A ZooKeeper session of the test's own in the lab's chroot (its ephemeral znodes go with it)."""
    from kazoo.client import KazooClient

    from kafka_lab.lab import CHROOT, zk_connect

    zk = KazooClient(hosts=zk_connect() + CHROOT, timeout=10.0)
    zk.start(timeout=15)
    return zk
