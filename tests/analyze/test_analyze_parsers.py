import random

import pytest

from kafka_runbooks.analyze.parsers import PARSERS, parse_content
from kafka_runbooks.analyze.parsers.jstack import parse_jstack
from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log
from kafka_runbooks.analyze.parsers.misc import (
    parse_heap_info, parse_jmap_histo, parse_open_files, parse_process_stat,
)
from kafka_runbooks.analyze.parsers.sockets import parse_sockets
from kafka_runbooks.host.sockets import split_host_port

from analyze_helpers import fixture_bytes, fixture_text


# ------------------------------------------------------------------ sockets

def test_seed_219_netstat_close_wait_dominant_on_9092():
    t = parse_sockets(fixture_bytes("seed001_219_netstat_antp.txt"))
    assert t.ok and t.format == "netstat" and t.unrecognized.count == 0
    assert len(t.rows) == 11
    assert t.counts_by_local_port()[9092] == {"CLOSE_WAIT": 10, "ESTABLISHED": 1}
    assert t.counts_by_peer_host()["192.168.1.217"] == {"CLOSE_WAIT": 7, "ESTABLISHED": 1}
    r = t.rows[1]
    assert (r.recv_q, r.send_q, r.local_host, r.local_port, r.peer_host, r.pid, r.program) == (
        178232, 0, "192.168.1.219", 9092, "192.168.1.217", 81068, "java")


def test_seed_217_218_netstat():
    t217 = parse_sockets(fixture_text("seed001_217_netstat_antp.txt"))
    assert t217.ok and len(t217.rows) == 16
    assert t217.counts_by_peer_host()["192.168.1.219"] == {"FIN_WAIT1": 7, "FIN_WAIT2": 1}
    assert t217.rows[1].pid is None and t217.rows[1].send_q == 0 and t217.rows[2].send_q == 53321
    t218 = parse_sockets(fixture_text("seed001_218_netstat_antp.txt"))
    assert t218.ok and t218.counts_by_local_port()[9092] == {"ESTABLISHED": 13}
    t = parse_sockets(fixture_text("seed001_218_netstat_an_to_219.txt"))  # `netstat -an`, no PID column
    assert t.ok and t.counts_by_peer_host() == {"192.168.1.219": {"FIN_WAIT2": 5, "ESTABLISHED": 3}}


SS = '''State      Recv-Q Send-Q       Local Address:Port        Peer Address:Port Process
LISTEN     0      50      [::ffff:127.0.0.1]:9092                  *:*     users:(("java",pid=4242,fd=120))
ESTAB      0      0                127.0.0.1:9092          127.0.0.1:54321 users:(("java",pid=4242,fd=130))
CLOSE-WAIT 12     0                127.0.0.1:9092          127.0.0.2:54322 users:(("java",pid=4242,fd=131))
FIN-WAIT-2 0      0                127.0.0.1:40000     [::1]:9093
'''


def test_ss_with_and_without_header():
    for text in (SS, "\n".join(SS.splitlines()[1:])):
        t = parse_sockets(text)
        assert t.ok and t.format == "ss" and len(t.rows) == 4
        assert [r.state for r in t.rows] == ["LISTEN", "ESTABLISHED", "CLOSE_WAIT", "FIN_WAIT2"]
        assert t.rows[0].local_host == "127.0.0.1" and t.rows[0].local_port == 9092 and t.rows[0].pid == 4242
        assert t.rows[3].peer_host == "::1" and t.rows[3].peer_port == 9093 and t.rows[3].pid is None
        assert t.counts_by_local_port()[9092] == {"LISTEN": 1, "ESTABLISHED": 1, "CLOSE_WAIT": 1}
    t = parse_sockets('tcp   ESTAB 0 0 127.0.0.1%lo:9092 127.0.0.1:1 users:(("java",pid=1,fd=2))')  # Netid column
    assert t.rows[0].local_host == "127.0.0.1" and t.rows[0].state == "ESTABLISHED"


