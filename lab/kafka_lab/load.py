"""Application load on the lab: an acks=all producer and one consumer group per broker committing offsets.

Light on CPU (a few messages per second). The producer does not retry (``retries=0``), so every error a broker
answers (NOT_LEADER_FOR_PARTITION, NOT_ENOUGH_REPLICAS, timeouts, ...) is counted by name; an application with
retries would hide them. Each consumer group is chosen so that its coordinator (the leader of its
``__consumer_offsets`` partition) is a different broker. Stats are written to a JSON file every second.

    python -m kafka_lab.load --state DIR --bootstrap H:P,... --groups G1,G2,G3 --stats FILE [--rate 4] [--commit-every 2] [--heartbeat-ms 3000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections import Counter, deque
from pathlib import Path

from .topics import ORDERS, TOPICS

# Measured on an idle lab of three 2.3.0 brokers, two 60 s windows each (2026-11-30): at 10 messages/s, commits every
# second and 1 s heartbeats the brokers used 5.96-6.14 s of CPU a minute and this process 1.40 s; at 4/s, commits every
# 2 s and librdkafka's default 3 s heartbeat, 4.01-4.59 s and 0.76-0.86 s. Three labs share two cores in ./run test.
# Each `orders` partition still gets a message every 1.5 s and each group commits well within the 10 s that
# `Faults._load_fresh` asks of a fresh load.
RATE = 4.0
COMMIT_EVERY_S = 2.0
HEARTBEAT_MS = 3000


def offsets_partition(group: str, partitions: int = 50) -> int:
    """Kafka's GroupMetadataManager.partitionFor (the product's own: remediate/gates.py)."""
    from kafka_runbooks.remediate.gates import offsets_partition_for

    return offsets_partition_for(group, partitions)


def groups_per_broker(offsets_leaders: dict[int, int], prefix: str = "kafka-lab-load-") -> dict[int, str]:
    """One group id per broker whose __consumer_offsets partition that broker leads (preferred leadership)."""
    out: dict[int, str] = {}
    wanted = set(offsets_leaders.values())
    k = 0
    while set(out) != wanted:
        g = f"{prefix}{k}"
        leader = offsets_leaders[offsets_partition(g, len(offsets_leaders))]
        out.setdefault(leader, g)
        k += 1
    return dict(sorted(out.items()))


class Stats:
    def __init__(self, groups: list[str]):
        self.lock = threading.Lock()
        self.started_at = time.time()
        self.produced_ok = 0
        self.produced_failed = 0
        self.produce_errors: Counter = Counter()
        self.latencies_ms: deque = deque(maxlen=1000)
        self.last_produce_ok_at: float | None = None
        self.last_produce_error: dict | None = None
        self.client_errors: Counter = Counter()
        self.groups = {g: {"consumed": 0, "commits_ok": 0, "commits_failed": 0, "commit_errors": Counter(),
                           "last_commit_ok_at": None, "assigned": []} for g in groups}

    def snapshot(self) -> dict:
        with self.lock:
            lat = sorted(self.latencies_ms)

            def pct(q: float) -> float | None:
                return round(lat[min(len(lat) - 1, int(q * len(lat)))], 1) if lat else None

            groups = {g: {**s, "commit_errors": dict(s["commit_errors"])} for g, s in self.groups.items()}
            return {
                "pid": os.getpid(), "started_at": self.started_at, "updated_at": time.time(),
                "produced_ok": self.produced_ok, "produced_failed": self.produced_failed,
                "produce_errors": dict(self.produce_errors), "last_produce_ok_at": self.last_produce_ok_at,
                "last_produce_error": self.last_produce_error,
                "produce_latency_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": lat[-1] if lat else None, "samples": len(lat)},
                "consumed": sum(s["consumed"] for s in self.groups.values()),
                "commits_ok": sum(s["commits_ok"] for s in self.groups.values()),
                "commits_failed": sum(s["commits_failed"] for s in self.groups.values()),
                "client_errors": dict(self.client_errors), "groups": groups,
            }


def _client_error(stats: Stats):
    def cb(err):
        with stats.lock:
            stats.client_errors[err.name()] += 1
    return cb


def run_consumer(bootstrap: str, group: str, stats: Stats, stop: threading.Event, commit_every_s: float = COMMIT_EVERY_S,
                 heartbeat_ms: int = HEARTBEAT_MS) -> None:
    from confluent_kafka import Consumer, KafkaException

    s = stats.groups[group]

    def on_commit(err, partitions):
        errs = [p.error for p in partitions or [] if p.error is not None]
        with stats.lock:
            if err is not None or errs:
                s["commits_failed"] += 1
                for e in ([err] if err is not None else []) + errs:
                    s["commit_errors"][e.name()] += 1
            else:
                s["commits_ok"] += 1
                s["last_commit_ok_at"] = time.time()

    def on_assign(consumer, partitions):
        with stats.lock:
            s["assigned"] = sorted(p.partition for p in partitions)

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"kafka-lab-load-{group}",
                  "enable.auto.commit": False, "auto.offset.reset": "latest", "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": heartbeat_ms, "on_commit": on_commit, "error_cb": _client_error(stats),
                  # the group's rebalance timeout: a rebalance that waits for a member lost in a coordinator
                  # move (seen after a ZooKeeper session flap of the coordinator) gives up after 30 s, not 5 min
                  "max.poll.interval.ms": 30000})
    c.subscribe([ORDERS], on_assign=on_assign)
    pending = 0
    next_commit = time.monotonic() + commit_every_s
    while not stop.is_set():
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            pending += 1
            with stats.lock:
                s["consumed"] += 1
        if pending and time.monotonic() >= next_commit:
            try:
                c.commit(asynchronous=True)
            except KafkaException as exc:  # e.g. _NO_OFFSET while unassigned
                with stats.lock:
                    s["commits_failed"] += 1
                    s["commit_errors"][exc.args[0].name()] += 1
            pending = 0
            next_commit = time.monotonic() + commit_every_s
    c.close()


def write_stats(path: Path, stats: Stats) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(stats.snapshot(), indent=1) + "\n")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import Producer

    ap = argparse.ArgumentParser(prog="python -m kafka_lab.load")
    ap.add_argument("--state", required=True, help="lab state dir (marks the process as the lab's)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--groups", required=True)
    ap.add_argument("--stats", required=True, type=Path)
    ap.add_argument("--rate", type=float, default=RATE, help="messages per second")
    ap.add_argument("--commit-every", type=float, default=COMMIT_EVERY_S, help="seconds between a group's commits")
    ap.add_argument("--heartbeat-ms", type=int, default=HEARTBEAT_MS, help="the consumers' heartbeat.interval.ms")
    a = ap.parse_args(argv)
    groups = a.groups.split(",")
    stats = Stats(groups)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    threads = [threading.Thread(target=run_consumer, args=(a.bootstrap, g, stats, stop, a.commit_every, a.heartbeat_ms),
                                name=f"consumer-{g}", daemon=True)
               for g in groups]
    for t in threads:
        t.start()
    producer = Producer({"bootstrap.servers": a.bootstrap, "client.id": "kafka-lab-load-producer", "acks": "all",
                         "retries": 0, "enable.idempotence": False, "linger.ms": 5, "message.timeout.ms": 10000,
                         "request.timeout.ms": 5000, "error_cb": _client_error(stats)})
    partitions = len(TOPICS[ORDERS]["assignment"])

    def delivered(err, msg, sent=None):
        now = time.time()
        with stats.lock:
            if err is None:
                stats.produced_ok += 1
                stats.last_produce_ok_at = now
                stats.latencies_ms.append((time.monotonic() - sent) * 1000)
            else:
                stats.produced_failed += 1
                stats.produce_errors[err.name()] += 1
                stats.last_produce_error = {"name": err.name(), "at": now, "partition": msg.partition()}

    interval = 1.0 / a.rate
    n = 0
    next_send = next_stats = time.monotonic()
    while not stop.is_set():
        now = time.monotonic()
        if now >= next_send:
            sent = now
            try:
                producer.produce(ORDERS, value=json.dumps({"n": n, "at": time.time()}).encode(), partition=n % partitions,
                                 on_delivery=lambda err, msg, sent=sent: delivered(err, msg, sent))
            except BufferError:
                with stats.lock:
                    stats.produced_failed += 1
                    stats.produce_errors["_QUEUE_FULL"] += 1
            n += 1
            next_send += interval
        if now >= next_stats:
            write_stats(a.stats, stats)
            next_stats = now + 1.0
        producer.poll(max(0.0, min(next_send, next_stats) - time.monotonic()))
    producer.flush(5)
    write_stats(a.stats, stats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
