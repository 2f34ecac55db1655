"""Snapshots, checks, probes and histories for the pure detector and lifecycle tests.

Times are fixed: the check under test happens at NOW; history samples are 30 s apart before it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from kafka_runbooks import clock
from kafka_runbooks.detect.history import Sample, broker_series, health_samples
from kafka_runbooks.model import Broker, ClusterSnapshot, FetchErrorSeen, HostProbe, KafkaCheck, Partition

NOW = dt.datetime(2026, 11, 22, 14, 0, 0, tzinfo=clock.UTC)
EPOCH_REG = "2026-11-22T10:00:00.000Z"  # when the brokers registered: hours ago


def at(seconds: float) -> str:
    """ISO time ``seconds`` relative to NOW (negative: before)."""
    return clock.iso(NOW + dt.timedelta(seconds=seconds))


def broker(b: int, registered_at: str = EPOCH_REG, session: int | None = None) -> Broker:
    name = f"kafka-lab-b{b}"
    return Broker(b, f"10.0.0.{b}", 9092, endpoints=(f"CLIENT://10.0.0.{b}:9092", f"REPLICATION://{name}:9093"),
                  registered_at=registered_at, session_id=session or 0x1000 + b, registration_zxid=100 + b)


def partitions(ids=(1, 2, 3), n=6, isr_without=()) -> list[Partition]:
    out = []
    for i in range(n):
        r = tuple(ids[(i + k) % len(ids)] for k in range(len(ids)))
        isr = tuple(x for x in r if x not in isr_without) or r[:1]
        out.append(Partition("__consumer_offsets" if i % 2 else "orders", i, r, r[0], isr))
    return out


def check(b: int, ok: bool = True, *, registered: bool = True) -> KafkaCheck:
    if ok:
        return KafkaCheck(b, f"kafka-lab-b{b}:9093", True, latency_ms=12.0, answered_by=b, at=at(0), registered=registered)
    return KafkaCheck(b, f"kafka-lab-b{b}:9093", False, latency_ms=5000.0, at=at(0), registered=registered, error_code="_TIMED_OUT",
                      error='no answer within 5s: KafkaError{code=_TIMED_OUT,val=-185,str="Failed while waiting for broker: Local: Timed out"}')


def fetch_error(fetcher: int, leader: int, seconds: float, line: int = 100) -> FetchErrorSeen:
    return FetchErrorSeen(
        at=at(seconds), fetcher_broker_id=fetcher, leader_broker_id=leader, line_no=line, cause="disconnected",
        excerpt=f"[2026-11-22 13:59:50,000] WARN [ReplicaFetcher replicaId={fetcher}, leaderId={leader}, fetcherId=0] "
                f"Error in response for fetch request (...) / java.io.IOException: Connection to {leader} was disconnected before the response was read",
    )


def probe(b: int, *, state="sleeping", pid=1000, close_wait=0, recv_q=0, errors=(), listening=True, uptime=3600.0, log_age=5.0,
          reachable=True) -> HostProbe:
    if not reachable:
        return HostProbe(b, False, error="ConnectError: cannot connect", probed_at=at(0))
    return HostProbe(
        b, True, pid=pid + b if pid else None, process_alive=pid is not None and state not in ("zombie", "dead"), open_files=300,
        connection_states={"ESTABLISHED": 20, "CLOSE_WAIT": close_wait} if pid else {}, probed_at=at(0),
        process_state=state if pid else None, process_uptime_s=uptime if pid else None, ports=(9093, 9092),
        addresses=(f"10.0.0.{b}",), listening=listening and pid is not None, recv_q_bytes=recv_q, recv_q_sockets=1 if recv_q else 0,
        bytes_received=10_000, bytes_acked=20_000, server_log_mtime=at(-log_age), server_log_age_s=log_age,
        fetch_errors=tuple(errors), fetch_errors_since=at(-180), fetch_errors_total=len(errors),
    )


def snapshot(brokers=None, parts=None, checks=None, probes=None, configured=(1, 2, 3), taken=0.0) -> ClusterSnapshot:
    brokers = [broker(b) for b in (1, 2, 3)] if brokers is None else brokers
    ids = [b.id for b in brokers]
    return ClusterSnapshot(
        cluster="lab", taken_at=at(taken), brokers=tuple(brokers), controller_id=ids[0] if ids else None,
        partitions=tuple(partitions() if parts is None else parts),
        probes=tuple([probe(b) for b in configured] if probes is None else probes),
        kafka_checks=tuple([check(b) for b in ids] if checks is None else checks),
        configured_broker_ids=tuple(configured),
    )


def history(*snapshots: ClusterSnapshot) -> dict[str, list[Sample]]:
    """The history the health operator would hand the detectors after these checks (oldest first)."""
    out: dict[str, list[Sample]] = {}
    for s in snapshots:
        for series, sample in health_samples(s).items():
            out.setdefault(series, []).append(sample)
    return out


def with_close_wait(s: ClusterSnapshot, b: int, close_wait: int, taken: float) -> ClusterSnapshot:
    probes = tuple(dataclasses.replace(p, connection_states={**p.connection_states, "CLOSE_WAIT": close_wait}) if p.broker_id == b else p
                   for p in s.probes)
    return dataclasses.replace(s, probes=probes, taken_at=at(taken))


__all__ = ["NOW", "at", "broker", "broker_series", "check", "fetch_error", "history", "partitions", "probe", "snapshot", "with_close_wait"]
