from kafka_runbooks.analyze.lockgraph import (
    blocked_behind, build_wait_for_graph, chain_into, compare_dumps, find_cycles,
)
from kafka_runbooks.analyze.parsers.jstack import parse_jstack, strip_deadlock_section

from analyze_helpers import fixture_bytes, fixture_text

SEED = "seed001_219_jstack_deadlock.txt"
SEED_THREADS = {"executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"}


def test_seed_excerpt_threads_and_lines():
    d = parse_jstack(fixture_bytes(SEED))
    assert d.ok, d.unparsable
    assert d.unrecognized.count == 0
    assert not d.threads and {t.name for t in d.deadlock_stacks} == SEED_THREADS
    assert d.reported_deadlock_count == 1
    assert [e.thread for e in d.deadlocks[0]] == ["executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"]
    assert d.deadlocks[0][0].cls == "kafka.coordinator.GroupMetadata" and d.deadlocks[0][0].held_by == "group-metadata-manager-0"
    hb = d.thread("executor-Heartbeat")
    lines = fixture_text(SEED).splitlines()
    assert lines[hb.line - 1] == '"executor-Heartbeat":'
    assert hb.state == "BLOCKED"
    assert hb.frames[0].text == "kafka.coordinator.GroupCoordinator.onExpireHeartbeat(GroupCoordinator.scala:739)"
    assert "waiting to lock <0x000000070dbce4c8>" in lines[hb.waiting_to_lock.line - 1]
    gmm = d.thread("group-metadata-manager-0")
    assert [l.address for l in gmm.locked] == ["0x000000070dbce4c8"]
    krh = d.thread("kafka-request-handler-3")
    assert {l.cls for l in krh.locked} == {"kafka.server.DelayedProduce", "java.util.LinkedList"}


def _check_seed_graph(text):
    d = parse_jstack(text)
    g = build_wait_for_graph(d)
    cycles = find_cycles(g)
    assert len(cycles) == 1
    c = cycles[0]
    assert set(c.threads) == {"group-metadata-manager-0", "kafka-request-handler-3"}
    assert {e.cls for e in c.edges} == {"kafka.coordinator.GroupMetadata", "java.util.LinkedList"}
    assert [e.waiter for e in blocked_behind(g, c)] == ["executor-Heartbeat"]
    chain = chain_into(g, c)
    assert [e.waiter for e in chain] == ["executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"]
    assert all(e.source == "stacks" for e in g.edges)
    return d


def test_seed_cycle_found_from_stacks():
    _check_seed_graph(fixture_text(SEED))


def test_seed_cycle_found_without_deadlock_summary():
    # Remove jstack's own "waiting to lock monitor ... which is held by" summary but keep the stacks.
    text = fixture_text(SEED)
    head, _, stacks = text.partition("Java stack information for the threads listed above:")
    stripped = "\n" * head.count("\n") + "Java stack information for the threads listed above:" + stacks
    d = _check_seed_graph(stripped)
    assert not d.deadlocks  # jstack summary gone: edges come from the stacks alone


def test_jdk17_full_dump_monitor_and_reentrantlock_cycles():
    text = fixture_text("jdk17_live_sample.jstack.txt")
    for variant in (text, strip_deadlock_section(text)):
        d = parse_jstack(variant)
        assert d.ok, d.unparsable
        assert d.full_dump and d.complete and d.unrecognized.count == 0
        cycles = find_cycles(build_wait_for_graph(d))
        keys = {frozenset(c.threads) for c in cycles}  # c.key() is the threads' nids (identity, not names)
        assert frozenset(["executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"]) in keys
        assert frozenset(["replica-fetcher-lock-A", "log-cleaner-lock-B"]) in keys
        assert all(all(k.startswith("nid=") for k in c.key()) for c in cycles)
        sync = next(c for c in cycles if "log-cleaner-lock-B" in c.threads)
        assert {e.kind for e in sync.edges} == {"synchronizer"}
        assert {e.cls for e in sync.edges} == {"java.util.concurrent.locks.ReentrantLock$NonfairSync"}
    d = parse_jstack(text)
    hb = d.thread("executor-Heartbeat")
    assert hb.tid == "0x00007f6758118f70" and hb.nid == "0x12ad" and hb.daemon
    assert hb.header_state == "waiting for monitor entry"
    assert d.thread("log-cleaner-lock-B").ownable_synchronizers[0].address == "0x000000069ec2cce0"


