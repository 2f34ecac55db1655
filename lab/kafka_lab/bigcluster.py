"""The ZooKeeper metadata of a big ZooKeeper-mode Kafka cluster, in Kafka 2.3's own layout, with no broker behind it:
for the read and planning paths at scale (``./run bench scale``) and the snapshot reader's tests.

    write_cluster(zk, "/bench-scale", brokers=100, partitions=100_000, replication=3)

Registrations (``/brokers/ids/<id>``, version 4, ephemeral like Kafka's: they live as long as the writer's session),
topics with their assignment, every partition's state (leader = first replica, full ISR), topic configs, the
controller and its epoch. Assignment is Kafka's round robin (replica i of partition p on broker ``(start + p + i) % n``),
so every broker leads and follows the same number of partitions. Writes go in multi-op transactions, pipelined.
"""

from __future__ import annotations

import json
import time
from typing import Iterator

TXN_OPS = 250  # creates per transaction (each ~150 bytes: well under jute.maxbuffer)
# One transaction in flight: ZooKeeper answers a session's requests in order, pings included, so a deep pipeline of
# big writes on a loaded ensemble delays the client's ping past its read timeout (seen: ConnectionLoss)
TRIES = 5


def registration(b: int, host: str, port: int = 9092, jmx_port: int = 9999) -> bytes:
    return json.dumps({
        "listener_security_protocol_map": {"CLIENT": "PLAINTEXT", "REPLICATION": "PLAINTEXT"},
        "endpoints": [f"CLIENT://{host}:{port}", f"REPLICATION://{host}:{port + 1}"], "rack": None, "jmx_port": jmx_port,
        "host": host, "timestamp": str(int(time.time() * 1000)), "port": port, "version": 4,
    }).encode()


def assignment(topic_index: int, partitions: int, brokers: int, replication: int, first_id: int = 1) -> dict[str, list[int]]:
    start = (topic_index * 7) % brokers
    return {str(p): [first_id + (start + p + i) % brokers for i in range(replication)] for p in range(partitions)}


def state(replicas: list[int], controller_epoch: int = 1) -> bytes:
    return json.dumps({"controller_epoch": controller_epoch, "leader": replicas[0], "version": 1, "leader_epoch": 0,
                       "isr": list(replicas)}).encode()


def topic_names(topics: int) -> list[str]:
    return [f"scale-{t:04d}" for t in range(topics)]


def _nodes(root: str, brokers: int, partitions: int, replication: int, topics: int, host_of) -> Iterator[tuple[str, bytes, bool]]:
    """(path, data, ephemeral) of every znode, parents first."""
    for path in ("", "/brokers", "/brokers/ids", "/brokers/topics", "/config", "/config/topics", "/config/brokers", "/admin"):
        yield root + path, b"", False
    yield f"{root}/controller_epoch", b"1", False
    per_topic, extra = divmod(partitions, topics)
    for t, name in enumerate(topic_names(topics)):
        n = per_topic + (1 if t < extra else 0)
        parts = assignment(t, n, brokers, replication)
        yield f"{root}/brokers/topics/{name}", json.dumps({"version": 1, "partitions": parts}).encode(), False
        yield f"{root}/config/topics/{name}", json.dumps({"version": 1, "config": {}}).encode(), False
        yield f"{root}/brokers/topics/{name}/partitions", b"", False
        for p, replicas in parts.items():
            yield f"{root}/brokers/topics/{name}/partitions/{p}", b"", False
            yield f"{root}/brokers/topics/{name}/partitions/{p}/state", state(replicas), False
    for b in range(1, brokers + 1):
        yield f"{root}/brokers/ids/{b}", registration(b, host_of(b)), True
    yield f"{root}/controller", json.dumps({"version": 1, "brokerid": 1, "timestamp": str(int(time.time() * 1000))}).encode(), True


def write_cluster(zk, root: str, *, brokers: int, partitions: int, replication: int = 3, topics: int = 100,
                  host_of=lambda b: f"broker-{b}.scale.invalid") -> dict:
    """Writes the cluster under ``root`` (which must not exist) with the started KazooClient ``zk``. Returns counts."""
    if zk.exists(root):
        raise ValueError(f"{root} exists: delete it first (delete_cluster)")
    t0 = time.monotonic()
    batch: list[tuple[str, bytes, bool]] = []
    written = 0
    for node in _nodes(root, brokers, partitions, replication, topics, host_of):
        batch.append(node)
        if len(batch) >= TXN_OPS:
            _commit(zk, batch)
            written += len(batch)
            batch = []
    if batch:
        _commit(zk, batch)
        written += len(batch)
    return {"znodes": written, "brokers": brokers, "partitions": partitions, "topics": topics, "seconds": time.monotonic() - t0}


def _commit(zk, batch: list[tuple[str, bytes, bool]]) -> None:
    """One transaction; after a lost connection, done if its last znode exists (a transaction is all or nothing)."""
    from kazoo.exceptions import ConnectionLoss

    for attempt in range(TRIES):
        try:
            txn = zk.transaction()
            for path, data, ephemeral in batch:
                txn.create(path, data, ephemeral=ephemeral)
            _check(txn.commit())
            return
        except ConnectionLoss:
            if zk.retry(zk.exists, batch[-1][0]):
                return
            time.sleep(0.5 * (attempt + 1))
    raise RuntimeError(f"could not write {batch[0][0]} .. {batch[-1][0]} in {TRIES} tries")


def _check(results) -> None:
    bad = [r for r in results if isinstance(r, Exception)]
    if bad:
        raise RuntimeError(f"a transaction of the cluster's znodes failed: {bad[0]!r}")


def delete_cluster(zk, root: str) -> None:
    if zk.exists(root):
        zk.delete(root, recursive=True)
