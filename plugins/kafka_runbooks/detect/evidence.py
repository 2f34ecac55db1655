"""Evidence items the detectors cite: ZooKeeper state, host probes, peers' log lines, direct checks,
trends. Pure."""

from __future__ import annotations

import json
from typing import Iterable

from kafka_runbooks.detect.trends import Trend
from kafka_runbooks.model import CanaryResult, Evidence, FetchErrorSeen, HostProbe, KafkaCheck, Partition, partition_order


def state_source(p: Partition) -> str:
    return f"zookeeper:/brokers/topics/{p.topic}/partitions/{p.index}/state"


def state_excerpt(p: Partition) -> str:
    """The state znode's JSON as Kafka writes it (reconstructed from the snapshot)."""
    return json.dumps(
        {"leader": p.leader, "leader_epoch": p.leader_epoch, "isr": list(p.isr), "replicas": list(p.replicas)},
        separators=(",", ":"),
    )


def state_evidence(parts: Iterable[Partition], limit: int) -> list[Evidence]:
    return [Evidence(source=state_source(p), excerpt=state_excerpt(p)) for p in sorted(parts, key=partition_order)[:limit]]


def check_evidence(check: KafkaCheck) -> Evidence:
    outcome = f"answered by broker {check.answered_by} in {check.latency_ms} ms" if check.ok else f"FAILED: {check.error}"
    return Evidence(source=f"kafka:check/broker/{check.broker_id}", excerpt=f"{check.at} direct check of {check.endpoint}: {outcome}")


def canary_evidence(c: CanaryResult) -> Evidence:
    outcome = f"ok (produce {c.produce_ms} ms, consume {c.consume_ms} ms)" if c.ok else f"FAILED: {c.error}"
    return Evidence(source=f"kafka:canary/broker/{c.broker_id}", excerpt=f"{c.at} canary {c.topic}-{c.partition}: {outcome}")


def fetch_error_evidence(host_broker_id: int, errors: list[FetchErrorSeen], host: str | None, limit: int) -> list[Evidence]:
    """The newest errors of one peer's server.log (the line numbers are those of the tail the probe read)."""
    return [
        Evidence(source=f"probe:broker/{host_broker_id}/server.log", lines=(e.line_no,), excerpt=e.excerpt, host=host)
        for e in errors[-limit:]
    ]


def probe_evidence(probe: HostProbe, host: str | None) -> Evidence:
    parts = []
    if probe.pid is not None:
        parts.append(f"pid {probe.pid} {probe.process_state or 'state unknown'}"
                     + (f", up {int(probe.process_uptime_s)} s" if probe.process_uptime_s is not None else ""))
    else:
        parts.append("no process listening on the broker ports")
    parts.append(f"ports {list(probe.ports)} on {list(probe.addresses)}: " + ("listening" if probe.listening else "NOT listening"))
    states = ", ".join(f"{k}={v}" for k, v in sorted(probe.connection_states.items()))
    if states:
        parts.append(f"connections: {states}")
    if probe.recv_q_bytes:
        parts.append(f"Recv-Q {probe.recv_q_bytes} B on {probe.recv_q_sockets} socket(s)")
    if probe.open_files is not None:
        parts.append(f"open files {probe.open_files}")
    if probe.server_log_age_s is not None:
        parts.append(f"server.log last written {probe.server_log_age_s:.0f} s ago")
    return Evidence(source=f"probe:broker/{probe.broker_id}", excerpt=f"{probe.probed_at}: " + "; ".join(parts), host=host)


def trend_evidence(t: Trend) -> Evidence:
    return Evidence(source=f"history:{t.series}/{t.key}", excerpt=t.excerpt())