JDK8 = '''2020-04-22 10:50:00
Full thread dump Java HotSpot(TM) 64-Bit Server VM (25.162-b12 mixed mode):

"kafka-request-handler-1" #40 daemon prio=5 os_prio=0 tid=0x00007f97c4a1b000 nid=0x13d5 waiting on condition [0x00007f9740bfa000]
   java.lang.Thread.State: WAITING (parking)
\tat sun.misc.Unsafe.park(Native Method)
\t- parking to wait for  <0x00000000c0a1b2c8> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)
\tat java.util.concurrent.locks.LockSupport.park(LockSupport.java:175)
\tat kafka.utils.CoreUtils$.inLock(CoreUtils.scala:232)

   Locked ownable synchronizers:
\t- <0x00000000c0a1b300> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)

"ReplicaFetcherThread-0-2" #41 prio=5 os_prio=0 tid=0x00007f97c4a1c000 nid=0x13d6 waiting on condition [0x00007f9740afa000]
   java.lang.Thread.State: WAITING (parking)
\tat sun.misc.Unsafe.park(Native Method)
\t- parking to wait for  <0x00000000c0a1b300> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)
\tat kafka.server.AbstractFetcherThread.doWork(AbstractFetcherThread.scala:100)

   Locked ownable synchronizers:
\t- <0x00000000c0a1b2c8> (a java.util.concurrent.locks.ReentrantLock$NonfairSync)

"waiter" #42 prio=5 os_prio=0 tid=0x00007f97c4a1d000 nid=0x13d7 in Object.wait() [0x00007f97409fa000]
   java.lang.Thread.State: WAITING (on object monitor)
\tat java.lang.Object.wait(Native Method)
\t- waiting on <0x00000000c0000001> (a java.lang.Object)
\tat java.lang.Object.wait(Object.java:502)
\t- locked <0x00000000c0000001> (a java.lang.Object)

   Locked ownable synchronizers:
\t- None

"other" #43 prio=5 os_prio=0 tid=0x00007f97c4a1e000 nid=0x13d8 waiting for monitor entry [0x00007f97408fa000]
   java.lang.Thread.State: BLOCKED (on object monitor)
\tat Foo.bar(Foo.java:1)
\t- waiting to lock <0x00000000c0000001> (a java.lang.Object)

   Locked ownable synchronizers:
\t- None

"VM Thread" os_prio=0 tid=0x00007f97c40d3800 nid=0x13a1 runnable

JNI global references: 310
'''


def test_jdk8_full_dump_reentrantlock_and_object_wait():
    d = parse_jstack(JDK8)
    assert d.ok, d.unparsable
    assert d.jvm.startswith("Java HotSpot") and d.timestamp == "2020-04-22 10:50:00"
    g = build_wait_for_graph(d)
    cycles = find_cycles(g)
    assert [frozenset(c.threads) for c in cycles] == [frozenset({"kafka-request-handler-1", "ReplicaFetcherThread-0-2"})]
    # Object.wait() releases the monitor: "other" is not blocked by "waiter"
    assert ("other", "0x00000000c0000001", "java.lang.Object") in g.unresolved
    assert d.thread("VM Thread").state is None


def test_progress_stuck_vs_progressing():
    text = fixture_text("jdk17_live_sample.jstack.txt")
    d1, d2 = parse_jstack(text), parse_jstack(text)
    threads = ("executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3")
    assert compare_dumps([d1, d2], threads).status == "stuck"
    moved = text.replace("KafkaDeadlock.lambda$monitorCycle$0(KafkaDeadlock.java:15)\n\t- waiting to lock <0x000000069ec1af90>",
                         "KafkaDeadlock.somewhereElse(KafkaDeadlock.java:99)\n\t- waiting to lock <0x000000069ec1af90>")
    assert moved != text
    p = compare_dumps([d1, parse_jstack(moved)], threads)
    assert p.status == "progressing" and "executor-Heartbeat" in p.reasons[0]
    assert compare_dumps([d1], threads).status == "stuck"  # single dump: noted, not measured
