"""``KafkaHook``: confluent-kafka clients for one cluster, and the direct check of one broker.

Security settings (SASL/SSL, credentials) come only from an optional Airflow connection
(conn_type ``generic``, ``extra`` = librdkafka properties such as ``security.protocol``,
``sasl.mechanism``, ``sasl.username``; the password may be the connection's password). The
bootstrap servers are never taken from it for per-broker work: each broker is reached on its own
registered endpoint for the configured listener (``Broker.endpoint``).

A client bootstrapped at one broker alone asks that broker first; ``ClusterMetadata.orig_broker_id``
says which broker answered, so a check can prove the broker itself is serving.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from airflow.sdk import BaseHook

from kafka_runbooks import clock
from kafka_runbooks.model import Broker, KafkaCheck

log = logging.getLogger(__name__)

# librdkafka properties a connection may not set: they decide where the client goes
_RESERVED = ("bootstrap.servers", "metadata.broker.list", "group.id")


def client_config(base: Mapping[str, Any], bootstrap: str, timeout_s: float) -> dict[str, Any]:
    """librdkafka configuration for a short-lived client of ``bootstrap``: bounded in time, logging
    through Python rather than to stderr, never retrying for longer than ``timeout_s``."""
    ms = max(1000, int(timeout_s * 1000))
    return {
        **base,
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": ms,
        "socket.connection.setup.timeout.ms": ms,
        "reconnect.backoff.max.ms": 1000,
        "logger": log,
    }


def broker_address(broker: Broker, listener: str | None) -> str:
    host, port = broker.endpoint(listener)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class KafkaHook(BaseHook):
    """Kafka clients for one cluster (``kafka_conn_id`` optional: only for security settings)."""

    conn_name_attr = "kafka_conn_id"
    default_conn_name = "kafka_default"
    conn_type = "generic"
    hook_name = "Kafka clients (kafka-runbooks)"

    def __init__(self, kafka_conn_id: str | None = None, *, listener: str | None = None) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.listener = listener
        self._base: dict[str, Any] | None = None

    def base_config(self) -> dict[str, Any]:
        if self._base is None:
            base: dict[str, Any] = {}
            if self.kafka_conn_id:
                conn = self.get_connection(self.kafka_conn_id)
                extra = dict(conn.extra_dejson or {})
                reserved = sorted(k for k in extra if k in _RESERVED)
                if reserved:
                    raise ValueError(f"Kafka connection {self.kafka_conn_id!r} may not set {reserved}: brokers come from ZooKeeper")
                base.update({str(k): v for k, v in extra.items()})
                if conn.login and "sasl.username" not in base:
                    base["sasl.username"] = conn.login
                if conn.password and "sasl.password" not in base:
                    base["sasl.password"] = conn.password
            self._base = base
        return dict(self._base)

    def admin_for(self, broker: Broker, timeout_s: float):
        """An AdminClient bootstrapped at ``broker`` alone (keep a reference until its futures resolve)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient(client_config(self.base_config(), broker_address(broker, self.listener), timeout_s))

    def check_broker(self, broker: Broker, timeout_s: float) -> KafkaCheck:
        """Ask ``broker`` itself for metadata within ``timeout_s``. Never raises for broker problems."""
        from confluent_kafka import KafkaException

        at = clock.now_iso()
        try:
            endpoint = broker_address(broker, self.listener)
        except KeyError as exc:
            return KafkaCheck(broker.id, "", ok=False, error=str(exc.args[0]), at=at)
        t0 = time.monotonic()
        try:
            md = self.admin_for(broker, timeout_s).list_topics(timeout=timeout_s)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=round((time.monotonic() - t0) * 1000, 1),
                              error=f"no metadata answer within {timeout_s:g}s: {err}", at=at)
        latency = round((time.monotonic() - t0) * 1000, 1)
        if md.orig_broker_id != broker.id:
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=latency, answered_by=md.orig_broker_id,
                              error=f"the answer came from broker {md.orig_broker_id}, not {broker.id}", at=at)
        return KafkaCheck(broker.id, endpoint, ok=True, latency_ms=latency, answered_by=md.orig_broker_id, at=at)