def test_split_host_port():
    assert split_host_port("::ffff:192.168.1.219:9092") == ("192.168.1.219", 9092)
    assert split_host_port("[::]:9092") == ("::", 9092)
    assert split_host_port("*:*") == ("*", None)


# ------------------------------------------------------------------ kafka log

def test_seed_217_218_replica_fetch_errors():
    for name, ts in (("seed001_217_server.log", "2020-04-22 10:43:36,369"), ("seed001_218_server.log", "2020-04-22 10:59:42,687")):
        log = parse_kafka_log(fixture_bytes(name))
        assert log.ok and log.unparsed.count == 0 and len(log.events) == 1
        e = log.events[0]
        assert (e.line, e.end_line, e.timestamp, e.level, e.logger) == (1, 16, ts, "WARN", "kafka.server.ReplicaFetcherThread")
        assert e.signature == "replica_fetch_error" and e.wording == "0.9 – 0.11"
        # attribute names of the signature table (docs/SIGNATURES.md): the leader named by the thread, the node the
        # exception names
        assert e.attrs == {"fetcher_id": "1", "leader": "219", "disconnected_node": "219"}
        assert e.exception == "java.io.IOException: Connection to 219 was disconnected before the response was read"
        assert e.exception_line == 2 and e.continuation == 15 and e.frames == 14


def test_seed_219_log_is_quiet():
    log = parse_kafka_log(fixture_text("seed001_219_server.log"))
    assert log.ok and len(log.events) == 10 and not log.signatures()


SIGS = '''[2017-01-01 00:00:00,001] INFO Kafka version : 0.10.1.0 (org.apache.kafka.common.utils.AppInfoParser)
[2017-01-01 00:00:01,001] INFO [Kafka Server 219], started (kafka.server.KafkaServer)
[2017-01-01 00:00:02,001] INFO Partition [orders,2] on broker 1: Shrinking ISR for partition [orders,2] from 1,2,3 to 1,2 (kafka.cluster.Partition)
[2017-01-01 00:00:02,501] INFO Partition [orders,2] on broker 1: Expanding ISR for partition [orders,2] from 1,2 to 1,2,3 (kafka.cluster.Partition)
[2017-01-01 00:00:03,001] INFO [Group Metadata Manager on Broker 1]: Loading offsets and group metadata from [__consumer_offsets,19] (kafka.coordinator.GroupMetadataManager)
[2017-01-01 00:00:04,001] INFO [Group Metadata Manager on Broker 1]: Finished loading offsets from [__consumer_offsets,19] in 1234 milliseconds. (kafka.coordinator.GroupMetadataManager)
[2017-01-01 00:00:05,001] ERROR Processor got uncaught exception. (kafka.network.Processor)
java.lang.ArrayIndexOutOfBoundsException: 18
\tat org.apache.kafka.common.protocol.ApiKeys.forId(ApiKeys.java:68)
\tat kafka.network.Processor.run(SocketServer.scala:413)
this line is not log4j
[2017-01-01 00:00:06,001] INFO [GroupCoordinator 1]: Not coordinator for group x (kafka.coordinator.GroupCoordinator)
\x07\x08 garbage \x01
'''


def test_log_signatures_and_unparsed_lines_kept():
    log = parse_kafka_log(SIGS)
    assert log.ok
    # "Not coordinator" is what clients log; the broker line carries no signature of the table
    assert [e.signature for e in log.events] == ["kafka_version", "broker_started", "isr_shrink", "isr_expand",
                                                 "group_load_start", "group_load_done", "processor_uncaught_exception",
                                                 None]
    assert log.kafka_version == "0.10.1.0"
    assert log.events[2].attrs == {"topic": "orders", "partition": "2", "from": "1,2,3", "to": "1,2"}
    assert log.events[5].attrs["millis"] == "1234"
    pe = log.events[6]
    assert pe.attrs["api_key_aioobe"] == "18" and pe.attrs["api_key_frame"] == "1"
    assert pe.exception_line == 8 and pe.end_line == 11  # non-log4j lines under a record stay with it (and are counted)
    assert log.unparsed.count == 2
    assert [s.line for s in log.unparsed.samples] == [11, 13]


