"""Watching a rolling restart from the outside (the roll tests and ``benchmarks/roll.py``): a canary load
with the client's own retries, and a ZooKeeper watcher that records every registration and every
``__consumer_offsets`` ISR change. Neither reads anything the remediation engine writes."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from typing import Any


class CanaryLoad:
    """An acks=all idempotent producer (the client's own retries on) writing numbered records, and a
    consumer group reading them and committing synchronously, both in background threads. Afterwards:
    how many produces failed after retries, which records were never read, and whether the group's
    committed offsets ever went backwards (a lost commit)."""

    @staticmethod
    def create_topic(bootstrap: str, name: str, partitions: int = 3, min_isr: int = 2) -> str:
        """A topic of the test's own (replication factor 3, min.insync.replicas 2) through the Admin API."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(name, partitions, 3, config={"min.insync.replicas": str(min_isr)})])[name].result(60)
        return name

    def __init__(self, bootstrap: str, topic: str, group: str, rate_per_s: float = 20.0) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.rate_per_s = rate_per_s
        self.stop_event = threading.Event()
        self.produced = threading.Event()  # the producer flushed: every record it will ever deliver is delivered
        self.lock = threading.Lock()
        self.sent = 0
        self.delivered: set[int] = set()
        self.failed: Counter = Counter()
        self.latencies_ms: list[float] = []
        self.seen: set[int] = set()
        self.committed: dict[int, int] = {}  # partition -> highest offset whose commit the broker acknowledged
        self.commit_errors: Counter = Counter()
        self.threads = [threading.Thread(target=self._produce, daemon=True), threading.Thread(target=self._consume, daemon=True)]

    def start(self) -> "CanaryLoad":
        for t in self.threads:
            t.start()
        return self

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "delivery.timeout.ms": 120000, "linger.ms": 5, "client.id": "roll-test-canary"})
        n = 0
        while not self.stop_event.is_set():
            sent_at = time.monotonic()

            def cb(err, msg, seq=n, t0=sent_at):
                with self.lock:
                    if err is None:
                        self.delivered.add(seq)
                        self.latencies_ms.append((time.monotonic() - t0) * 1000)
                    else:
                        self.failed[err.name()] += 1

            p.produce(self.topic, key=str(n).encode(), value=json.dumps({"seq": n}).encode(), on_delivery=cb)
            with self.lock:
                self.sent += 1
            n += 1
            p.poll(1.0 / self.rate_per_s)
        try:
            p.flush(150)
        finally:
            self.produced.set()

    def _consume(self) -> None:
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "session.timeout.ms": 10000, "client.id": "roll-test-consumer"})
        c.subscribe([self.topic])
        last_commit = time.monotonic()
        pending: dict[int, int] = {}
        # until the producer's flush is over: a record delivered during the flush is one to read (a CI run here saw the last two
        # delivered after the consumer had found nothing unseen and left: "never read", though nothing was lost)
        while not self.produced.is_set() or self._unseen():
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                try:
                    seq = json.loads(msg.value())["seq"]
                except (ValueError, KeyError, TypeError):
                    seq = None  # not one of ours
                if seq is not None:
                    with self.lock:
                        self.seen.add(seq)
                pending[msg.partition()] = msg.offset() + 1
            if pending and time.monotonic() - last_commit >= 1.0:
                from confluent_kafka import KafkaException, TopicPartition

                try:
                    done = c.commit(offsets=[TopicPartition(self.topic, p, o) for p, o in pending.items()], asynchronous=False)
                    with self.lock:
                        for tp in done:
                            if tp.error is None:
                                self.committed[tp.partition] = max(self.committed.get(tp.partition, 0), tp.offset)
                    pending.clear()
                except KafkaException as exc:
                    self.commit_errors[exc.args[0].name()] += 1
                last_commit = time.monotonic()
            if self.stop_event.is_set() and time.monotonic() > self.drain_deadline:
                break
        c.close()

    def _unseen(self) -> bool:
        with self.lock:
            return bool(self.delivered - self.seen)

    def stop(self, drain_s: float = 120.0) -> dict[str, Any]:
        self.drain_deadline = time.monotonic() + drain_s
        self.stop_event.set()
        for t in self.threads:
            t.join(drain_s + 30)
        return self.stats()

    def broker_committed(self) -> dict[int, int]:
        """The group's committed offsets as the coordinator answers them now."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False})
        try:
            parts = self.committed.keys()
            return {tp.partition: tp.offset for tp in c.committed([TopicPartition(self.topic, p) for p in parts], timeout=30)}
        finally:
            c.close()

    def stats(self) -> dict[str, Any]:
        with self.lock:
            lat = sorted(self.latencies_ms)
            return {
                "sent": self.sent,
                "delivered": len(self.delivered),
                "failed": dict(self.failed),
                "never_read": sorted(self.delivered - self.seen)[:50],
                "commits": dict(self.committed),
                "commit_errors": dict(self.commit_errors),
                "p99_ms": lat[int(0.99 * (len(lat) - 1))] if lat else None,
                "max_ms": lat[-1] if lat else None,
            }


class ZooKeeperWatcher:
    """Records, from its own ZooKeeper session, every change of /brokers/ids and of every
    __consumer_offsets partition's state: (monotonic time, registered brokers) and (time, partition, isr)."""

    def __init__(self, zk) -> None:
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch

        self.zk = zk
        self.lock = threading.Lock()
        self.registered: list[tuple[float, frozenset[int]]] = []
        self.isr: list[tuple[float, int, tuple[int, ...]]] = []
        self.replicas: dict[int, tuple[int, ...]] = {
            int(p): tuple(r) for p, r in json.loads(zk.get("/brokers/topics/__consumer_offsets")[0])["partitions"].items()
        }
        self.stopped = False
        ChildrenWatch(zk, "/brokers/ids", self._ids)
        for p in self.replicas:
            DataWatch(zk, f"/brokers/topics/__consumer_offsets/partitions/{p}/state", lambda data, stat, p=p: self._state(p, data))

    def _ids(self, children) -> bool | None:
        with self.lock:
            self.registered.append((time.monotonic(), frozenset(int(c) for c in children)))
        return False if self.stopped else None

    def _state(self, p: int, data) -> bool | None:
        if data:
            with self.lock:
                self.isr.append((time.monotonic(), p, tuple(json.loads(data)["isr"])))
        return False if self.stopped else None

    def stop(self) -> None:
        self.stopped = True

    def most_holders_down(self) -> int:
        """The most replicas of any one __consumer_offsets partition that were unregistered at once."""
        with self.lock:
            return max((len(set(reps) - regs) for _, regs in self.registered for reps in self.replicas.values()), default=0)

    def offsets_partitions_without_a_registered_in_sync_holder(self) -> list[tuple[float, int]]:
        """Moments when an offsets partition's ISR had no registered broker (its coordinator gone)."""
        events = sorted([(t, "ids", regs) for t, regs in self.registered] + [(t, "isr", (p, isr)) for t, p, isr in self.isr],
                        key=lambda e: e[0])
        regs: frozenset[int] = frozenset()
        isr: dict[int, tuple[int, ...]] = {}
        bad = []
        for t, kind, value in events:
            if kind == "ids":
                regs = value
            else:
                isr[value[0]] = value[1]
            if regs:
                bad += [(t, p) for p, members in isr.items() if not set(members) & regs]
        return bad

    def down_order(self) -> list[int]:
        """Brokers in the order they deregistered."""
        with self.lock:
            out, prev = [], None
            for _, regs in self.registered:
                if prev is not None:
                    out += sorted(prev - regs)
                prev = regs
            return out

    def registrations(self) -> list[tuple[float, list[int]]]:
        """Every /brokers/ids seen, with seconds since the first: what a failed assertion shows."""
        with self.lock:
            t0 = self.registered[0][0] if self.registered else 0.0
            return [(round(t - t0, 2), sorted(regs)) for t, regs in self.registered]

    def isr_changes(self) -> list[tuple[float, int, tuple[int, ...]]]:
        """Every __consumer_offsets ISR seen, with seconds since the first registration seen."""
        with self.lock:
            t0 = self.registered[0][0] if self.registered else 0.0
            return [(round(t - t0, 2), p, isr) for t, p, isr in self.isr]
