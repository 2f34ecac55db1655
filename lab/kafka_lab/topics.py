"""The lab's topics, through Kafka's Admin API (confluent-kafka), never by writing Kafka's znodes.

Preferred leaders (first replica) are spread over the brokers: each broker leads two ``orders`` partitions and one
canary partition; ``__consumer_offsets`` is created by Kafka itself (the first FindCoordinator request), with its
own round-robin assignment.
"""

from __future__ import annotations

import time

from .hosts import BROKER_IDS, client_bootstrap
from .procs import LabError

ORDERS = "orders"
CANARY = "kafka-runbooks-canary"
OFFSETS = "__consumer_offsets"
OFFSETS_PARTITIONS = 50


def _rotations(n: int) -> list[list[int]]:
    ids = list(BROKER_IDS)
    forward = [ids[i:] + ids[:i] for i in range(len(ids))]
    backward = [[r[0], *reversed(r[1:])] for r in forward]
    return (forward + backward)[:n] if n <= 2 * len(ids) else [forward[i % len(ids)] for i in range(n)]


TOPICS = {
    ORDERS: {"assignment": _rotations(6), "config": {"min.insync.replicas": "2"}},
    CANARY: {"assignment": _rotations(3), "config": {"min.insync.replicas": "2"}},
}


def bootstrap_all() -> str:
    return ",".join(client_bootstrap(b) for b in BROKER_IDS)


def admin(bootstrap: str | None = None, timeout_ms: int = 10000):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap or bootstrap_all(), "socket.timeout.ms": timeout_ms,
                        "client.id": "kafka-lab-admin"})


def create_topics(timeout: float = 60) -> None:
    from confluent_kafka.admin import NewTopic

    a = admin()
    new = [NewTopic(name, num_partitions=len(spec["assignment"]), replica_assignment=spec["assignment"], config=spec["config"]) for name, spec in TOPICS.items()]
    futures = a.create_topics(new, operation_timeout=timeout)
    for name, f in futures.items():
        try:
            f.result(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - confluent-kafka raises KafkaException wrapping the broker's error
            raise LabError(f"creating topic {name} failed: {exc}") from exc


def delete_topic(name: str, timeout: float = 180) -> None:
    """Deletes a topic and waits until no broker's metadata has it; a topic already gone counts as deleted. Each try
    uses a new client: a request sent to a controller that restarted under it (a test's roll) can stay unanswered."""
    deadline = time.monotonic() + timeout
    asked = False
    while True:
        a = admin()  # referenced until its future resolves
        try:
            if not asked:
                a.delete_topics([name])[name].result(max(1.0, min(30.0, deadline - time.monotonic())))
                asked = True
            if name not in a.list_topics(timeout=5).topics:
                return
            last: object = "still in the cluster's metadata"
        except Exception as exc:  # noqa: BLE001 - KafkaException (the broker's error) or the future's TimeoutError
            if "UNKNOWN_TOPIC" in str(exc) or "does not exist" in str(exc):
                return
            last = repr(exc)
        if time.monotonic() >= deadline:
            raise LabError(f"topic {name} not deleted within {timeout:.0f} s: {last}")
        time.sleep(1)


def force_offsets_topic(timeout: float = 60) -> None:
    """Kafka creates __consumer_offsets on the first FindCoordinator request: a consumer asks for a committed
    offset until a coordinator answers. (AdminClient.describe_consumer_groups is not used for this: while no
    coordinator exists it can abort the process in librdkafka 2.16, `rd_kafka_enq_once_del_source_return`.)"""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap_all(), "group.id": "kafka-lab-bootstrap", "client.id": "kafka-lab-admin",
                  "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    last = None
    try:
        while time.monotonic() < deadline:
            try:
                c.committed([TopicPartition(ORDERS, 0)], timeout=5)
                return
            except KafkaException as exc:  # COORDINATOR_NOT_AVAILABLE, timeouts: until the topic has leaders
                last = exc
    finally:
        c.close()
    raise LabError(f"__consumer_offsets not created within {timeout:.0f}s (last error: {last})")


def elect_preferred(partitions: list[tuple[str, int]], timeout: float = 30) -> dict:
    """Preferred-replica election through the Admin API; {(topic, p): error name or None}."""
    from confluent_kafka import TopicPartition
    from confluent_kafka import ElectionType

    if not partitions:
        return {}
    a = admin()
    f = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(t, p) for t, p in partitions])  # no kwargs: see ENVIRONMENT.md
    result = f.result(timeout=timeout)
    return {(tp.topic, tp.partition): (str(err) if err is not None else None) for tp, err in result.items()}


def elect_preferred_znode(kz, partitions: list[tuple[str, int]], timeout: float = 30) -> None:
    """Preferred-replica election as Kafka before 2.2 offers it (no ElectLeaders API, KIP-183): the partitions written
    to /admin/preferred_replica_election (what kafka-preferred-replica-election.sh does); the controller elects and
    deletes the znode. Waits for an election already pending to finish first."""
    import json

    from kazoo.exceptions import NodeExistsError

    path = "/admin/preferred_replica_election"
    data = json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]}).encode()
    deadline = time.monotonic() + timeout
    while True:
        try:
            kz.create(path, data, makepath=True)
            break
        except NodeExistsError:
            if time.monotonic() > deadline:
                raise LabError(f"{path} still holds an earlier election after {timeout:.0f}s")
            time.sleep(0.3)
    while kz.exists(path):
        if time.monotonic() > deadline:
            raise LabError(f"the controller did not run the preferred election of {path} within {timeout:.0f}s")
        time.sleep(0.2)


def list_topics_at(b: int, timeout: float = 3.0):
    """A Metadata request to broker b alone (bootstrapped at its CLIENT listener); raises on timeout."""
    return admin(client_bootstrap(b), timeout_ms=int(timeout * 1000)).list_topics(timeout=timeout)
