"""The gates after every start, each bounded by its ``gates.*`` setting, none a fixed sleep.

* in sync: the broker is in the ISR of every partition it holds (kazoo watches on the state znodes,
  polled every ``poll_s`` as a safety net), with progress -- which partitions still miss it, and
  how far its log recovery has come (``Completed load of log`` lines of its server.log);
* coordinator loaded: every ``__consumer_offsets`` partition the broker leads, and every one whose
  leader changed during the step, answers an OffsetFetch for a probe group id that Kafka maps to
  that partition (Kafka 2.3: ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``),
  through a confluent-kafka consumer (``Consumer.committed``), until none answers
  COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR; corroborated by the broker's
  ``Finished loading offsets`` lines; with progress -- which partitions still have no loaded coordinator, what they
  answered, the time left. (The Admin API's coordinator calls are not used: librdkafka
  aborts the process when a coordinator request fails mid-flight, issue librdkafka#4605 -- exactly
  the moment this gate exists for.)
* canary: the health check's canary (``KafkaHook.canary``: acks=all produce and consume back) on a
  partition led by each leader of the canary topic (a replica on every broker), within
  ``canary.latency_bound_ms``; with progress -- the failed rounds so far, the last one's reason, the time left.

Any gate failing raises :class:`GateFailed`, which halts the roll.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot

PROBE_PREFIX = "kafka-runbooks-probe-"
LOG_RECOVERY_MARKERS = ("Completed load of log", "Recovering unflushed segment", "Loading producer state", "Logs loading complete")


class GateFailed(RuntimeError):
    def __init__(self, gate: str, reason: str, details: Mapping[str, Any] | None = None):
        self.gate = gate
        self.reason = reason
        self.details = dict(details or {})
        super().__init__(f"gate {gate!r} failed: {reason}")


@dataclass
class GateResult:
    gate: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"gate": self.gate, "seconds": round(self.seconds, 2), **self.details}


# --------------------------------------------------------------------------- pure helpers

def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (UTF-16 code units, 32-bit two's complement)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, num_partitions: int) -> int:
    """Kafka's ``GroupMetadataManager.partitionFor``: ``Utils.abs(groupId.hashCode) % n``, where Kafka's
    ``Utils.abs`` is ``Math.abs`` except that ``Integer.MIN_VALUE`` maps to 0 (not ``& 0x7fffffff``,
    which is ``Utils.toPositive``, the partitioner's)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def probe_groups(num_partitions: int, prefix: str = PROBE_PREFIX) -> dict[int, str]:
    """One probe group id per ``__consumer_offsets`` partition (the first ``prefix<n>`` that maps there)."""
    out: dict[int, str] = {}
    n = 0
    while len(out) < num_partitions:
        group = f"{prefix}{n}"
        out.setdefault(offsets_partition_for(group, num_partitions), group)
        n += 1
        if n > num_partitions * 1000:
            raise RuntimeError(f"could not find probe groups for {num_partitions} partitions")
    return out


def offsets_partitions(snapshot: ClusterSnapshot) -> dict[int, int]:
    """{__consumer_offsets partition: leader} (leader -1 when offline)."""
    return {p.index: p.leader for p in snapshot.partitions if p.topic == CONSUMER_OFFSETS}


def partitions_to_probe(before: Mapping[int, int], after: Mapping[int, int], broker_id: int) -> list[int]:
    """Offsets partitions the broker leads now, and those whose leader changed during the step."""
    return sorted(p for p, leader in after.items() if leader == broker_id or before.get(p) != leader)


def finished_loading(log_text: str) -> dict[int, int]:
    """{partition: milliseconds} from ``Finished loading offsets ... from __consumer_offsets-N in M milliseconds``."""
    from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log

    out = {}
    for ev in parse_kafka_log(log_text).signatures("group_load_done"):
        out[int(ev.attrs["partition"])] = int(ev.attrs["millis"])
    return out


def failed_loading(log_text: str) -> dict[int, str]:
    """{partition: the exception} of offsets partitions whose newest load line is ``Error loading offsets from``: Kafka
    counts such a load as done, and the groups it had not reached are missing from that coordinator (detect/offsets.py)."""
    from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log  # deferred: loaded on first use, not when a DAG file is parsed

    parsed = parse_kafka_log(log_text)
    newest: dict[int, Any] = {}
    for ev in sorted(parsed.signatures("group_load_start") + parsed.signatures("group_load_done")
                     + parsed.signatures("group_load_failed"), key=lambda r: r.line):
        newest[int(ev.attrs["partition"])] = ev
    return {p: (ev.exception or "no exception line")[:300] for p, ev in newest.items() if ev.signature == "group_load_failed"}


def refuse_any_failed_load(log_text: str, led: Iterable[int],
                           other_logs: Callable[[], Mapping[int, tuple[list[int], str]]] | None) -> None:
    """Once every probed partition answers: no partition's newest load line may be a failure, on this broker
    (``log_text``, the partitions it leads) nor on the other brokers that lead a probed partition (``other_logs()``:
    {broker: (the probed partitions it leads, its server.log tail)})."""
    refuse_failed_loads(log_text, led)
    for other, (theirs, text) in sorted((other_logs() if other_logs else {}).items()):
        refuse_failed_loads(text, theirs, f"broker {other}")


def refuse_failed_loads(log_text: str, led: Iterable[int], where: str = "this broker") -> None:
    """GateFailed when a partition in ``led`` last ended its load with an exception: its coordinator answers OffsetFetch,
    without the groups the load had not reached, so no probe tells it from a loaded one."""
    failed = {p: why for p, why in failed_loading(log_text).items() if p in set(led)}
    if failed:
        raise GateFailed("coordinator", "the load of " + ", ".join(f"__consumer_offsets-{p}" for p in sorted(failed))
                         + f" on {where} ended with an exception (" + "; ".join(f"{p}: {w}" for p, w in sorted(failed.items()))
                         + "): Kafka counts it as loaded, but groups after the failure point are missing from the "
                         "coordinator (their committed offsets unknown to it); moving the partition's leadership loads it again",
                         {"failed_loads": {str(p): w for p, w in sorted(failed.items())}})


def log_recovery_progress(log_text: str) -> dict[str, int]:
    return {m: log_text.count(m) for m in LOG_RECOVERY_MARKERS if m in log_text}


def canary_coverage(snapshot: ClusterSnapshot, topic: str) -> list[str]:
    """Why ``topic`` cannot serve as the canary ([] = it can): it must exist with a replica on every live broker."""
    parts = [p for p in snapshot.partitions if p.topic == topic]
    if not parts:
        return [f"canary topic {topic!r} does not exist: create it with a replica on every broker"]
    covered = {r for p in parts for r in p.replicas}
    missing = sorted(snapshot.live_broker_ids - covered)
    return [f"canary topic {topic!r} has no replica on brokers {missing}"] if missing else []


# --------------------------------------------------------------------------- I/O gates

def in_sync_gate(zk, cluster: str, broker_id: int, expected: Iterable[str], *, timeout_s: float, poll_s: float,
                 progress: Callable[[list[str], dict[str, int]], None], recovery_log: Callable[[], str],
                 guard: Callable[[], None] | None = None) -> GateResult:
    """Back in every ISR it belongs in; ``progress(waiting_for, log_recovery)`` is called when the
    picture changed (at most every 5 s) and at least every 30 s while it waits."""
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.remediate.recovery import recovery_status
    from kafka_runbooks.remediate.waits import Waker, wait_for

    expected = list(expected)
    waker = Waker()
    t0 = time.monotonic()
    last: dict[str, Any] = {"waiting": None, "at": 0.0}
    watched: set[str] = set()

    def check() -> bool | None:
        zk.get_children("/brokers/ids", watch=waker)
        snapshot = read_snapshot(zk, cluster)
        done, waiting = recovery_status(snapshot, broker_id, expected)
        if done:
            return True
        for p in snapshot.partitions_of(broker_id):
            path = f"/brokers/topics/{p.topic}/partitions/{p.index}/state"
            if broker_id not in p.isr and path not in watched:
                watched.add(path)
                zk.exists(path, watch=waker)
        since = time.monotonic() - last["at"]
        if (waiting != last["waiting"] and since >= 5) or since >= 30:
            last.update(waiting=waiting, at=time.monotonic())
            progress(waiting, log_recovery_progress(recovery_log()))
        else:  # a change held back, or the next 30 s report: wake up for it whatever poll_s is
            due = (5 if waiting != last["waiting"] else 30) - since
            if last.get("timer") is None or not last["timer"].is_alive():
                last["timer"] = threading.Timer(max(0.05, due), waker)
                last["timer"].daemon = True
                last["timer"].start()
        # a fired watch is gone: re-arm the ones still pending
        for path in list(watched):
            zk.exists(path, watch=waker)
        return None

    try:
        result = wait_for(check, timeout_s=timeout_s, poll_s=poll_s, waker=waker, guard=guard)
    finally:
        if last.get("timer") is not None:
            last["timer"].cancel()
    if result is None:
        raise GateFailed("in_sync", f"broker {broker_id} is not back in every ISR after {timeout_s:g}s",
                         {"waiting_for": last["waiting"] or []})
    return GateResult("in_sync", time.monotonic() - t0, {"partitions": len(expected)})


def coordinator_gate(consumer_config: Callable[[str], dict], partitions: Iterable[int], num_partitions: int, *,
                     timeout_s: float, poll_s: float, request_timeout_s: float,
                     broker_log: Callable[[], str], led_by_broker: Iterable[int],
                     other_logs: Callable[[], Mapping[int, tuple[list[int], str]]] | None = None,
                     guard: Callable[[], None] | None = None,
                     progress: Callable[[list[int], dict[int, list[str]], float], None] | None = None) -> GateResult:
    """Every partition in ``partitions`` answers an OffsetFetch for its probe group.
    ``consumer_config(group_id)`` gives the librdkafka config of a consumer in that group.
    ``progress(pending, errors_seen, left_s)`` is called after a round of probes that left some partition
    without a loaded coordinator (at most once per poll): at the first such round, when the pending set changed
    (at most every 5 s), and at least every 30 s while it waits. Then :func:`refuse_any_failed_load`."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    t0 = time.monotonic()
    heard = _BrokerErrors()
    groups = probe_groups(num_partitions)
    pending = {p: groups[p] for p in partitions}
    seen_errors: dict[int, list[str]] = {}
    loaded_after: dict[int, float] = {}
    loaded_at: dict[int, str] = {}
    consumers: dict[int, Any] = {}
    said: dict[str, Any] = {"pending": None, "at": None}
    try:
        deadline = t0 + timeout_s
        while pending:
            for p, group in list(pending.items()):
                if guard is not None:
                    guard()
                if p not in consumers:
                    # librdkafka retries COORDINATOR_LOAD_IN_PROGRESS by itself until the call's timeout; its
                    # debug lines ("OffsetFetch ... returned Broker: Coordinator load in progress") say what the
                    # coordinator answered meanwhile
                    consumers[p] = Consumer({**consumer_config(group), "debug": "cgrp,topic", "logger": heard.for_partition(p)})
                try:
                    consumers[p].committed([TopicPartition(CONSUMER_OFFSETS, 0)], timeout=request_timeout_s)
                    failed = None
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else exc
                    failed = err.name() if hasattr(err, "name") else type(err).__name__
                consumers[p].poll(0)  # delivers the client's queued log lines to ``heard``
                errs = seen_errors.setdefault(p, [])
                for n in heard.take(p) + ([failed] if failed else []):
                    if n not in errs:
                        errs.append(n)
                if not errs:
                    del seen_errors[p]
                if failed:
                    continue
                loaded_after[p] = round(time.monotonic() - t0, 2)
                loaded_at[p] = clock.now_iso()
                del pending[p]
                consumers.pop(p).close()
            if not pending:
                break
            if time.monotonic() >= deadline:
                raise GateFailed("coordinator", f"__consumer_offsets partitions {sorted(pending)} have no loaded coordinator "
                                 f"after {timeout_s:g}s", {"errors_seen": seen_errors, "pending": sorted(pending)})
            if progress is not None:
                now, waiting = time.monotonic(), sorted(pending)
                since = None if said["at"] is None else now - said["at"]
                if since is None or (waiting != said["pending"] and since >= 5) or since >= 30:
                    said.update(pending=waiting, at=now)
                    progress(waiting, {p: list(seen_errors.get(p, [])) for p in waiting}, max(0.0, deadline - now))
            time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
    finally:
        for c in consumers.values():
            try:
                c.close()
            except Exception:  # noqa: BLE001
                pass
    refuse_any_failed_load(log_text := broker_log(), led := sorted(set(led_by_broker) & set(partitions)), other_logs)
    finished = finished_loading(log_text)
    return GateResult("coordinator", time.monotonic() - t0, {
        "probed": sorted(partitions),
        "errors_seen": {str(k): v for k, v in sorted(seen_errors.items())},
        "loaded_after_s": {str(k): v for k, v in sorted(loaded_after.items())},
        "loaded_at": {str(k): v for k, v in sorted(loaded_at.items())},
        "finished_loading_lines": {str(p): finished[p] for p in led if p in finished},
        "not_corroborated": [p for p in led if p not in finished],
    })


class _BrokerErrors:
    """Collects, per probed partition, the coordinator errors named in librdkafka's debug log lines."""

    NAMES = {
        "Coordinator load in progress": "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_LOAD_IN_PROGRESS": "COORDINATOR_LOAD_IN_PROGRESS",
        "Not coordinator": "NOT_COORDINATOR",
        "NOT_COORDINATOR": "NOT_COORDINATOR",
        "Coordinator not available": "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_NOT_AVAILABLE": "COORDINATOR_NOT_AVAILABLE",
    }

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.names: dict[int, list[str]] = {}

    def for_partition(self, p: int):
        import logging

        outer = self

        class Sink(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                msg = record.getMessage()
                for text, name in outer.NAMES.items():
                    if text in msg:
                        with outer.lock:
                            names = outer.names.setdefault(p, [])
                            if name not in names:
                                names.append(name)

        logger = logging.getLogger(f"kafka_runbooks.remediate.gates.probe.{p}")
        logger.propagate = False
        logger.setLevel(logging.DEBUG)
        logger.handlers = [Sink()]
        return logger

    def take(self, p: int) -> list[str]:
        with self.lock:
            return self.names.pop(p, [])


def canary_leaders(snapshot: ClusterSnapshot, topic: str) -> dict[int, int]:
    """{leader: one partition of ``topic`` it leads}: a canary round over these touches every partition's
    leader, and (replicas on every broker, acks=all) every in-sync replica."""
    led: dict[int, int] = {}
    for p in sorted((p for p in snapshot.partitions if p.topic == topic and p.leader >= 0), key=lambda p: p.index):
        led.setdefault(p.leader, p.index)
    return led


def canary_gate(hook, read_snapshot: Callable[[], ClusterSnapshot], topic: str, *, latency_bound_ms: float,
                round_timeout_s: float, timeout_s: float, poll_s: float, guard: Callable[[], None] | None = None,
                progress: Callable[[int, str, float], None] | None = None) -> GateResult:
    """Rounds of ``KafkaHook.canary`` (one acks=all record to a partition led by each leader of the
    canary topic, consumed back) on the state as it is at each round; the gate passes at the first
    round where every record made it and each round trip stayed within ``latency_bound_ms``.
    ``progress(failed_rounds, last_failure, left_s)`` is called after a failed round: the first, then at most
    every 10 s."""
    t0 = time.monotonic()
    failures: list[str] = []
    said_at: float | None = None
    while True:
        if guard is not None:
            guard()
        snapshot = read_snapshot()
        led = canary_leaders(snapshot, topic)
        brokers = [b for b in (snapshot.broker(x) for x in sorted(led)) if b is not None]
        results = hook.canary(brokers, {b.id: led[b.id] for b in brokers}, topic, round_timeout_s) if brokers else []
        slow = [r for r in results if r.ok and (r.produce_ms or 0) + (r.consume_ms or 0) > latency_bound_ms]
        bad = [r for r in results if not r.ok]
        if results and not bad and not slow:
            worst = max((r.produce_ms or 0) + (r.consume_ms or 0) for r in results)
            return GateResult("canary", time.monotonic() - t0, {
                "round_trip_ms": round(worst, 1), "partitions": {str(r.broker_id): r.partition for r in results},
                "failed_rounds": failures[-5:]})
        failures.append(
            f"round at {round(time.monotonic() - t0, 1)}s: "
            + ("; ".join([f"leader {r.broker_id}: {r.error_code} {r.error}" for r in bad]
                         + [f"leader {r.broker_id}: {(r.produce_ms or 0) + (r.consume_ms or 0):.0f} ms" for r in slow])
               or f"no leader of {topic} to write to")
        )
        if time.monotonic() - t0 >= timeout_s:
            raise GateFailed("canary", f"no canary round succeeded within {latency_bound_ms:g} ms in {timeout_s:g}s",
                             {"failed_rounds": failures[-5:]})
        if progress is not None and (said_at is None or time.monotonic() - said_at >= 10):
            said_at = time.monotonic()
            progress(len(failures), failures[-1], max(0.0, timeout_s - (said_at - t0)))
        time.sleep(poll_s)
