"""Property-based fuzzing of every parser: any bytes in, a result out (never an exception, never a hang),
with what could not be parsed reported."""

import hashlib
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_runbooks.analyze.bundle import load_entry
from kafka_runbooks.analyze.parsers import PARSERS
from kafka_runbooks.analyze.parsers.base import budget
from kafka_runbooks.analyze.parsers.kafka_log import fetch_errors

TOKENS = ["[2020-04-22 10:43:36,369] ", "2023-09-01 04:02:01,662 [myid:13] - ", "WARN ", "INFO ", "ERROR ", "(kafka.server.ReplicaFetcherThread)",
          "[ReplicaFetcherThread-0-1], Error in fetch", "[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] ",
          "java.io.IOException: Connection to 2 was disconnected before the response was read", "\tat kafka.Foo.bar(Foo.scala:1)",
          '"main" #1 prio=5 tid=0x1 nid=0x2 waiting on condition  [0x3]', "   java.lang.Thread.State: BLOCKED",
          "\t- waiting to lock <0x1> (a java.lang.Object)", "\t- locked <0x1> (a java.lang.Object)", "Found one Java-level deadlock:",
          "Full thread dump ", "JNI global refs: 1", "tcp 0 0 1.2.3.4:9092 5.6.7.8:1 CLOSE_WAIT 1/java", "ESTAB 0 0 [::1]:9092 *:*",
          "baseOffset: 1 lastOffset: 2 ", "offset: 1 position: 2", "GC(1) Pause Young 1M->1M(2M) 1.0ms", "zk_server_state\tleader",
          "Mode: follower", " /1.2.3.4:5[1](queued=0,recved=1)", "Dumping /x/00000000000000000000.log", "{", "}", "\"", "\x00",
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
