"""Issue 32, points 9-12: what the evidence says, said as it is. Fixtures under fixtures/written/ are written here
from Kafka's, ZooKeeper's and the JDK's source at the versions named in fixtures/README.md (the lab's Kafka 2.3.0 /
JDK 17 cannot produce them); jdk17_g1_concurrent_cycle.gc.log and the JSON thread dump are recorded here."""

import pytest

from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose
from kafka_runbooks.analyze.parsers import parse_gc_log, parse_log

from analyze_helpers import fixture_bytes, fixture_text


def _kinds(fs):
    return [f.kind for f in fs]


def _log(data, path="hosts/2/server.log", broker=2, kind="server_log"):
    return ParsedFile(path, kind, broker, result=parse_log(data if isinstance(data, bytes) else data.encode()))


def _gc(name, path="hosts/1/kafkaServer-gc.log", broker=1):
    return ParsedFile(path, "gc_log", broker, result=parse_gc_log(fixture_bytes(name)))


# ---------------------------------------------------------------- 9. one ZooKeeper timeout, two lines


def test_a_timeout_the_34_client_logs_as_warn_then_info_is_one_event():
    """ZooKeeper client 3.4.9 - 3.4.13 (Kafka 0.10 - 2.1): ClientCnxn logs the timeout as a WARN, then the same words
    plus ', closing socket connection and attempting reconnect' as an INFO. Two timeouts, both reconnected."""
    fs = diagnose([_log(fixture_bytes("written/zk349_client_timeout_warn_info.server.log"))])
    t = next(f for f in fs if f.kind == "zk_session_timeout")
    assert t.details["timeouts"] == 2 and t.details["reconnected"] == 2, t.summary
    assert "(2 time(s))" in t.summary and "2 time(s) it reconnected" in t.summary and "4 time(s)" not in t.summary
    assert t.details["longest_silence_ms"] == 4170 and "zk_session_expired" not in _kinds(fs)
    assert {2, 3, 10, 11} <= set(t.evidence[0].lines)  # both lines of each event are cited


def test_one_timeout_line_per_event_still_counts_each_event():
    """Kafka 2.3.0's client (3.4.14) logs one line per timeout: the real reconnect still counts once."""
    fs = diagnose([_log(fixture_bytes("real23/broker2.server.log.zk-reconnect"))])
    assert next(f for f in fs if f.kind == "zk_session_timeout").details["timeouts"] == 1


# ---------------------------------------------------------------- 10. only stop-the-world pauses are pauses


def test_g1_jdk8_concurrent_phases_and_worker_lines_are_not_pauses():
    """JDK 8 G1 with Kafka's -XX:+PrintGCDetails -XX:+PrintGCDateStamps -XX:+PrintGCTimeStamps: four young pauses
    (one initial-mark), the concurrent cycle (6.5 s of concurrent marking beside the application), remark and
    cleanup. Six pauses, each once (the '[GC Worker End (ms)' detail lines closed by [Times:] are not events)."""
    g = parse_gc_log(fixture_bytes("written/jdk8_g1_print_gc_details.gc.log"))
    assert [(p.line, p.kind) for p in g.pauses] == [(1, "young"), (28, "young"), (55, "young"), (86, "remark"),
                                                    (88, "cleanup"), (92, "young")]
    assert g.concurrent == 6 and max(p.seconds for p in g.pauses) < 0.1 and g.ok


def test_cms_concurrent_phases_are_not_pauses():
    g = parse_gc_log(fixture_bytes("written/jdk8_cms_print_gc_details.gc.log"))
    assert [p.kind for p in g.pauses] == ["young", "initial-mark", "remark", "young"]
    assert g.concurrent == 10 and max(p.seconds for p in g.pauses) == pytest.approx(0.07)


def test_jdk17_g1_concurrent_cycle_recorded_here():
    """Real JDK 17.0.15 -Xlog:gc*:file=...:time,tags (Kafka's decorations) of tests/analyze/java/GcCycle.java with
    -XX:+ExplicitGCInvokesConcurrent: 'Concurrent Mark Cycle' / 'Concurrent Mark' lines are not pauses."""
    text = fixture_text("jdk17_g1_concurrent_cycle.gc.log")
    g = parse_gc_log(text)
    assert len(g.pauses) == sum(1 for ln in text.split("\n") if "] GC(" in ln and " Pause " in ln and ln.endswith("ms"))
    assert {p.kind for p in g.pauses} == {"young", "remark", "cleanup", "full"}
    assert not any("Concurrent Mark" in p.text or "Concurrent Cycle" in p.text for p in g.pauses)


