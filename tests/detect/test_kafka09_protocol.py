"""Seed 002 is never caused by the product: against a cluster registered as Kafka 0.9 (a REAL ZooKeeper holding the
registration znodes 0.9.0.1 writes, schema version 2), the health check, a restart plan and a restart step's serving
check send the brokers no API key 0.9 does not know -- neither the product's own wire code nor the librdkafka clients it
creates (ApiVersions, key 18, made seed 002's brokers drop every request of the network thread's batch) -- and the
direct check still tells a broker that answers from one that accepts connections and never answers.

The brokers are tests/kafka09_server.py: protocol-level stand-ins for 0.9.0.1's request path (written from its
SocketServer/RequestChannel/ApiKeys source; its docstring says what it does and does not do), each recording every API
key it received. No real 0.9 broker can be had on this machine (../shared/ENVIRONMENT.md)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)

_spec = importlib.util.spec_from_file_location("kafka_runbooks_tests_kafka09", Path(__file__).parents[1] / "kafka09_server.py")
kafka09 = importlib.util.module_from_spec(_spec)
sys.modules.setdefault(_spec.name, kafka09)
_spec.loader.exec_module(kafka09)

TOPIC = "orders"
CANARY = "kafka-runbooks-canary"
IDS = (1, 2, 3)


def _assignment(n: int) -> dict[int, tuple[int, list[int], list[int]]]:
    return {p: (IDS[p % 3], [IDS[(p + i) % 3] for i in range(3)], [IDS[(p + i) % 3] for i in range(3)]) for p in range(n)}


@pytest.fixture
def cluster09(zk, zookeeper, monkeypatch):
    """(config, {broker id: Kafka09Server}): three 0.9 stand-ins registered in ZooKeeper by a 'broker' session, as
    0.9.0.1 registers (schema version 2), with topics orders (3 partitions) and the canary topic."""
    from kafka_runbooks.config import ClusterConfig

    servers = {b: kafka09.Kafka09Server(b).start() for b in IDS}
    topics = {TOPIC: _assignment(3), CANARY: _assignment(3)}
    for s in servers.values():
        s.set_cluster({b: x.address for b, x in servers.items()}, topics)
    brokers = zookeeper.client(zk.chroot_path)
    try:
        for b, s in servers.items():
            brokers.create(f"/brokers/ids/{b}", s.registration(), ephemeral=True, makepath=True)
        brokers.create("/controller", json.dumps({"version": 1, "brokerid": 1, "timestamp": "0"}).encode(), ephemeral=True)
        for topic, parts in topics.items():
            brokers.create(f"/brokers/topics/{topic}", json.dumps(
                {"version": 1, "partitions": {str(p): r for p, (_, r, _) in parts.items()}}).encode(), makepath=True)
            for p, (leader, _, isr) in parts.items():
                brokers.create(f"/brokers/topics/{topic}/partitions/{p}/state", json.dumps(
                    {"controller_epoch": 1, "leader": leader, "version": 1, "leader_epoch": 0, "isr": isr}).encode(), makepath=True)
        monkeypatch.setenv("AIRFLOW_CONN_KR_ZK_09", json.dumps(
            {"conn_type": "generic", "host": zookeeper.hosts, "extra": {"chroot": zk.chroot_path}}))
        config = ClusterConfig.from_dict("c09", {
            "zk_conn_id": "kr_zk_09", "hosts": {str(b): f"ssh_b{b}" for b in IDS},
            "health": {"kafka_probe_timeout_s": 5.0}, "leadership": {"view_timeout_s": 5.0},
            "canary": {"enabled": True, "topic": CANARY, "timeout_s": 2.0}})
        yield config, servers
    finally:
        brokers.stop()
        brokers.close()
        for s in servers.values():
            s.stop()


def _no_unknown_key(servers, asked=IDS) -> None:
    sent = {b: sorted(s.keys()) for b, s in servers.items()}
    assert all(not s.unknown_keys() for s in servers.values()), f"keys 0.9 does not know were sent: {sent}"
    assert all(not s.errors for s in servers.values()), {b: s.errors[:1] for b, s in servers.items()}
    assert all(servers[b].keys() for b in asked), f"a broker was asked nothing at all: {sent}"


def _snapshot(config):
    from kafka_runbooks.detect.observe import take_snapshot

    return take_snapshot(config, probe_hosts=False, probe_zookeeper=False)


def test_health_check_asks_0_9_brokers_no_unknown_key_and_tells_serving_from_hung(cluster09):
    config, servers = cluster09
    s = _snapshot(config)
    # the canary's librdkafka producer, consumer and admin were created too: none of them sent ApiVersions either
    assert s.canary, "the canary ran"
    _no_unknown_key(servers)
    assert [b.schema_version for b in s.brokers] == [2, 2, 2]
    assert [(c.broker_id, c.ok, c.answered_by) for c in s.kafka_checks] == [(b, True, b) for b in IDS], s.kafka_checks
    assert {c.method for c in s.kafka_checks} == {"Metadata v0"}
    assert [(v.broker_id, v.ok) for v in s.metadata_views] == [(b, True) for b in IDS]
    assert any("not asked ApiVersions" in n for n in s.version.notes), s.version.notes
    assert not s.version.has("api_versions")  # schema 2 is a floor of 0.9.0 only

    servers[3].hang()  # accepts connections, reads requests, never answers (a stuck request path)
    s = _snapshot(config)
    _no_unknown_key(servers)
    by = {c.broker_id: c for c in s.kafka_checks}
    assert by[1].ok and by[2].ok, s.kafka_checks
    assert not by[3].ok and by[3].error_code == "_TIMED_OUT", by[3]
    assert not s.view_of(3).ok and s.view_of(1).ok


def test_plan_and_restart_steps_serving_checks_ask_0_9_brokers_no_unknown_key(cluster09):
    """What the plan operator (operators/remediate.fresh_plan) and a restart step (remediate/executor.read_fresh_state,
    last_check) ask the brokers: direct checks of every holder (``serving_evidence``), the version, and the
    coordinator probe's librdkafka configuration (``probe_consumer_config``)."""
    from confluent_kafka.admin import AdminClient

    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate.executor import probe_consumer_config, serving_evidence
    from kafka_runbooks.remediate.plan import plan_restart, safety_settings

    config, servers = cluster09
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        snapshot = read_snapshot(zk, config.name)
    not_serving, unresponsive, checks, _ = serving_evidence(config, snapshot, [3], {}, [])
    version = KafkaHook(config.kafka_conn_id, listener=config.listener).kafka_version(
        snapshot.brokers, config.health.kafka_probe_timeout_s, config.kafka_version)
    plan = plan_restart(snapshot, [3], config, not_serving=not_serving, unresponsive=unresponsive,
                        settings=safety_settings(config, {}, {}, version))
    _no_unknown_key(servers, asked=(1, 2))  # the holders of what broker 3 holds
    assert sorted(checks) == [1, 2] and all(c.ok for c in checks.values()) and not unresponsive, checks
    assert plan.steps or plan.refusals

    # the coordinator gate's consumers: the config a restart step gives them, used by a librdkafka client here
    consumer = probe_consumer_config(types.SimpleNamespace(config=config), snapshot)("kr-probe")
    assert consumer["api.version.request"] is False and consumer["broker.version.fallback"] == "0.9.0"
    admin = AdminClient({k: v for k, v in consumer.items() if k not in ("group.id", "enable.auto.commit", "session.timeout.ms")})
    assert TOPIC in admin.list_topics(timeout=10).topics
    _no_unknown_key(servers, asked=(1, 2))
    # a restart step: the holders checked again right before the stop; one of them hung now is no holder
    servers[2].hang()
    _, unresponsive, checks, _ = serving_evidence(config, snapshot, [3], {}, [])
    assert checks[1].ok and not checks[2].ok and 2 in unresponsive, checks
    _no_unknown_key(servers, asked=(1, 2))


