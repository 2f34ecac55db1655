"""read_snapshot against a REAL ZooKeeper holding Kafka's exact znode layout, then hostile znodes."""

from __future__ import annotations

import json
import socket

import pytest
from kazoo.exceptions import BadArgumentsError

from kafka_runbooks.detect.detectors import detect
from kafka_runbooks.detect.snapshot import read_snapshot
from kafka_runbooks.zookeeper import kazoo_client


def j(obj) -> bytes:
    return json.dumps(obj).encode()


def register(zk, broker_id, host="127.0.0.1", port=None, *, ephemeral=False, null_host=False):
    port = port or 9090 + broker_id
    reg = {
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
        "endpoints": [f"PLAINTEXT://{host}:{port}"],
        "jmx_port": -1,
        "host": None if null_host else host,
        "timestamp": "1700000000000",
        "port": -1 if null_host else port,
        "version": 4,
    }
    zk.create(f"/brokers/ids/{broker_id}", j(reg), ephemeral=ephemeral, makepath=True)


def topic(zk, name, assignment, states, min_isr=None):
    zk.create(f"/brokers/topics/{name}", j({"version": 1, "partitions": {str(p): r for p, r in assignment.items()}}), makepath=True)
    for p, (leader, isr) in states.items():
        zk.create(
            f"/brokers/topics/{name}/partitions/{p}/state",
            j({"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 3, "isr": isr}),
            makepath=True,
        )
    cfg = {} if min_isr is None else {"min.insync.replicas": str(min_isr)}
    zk.create(f"/config/topics/{name}", j({"version": 1, "config": cfg}), makepath=True)


def kafka_cluster(zk):
    for b in (1, 2):
        register(zk, b)
    register(zk, 3, null_host=True)  # listeners-only registration: host null, port -1
    zk.create("/controller", j({"version": 1, "brokerid": 1, "timestamp": "1700000000000"}))
    topic(zk, "orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, {0: (1, [1, 2]), 1: (2, [2, 1]), 2: (3, [3])}, min_isr=2)
    topic(zk, "__consumer_offsets", {0: [3, 1, 2]}, {0: (3, [3, 1, 2])})


def test_reads_kafka_layout(zk):
    kafka_cluster(zk)
    s = read_snapshot(zk, "lab")
    assert s.unparsable == ()
    assert s.cluster == "lab" and s.taken_at.endswith("Z")
    assert [b.id for b in s.brokers] == [1, 2, 3]
    b3 = s.broker(3)
    assert (b3.host, b3.port, b3.endpoints) == ("127.0.0.1", 9093, ("PLAINTEXT://127.0.0.1:9093",))
    assert s.broker(1).port == 9091
    assert s.controller_id == 1
    by_name = {p.name: p for p in s.partitions}
    assert set(by_name) == {"orders-0", "orders-1", "orders-2", "__consumer_offsets-0"}
    o2 = by_name["orders-2"]
    assert (o2.replicas, o2.leader, o2.isr, o2.leader_epoch, o2.min_insync_replicas) == ((3, 1, 2), 3, (3,), 3, 2)
    assert by_name["__consumer_offsets-0"].min_insync_replicas is None
    # a ZooKeeper-only snapshot names broker 3 from the ISR shape, as a warning only (no direct check ran)
    findings = detect(s)
    assert [f.broker_ids for f in findings if f.kind == "isr_shape_suspect"] == [(3,)]
    assert not [f for f in findings if f.kind == "broker_unresponsive"]


def test_missing_state_znode_is_recorded(zk):
    kafka_cluster(zk)
    zk.create("/brokers/topics/late", j({"version": 1, "partitions": {"0": [1, 2]}}))
    s = read_snapshot(zk, "lab")
    assert "late-0" not in {p.name for p in s.partitions}
    assert any(u.startswith("/brokers/topics/late/partitions/0/state: missing") for u in s.unparsable)


def test_wrong_chroot_is_recorded_not_empty_silence(zookeeper):
    with pytest.warns(UserWarning, match="No chroot path exists"):  # kazoo's own warning for a missing chroot
        zk = zookeeper.client("/definitely-not-kafka")
    try:
        s = read_snapshot(zk, "lab")
    finally:
        zk.stop()
        zk.close()
    assert s.brokers == () and s.partitions == ()
    assert any(u.startswith("/brokers/ids: missing") for u in s.unparsable)
    assert any(u.startswith("/brokers/topics: missing") for u in s.unparsable)


def test_hostile_znodes_are_recorded_never_crash(zk):
    kafka_cluster(zk)
    deep = b"[" * 100_000 + b"]" * 100_000
    hostile_states = {
        "garbage": b"\xff\xfe\x00garbage\x80",
        "leaderx": j({"leader": "x", "isr": [1], "leader_epoch": 0}),
        "isrstr": j({"leader": 1, "isr": "1,2", "leader_epoch": 0}),
        "deep": deep,
        "huge": b'{"leader":1,"isr":[1],"pad":"' + b"A" * (1024 * 1024) + b'"}',
        "bigint": b'{"leader": 99999999999999999999999, "isr": [1]}',
        "nan": b'{"leader": NaN, "isr": [1]}',
        "boolleader": j({"leader": True, "isr": [1]}),
        "arr": j([1, 2, 3]),
        "empty": b"",
    }
    for name, state in hostile_states.items():
        zk.create(f"/brokers/topics/{name}", j({"version": 1, "partitions": {"0": [1, 2]}}))
        zk.create(f"/brokers/topics/{name}/partitions/0/state", state, makepath=True)
    # hostile assignments and configs
    zk.create("/brokers/topics/badparts", j({"version": 1, "partitions": {"0": [1, 2], "x": [1], "1": "1,2", "2": [1, 1]}}))
    zk.create("/brokers/topics/badparts/partitions/0/state", j({"leader": 1, "isr": [1, 2]}), makepath=True)
    zk.create("/brokers/topics/notobj", j("just a string"))
    zk.set("/config/topics/orders", j({"version": 1, "config": {"min.insync.replicas": "two"}}))
    # path-like / illegal topic names: kazoo/ZooKeeper refuse "." and "..", others are legal znodes but not Kafka topics
    with pytest.raises((ValueError, BadArgumentsError)):
        zk.create("/brokers/topics/../../etc", b"{}")
    for evil in ("..\\..\\etc", "bad name", "x" * 300, "tópico", "..", "."):
        try:
            zk.create(f"/brokers/topics/{evil}", j({"version": 1, "partitions": {"0": [1]}}))
        except (ValueError, BadArgumentsError):
            assert evil in ("..", ".")
    # hostile broker registrations and controller
    zk.create("/brokers/ids/abc", j({"host": "h", "port": 1}))
    zk.create("/brokers/ids/99999999999", j({"host": "h", "port": 1}))
    zk.create("/brokers/ids/7", b"not json")
    zk.create("/brokers/ids/8", j({"host": 5, "port": "9092", "endpoints": []}))
    zk.set("/controller", j({"brokerid": "1"}))

    s = read_snapshot(zk, "lab")  # no exception is the first assertion
    bad = "\n".join(s.unparsable)

    names = {p.name for p in s.partitions}
    assert {"orders-0", "orders-1", "orders-2", "__consumer_offsets-0", "badparts-0"} == names
    for name in hostile_states:
        assert f"/brokers/topics/{name}/partitions/0/state: " in bad, name
    assert "/brokers/topics/garbage/partitions/0/state: not UTF-8" in bad
    assert "/brokers/topics/leaderx/partitions/0/state: 'leader' is a string 'x'" in bad
    assert "/brokers/topics/isrstr/partitions/0/state: 'isr' is a string '1,2'" in bad
    assert "/brokers/topics/deep/partitions/0/state: JSON nested too deeply" in bad
    assert "/brokers/topics/huge/partitions/0/state: 1048" in bad and "exceeds the 524288-byte limit" in bad
    assert "/brokers/topics/nan/partitions/0/state: invalid JSON: non-standard JSON constant NaN" in bad
    assert "/brokers/topics/bigint/partitions/0/state: 'leader' = 99999999999999999999999 is outside" in bad
    assert "/brokers/topics/boolleader/partitions/0/state: 'leader' is a JSON bool" in bad
    assert "/brokers/topics/empty/partitions/0/state: empty znode" in bad
    assert "/brokers/topics/badparts: partition 'x'" in bad
    assert "/brokers/topics/badparts: 'partitions.1' is a string '1,2'" in bad
    assert "/brokers/topics/badparts: 'partitions.2' repeats a broker id" in bad
    assert "/brokers/topics/notobj: topic assignment is a JSON str" in bad
    assert "/config/topics/orders: 'min.insync.replicas' is a string 'two'" in bad
    assert "/brokers/topics/'..\\\\..\\\\etc': not a legal Kafka topic name" in bad
    assert "/brokers/topics/'bad name': not a legal Kafka topic name" in bad
    assert "/brokers/topics/'t\\xf3pico': not a legal Kafka topic name" in bad
    assert any(u.startswith("/brokers/topics/'xxxx") and len(u) < 400 for u in s.unparsable)
    assert "/brokers/ids/abc: broker id 'abc' is not" in bad
    assert "/brokers/ids/99999999999: broker id" in bad
    assert "/brokers/ids/7: invalid JSON" in bad
    assert "/brokers/ids/8: 'host' is a JSON int" in bad
    assert "/controller: 'brokerid' is a string '1'" in bad
    # registered-but-garbled brokers stay registered (their ephemeral znode exists)
    assert {b.id for b in s.brokers} == {1, 2, 3, 7, 8}
    assert s.broker(7).host == "" and s.controller_id is None
    # orders topic kept, its min.isr unknown
    assert {p.min_insync_replicas for p in s.partitions if p.topic == "orders"} == {None}
    # every entry names its znode path, and the whole snapshot serialises
    assert all(u.startswith("/") for u in s.unparsable)
    json.dumps(s.to_dict(), allow_nan=False)
    findings = detect(s)
    unp = [f for f in findings if f.kind == "unparsable"]
    assert len(unp) == 1 and len(unp[0].details["entries"]) == len(s.unparsable)


def test_client_builder_validates_and_is_read_write():
    zk = kazoo_client("127.0.0.1:1,127.0.0.1:2", "/kafka")
    assert zk.chroot == "/kafka" and zk.read_only is False
    for hosts, chroot in (("", None), ("h:1/x", None), ("h:1", "kafka"), ("h:1", "/a/../b")):
        with pytest.raises(ValueError):
            kazoo_client(hosts, chroot)


def test_zk_client_from_airflow_connection(monkeypatch):
    monkeypatch.setenv(
        "AIRFLOW_CONN_KR_ZK_TEST",
        json.dumps({"conn_type": "generic", "host": "127.0.0.1:21811,127.0.0.1:21812", "extra": {"chroot": "/kafka"}}),
    )
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook

    zk = ZooKeeperHook("kr_zk_test").get_conn()
    assert zk.chroot == "/kafka"
    assert sorted(zk.hosts) == [("127.0.0.1", 21811), ("127.0.0.1", 21812)]
    assert zk.read_only is False


def test_reads_sessions_maintenance_and_dynamic_configs(zk):
    """What the remediation engine checks before every step: who holds which session, whether a
    reassignment or preferred election is running, and the cluster-wide dynamic broker configs."""
    kafka_cluster(zk)
    zk.delete("/brokers/ids/2")
    register(zk, 2, ephemeral=True)  # a live registration: owned by this session
    zk.create("/controller_epoch", b"7")
    zk.create("/admin/reassign_partitions", j({"version": 1, "partitions": [{"topic": "orders", "partition": 1, "replicas": [1, 2, 3]}]}), makepath=True)
    zk.create("/admin/preferred_replica_election", j({"version": 1, "partitions": [{"topic": "orders", "partition": 2}]}))
    zk.create("/config/brokers/<default>", j({"version": 1, "config": {"auto.leader.rebalance.enable": "true"}}), makepath=True)
    zk.create("/config/brokers/2", j({"version": 1, "config": {"auto.leader.rebalance.enable": "false"}}))
    zk.set("/config/topics/orders", j({"version": 1, "config": {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}}))

    s = read_snapshot(zk, "lab")
    assert s.unparsable == ()
    b2 = s.broker(2)
    assert b2.session_id == zk.client_id[0] and b2.registration_zxid > 0 and b2.registered_at.endswith("Z")
    assert s.broker(1).session_id == 0  # persistent znode: no owner
    assert s.controller_epoch == 7
    assert s.reassigning == ("orders-1",) and s.preferred_election_pending == ("orders-2",)
    assert s.broker_config("auto.leader.rebalance.enable") == "true"
    assert s.broker_config("auto.leader.rebalance.enable", 2) == "false"
    assert s.broker_config("auto.leader.rebalance.enable", 1) == "true"
    assert {p.unclean_leader_election for p in s.partitions if p.topic == "orders"} == {True}
    assert {p.unclean_leader_election for p in s.partitions if p.topic == "__consumer_offsets"} == {None}
    again = type(s).from_dict(json.loads(json.dumps(s.to_dict())))
    assert again == s


def test_unreadable_maintenance_znode_counts_as_in_progress(zk):
    kafka_cluster(zk)
    zk.create("/admin/reassign_partitions", b"{not json", makepath=True)
    zk.create("/config/brokers/<default>", j({"version": 1, "config": {"x": 1}}), makepath=True)
    s = read_snapshot(zk, "lab")
    assert s.reassigning == ("<unreadable>",)
    assert any(u.startswith("/admin/reassign_partitions: invalid JSON") for u in s.unparsable)
    assert any(u.startswith("/config/brokers/<default>: config values must be strings") for u in s.unparsable)


# --- the pipelined reader (issue 18 §4): the same snapshot as kazoo's own reads, on the same trees
def _same(a, b) -> bool:
    import dataclasses

    return dataclasses.replace(a, taken_at="") == dataclasses.replace(b, taken_at="")


def test_pipelined_and_kazoo_readers_agree_on_a_hostile_tree(zk):
    test_hostile_znodes_are_recorded_never_crash(zk)  # builds the tree (and checks the pipelined reader on it)
    zk.create("/admin/reassign_partitions", j({"version": 1, "partitions": [{"topic": "orders", "partition": 1}]}), makepath=True)
    zk.create("/config/brokers/<default>", j({"version": 1, "config": {"unclean.leader.election.enable": "false"}}), makepath=True)
    pipelined, plain = read_snapshot(zk, "lab"), read_snapshot(zk, "lab", pipelined=False)
    assert pipelined.unparsable and pipelined.reassigning == ("orders-1",)
    assert _same(pipelined, plain)


def test_pipelined_and_kazoo_readers_agree_on_a_big_cluster(zk, zookeeper):
    from kafka_lab.bigcluster import write_cluster

    write_cluster(zk, "/big", brokers=30, partitions=6000, topics=12)
    zk.set("/big/brokers/topics/scale-0003/partitions/7/state", j({"leader": 2, "isr": "2", "leader_epoch": 0}))
    zk.delete("/big/brokers/topics/scale-0005/partitions/9", recursive=True)
    big = zookeeper.client(zk.chroot_path + "/big")
    try:
        pipelined, plain = read_snapshot(big, "big"), read_snapshot(big, "big", pipelined=False)
    finally:
        big.stop()
        big.close()
    assert len(pipelined.partitions) == 6000 - 2 and len(pipelined.brokers) == 30
    assert len(pipelined.unparsable) == 2, pipelined.unparsable
    assert _same(pipelined, plain)


def test_a_lost_pipelined_session_falls_back_to_kazoo(zk, monkeypatch):
    from kazoo.exceptions import ConnectionLoss

    from kafka_runbooks.zookeeper import PipelinedReader

    kafka_cluster(zk)
    expected = read_snapshot(zk, "lab", pipelined=False)
    calls = []

    def lost(self, paths, parse=None):
        calls.append(len(paths))
        self.close()
        raise ConnectionLoss("dropped")

    monkeypatch.setattr(PipelinedReader, "get_many", lost)
    assert _same(read_snapshot(zk, "lab"), expected) and calls == [3]  # lost at the registrations, kazoo read the rest
    monkeypatch.setattr(PipelinedReader, "beside", classmethod(lambda cls, zk, timeout_s=10.0: cls(("127.0.0.1", 1), zk.chroot)))
    assert _same(read_snapshot(zk, "lab"), expected)  # no session at all: every read through kazoo


@pytest.mark.parametrize("multi_read", [True, False])
def test_pipelined_reader_reads_many_and_missing_znodes(zk, multi_read):
    from kafka_runbooks.zookeeper import PipelinedReader

    for i in range(300):
        zk.create(f"/n/{i}", str(i).encode(), makepath=True)
    paths = [f"/n/{i}" for i in range(300)] + ["/n/missing", "/nothing/here"]
    with PipelinedReader.beside(zk) as r:
        r.WINDOW, r.MULTI_READ_OPS, r.multi_read = 7, 3, multi_read  # many windows' and batches' worth
        got = r.get_many(paths)
        assert r.multi_read is multi_read  # no fallback taken
        assert sorted(r.children("/n"), key=int) == [str(i) for i in range(300)] and r.children("/absent") is None
    assert [got[f"/n/{i}"][0] for i in range(300)] == [str(i).encode() for i in range(300)]
    assert got[f"/n/5"][1] == zk.get("/n/5")[1]
    assert got["/n/missing"] == (None, None) and got["/nothing/here"] == (None, None)


@pytest.mark.parametrize("multi_read", [True, False])
def test_a_session_lost_while_replies_are_parsed_falls_back_to_kazoo_for_the_whole_batch(zk, monkeypatch, multi_read):
    """The partition states are parsed as their replies come in: a session lost midway leaves no half-read batch behind
    (kazoo reads and parses all of it again; nothing is noted twice)."""
    from kafka_runbooks.zookeeper import PipelinedReader

    if not multi_read:
        _single_reads(monkeypatch)
    monkeypatch.setattr(PipelinedReader, "MULTI_READ_OPS", 2)

    kafka_cluster(zk)
    zk.create("/brokers/topics/late", j({"version": 1, "partitions": {"0": [1, 2], "1": [2, 1]}}))
    zk.create("/brokers/topics/late/partitions/1/state", b"{not json", makepath=True)
    expected = read_snapshot(zk, "lab", pipelined=False)
    real, parsed = PipelinedReader.get_many, []

    def dropped_while_parsing(self, paths, parse=None):
        if parse is None:
            return real(self, paths)

        def parse_then_drop(path, data, stat):
            parsed.append(path)
            self._sock.shutdown(socket.SHUT_RDWR)
            return parse(path, data, stat)
        return real(self, paths, parse_then_drop)

    monkeypatch.setattr(PipelinedReader, "get_many", dropped_while_parsing)
    monkeypatch.setattr(PipelinedReader, "WINDOW", 1)
    s = read_snapshot(zk, "lab")
    assert parsed and len(parsed) < 6 and _same(s, expected)
    assert len(s.unparsable) == 2 and len(s.partitions) == 4


# --- multiRead (ZooKeeper >= 3.6): the same snapshot as single reads; single reads when the server is older or refuses
def _single_reads(monkeypatch, version=(3, 4, 14)):
    from kafka_runbooks import zookeeper

    monkeypatch.setattr(zookeeper, "server_version", lambda host, port, timeout_s=2.0: version)


def _requests_per_read(monkeypatch) -> list[int]:
    """The znodes per request of every PipelinedReader read from now on (1: single reads, more: multiRead)."""
    from kafka_runbooks.zookeeper import PipelinedReader

    real, seen = PipelinedReader._pipeline, []

    def spy(self, request_cls, paths, parse=None, ops=1):
        seen.append(ops)
        return real(self, request_cls, paths, parse, ops)

    monkeypatch.setattr(PipelinedReader, "_pipeline", spy)
    return seen


def test_multi_read_and_single_reads_agree_on_a_big_hostile_cluster(zk, zookeeper, monkeypatch):
    from kafka_lab.bigcluster import write_cluster

    from kafka_runbooks import zookeeper as zkmod

    assert zkmod.server_version(*zk.hosts[0]) >= (3, 6)  # the tests' Debian ZooKeeper (3.8): multiRead is used
    write_cluster(zk, "/big", brokers=30, partitions=6000, topics=12)
    zk.set("/big/brokers/topics/scale-0003/partitions/7/state", j({"leader": 2, "isr": "2", "leader_epoch": 0}))
    zk.set("/big/brokers/topics/scale-0004/partitions/1/state", b'{"leader":1,"isr":[1],"pad":"' + b"A" * (1024 * 1024) + b'"}')
    zk.set("/big/brokers/topics/scale-0004/partitions/2/state", b"\xff\xfe\x00garbage\x80")
    zk.set("/big/brokers/topics/scale-0004/partitions/3/state", b"")
    zk.delete("/big/brokers/topics/scale-0005/partitions/9", recursive=True)
    zk.delete("/big/brokers/topics/scale-0006/partitions/0/state")
    big = zookeeper.client(zk.chroot_path + "/big")
    try:
        seen = _requests_per_read(monkeypatch)
        multi = read_snapshot(big, "big")
        assert set(seen) == {1, 100}  # children and the few single reads, then multiRead
        _single_reads(monkeypatch)
        seen.clear()
        single = read_snapshot(big, "big")
        assert set(seen) == {1}
    finally:
        big.stop()
        big.close()
    assert len(multi.partitions) == 6000 - 6 and len(multi.unparsable) == 6, multi.unparsable
    assert multi.to_dict() | {"taken_at": ""} == single.to_dict() | {"taken_at": ""}


def test_multi_read_and_single_reads_agree_on_a_hostile_tree(zk, monkeypatch):
    test_hostile_znodes_are_recorded_never_crash(zk)  # builds the tree (and checks the multiRead path on it)
    multi = read_snapshot(zk, "lab")
    _single_reads(monkeypatch)
    assert multi.unparsable and _same(multi, read_snapshot(zk, "lab"))


@pytest.mark.parametrize("version", [(3, 4, 14), (3, 5, 9), None])
def test_single_reads_when_the_server_is_older_than_3_6_or_unknown(zk, monkeypatch, version):
    kafka_cluster(zk)
    expected = read_snapshot(zk, "lab", pipelined=False)
    _single_reads(monkeypatch, version)
    seen = _requests_per_read(monkeypatch)
    assert _same(read_snapshot(zk, "lab"), expected) and set(seen) == {1}


def test_a_refused_multi_read_falls_back_to_single_reads(zk, monkeypatch):
    """A multiRead the server does not know (here an unknown opcode: ZooKeeper answers UNIMPLEMENTED and closes the
    session, as 3.4/3.5 do for multiRead itself) is read again with single reads, on a new session, not by kazoo."""
    from kafka_runbooks.detect import snapshot
    from kafka_runbooks.zookeeper import PipelinedReader

    kafka_cluster(zk)
    expected = read_snapshot(zk, "lab", pipelined=False)
    monkeypatch.setattr(PipelinedReader, "MULTI_READ", 99)
    monkeypatch.setattr(snapshot, "_fetch_kazoo", lambda *a: pytest.fail("kazoo read what the reader should have"))
    seen = _requests_per_read(monkeypatch)
    assert _same(read_snapshot(zk, "lab"), expected)
    assert seen[:3] == [1, 100, 1] and set(seen[3:]) == {1}  # children, the refused multiRead, then single reads only


def test_decode_json_is_the_strict_decoder():
    """decode_json's shortcut (the C scanner alone) gives what the strict decoder gives, and its errors."""
    from kafka_runbooks.detect.snapshot import Unparsable, _DECODER, decode_json

    for text in ('{"leader":1,"isr":[1]}', ' {"a": 1}\n', '[1, 2]', '"7"', "7", " 7 ", "1e400", '{"a":1,"a":2}'):
        assert decode_json(text.encode()) == _DECODER.decode(text)
    for text, why in (('{"a":1} x', "Extra data"), ("NaN", "non-standard JSON constant NaN"), ("-Infinity", "Infinity"),
                      ("", "empty znode"), (" ", "Expecting value"), ('{"a":}', "Expecting value"), ("1" * 5000, "digits"),
                      ("[" * 100_000, "nested too deeply")):
        with pytest.raises(Unparsable, match=why):
            decode_json(text.encode())