def test_a_concurrent_phase_is_no_long_pause_and_excuses_no_fetch_failure():
    """The 6.5 s concurrent-mark-end gave gc_pause_long ('long enough to expire a ZooKeeper session') and made
    broker 1's fetch failures 11 s later 'its own doing'. Without a real pause they count against leader 0."""
    data = fixture_text("seed000_broker1_server.log").replace("2018-10-30 07:00:34", "2019-06-11 09:15:20")
    data = "\n".join(data.split("\n")[:14])  # the first fetch error and its exception
    fs = diagnose([_gc("written/jdk8_g1_print_gc_details.gc.log"), _log(data, "hosts/1/server.log", 1)])
    assert "gc_pause_long" not in _kinds(fs)
    assert "fetch_failures_own_doing" not in _kinds(fs), [f.summary for f in fs]
    p = next(f for f in fs if f.kind == "peer_fetch_failures")
    assert p.broker_ids == (0,)


def test_a_real_full_pause_still_stalls_the_broker():
    """The same fetch failure after a real 9.1 s Full GC (JDK 8 G1 'Full GC' line) is still the reporter's own doing."""
    gc = ("2019-06-11T09:15:10.000+0000: 1480.383: [Full GC (Allocation Failure)  3900M->1800M(4096M), 9.1234567 secs]\n"
          "   [Eden: 0.0B(204.0M)->0.0B(204.0M) Survivors: 0.0B->0.0B Heap: 3900.0M(4096.0M)->1800.0M(4096.0M)], [Metaspace: 52000K->52000K(1095680K)]\n"
          " [Times: user=9.80 sys=0.10, real=9.12 secs] \n")
    data = fixture_text("seed000_broker1_server.log").replace("2018-10-30 07:00:34", "2019-06-11 09:15:20")
    data = "\n".join(data.split("\n")[:14])
    fs = diagnose([ParsedFile("hosts/1/gc.log", "gc_log", 1, result=parse_gc_log(gc)), _log(data, "hosts/1/server.log", 1)])
    assert "gc_pause_long" in _kinds(fs) and "peer_fetch_failures" not in _kinds(fs)
    assert "9.1 s GC pause" in next(f for f in fs if f.kind == "fetch_failures_own_doing").summary


# ---------------------------------------------------------------- 11. a ZooKeeper silence is not proof of a stall


def test_fetch_failures_after_a_zookeeper_silence_name_every_possible_cause():
    """Real 2.3.0: broker 3 (SIGSTOPped) logged fetch errors right after its client's 46,618 ms silence. The reason
    given names what the silence can mean (the broker process, its ZooKeeper server or the network), as the
    timeout finding on the same lines does: not 'the process was stalled' as a fact."""
    fs = diagnose([_log(fixture_bytes("real23/broker3.server.log"), "hosts/3/server.log", 3)])
    own = next(f for f in fs if f.kind == "fetch_failures_own_doing" and f.broker_ids == (3,))
    assert "46618 ms" in own.summary and "(the process was stalled)" not in own.summary
    assert "ZooKeeper server" in own.summary and "network" in own.summary


# ---------------------------------------------------------------- 12. what was silent


def _zk_log(name, server="2"):
    return ParsedFile(f"zk/{server}/zookeeper.log", "zk_log", None, result=parse_log(fixture_bytes(name)), server=server)


def test_a_zookeeper_server_that_cannot_load_its_database_and_exits_is_said():
    """ZooKeeper 3.4.13: QuorumPeer.loadDataBase logs 'Unable to load database on disk' (EOFException in a
    transaction log), QuorumPeerMain 'Unexpected exception, exiting abnormally'."""
    fs = diagnose([_zk_log("written/zk3413_unable_to_load_database.zookeeper.log")])
    z = next(f for f in fs if f.kind == "zk_database_load_failed")
    assert z.severity.value == "critical" and "ZooKeeper server 2" in z.summary and "java.io.EOFException" in z.summary
    assert "exiting abnormally" in z.summary and "it is not running" in z.summary and z.details["exited"]
    assert {9, 25} <= set(z.evidence[0].lines)


