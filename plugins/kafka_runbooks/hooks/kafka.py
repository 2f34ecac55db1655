"""``KafkaHook``: confluent-kafka clients for one cluster, and the direct check of one broker.

Security settings (SASL/SSL, credentials) come only from an optional Airflow connection
(conn_type ``generic``, ``extra`` = librdkafka properties such as ``security.protocol``,
``sasl.mechanism``, ``sasl.username``; the password may be the connection's password). The
bootstrap servers are never taken from it for per-broker work: each broker is reached on its own
registered endpoint for the configured listener (``Broker.endpoint``).

The direct check of broker N: a client bootstrapped at N alone (on the configured listener) sends
a DescribeConfigs request for the BROKER resource N. librdkafka sends a broker resource's request
to that broker and no other (a metadata request goes to *any* known broker: bootstrapped at a
healthy 1, ``list_topics`` was answered by 2 here), and the answer carries N's own ``broker.id``:
an answer proves N itself read and answered a request. A stuck or stopped N times out.
A broker without DescribeConfigs (Kafka < 0.11, KIP-133: librdkafka says ``_UNSUPPORTED_FEATURE`` at once, from
that broker's own ApiVersions answer) is asked ApiVersions and Metadata on a connection to it alone instead
(``hooks/kafka_wire.py``); its answer names the broker at the address asked. ``KafkaCheck.method`` says which.

What a broker may be asked is decided before it is asked anything (``versions.asking``, seed 002): from its
registration's schema version, its own ``Kafka version : N`` log line (``logged``) and the ``kafka_version`` setting
(which can only forbid). A broker that may be older than 0.10.0 -- unknown included: the branch safe for 0.9 -- is
never sent ApiVersions (API key 18, which makes a 0.9 broker drop every request of that network-thread batch): its
direct check and metadata view are Metadata v0 alone (method ``Metadata v0``), the version probe skips it, and every
librdkafka client that may reach it (bootstrapped at it, or at a broker of a cluster it is registered in) gets
``api.version.request=false`` and ``broker.version.fallback`` (``librdkafka_base``). A client whose caller decided
nothing (``client_config`` of a base without ``api.version.request``) is set up as for 0.9.
"""

from __future__ import annotations

import logging
import socket
import time
from dataclasses import dataclass
from typing import Any, Mapping

from airflow.sdk import BaseHook

from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

from kafka_runbooks import clock
from kafka_runbooks.model import Broker, CanaryResult, KafkaCheck, MetadataView

log = logging.getLogger(__name__)

# ApiVersions answers in milliseconds: a broker that does not answer within this (or the caller's shorter timeout)
# stays unknown in KafkaHook.kafka_version -- the conservative branch -- instead of delaying what waits for the version
VERSION_PROBE_S = 2.0

# librdkafka properties a connection may not set: they decide where the client goes
_RESERVED = ("bootstrap.servers", "metadata.broker.list", "group.id")
# marks a base whose api.version.request was decided (KafkaHook.librdkafka_base); client_config removes it. Where
# ApiVersions may be sent the property is left at librdkafka's default (true): setting it makes librdkafka 2.x warn
# that it is deprecated on every client
_DECIDED = "kafka_runbooks.api_version_decided"