# ------------------------------------------------------------------ small parsers

def test_small_parsers():
    assert parse_open_files("326639\n").count == 326639
    p = parse_process_stat("  81068 123456 1901924 java -Xmx1G kafka.Kafka config/server.properties\n")
    assert (p.pid, p.uptime_s, p.rss_kb, p.is_kafka) == (81068, 123456, 1901924, True)
    assert parse_process_stat("").unparsable == ["no such process (empty ps output)"]
    h = parse_heap_info(fixture_text("jdk17_heap_info.txt"))
    assert h.ok and h.collector == "garbage-first heap" and h.total_kb == 397312 and h.used_kb == 5986
    ps = parse_heap_info(" PSYoungGen      total 76288K, used 3932K [0x1, 0x2, 0x3)\n"
                         " ParOldGen       total 175104K, used 10K [0x1, 0x2, 0x3)\n Metaspace       used 2K, capacity 4K\n")
    assert ps.ok and ps.total_kb == 76288 + 175104 and ps.used_kb == 3942 and ps.metaspace_used_kb == 2
    hist = parse_jmap_histo(fixture_text("jdk17_jmap_histo.txt"))
    assert hist.ok and hist.top(1)[0].cls == "[B" and hist.total_bytes == 1103448


# ------------------------------------------------------------------ bad input: never raise, always explain

_RNG = random.Random(20200422)
BAD_INPUTS = {
    "empty": b"",
    "whitespace": b"  \n\n\t\n",
    "random_binary": bytes(_RNG.getrandbits(8) for _ in range(4096)),
    "high_bytes_no_nul": bytes(_RNG.randrange(128, 256) for _ in range(4096)),
    "none": None,
}


@pytest.mark.parametrize("kind", sorted(PARSERS))
@pytest.mark.parametrize("label", sorted(BAD_INPUTS))
def test_bad_input_is_explicitly_unparsable(kind, label):
    r = parse_content(kind, BAD_INPUTS[label])
    assert r.unparsable, f"{kind} accepted {label}"
    assert not r.ok


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_prose_is_unparsable(kind):
    r = parse_content(kind, "hello\nthis is not what you expected\nat all\n")
    assert r.unparsable


def test_truncated_full_dump_keeps_parsed_threads():
    text = fixture_text("jdk17_live_sample.jstack.txt")
    cut = "\n".join(text.splitlines()[:125])  # stops inside "kafka-request-handler-3"
    d = parse_jstack(cut)
    # a missing "JNI global refs" trailer is normal on older JVMs (issue 9): a note, not "unparsable"
    assert d.ok and any("JNI global refs" in n for n in d.notes)
    assert {"executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"} <= {t.name for t in d.threads}


def test_truncated_deadlock_excerpt():
    lines = fixture_text("seed001_219_jstack_deadlock.txt").splitlines()
    d = parse_jstack("\n".join(lines[:4]))  # cut after "waiting to lock monitor", before "which is held by"
    assert not d.ok
    assert any("truncated deadlock section" in u for u in d.unparsable)
    assert any("no 'which is held by'" in u for u in d.unparsable)


def test_garbage_lines_in_log_are_counted_not_dropped():
    text = fixture_text("seed001_217_server.log") + "\n".join(f"junk {i} \u2603" for i in range(40)) + "\n"
    log = parse_kafka_log(text)
    assert log.unparsed.count == 40 and len(log.unparsed.samples) == 20
    assert log.unparsable and "outside the kafka layout" in log.unparsable[0] and log.layout == "kafka"
    assert log.events[0].signature == "replica_fetch_error"  # content before the garbage is still parsed


def test_histo_truncated():
    text = "\n".join(fixture_text("jdk17_jmap_histo.txt").splitlines()[:20])
    h = parse_jmap_histo(text)
    assert len(h.rows) == 18 and any("truncated histogram" in u for u in h.unparsable)