def test_a_load_failure_without_the_exit_line_does_not_claim_the_exit():
    text = "\n".join(ln for ln in fixture_text("written/zk3413_unable_to_load_database.zookeeper.log").split("\n")
                     if "exiting abnormally" not in ln)
    fs = diagnose([ParsedFile("zk/2/zookeeper.log", "zk_log", None, result=parse_log(text.encode()), server="2")])
    z = next(f for f in fs if f.kind == "zk_database_load_failed")
    assert "does not show whether it exited" in z.summary and not z.details["exited"]


def test_an_offsets_load_that_took_minutes_is_said():
    fs = diagnose([_log(fixture_bytes("written/kafka23_offsets_load_slow.server.log"))])
    s = next(f for f in fs if f.kind == "offsets_load_finished_late")
    assert s.partitions == ("__consumer_offsets-7",) and "337,471 ms" in s.summary and s.broker_ids == (2,)
    assert "offsets_load_slow" not in _kinds(fs)


def test_a_quick_load_is_not_slow():
    fs = diagnose([_log(fixture_bytes("real23/broker1.server.log.start"), "hosts/1/server.log", 1)])
    assert "offsets_load_finished_late" not in _kinds(fs)


def test_kafka_26_fetch_error_with_its_exception_on_the_next_line():
    """Kafka 2.6.0 FetchSessionHandler.handleError: log.info("Error sending fetch request {} to node {}:", metadata,
    node, t) -- the message ends at 'to node 2:' and the exception is the next line."""
    data = fixture_bytes("written/kafka26_fetch_error_two_line.server.log")
    recs = [r for r in parse_log(data).records if "Error sending fetch request" in (r.message or "")]
    assert len(recs) == 2
    for r in recs:
        assert r.signature == "fetch_session_error", r.message
        assert r.attrs["leader"] == "2" and r.attrs["node"] == "2" and r.attrs["disconnected_node"] == "2"
    only_session_lines = b"\n".join(ln for ln in data.split(b"\n") if b"Error in response for fetch request" not in ln)
    fs = diagnose([_log(only_session_lines, "hosts/1/server.log", 1)])
    p = next(f for f in fs if f.kind == "peer_fetch_failures")
    assert p.broker_ids == (2,) and p.details["count"] == 2 and p.details["causes"] == {"disconnected": 2}


@pytest.mark.parametrize("name", ["jdk21/virtual_threads.dump_to_file.txt", "jdk21/virtual_threads.dump_to_file.json"])
def test_a_dump_without_lock_data_says_a_deadlock_cannot_be_told(name):
    """Real JDK 21.0.8 `jcmd PID Thread.dump_to_file -format=text|json` (recorded for issue 21): names and stacks
    only. The report says it cannot tell, rather than saying nothing (which reads as 'no deadlock')."""
    from kafka_runbooks.analyze.parsers import parse_thread_dumps

    fs = diagnose([ParsedFile(f"hosts/1/{name.split('/')[-1]}", "jstack", 1, result=parse_thread_dumps(fixture_text(name)))])
    u = next(f for f in fs if f.kind == "deadlock_unknown")
    assert "cannot be told" in u.summary and "jstack -l" in u.summary and u.broker_ids == (1,)
    assert "jvm_deadlock" not in _kinds(fs)


def test_a_dump_with_lock_data_beside_it_needs_no_such_warning():
    from kafka_runbooks.analyze.parsers import parse_thread_dumps

    files = [ParsedFile(f"hosts/1/{n.split('/')[-1]}", "jstack", 1, result=parse_thread_dumps(fixture_text(n)))
             for n in ("jdk21/virtual_threads.dump_to_file.json", "jdk21/virtual_threads.jstack-l.txt")]
    assert "deadlock_unknown" not in _kinds(diagnose(files))


def test_a_real_zookeeper_38_that_cannot_load_its_database():
    """Recorded here: Debian's ZooKeeper 3.8.0 (the lab's) as a one-server quorum whose dataDir holds acceptedEpoch 3
    and currentEpoch 5: QuorumPeer 'Unable to load database on disk' (IOException: The accepted epoch, 3 is less than
    the current epoch, 5), QuorumPeerMain 'Unexpected exception, exiting abnormally', the JVM exits with code 1."""
    fs = diagnose([_zk_log("realzk38/zk1.zookeeper.log.load-failed", server="1")])
    z = next(f for f in fs if f.kind == "zk_database_load_failed")
    assert "The accepted epoch, 3 is less than the current epoch, 5" in z.summary and z.details["exited"]
    assert z.evidence[0].lines == (79, 80, 86, 87) and z.details["no_restart"]
