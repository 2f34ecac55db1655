"""Property-based fuzzing of every parser: any bytes in, a result out (never an exception, never a hang),
with what could not be parsed reported."""

import hashlib
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_runbooks.analyze.bundle import load_entry
from kafka_runbooks.analyze.parsers import PARSERS, parse_content
from kafka_runbooks.analyze.parsers.base import budget
from kafka_runbooks.analyze.parsers.kafka_log import fetch_errors
from kafka_runbooks.analyze.signatures import EVIDENCE_SHAPES

from analyze_helpers import fixture_bytes

TOKENS = ["[2020-04-22 10:43:36,369] ", "2023-09-01 04:02:01,662 [myid:13] - ", "WARN ", "INFO ", "ERROR ", "(kafka.server.ReplicaFetcherThread)",
          "[ReplicaFetcherThread-0-1], Error in fetch", "[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] ",
          "java.io.IOException: Connection to 2 was disconnected before the response was read", "\tat kafka.Foo.bar(Foo.scala:1)",
          '"main" #1 prio=5 tid=0x1 nid=0x2 waiting on condition  [0x3]', "   java.lang.Thread.State: BLOCKED",
          "\t- waiting to lock <0x1> (a java.lang.Object)", "\t- locked <0x1> (a java.lang.Object)", "Found one Java-level deadlock:",
          "Full thread dump ", "JNI global refs: 1", "tcp 0 0 1.2.3.4:9092 5.6.7.8:1 CLOSE_WAIT 1/java", "ESTAB 0 0 [::1]:9092 *:*",
          "baseOffset: 1 lastOffset: 2 ", "offset: 1 position: 2", "GC(1) Pause Young 1M->1M(2M) 1.0ms", "zk_server_state\tleader",
          "Mode: follower", " /1.2.3.4:5[1](queued=0,recved=1)", "Dumping /x/00000000000000000000.log",
          # issue 21's shapes
          '"kafka-request-handler-1":', "  waiting for ownable synchronizer 0x00000000fffc81e0, (a java.util.concurrent.locks.ReentrantReadWriteLock$NonfairSync),",
          '  which is held by "group-metadata-manager-0"', "  waiting to lock monitor 0x7f (object 0x1, a java.lang.Object),",
          "Java stack information for the threads listed above:", "Found 1 deadlock.", "   Carrying virtual thread #19",
          '#19 "vt-pinned-on-monitor" virtual', '#21 "" virtual', "      java.base/java.lang.VirtualThread.park(Unknown Source)",
          "2026-11-24T20:54:57.875803705Z", "21.0.8+9-LTS", "11329",
          "WARN Client session timed out, have not heard from server in 6670ms for session id 0x200001131670001 (org.apache.zookeeper.ClientCnxn)",
          "INFO Session establishment complete on server /127.101.0.1:2181, session id = 0x200001131670001, negotiated timeout = 10000 (org.apache.zookeeper.ClientCnxn)",
          "INFO [ReplicaFetcherManager on broker 1] Removed fetcher for partitions Set(t1-0) (kafka.server.ReplicaFetcherManager)",
          "INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Shutting down (kafka.server.ReplicaFetcherThread)",
          "INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Stopped (kafka.server.ReplicaFetcherThread)",
          ": java.nio.channels.ClosedSelectorException.", "ERROR [KafkaServer id=9] Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)",
          "ERROR Exiting Kafka. (kafka.server.KafkaServerStartable)", "java.lang.OutOfMemoryError: Java heap space",
          "tcp   ESTAB      0      0                                          127.0.0.1%lo:XmlIpcRegSvc           127.0.0.1:46104",
          "u_str ESTAB      0      0       * 20383                 * 20384", "Socket           Flowhash Proto Recv-Q Send-Q  Local Address",
          "f6b01a1c2a3a2107 b09490b8 tcp4       0      0  192.168.1.10.9092  192.168.1.23.52110 ESTABLISHED",
          "Active LOCAL (UNIX) domain sockets", "{", "}", "\"", "\x00",
          "\ufffd", "\r", "\n", " ", "\t", "(", ")", "[", "]", "@", ":", "-", "="]

texts = st.lists(st.one_of(st.sampled_from(TOKENS), st.text(max_size=20)), max_size=60).map("".join)
blobs = st.one_of(texts, st.binary(max_size=400), texts.map(lambda t: t.encode("utf-16")), texts.map(lambda t: t.encode("utf-8")))


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=blobs)
def test_every_parser_returns_a_result_for_any_input(data):
    for kind, fn in PARSERS.items():
        with budget(30):
            r = fn(data)
        assert r is not None, kind
        assert isinstance(r.unparsable, list), kind
        assert all(isinstance(u, str) for u in r.unparsable), kind


@settings(max_examples=80, deadline=None, database=None)
@given(data=texts)
def test_fetch_errors_never_raises(data):
    for fe in fetch_errors(data):
        assert isinstance(fe.leader_broker_id, int) and fe.line_no >= 1


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=blobs, kind=st.sampled_from(sorted(PARSERS)))
def test_bundle_entry_never_raises(tmp_path, data, kind):
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    (tmp_path / "f.out").write_bytes(raw)
    pfs, rows = load_entry(str(tmp_path), {"path": "f.out", "kind": kind, "broker_id": 1, "host": None,
                                          "stream": "stdout", "sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)})
    assert pfs and pfs[0].path == "f.out"
    json.dumps([r for table in rows.values() for r in table], default=str)  # rows are plain data


# the corpus: every shape of issue 21 (EVIDENCE_SHAPES, docs/SIGNATURES.md), each the fixture of a real file
CORPUS = [(kind, fixture_bytes(fixture)) for _, kind, _, fixture in EVIDENCE_SHAPES]
NOISE = st.sampled_from([b"", b"\n", b"\n\n", b"2026-11-24 21:00:00\n", b"$ \n", b"\x00\x00", b"\xff\xfe", b"\r\n", b" " * 300])


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.sampled_from(range(len(CORPUS))), cut=st.floats(0, 1), noise=st.lists(st.tuples(st.floats(0, 1), NOISE), max_size=4))
def test_every_shape_survives_cuts_and_noise(shape, cut, noise):
    """A shape cut anywhere, with noise spliced in at line starts: a result, never an exception or a hang, and what
    could not be read said as text."""
    kind, data = CORPUS[shape]
    lines = data.split(b"\n")
    lines = lines[:max(1, int(len(lines) * cut))] if cut < 0.98 else lines
    for where, junk in noise:
        lines.insert(int(len(lines) * where), junk.rstrip(b"\n"))
    with budget(30):
        r = parse_content(kind, b"\n".join(lines))
    assert r is not None and all(isinstance(u, str) for u in r.unparsable)


@settings(max_examples=30, deadline=None, database=None)
@given(shape=st.sampled_from([k for k, (kind, _) in enumerate(CORPUS) if kind == "jstack"]),
       before=st.lists(st.sampled_from(["", "2026-11-24 21:00:00", "   "]), max_size=3),
       after=st.lists(st.sampled_from(["", "$ ", "   "]), max_size=3))
def test_noise_around_a_readable_dump_never_makes_it_unreadable(shape, before, after):
    _, data = CORPUS[shape]
    plain = parse_content("jstack", data)
    assert plain.ok
    noisy = parse_content("jstack", "\n".join(before + [data.decode()] + after))
    assert noisy.ok, noisy.unparsable
    assert [len(d.threads) for d in noisy.dumps] == [len(d.threads) for d in plain.dumps]