def client_config(base: Mapping[str, Any], bootstrap: str, timeout_s: float) -> dict[str, Any]:
    """librdkafka configuration for a short-lived client of ``bootstrap``: bounded in time, logging
    through Python rather than to stderr, never retrying for longer than ``timeout_s``. ``base`` should come from
    ``KafkaHook.librdkafka_base`` (it decides ``api.version.request``); a base that decided nothing gets the settings
    that are safe for 0.9 (``versions.LEGACY_CLIENT``: no ApiVersions, seed 002)."""
    from kafka_runbooks import versions  # deferred: loaded on first use, not when a DAG file is parsed

    ms = max(1000, int(timeout_s * 1000))
    undecided = not base.get(_DECIDED) and "api.version.request" not in base
    base = {k: v for k, v in base.items() if k != _DECIDED}
    return {
        **(versions.LEGACY_CLIENT if undecided else {}),
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
    conn_type = "kafka_runbooks_kafka"  # provider.py registers it (a connection of type generic works too)
    hook_name = "Kafka clients (kafka-runbooks)"

    def __init__(self, kafka_conn_id: str | None = None, *, listener: str | None = None, kafka_version: str | None = None,
                 logged: Mapping[int, str] | None = None) -> None:
        super().__init__()
        self.kafka_conn_id = kafka_conn_id
        self.listener = listener
        self.configured = kafka_version  # the cluster's kafka_version setting: only ever forbids ApiVersions
        self.logged = dict(logged or {})  # {broker id: the version its running JVM logged}
        self._known: dict[int, Broker] = {}  # the cluster's registered brokers, as told (``knows``)
        self._base: dict[str, Any] | None = None

    def knows(self, brokers: Iterable[Broker]) -> "KafkaHook":
        """Tells the hook the cluster's registered brokers: a librdkafka client may reach any of them (its Metadata
        answers name them all), so each one's ``asking`` decides every client's ``api.version.request``."""
        for b in brokers:
            self._known[b.id] = b
        return self

    def asking(self, broker: Broker):
        """What ``broker`` may be asked (``versions.Asking``), decided before it is asked anything."""
        from kafka_runbooks import versions  # deferred: loaded on first use, not when a DAG file is parsed

        return versions.asking(broker.id, broker.schema_version, self.logged.get(broker.id), self.configured)

    def librdkafka_base(self, bootstrap: Iterable[Broker]) -> dict[str, Any]:
        """``base_config()`` with ``api.version.request`` decided for every broker a client bootstrapped at
        ``bootstrap`` may reach (those and the registered brokers the hook knows): false with the matching
        ``broker.version.fallback`` when any of them may be older than 0.10.0 or is unknown (seed 002); else left at
        librdkafka's default (true). For ``client_config`` only (it removes the mark of a decided base)."""
        settings = self.librdkafka_settings(bootstrap)
        if settings.get("api.version.request"):
            settings = {}  # librdkafka's default: not set (librdkafka warns on every client that sets it)
        return {**self.base_config(), **settings, _DECIDED: True}

    def librdkafka_settings(self, bootstrap: Iterable[Broker]) -> dict[str, Any]:
        """``api.version.request`` (and ``broker.version.fallback``) alone, as ``librdkafka_base`` decides them."""
        from kafka_runbooks import versions  # deferred: loaded on first use, not when a DAG file is parsed

        reach = {**self._known, **{b.id: b for b in bootstrap}}
        return versions.client_settings(self.asking(b) for b in reach.values())

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

        return AdminClient(client_config(self.librdkafka_base([broker]), broker_address(broker, self.listener), timeout_s))

    def check_broker(self, broker: Broker, timeout_s: float, *, registered: bool = True) -> KafkaCheck:
        """Ask ``broker`` itself a question within ``timeout_s``. Never raises for broker problems.

        A broker that may be older than 0.10.0 (or whose cluster may hold one: librdkafka would send ApiVersions to
        it) is never given to librdkafka: Metadata on a connection to it alone (v0 without ApiVersions where it may
        be 0.9 itself), the branch that is safe for 0.9 (``versions.asking``)."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import ConfigResource

        at = clock.now_iso()
        try:
            endpoint = broker_address(broker, self.listener)
        except KeyError as exc:
            return KafkaCheck(broker.id, "", ok=False, error=str(exc.args[0]), at=at, error_code="NO_ENDPOINT", registered=registered)
        if not self.librdkafka_settings([broker])["api.version.request"]:
            return self._check_without_describe_configs(broker, timeout_s, registered=registered, at=at, refused=False)
        t0 = time.monotonic()
        closed = connection_refused(*broker.endpoint(self.listener), min(1.0, timeout_s))
        if closed is not None:  # nothing listens: said at once (librdkafka would retry it for the whole timeout)
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=round((time.monotonic() - t0) * 1000, 1), at=at,
                              error=f"connection refused at {endpoint}: nothing listens there ({closed})",
                              error_code="ConnectionRefusedError", registered=registered, method="TCP connect")

        def elapsed() -> float:
            return round((time.monotonic() - t0) * 1000, 1)

        try:
            admin = self.admin_for(broker, timeout_s)
            futures = admin.describe_configs([ConfigResource(ConfigResource.Type.BROKER, str(broker.id))], request_timeout=timeout_s)
            (future,) = futures.values()
            config = future.result(timeout=timeout_s + 1.0)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            code = err.name() if hasattr(err, "name") else None
            if code == "_UNSUPPORTED_FEATURE":
                return self._check_without_describe_configs(broker, timeout_s, registered=registered, at=at, refused=True)
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=elapsed(), error=f"no answer within {timeout_s:g}s: {err}",
                              at=at, error_code=code, registered=registered, method="DescribeConfigs")
        except Exception as exc:  # noqa: BLE001 - a future that never resolved, a client that could not start
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=elapsed(), error=f"{type(exc).__name__}: {exc}",
                              at=at, error_code=type(exc).__name__, registered=registered)
        entry = config.get("broker.id")
        answered_by = int(entry.value) if entry is not None and str(entry.value).isdigit() else None
        if answered_by is not None and answered_by != broker.id:
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=elapsed(), answered_by=answered_by, at=at,
                              error=f"{endpoint} answered as broker {answered_by}, not {broker.id}", error_code="WRONG_BROKER",
                              registered=registered)
        return KafkaCheck(broker.id, endpoint, ok=True, latency_ms=elapsed(), answered_by=broker.id, at=at, registered=registered,
                          method="DescribeConfigs")

    def _check_without_describe_configs(self, broker: Broker, timeout_s: float, *, registered: bool, at: str,
                                        refused: bool) -> KafkaCheck:
        """The direct check of a broker older than 0.11 (``refused``: librdkafka said DescribeConfigs is unsupported),
        or of one librdkafka may not be given: ApiVersions + Metadata on a connection to it alone, or Metadata v0 alone
        where the broker may be older than 0.10.0 (``versions.asking``; unknown included). Either answer proves the
        broker at that address read and answered a request; a hung broker accepts the connection and never answers."""
        from kafka_runbooks import versions  # deferred: loaded on first use, not when a DAG file is parsed
        from kafka_runbooks.hooks.kafka_wire import WireError, fetch_metadata  # deferred: loaded on first use, not when a DAG file is parsed

        ask = self.asking(broker).api_versions
        method = "ApiVersions+Metadata" if ask else "Metadata v0"
        host, port = broker.endpoint(self.listener)
        endpoint = f"{host}:{port}"
        t0 = time.monotonic()
        try:
            md = fetch_metadata(host, port, timeout_s, self.base_config(), ask_versions=ask)
        except (OSError, WireError, ValueError) as exc:
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=round((time.monotonic() - t0) * 1000, 1),
                              error=f"no answer within {timeout_s:g}s: {type(exc).__name__}: {exc}", at=at,
                              error_code="_TIMED_OUT" if isinstance(exc, (socket.timeout, TimeoutError)) else type(exc).__name__,
                              registered=registered, method=method)
        ms = round((time.monotonic() - t0) * 1000, 1)
        seen = versions.from_api_versions(broker.id, md.api_versions)
        if refused and versions.cluster_version({broker.id: [seen]}).has("describe_configs"):
            # librdkafka said the broker lacks it, its own answer says it has it: believe neither
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=ms, at=at, registered=registered, method=method,
                              error=f"DescribeConfigs refused as unsupported, yet the broker's ApiVersions says {seen.describe()}",
                              error_code="VERSION_CONFLICT", api_versions=md.api_versions)
        answered_by = md.broker_at(host, port)
        if answered_by != broker.id:
            named = f"broker {answered_by}" if answered_by is not None else "no broker"
            return KafkaCheck(broker.id, endpoint, ok=False, latency_ms=ms, answered_by=answered_by, at=at, registered=registered,
                              error=f"{endpoint} answered, but its metadata lists {named} at that address, not {broker.id}",
                              error_code="WRONG_BROKER", method=method, api_versions=md.api_versions)
        return KafkaCheck(broker.id, endpoint, ok=True, latency_ms=ms, answered_by=broker.id, at=at, registered=registered,
                          method=method, api_versions=md.api_versions)

    def check_all(self, brokers: Iterable[Broker], timeout_s: float, *, unregistered: Iterable[int] = (),
                  unregistered_timeout_s: float | None = None) -> list[KafkaCheck]:
        """Every broker checked in parallel (each on its own client); results in the brokers' order.
        Brokers in ``unregistered`` (checked on their last known endpoint) get ``unregistered_timeout_s``."""
        brokers = list(brokers)
        if not brokers:
            return []
        unregistered = set(unregistered)
        self.knows(b for b in brokers if b.id not in unregistered)
        short = min(timeout_s, unregistered_timeout_s) if unregistered_timeout_s else timeout_s

        def one(b: Broker) -> KafkaCheck:
            gone = b.id in unregistered
            return self.check_broker(b, short if gone else timeout_s, registered=not gone)

        with ThreadPoolExecutor(max_workers=min(16, len(brokers)), thread_name_prefix="kafka-check") as pool:
            return list(pool.map(one, brokers))

    def kafka_version(self, brokers: Iterable[Broker], timeout_s: float, configured: str | None = None):
        """The version the brokers report (``kafka_runbooks.versions.KafkaVersion``): each broker's ApiVersions
        answer, asked on a connection to it alone, and its registration's schema version. A broker that does not
        answer is known by its registration alone; the setting ``configured`` is only compared, never believed.
        A broker that may be older than 0.10.0 (``asking``; unknown included) is not asked: its registration alone
        places it, and a note says why (seed 002: ApiVersions would make a 0.9 broker drop a batch of requests)."""
        from kafka_runbooks import versions  # deferred: loaded on first use, not when a DAG file is parsed
        from kafka_runbooks.hooks.kafka_wire import WireError, api_versions  # deferred: loaded on first use, not when a DAG file is parsed

        brokers = list(brokers)
        timeout_s = min(timeout_s, VERSION_PROBE_S)
        notes: list[str] = []

        def one(b: Broker) -> list:
            seen = [versions.from_znode(b.id, b.schema_version)]
            may = self.asking(b)
            if not may.api_versions:
                notes.append(f"broker {b.id}: not asked ApiVersions: {may.why}")
                return [o for o in seen if o is not None]
            try:
                host, port = b.endpoint(self.listener)
                seen.append(versions.from_api_versions(b.id, api_versions(host, port, timeout_s, self.base_config())))
            except (OSError, WireError, ValueError, KeyError) as exc:
                notes.append(f"broker {b.id}: no ApiVersions answer ({type(exc).__name__}: {exc})")
            return [o for o in seen if o is not None]

        if not brokers:
            return versions.KafkaVersion((), configured, ("no registered broker to ask",))
        self.knows(brokers)
        with ThreadPoolExecutor(max_workers=min(16, len(brokers)), thread_name_prefix="kafka-version") as pool:
            observed = dict(zip((b.id for b in brokers), pool.map(one, brokers)))
        kv = versions.cluster_version(observed, configured)
        return versions.KafkaVersion(kv.brokers, configured, kv.notes + tuple(sorted(notes)))

    def metadata_view(self, broker: Broker, timeout_s: float) -> MetadataView:
        """What ``broker``'s own metadata cache says: a Metadata request on a connection to that broker alone,
        on the configured listener (``hooks/kafka_wire.py``: librdkafka would ask any broker). Never raises for
        broker problems. Metadata v0 alone (no leader epochs, no controller) where the broker may be older than 0.10.0
        (``asking``); no recording of a pre-2.1 broker's Metadata answer is kept (docs/VERSIONS.md)."""
        from kafka_runbooks.hooks.kafka_wire import WireError, fetch_metadata  # deferred: loaded on first use, not when a DAG file is parsed

        at = clock.now_iso()
        try:
            host, port = broker.endpoint(self.listener)
        except KeyError as exc:
            return MetadataView(broker.id, "", ok=False, at=at, error=str(exc.args[0]))
        endpoint = f"{host}:{port}"
        t0 = time.monotonic()
        try:  # Metadata v0 alone (no leader epochs) where the broker may be older than 0.10.0: versions.asking
            md = fetch_metadata(host, port, timeout_s, self.base_config(), ask_versions=self.asking(broker).api_versions)
        except (OSError, WireError, ValueError) as exc:
            return MetadataView(broker.id, endpoint, ok=False, at=at, error=f"{type(exc).__name__}: {exc}",
                                latency_ms=round((time.monotonic() - t0) * 1000, 1))
        leaders = {p.name: (p.leader, p.leader_epoch) for p in md.partitions if p.error == 0 or p.leader >= 0}
        return MetadataView(broker.id, endpoint, ok=True, at=at, leaders=leaders, controller_id=md.controller_id,
                            latency_ms=round((time.monotonic() - t0) * 1000, 1))

    def metadata_views(self, brokers: Iterable[Broker], timeout_s: float) -> list[MetadataView]:
        """Every broker's own view, asked in parallel; in the brokers' order."""
        brokers = list(brokers)
        if not brokers:
            return []
        self.knows(brokers)
        with ThreadPoolExecutor(max_workers=min(16, len(brokers)), thread_name_prefix="kafka-view") as pool:
            return list(pool.map(lambda b: self.metadata_view(b, timeout_s), brokers))

    def canary(self, brokers: Iterable[Broker], led: dict[int, int], topic: str, timeout_s: float, *, version=None) -> list[CanaryResult]:
        """One record produced (acks=all) to partition ``led[b]`` of ``topic`` -- a partition broker
        ``b`` leads -- and consumed back, for every broker in ``led``; all brokers at once, producing and
        consuming each bounded by ``timeout_s``. A broker that leads no partition of the topic gets a failed result saying so.

        The producer is idempotent where every broker has InitProducerId (``version``, a
        ``kafka_runbooks.versions.KafkaVersion``: Kafka >= 0.11, KIP-98); before that (and when the version is unknown)
        a retried produce whose first attempt did land writes the record twice, so the canary counts the copies of its
        own record itself: the partition is read from its end before the produce (ListOffsets), and every record
        carrying this round's token is counted (``CanaryResult.duplicates``). No recording of the non-idempotent branch
        against a real pre-0.11 broker is kept (docs/VERSIONS.md).

        Every librdkafka client here (producer, consumer, ListOffsets admin) gets ``librdkafka_base(brokers)``: no
        ApiVersions where any broker may be older than 0.10.0 (seed 002)."""
        import uuid

        from confluent_kafka import Producer

        brokers = list(brokers)
        at = clock.now_iso()
        idempotent = version is not None and version.has("idempotent_producer")
        results: dict[int, CanaryResult] = {}
        bootstrap = ",".join(broker_address(b, self.listener) for b in brokers if _has(b, self.listener))
        for b in brokers:
            if b.id not in led:
                results[b.id] = CanaryResult(b.id, topic, None, ok=False, error=f"broker {b.id} leads no partition of {topic}",
                                             error_code="NO_PARTITION", at=at, idempotent=idempotent)
        todo = {bid: p for bid, p in led.items() if bid not in results}
        if not todo or not bootstrap:
            return [results[b] for b in sorted(results)]
        ms = max(1000, int(timeout_s * 1000))
        # no ApiVersions from librdkafka where any broker may be older than 0.10.0 (seed 002): librdkafka_base
        base = client_config(self.librdkafka_base(brokers), bootstrap, timeout_s)
        # bounded apart from the produce: a fresh client's bootstrap and ListOffsets take seconds on a loaded host
        before = self._end_offsets(base, topic, set(todo.values()), min(timeout_s, 5.0))
        producer = Producer({**base, "acks": "all", "message.timeout.ms": ms, "linger.ms": 0, "enable.idempotence": idempotent})
        token = f"kafka-runbooks-canary {at} {uuid.uuid4().hex[:12]}".encode()
        sent = _canary_produce(producer, topic, todo, token, timeout_s)
        want = _canary_delivered(todo, sent, topic, results, at, idempotent)
        if want:
            _canary_consume(base, topic, want, _CanaryRound(token, before, sent, at, idempotent), results, timeout_s)
        return [results[b] for b in sorted(results)]

    @staticmethod
    def _end_offsets(base: dict, topic: str, partitions: set[int], timeout_s: float) -> dict[int, int | None]:
        """{partition: its end offset now} (ListOffsets, v1 since 0.10.1); None where it did not answer in time."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient, OffsetSpec

        out: dict[int, int | None] = {p: None for p in partitions}
        try:
            admin = AdminClient(base)
            futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                                         request_timeout=timeout_s)
            deadline = time.monotonic() + timeout_s
            for tp, f in futures.items():
                try:
                    out[tp.partition] = int(f.result(timeout=max(0.0, deadline - time.monotonic())).offset)
                except Exception:  # noqa: BLE001 - that partition's copies are simply not counted
                    pass
        except Exception:  # noqa: BLE001
            pass
        return out


def connection_refused(host: str, port: int, timeout_s: float) -> str | None:
    """The refusal when a TCP connection to ``host:port`` is refused (nothing listens: a killed broker), else None --
    an answer, a timeout or any other error is left to the real check. Nothing is sent: safe for every version."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except ConnectionRefusedError as exc:
        return f"{type(exc).__name__}: {exc}"
    except OSError:
        return None


def _has(broker: Broker, listener: str | None) -> bool:
    try:
        broker.endpoint(listener)
        return True
    except KeyError:
        return False


@dataclass(frozen=True)
class _CanaryRound:
    """What one canary round's consumer checks against: its record (``token``), the partitions' end offsets before the
    produce, the delivery reports, when it started and whether the producer was idempotent."""

    token: bytes
    before: dict
    sent: dict
    at: str
    idempotent: bool


def _canary_produce(producer, topic: str, todo: dict[int, int], token: bytes, timeout_s: float) -> dict[int, dict]:
    """The canary record produced to every broker's partition in ``todo``; {broker: its delivery report} (error,
    offset, milliseconds), for those reported within ``timeout_s``."""
    sent: dict[int, dict] = {}

    def delivered(bid: int, t0: float):
        def cb(err, msg):
            sent[bid] = {"err": err, "offset": msg.offset() if err is None else None, "ms": round((time.monotonic() - t0) * 1000, 1)}
        return cb

    for bid, partition in todo.items():
        producer.produce(topic, value=token, key=str(bid).encode(), partition=partition, on_delivery=delivered(bid, time.monotonic()))
    deadline = time.monotonic() + timeout_s
    producer.flush(max(0.0, deadline - time.monotonic()))
    return sent


def _canary_delivered(todo: dict[int, int], sent: dict[int, dict], topic: str, results: dict, at: str,
                      idempotent: bool) -> dict[int, tuple[int, int]]:
    """A failed result in ``results`` for every broker whose record was not delivered; {partition: (broker, offset)}
    of the delivered ones, to consume back."""
    want: dict[int, tuple[int, int]] = {}
    for bid, partition in todo.items():
        d = sent.get(bid)
        if d is None or d["err"] is not None:
            err = d["err"] if d else None
            results[bid] = CanaryResult(bid, topic, partition, ok=False, produce_ms=d["ms"] if d else None,
                                        error=f"produce failed: {err or 'no delivery report within the timeout'}",
                                        error_code=err.name() if err else "_MSG_TIMED_OUT", at=at, idempotent=idempotent)
        else:
            want[partition] = (bid, d["offset"])
    return want


def _canary_consume(base: dict, topic: str, want: dict[int, tuple[int, int]], round_: _CanaryRound, results: dict,
                    timeout_s: float) -> None:
    """Consumes the delivered records back (each partition from its end before the produce, so every copy of this
    round's record is counted), within ``timeout_s`` of its own; a result in ``results`` for every broker of ``want``."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    sent, at, idempotent, before = round_.sent, round_.at, round_.idempotent, round_.before
    copies: dict[int, int] = {}
    consumer = Consumer({**base, "group.id": "kafka-runbooks-canary", "enable.auto.commit": False,
                         "enable.partition.eof": False, "fetch.wait.max.ms": 100})
    try:
        t0 = time.monotonic()
        deadline = t0 + timeout_s  # consuming gets its own bound: a slow acks=all must not eat it
        # from the partition's end before the produce (every copy of this round's record is after it)
        start = {p: (before[p] if before.get(p) is not None and before[p] <= off else off) for p, (_, off) in want.items()}
        consumer.assign([TopicPartition(topic, p, start[p]) for p in want])
        while want and time.monotonic() < deadline:
            msg = consumer.poll(min(0.5, max(0.0, deadline - time.monotonic())))
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() != KafkaError._PARTITION_EOF and msg.partition() in want:
                    bid, _ = want.pop(msg.partition())
                    results[bid] = CanaryResult(bid, topic, msg.partition(), ok=False, produce_ms=sent[bid]["ms"],
                                                error=f"consume failed: {msg.error()}", error_code=msg.error().name(), at=at,
                                                idempotent=idempotent)
                continue
            p = msg.partition()
            if p not in want:
                continue
            if msg.value() == round_.token:
                copies[p] = copies.get(p, 0) + 1
            if msg.offset() >= want[p][1]:
                bid, _ = want.pop(p)
                counted = before.get(p) is not None and start[p] == before[p]
                results[bid] = CanaryResult(bid, topic, p, ok=True, produce_ms=sent[bid]["ms"],
                                            consume_ms=round((time.monotonic() - t0) * 1000, 1), at=at, idempotent=idempotent,
                                            duplicates=max(0, copies.get(p, 0) - 1) if counted else None)
    finally:
        consumer.close()
    for p, (bid, _) in want.items():
        results[bid] = CanaryResult(bid, topic, p, ok=False, produce_ms=sent[bid]["ms"],
                                    error=f"record not consumed back within {timeout_s:g}s", error_code="_TIMED_OUT", at=at,
                                    idempotent=idempotent)