def test_the_stand_in_drops_the_batch_of_an_unknown_key_as_seed_002_shows(cluster09):
    """The stand-in is a real detector: librdkafka left at its defaults sends ApiVersions, which the stand-in answers
    as 0.9.0.1 does (the uncaught exception, no answer); the product's librdkafka settings for this cluster do not."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kafka_runbooks.hooks.kafka import client_config

    _, servers = cluster09
    s = servers[1]
    default = {**client_config({"api.version.request": True}, f"127.0.0.1:{s.port}", 2.0), "api.version.request.timeout.ms": 1000}
    default.pop("logger")
    admin = AdminClient(default)
    with pytest.raises(KafkaException):  # no answer to ApiVersions; librdkafka gives up on that connection
        admin.list_topics(timeout=4)
    assert 18 in s.unknown_keys() and "ArrayIndexOutOfBoundsException: 18" in s.errors[0]
    assert {r.outcome for r in s.received if r.api_key == 18} == {"uncaught exception"}
    fresh = servers[2]
    safe = client_config({}, f"127.0.0.1:{fresh.port}", 2.0)  # a base that decided nothing: as for 0.9
    safe.pop("logger")
    assert TOPIC in AdminClient(safe).list_topics(timeout=6).topics
    assert fresh.keys() == {3} and not fresh.errors


def test_a_0_9_broker_sent_key_18_drops_the_other_requests_of_its_batch():
    """Two requests selected in the same poll, the unknown key first: neither is ever answered and neither connection is
    closed (seed 002: 'every request selected in the same batch was dropped', other clients' and brokers' included);
    the next poll's requests are answered again."""
    import socket
    import time

    from kafka_runbooks.hooks.kafka_wire import metadata_body, parse_metadata, request

    s = kafka09.Kafka09Server(1).start()
    s.set_cluster({1: s.address}, {TOPIC: _assignment(1)})
    try:
        bad, good = socket.create_connection(s.address, 5), socket.create_connection(s.address, 5)
        deadline = time.monotonic() + 10
        while len(s._conns) < 2 and time.monotonic() < deadline:  # both accepted, in this order
            time.sleep(0.05)
        s.hold()
        bad.sendall(request(18, 0, 7, b""))
        good.sendall(request(3, 0, 8, metadata_body(0)))
        time.sleep(0.5)  # both in the server's socket buffers
        s.release()
        while len(s.received) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [(r.api_key, r.outcome) for r in s.received] == [(18, "uncaught exception"), (3, "dropped")]
        for sock in (bad, good):
            sock.settimeout(1.0)
            with pytest.raises(socket.timeout):  # no answer, and not closed (recv would return b"")
                sock.recv(4)
        assert "java.lang.ArrayIndexOutOfBoundsException: 18" in s.errors[0]
        good.sendall(request(3, 0, 9, metadata_body(0)))  # a later poll: answered
        good.settimeout(5.0)
        size = int.from_bytes(good.recv(4), "big")
        data = b""
        while len(data) < size:
            data += good.recv(size - len(data))
        assert int.from_bytes(data[:4], "big") == 9 and parse_metadata(data[4:], 0).brokers == {1: s.address}
    finally:
        s.stop()
