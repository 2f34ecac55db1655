"""The one vocabulary shared by detectors, capture, the Spark app, reports and runbooks.

Everything here is plain data (frozen dataclasses) with JSON round-trips, so it can cross
Airflow XCom, DAG-run conf, the Spark driver and the incident store unchanged.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from kafka_runbooks import versions

CONSUMER_OFFSETS = "__consumer_offsets"


class Severity(str, enum.Enum):
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class Broker:
    """A broker as registered in ZooKeeper (`/brokers/ids/<id>`) or reported by the Admin API.

    ``host``/``port`` are the registration's own (Kafka fills them from a PLAINTEXT-protocol
    endpoint, or leaves them empty); clients and probes pick a listener with :meth:`endpoint`.
    The registration fields (``session_id`` = the znode's ephemeral owner, ``registration_zxid`` =
    its czxid, ``registered_at`` = its ctime) tell a new registration from an old one."""

    id: int
    host: str
    port: int
    version: str | None = None  # Kafka version when known (from config or the Admin API)
    rack: str | None = None
    endpoints: tuple[str, ...] = ()  # "LISTENER://host:port", as registered
    jmx_port: int | None = None
    registered_at: str | None = None  # ISO-8601 UTC
    session_id: int | None = None
    registration_zxid: int | None = None
    schema_version: int | None = None  # the registration JSON's "version" (4 since 0.10.2): a floor of Kafka's

    def listeners(self) -> dict[str, tuple[str, int]]:
        """{listener name: (host, port)} of the registered endpoints that parse."""
        out: dict[str, tuple[str, int]] = {}
        for ep in self.endpoints:
            name, sep, rest = ep.partition("://")
            host, colon, port = rest.rpartition(":")
            if sep and colon and host and port.isdigit():
                out[name] = (host.strip("[]"), int(port))
        return out

    def endpoint(self, listener: str | None = None) -> tuple[str, int]:
        """(host, port) to reach this broker on ``listener``; with no listener named: the only
        registered endpoint, else the registration's host/port. Raises KeyError naming what exists."""
        found = self.listeners()
        if listener:
            if listener not in found:
                raise KeyError(f"broker {self.id} has no listener {listener!r} (registered: {sorted(found) or 'none'})")
            return found[listener]
        if len(found) == 1:
            return next(iter(found.values()))
        if self.host and self.port > 0:
            return self.host, self.port
        raise KeyError(f"broker {self.id}: several listeners {sorted(found)} and no listener configured")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "endpoints": list(self.endpoints)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Broker":
        return cls(
            id=int(d["id"]),
            host=str(d["host"]),
            port=int(d["port"]),
            version=d.get("version"),
            rack=d.get("rack"),
            endpoints=tuple(d.get("endpoints") or ()),
            jmx_port=d.get("jmx_port"),
            registered_at=d.get("registered_at"),
            session_id=d.get("session_id"),
            registration_zxid=d.get("registration_zxid"),
            schema_version=d.get("schema_version"),
        )


@dataclass(frozen=True)
class Partition:
    """One partition's assignment and state (`/brokers/topics/T/partitions/P/state`)."""

    topic: str
    index: int
    replicas: tuple[int, ...]
    leader: int  # -1 when offline
    isr: tuple[int, ...]
    leader_epoch: int = 0
    min_insync_replicas: int | None = None  # topic override (/config/topics/T)
    unclean_leader_election: bool | None = None  # topic override of unclean.leader.election.enable

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"

    @property
    def offline(self) -> bool:
        return self.leader < 0

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Partition":
        return cls(
            topic=str(d["topic"]),
            index=int(d["index"]),
            replicas=tuple(int(r) for r in d["replicas"]),
            leader=int(d["leader"]),
            isr=tuple(int(r) for r in d["isr"]),
            leader_epoch=int(d.get("leader_epoch", 0)),
            min_insync_replicas=d.get("min_insync_replicas"),
            unclean_leader_election=d.get("unclean_leader_election"),
        )


@dataclass(frozen=True)
class FetchErrorSeen:
    """A replica fetcher's failed fetch, read from one broker host's ``server.log``: broker
    ``fetcher_broker_id`` could not fetch from leader ``leader_broker_id`` at ``at``."""

    at: str  # ISO-8601 UTC (the log's local time converted with the host's UTC offset)
    fetcher_broker_id: int | None  # None when the log line does not say (0.10-era thread names)
    leader_broker_id: int
    line_no: int  # 1-based, in the tail that was read
    excerpt: str
    cause: str | None = None  # "disconnected", "timeout", "connection_failed" (analyze/parsers/kafka_log.py fetch_errors)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "FetchErrorSeen":
        return cls(
            at=str(d["at"]),
            fetcher_broker_id=d.get("fetcher_broker_id"),
            leader_broker_id=int(d["leader_broker_id"]),
            line_no=int(d.get("line_no", 0)),
            excerpt=str(d.get("excerpt", "")),
            cause=d.get("cause"),
        )


@dataclass(frozen=True)
class LogLineSeen:
    """One log line a probe read and cites: what it is (``what``, e.g. "unknown_api_key", "group_load_start",
    "zk_follow_exception"), when (UTC, converted with the host's offset), its line number in the tail that was
    read, the excerpt, and what was read out of it (``attrs``: api key, connection, partition, ...)."""

    what: str
    at: str | None
    line_no: int
    excerpt: str
    attrs: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None  # which file ("server.log", "log-cleaner.log", "zookeeper.log")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "attrs": dict(self.attrs)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LogLineSeen":
        return cls(what=str(d["what"]), at=d.get("at"), line_no=int(d.get("line_no") or 0), excerpt=str(d.get("excerpt") or ""),
                   attrs={str(k): str(v) for k, v in (d.get("attrs") or {}).items()}, source=d.get("source"))


@dataclass(frozen=True)
class OffsetsPartitionDir:
    """A ``__consumer_offsets-N`` directory on a broker host: how many segments and bytes it holds."""

    partition: int
    segments: int
    bytes: int
    oldest_segment: str | None = None  # file name of the oldest / newest .log segment
    newest_segment: str | None = None
    log_dir: str | None = None
    empty_segments: int = 0  # .log files of 0 bytes (left by compaction until the next cleaning merges them)

    @property
    def name(self) -> str:
        return f"{CONSUMER_OFFSETS}-{self.partition}"

    @property
    def data_segments(self) -> int:
        return self.segments - self.empty_segments

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "OffsetsPartitionDir":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


# /proc/<pid>/stat state letters (proc(5)) -> words used in findings
PROCESS_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk_sleep",
    "T": "stopped",
    "t": "tracing_stop",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
    "P": "parked",
    "W": "paging",
}
# states in which a process cannot serve (attach-based JVM tools cannot work either)
NOT_SERVING_STATES = ("stopped", "tracing_stop", "zombie", "dead")


@dataclass(frozen=True)
class HostProbe:
    """What a host probe over SSH saw for one broker's host.

    Socket figures count TCP connections whose LOCAL end is one of the broker's ports on one of
    the broker's own addresses (``addresses``: its registered host names resolved, plus the SSH
    host), never LISTEN sockets. ``bytes_received``/``bytes_acked`` are the sums of ``ss -ti``
    counters over those connections at ``probed_at`` (sockets come and go: compare them across
    probes as a rate, not as a counter). ``fetch_errors`` are this host's replica fetchers'
    failed fetches within the probe's window (``fetch_errors_since`` .. ``probed_at``)."""

    broker_id: int
    reachable: bool
    pid: int | None = None
    process_alive: bool = False
    open_files: int | None = None
    connection_states: Mapping[str, int] = field(default_factory=dict)  # state -> count on the broker port
    error: str | None = None
    probed_at: str | None = None  # ISO-8601 UTC, the host's clock
    process_state: str | None = None  # PROCESS_STATES value from /proc/<pid>/stat; None without a process
    process_uptime_s: float | None = None
    ports: tuple[int, ...] = ()
    addresses: tuple[str, ...] = ()
    listening: bool = False  # the broker process holds a listening socket on one of ``ports``
    recv_q_bytes: int | None = None  # sum of Recv-Q over those connections
    recv_q_sockets: int | None = None  # connections with data waiting in Recv-Q
    bytes_received: int | None = None
    bytes_acked: int | None = None
    server_log_mtime: str | None = None  # ISO-8601 UTC
    server_log_age_s: float | None = None  # host clock minus mtime
    fetch_errors: tuple[FetchErrorSeen, ...] = ()
    fetch_errors_since: str | None = None
    fetch_errors_total: int = 0  # before truncation to the newest ones kept in ``fetch_errors``
    # memory (incident 000: free memory fell as CLOSE_WAIT climbed): the host's MemAvailable, the JVM's RSS
    mem_available_bytes: int | None = None
    process_rss_bytes: int | None = None
    # incident 002b: live threads named kafka-log-cleaner-thread-* (None: not looked at), bytes read so far by
    # the offsets loader threads (group-metadata-manager-*, /proc/<pid>/task/<tid>/io rchar), and the
    # __consumer_offsets directories of this broker's log dirs
    log_cleaner_threads: int | None = None
    loader_read_bytes: int | None = None
    offsets_dirs: tuple[OffsetsPartitionDir, ...] = ()
    # log lines of interest within the window: unknown API keys (002a), offsets loads started/finished
    # (002b), the log cleaner's death (002b), ZooKeeper session expiries (004)
    log_lines: tuple[LogLineSeen, ...] = ()
    # the version the broker's JVM logged at its start (AppInfoParser's ``Kafka version : 0.10.2.1``; None: not found)
    # and where it was read (``kafka_version_log``: "server.log", the stdout log's name (0.10 logs it to
    # kafkaServer.out only), or "history": read by an earlier check of the same JVM; None: not looked for)
    kafka_version_logged: str | None = None
    kafka_version_log: str | None = None

    @property
    def stopped(self) -> bool:
        return self.process_state in NOT_SERVING_STATES

    def lines(self, what: str) -> list[LogLineSeen]:
        return [x for x in self.log_lines if x.what == what]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["connection_states"] = dict(self.connection_states)
        d["ports"] = list(self.ports)
        d["addresses"] = list(self.addresses)
        d["fetch_errors"] = [e.to_dict() for e in self.fetch_errors]
        d["offsets_dirs"] = [o.to_dict() for o in self.offsets_dirs]
        d["log_lines"] = [x.to_dict() for x in self.log_lines]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HostProbe":
        return cls(
            broker_id=int(d["broker_id"]),
            reachable=bool(d["reachable"]),
            pid=d.get("pid"),
            process_alive=bool(d.get("process_alive", False)),
            open_files=d.get("open_files"),
            connection_states=dict(d.get("connection_states") or {}),
            error=d.get("error"),
            probed_at=d.get("probed_at"),
            process_state=d.get("process_state"),
            process_uptime_s=d.get("process_uptime_s"),
            ports=tuple(int(p) for p in d.get("ports") or ()),
            addresses=tuple(d.get("addresses") or ()),
            listening=bool(d.get("listening", False)),
            recv_q_bytes=d.get("recv_q_bytes"),
            recv_q_sockets=d.get("recv_q_sockets"),
            bytes_received=d.get("bytes_received"),
            bytes_acked=d.get("bytes_acked"),
            server_log_mtime=d.get("server_log_mtime"),
            server_log_age_s=d.get("server_log_age_s"),
            fetch_errors=tuple(FetchErrorSeen.from_dict(e) for e in d.get("fetch_errors") or ()),
            fetch_errors_since=d.get("fetch_errors_since"),
            fetch_errors_total=int(d.get("fetch_errors_total") or 0),
            mem_available_bytes=d.get("mem_available_bytes"),
            process_rss_bytes=d.get("process_rss_bytes"),
            log_cleaner_threads=d.get("log_cleaner_threads"),
            loader_read_bytes=d.get("loader_read_bytes"),
            offsets_dirs=tuple(OffsetsPartitionDir.from_dict(o) for o in d.get("offsets_dirs") or ()),
            log_lines=tuple(LogLineSeen.from_dict(x) for x in d.get("log_lines") or ()),
            kafka_version_logged=d.get("kafka_version_logged"),
            kafka_version_log=d.get("kafka_version_log"),
        )


@dataclass(frozen=True)
class ZooKeeperProbe:
    """What the health check saw of one ZooKeeper server: its four-letter words (``mntr``, ``srvr``,
    ``cons`` -- never ``ruok``, which answers ``imok`` without a quorum) and, when its host has an SSH
    connection, its process, load, ``zoo.cfg`` and the log lines of a follower dropping out (incident 004).

    ``connections`` are client connections, the probe's own excluded. ``uptime_ms`` (mntr ``zk_uptime``)
    restarts when the server's ZooKeeperServer is recreated -- as it is when a follower drops out of the
    quorum and rejoins -- and ``elections`` (mntr ``zk_cnt_election_time``) counts the elections this
    peer went through since its process started."""

    server: str  # server id (myid) when configured, else "host:port"
    address: str  # "host:port" asked
    reachable: bool  # the four-letter words were answered
    probed_at: str | None = None
    serving: bool = False  # answered with its stats (a server without a quorum says it is not serving)
    mode: str | None = None  # leader | follower | observer | standalone
    zxid: int | None = None
    connections: int | None = None
    packets_received: int | None = None
    packets_sent: int | None = None
    outstanding: int | None = None
    latency_avg_ms: float | None = None
    latency_max_ms: float | None = None
    uptime_ms: int | None = None
    elections: int | None = None
    learners: int | None = None
    synced_followers: int | None = None
    pending_syncs: int | None = None  # leader only (mntr zk_pending_syncs): learners still syncing
    version: str | None = None
    error: str | None = None
    zone: str | None = None
    # over SSH (None when the server has no SSH connection, or it could not be read)
    host_reachable: bool | None = None
    host_error: str | None = None
    pid: int | None = None
    process_state: str | None = None
    process_uptime_s: float | None = None  # how long its process has run (a drop restarts its server, not its process)
    load_1m: float | None = None
    cpus: int | None = None
    tick_time_ms: int | None = None
    sync_limit: int | None = None
    init_limit: int | None = None
    log_lines: tuple[LogLineSeen, ...] = ()

    @property
    def epoch(self) -> int | None:
        """The leader epoch: a zxid's high 32 bits."""
        return None if self.zxid is None else self.zxid >> 32

    @property
    def sync_timeout_ms(self) -> int | None:
        return self.tick_time_ms * self.sync_limit if self.tick_time_ms and self.sync_limit else None

    def lines(self, what: str) -> list[LogLineSeen]:
        return [x for x in self.log_lines if x.what == what]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["log_lines"] = [x.to_dict() for x in self.log_lines]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ZooKeeperProbe":
        kw = {k: d.get(k) for k in cls.__dataclass_fields__ if k in d and k != "log_lines"}
        return cls(**kw, log_lines=tuple(LogLineSeen.from_dict(x) for x in d.get("log_lines") or ()))


@dataclass(frozen=True)
class KafkaCheck:
    """A direct Kafka-protocol check of one broker: a client bootstrapped at that broker alone
    (on the configured listener) sends it a request only that broker can answer, with a short
    timeout. ``answered_by`` is the broker id that answered."""

    broker_id: int
    endpoint: str  # "host:port" that was asked
    ok: bool
    latency_ms: float | None = None
    answered_by: int | None = None
    error: str | None = None
    at: str | None = None  # ISO-8601 UTC
    error_code: str | None = None  # librdkafka / Kafka error name, e.g. "_TIMED_OUT", "_TRANSPORT"
    registered: bool = True  # False: checked because its host is configured, though not registered
    # the request that was asked: "DescribeConfigs" (Kafka >= 0.11), or "ApiVersions+Metadata" where the broker has no
    # DescribeConfigs (versions.FEATURES["describe_configs"]); with the version range its ApiVersions answer implies
    method: str | None = None
    api_versions: Mapping[int, tuple[int, int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        if self.api_versions is not None:
            d["api_versions"] = {str(k): list(v) for k, v in sorted(self.api_versions.items())}
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "KafkaCheck":
        if d.get("api_versions") is not None:
            d = {**d, "api_versions": {int(k): (int(v[0]), int(v[1])) for k, v in d["api_versions"].items()}}
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class CanaryResult:
    """One canary round trip on a partition led by ``broker_id``: produce (acks=all), then consume
    the same record back from the leader."""

    broker_id: int
    topic: str
    partition: int | None
    ok: bool
    produce_ms: float | None = None
    consume_ms: float | None = None
    error: str | None = None
    error_code: str | None = None
    at: str | None = None
    idempotent: bool | None = None  # produced with the idempotent producer (Kafka >= 0.11, KIP-98)
    duplicates: int | None = None  # extra copies of this round's record found (None: not counted)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CanaryResult":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__ if k in d})


@dataclass(frozen=True)
class MetadataView:
    """What one broker's own metadata cache says (issue 7): a Metadata request on a connection to that broker
    alone (``hooks/kafka_wire.py``), answered from its cache. ``leaders``: "topic-N" -> [leader, leader epoch]
    (epoch None before Kafka 2.1's Metadata v7)."""

    broker_id: int
    endpoint: str
    ok: bool
    at: str | None = None
    leaders: Mapping[str, tuple[int, int | None]] = field(default_factory=dict)
    controller_id: int | None = None  # the controller this broker believes in
    error: str | None = None
    latency_ms: float | None = None

    def leader_of(self, partition: str) -> int | None:
        entry = self.leaders.get(partition)
        return None if entry is None else entry[0]

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "leaders": {k: list(v) for k, v in sorted(self.leaders.items())}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MetadataView":
        return cls(broker_id=int(d["broker_id"]), endpoint=str(d.get("endpoint") or ""), ok=bool(d.get("ok")), at=d.get("at"),
                   leaders={str(k): (int(v[0]), None if v[1] is None else int(v[1])) for k, v in (d.get("leaders") or {}).items()},
                   controller_id=d.get("controller_id"), error=d.get("error"), latency_ms=d.get("latency_ms"))


@dataclass(frozen=True)
class RequestMetrics:
    """A broker's request-path JMX figures (issue 7, incident 003), read with Kafka's own JmxTool on its host.
    ``values``: "<object name>:<attribute>" -> number, e.g.
    "kafka.network:type=RequestChannel,name=RequestQueueSize:Value"."""

    broker_id: int
    ok: bool
    at: str | None = None
    values: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None

    def get(self, object_name: str, attribute: str) -> float | None:
        return self.values.get(f"{object_name}:{attribute}")

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "values": dict(sorted(self.values.items()))}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "RequestMetrics":
        return cls(broker_id=int(d["broker_id"]), ok=bool(d.get("ok")), at=d.get("at"),
                   values={str(k): float(v) for k, v in (d.get("values") or {}).items()}, error=d.get("error"))


@dataclass(frozen=True)
class ClusterSnapshot:
    """Cluster state at one instant: registrations, controller, partitions, host probes."""

    cluster: str
    taken_at: str  # ISO-8601 UTC
    brokers: tuple[Broker, ...]
    controller_id: int | None
    partitions: tuple[Partition, ...]
    probes: tuple[HostProbe, ...] = ()
    # Problems met while reading (e.g. a znode whose JSON could not be parsed): never dropped.
    unparsable: tuple[str, ...] = ()
    controller_epoch: int | None = None
    # partitions ("topic-N") named in /admin/reassign_partitions and /admin/preferred_replica_election
    reassigning: tuple[str, ...] = ()
    preferred_election_pending: tuple[str, ...] = ()
    # dynamic broker configs from /config/brokers/<id> and /config/brokers/<default> (key "<default>")
    broker_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # direct Kafka-protocol checks and the canary (empty when not run)
    kafka_checks: tuple[KafkaCheck, ...] = ()
    canary: tuple[CanaryResult, ...] = ()
    # broker ids whose hosts are configured (probed even when not registered)
    configured_broker_ids: tuple[int, ...] = ()
    # leadership (issue 7): each broker's own metadata view, request-path JMX figures, the controllers' log lines
    # about elections, and the election-related keys of each broker's server.properties (allow-listed: no secrets)
    metadata_views: tuple[MetadataView, ...] = ()
    request_metrics: tuple[RequestMetrics, ...] = ()
    controller_log: tuple[LogLineSeen, ...] = ()
    static_configs: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # the ZooKeeper ensemble's members, one probe each (empty when not probed)
    zookeeper: tuple[ZooKeeperProbe, ...] = ()
    # why the cluster's state could not be read from ZooKeeper (then brokers/partitions are unknown, not empty)
    zookeeper_error: str | None = None
    # the Kafka version the brokers report (kafka_runbooks.versions.to_dict; None when not observed)
    kafka_version: Mapping[str, Any] | None = None

    # computed once per snapshot (frozen: they cannot go stale); a plan asks them for every step and partition
    @functools.cached_property
    def live_broker_ids(self) -> frozenset[int]:
        return frozenset(b.id for b in self.brokers)

    @functools.cached_property
    def _replica_index(self) -> dict[int, list[Partition]]:
        index: dict[int, list[Partition]] = {}
        for p in self.partitions:
            for r in dict.fromkeys(p.replicas):
                index.setdefault(r, []).append(p)
        return index

    @functools.cached_property
    def not_fully_replicated(self) -> tuple[Partition, ...]:
        """Partitions with a replica out of their ISR, or offline, in snapshot order."""
        return tuple(p for p in self.partitions if p.leader < 0 or any(r not in p.isr for r in p.replicas))

    def broker(self, broker_id: int) -> Broker | None:
        return next((b for b in self.brokers if b.id == broker_id), None)

    def probe(self, broker_id: int) -> HostProbe | None:
        return next((p for p in self.probes if p.broker_id == broker_id), None)

    def kafka_check(self, broker_id: int) -> KafkaCheck | None:
        return next((c for c in self.kafka_checks if c.broker_id == broker_id), None)

    def canary_of(self, broker_id: int) -> CanaryResult | None:
        return next((c for c in self.canary if c.broker_id == broker_id), None)

    def view_of(self, broker_id: int) -> MetadataView | None:
        return next((v for v in self.metadata_views if v.broker_id == broker_id), None)

    def metrics_of(self, broker_id: int) -> RequestMetrics | None:
        return next((m for m in self.request_metrics if m.broker_id == broker_id), None)

    def static_config(self, key: str, broker_id: int) -> str | None:
        """A key of broker ``broker_id``'s server.properties, when it was read (None: not set, or not read)."""
        return self.static_configs.get(str(broker_id), {}).get(key)
    def zk(self, server: str) -> ZooKeeperProbe | None:
        return next((z for z in self.zookeeper if z.server == str(server)), None)

    def partitions_of(self, broker_id: int) -> list[Partition]:
        return list(self._replica_index.get(broker_id, ()))

    def broker_config(self, key: str, broker_id: int | None = None) -> str | None:
        """A dynamic broker config: the broker's own override, else the cluster-wide default."""
        if broker_id is not None and key in self.broker_configs.get(str(broker_id), {}):
            return self.broker_configs[str(broker_id)][key]
        return self.broker_configs.get("<default>", {}).get(key)

    def with_probes(self, probes: Iterable[HostProbe]) -> "ClusterSnapshot":
        return dataclasses.replace(self, probes=tuple(probes))

    def with_checks(self, checks: Iterable[KafkaCheck], canary: Iterable[CanaryResult] = ()) -> "ClusterSnapshot":
        return dataclasses.replace(self, kafka_checks=tuple(checks), canary=tuple(canary))

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "taken_at": self.taken_at,
            "brokers": [b.to_dict() for b in self.brokers],
            "controller_id": self.controller_id,
            "partitions": [p.to_dict() for p in self.partitions],
            "probes": [p.to_dict() for p in self.probes],
            "unparsable": list(self.unparsable),
            "controller_epoch": self.controller_epoch,
            "reassigning": list(self.reassigning),
            "preferred_election_pending": list(self.preferred_election_pending),
            "broker_configs": {k: dict(v) for k, v in self.broker_configs.items()},
            "kafka_checks": [c.to_dict() for c in self.kafka_checks],
            "canary": [c.to_dict() for c in self.canary],
            "configured_broker_ids": list(self.configured_broker_ids),
            "metadata_views": [v.to_dict() for v in self.metadata_views],
            "request_metrics": [m.to_dict() for m in self.request_metrics],
            "controller_log": [x.to_dict() for x in self.controller_log],
            "static_configs": {k: dict(v) for k, v in self.static_configs.items()},
            "zookeeper": [z.to_dict() for z in self.zookeeper],
            "zookeeper_error": self.zookeeper_error,
            "kafka_version": self.kafka_version,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterSnapshot":
        return cls(
            cluster=str(d["cluster"]),
            taken_at=str(d["taken_at"]),
            brokers=tuple(Broker.from_dict(b) for b in d["brokers"]),
            controller_id=d.get("controller_id"),
            partitions=tuple(Partition.from_dict(p) for p in d["partitions"]),
            probes=tuple(HostProbe.from_dict(p) for p in d.get("probes") or ()),
            unparsable=tuple(d.get("unparsable") or ()),
            controller_epoch=d.get("controller_epoch"),
            reassigning=tuple(d.get("reassigning") or ()),
            preferred_election_pending=tuple(d.get("preferred_election_pending") or ()),
            broker_configs={str(k): dict(v) for k, v in (d.get("broker_configs") or {}).items()},
            kafka_checks=tuple(KafkaCheck.from_dict(c) for c in d.get("kafka_checks") or ()),
            canary=tuple(CanaryResult.from_dict(c) for c in d.get("canary") or ()),
            configured_broker_ids=tuple(int(b) for b in d.get("configured_broker_ids") or ()),
            metadata_views=tuple(MetadataView.from_dict(v) for v in d.get("metadata_views") or ()),
            request_metrics=tuple(RequestMetrics.from_dict(m) for m in d.get("request_metrics") or ()),
            controller_log=tuple(LogLineSeen.from_dict(x) for x in d.get("controller_log") or ()),
            static_configs={str(k): {str(a): str(b) for a, b in dict(v).items()} for k, v in (d.get("static_configs") or {}).items()},
            zookeeper=tuple(ZooKeeperProbe.from_dict(z) for z in d.get("zookeeper") or ()),
            zookeeper_error=d.get("zookeeper_error"),
            kafka_version=d.get("kafka_version"),
        )

    @property
    def version(self):
        """The brokers' version as observed (kafka_runbooks.versions.KafkaVersion; unknown when not observed)."""
        return versions.from_dict(self.kafka_version)


@dataclass(frozen=True)
class Evidence:
    """A citation: the exact lines of one captured file (or a live observation) behind a finding."""

    source: str  # bundle-relative file path, or e.g. "zookeeper:/brokers/topics/t/partitions/0/state"
    lines: tuple[int, ...] = ()  # 1-based line numbers in `source`
    excerpt: str = ""
    host: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "lines": list(self.lines)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Evidence":
        return cls(
            source=str(d["source"]),
            lines=tuple(int(x) for x in d.get("lines") or ()),
            excerpt=str(d.get("excerpt", "")),
            host=d.get("host"),
        )


@dataclass(frozen=True)
class Finding:
    """Something a detector or the analysis concluded, with the evidence that proves it."""

    kind: str  # one of findings.FindingKind (kept as its plain string: what XCom, JSON, Arrow and the state DB hold)
    severity: Severity
    summary: str
    broker_ids: tuple[int, ...] = ()
    partitions: tuple[str, ...] = ()
    evidence: tuple[Evidence, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.kind) is not str:
            object.__setattr__(self, "kind", str(self.kind))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity.value,
            "summary": self.summary,
            "broker_ids": list(self.broker_ids),
            "partitions": list(self.partitions),
            "evidence": [e.to_dict() for e in self.evidence],
            "details": dict(self.details),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Finding":
        return cls(
            kind=str(d["kind"]),
            severity=Severity(d["severity"]),
            summary=str(d["summary"]),
            broker_ids=tuple(int(b) for b in d.get("broker_ids") or ()),
            partitions=tuple(d.get("partitions") or ()),
            evidence=tuple(Evidence.from_dict(e) for e in d.get("evidence") or ()),
            details=dict(d.get("details") or {}),
        )


TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = (CONSUMER_OFFSETS, TRANSACTION_STATE)  # their leaders are the group / transaction coordinators


def partition_order(p: Partition) -> tuple[int, str, int]:
    """The order partitions are listed in everywhere: internal topics (__consumer_offsets, __transaction_state) first,
    then by topic and index."""
    return (0 if p.topic in INTERNAL_TOPICS else 1, p.topic, p.index)


@dataclass(frozen=True)
class Step:
    """One action of a remediation plan on one broker: what it does, what it changes while it runs
    (``blast_radius``) and, when it cannot be taken now, every reason (``refusals``).

    What travels (XCom, the approval, the record) stays small at any cluster size: ``blast_radius`` holds the first
    lines of each kind of effect (all of them when few), ``blast_counts`` counts every line per kind
    (``remediate/blast.py``: partitions, losing_replica, leaderships_moving, coordinators_moving, at_min_isr, offline,
    topics) and ``blast_sha256`` fingerprints the whole list, so the approval binds what was computed; the whole
    list is the plan's :class:`PlanDetail`, kept in the state database. ``refusals`` likewise holds the first reasons
    and ``refusal_count`` counts them all: a refused step is never shown as allowed.

    No command lives here: the argv run on a host is built from the cluster's configuration when
    the step executes (``ClusterConfig.argv``), never carried through XCom."""

    action: str  # "restart_broker"
    broker_id: int  # the broker restarted
    reason: str
    blast_radius: tuple[str, ...] = ()
    refusals: tuple[str, ...] = ()
    blast_counts: Mapping[str, int] = field(default_factory=dict)  # every line, per kind ({} = the lines are all)
    blast_sha256: str | None = None
    refusal_count: int = 0  # every reason (0 = the shown ones are all)

    @property
    def partitions_touched(self) -> int:
        return int(self.blast_counts.get("partitions", len(self.blast_radius)))

    @property
    def refusals_total(self) -> int:
        return max(self.refusal_count, len(self.refusals))

    def to_dict(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "broker_id": self.broker_id,
            "reason": self.reason,
            "blast_radius": list(self.blast_radius),
            "refusals": list(self.refusals),
            **({"blast_counts": dict(self.blast_counts)} if self.blast_counts else {}),
            **({"blast_sha256": self.blast_sha256} if self.blast_sha256 else {}),
            **({"refusal_count": self.refusal_count} if self.refusal_count else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Step":
        return cls(
            action=str(d["action"]),
            broker_id=int(d["broker_id"]),
            reason=str(d["reason"]),
            blast_radius=tuple(str(x) for x in d.get("blast_radius") or ()),
            refusals=tuple(str(x) for x in d.get("refusals") or ()),
            blast_counts={str(k): int(v) for k, v in (d.get("blast_counts") or {}).items()},
            blast_sha256=d.get("blast_sha256"),
            refusal_count=int(d.get("refusal_count") or 0),
        )


@dataclass(frozen=True)
class PlanDetail:
    """Everything a plan computed that is too big to travel: per step (broker) every blast radius line and every
    refusal, and the per (step, topic) summary rows (``remediate.blast.TopicBlast``). Kept in the state database
    (``state/plans.py``) under the plan's record and digest; the plan carries its fingerprint (``blast_sha256``)."""

    effects: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    refusals: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    topic_rows: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"effects": {str(b): list(v) for b, v in self.effects.items()},
                "refusals": {str(b): list(v) for b, v in self.refusals.items()},
                "topic_rows": [dict(r) for r in self.topic_rows]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PlanDetail":
        return cls(effects={int(b): tuple(v) for b, v in (d.get("effects") or {}).items()},
                   refusals={int(b): tuple(v) for b, v in (d.get("refusals") or {}).items()},
                   topic_rows=tuple(dict(r) for r in d.get("topic_rows") or ()))


@dataclass(frozen=True)
class ElectionBatch:
    """One batch of a preferred-replica election: the partitions ("topic-N") whose leadership moves to their preferred
    replica ``target`` together, written to ``/admin/preferred_replica_election`` at once and checked before the next.
    Nothing is stopped or started: not a Step."""

    target: int  # the broker leadership moves to (the partitions' preferred replica)
    partitions: tuple[str, ...]
    reason: str
    refusals: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "partitions": list(self.partitions), "reason": self.reason, "refusals": list(self.refusals)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ElectionBatch":
        return cls(target=int(d["target"]), partitions=tuple(str(x) for x in d.get("partitions") or ()), reason=str(d["reason"]),
                   refusals=tuple(str(x) for x in d.get("refusals") or ()))


@dataclass(frozen=True, eq=False)
class Plan:
    """A remediation plan: ordered steps, or the reasons it is refused, and the state it came from. A restart's is a
    :class:`RestartPlan`, a preferred election's an :class:`ElectionPlan` (``from_dict`` gives each its type by its
    ``kind``); a plan of another kind (a demotion's) is a Plan. Plans compare by their fields, whatever the type.

    ``refusals`` lists every plan-wide reason not to act, then each step's first ones as ``"broker N: ..."`` (with a
    line counting the rest: every reason is in ``detail`` and the state database). A restart plan's blast radius is
    in its steps (first lines per kind, counts, fingerprint), ``blast_topics`` (per topic, the worst step) and
    ``blast_sha256`` (the fingerprint of every step's whole list); ``blast_radius`` is an election's (a line per
    broker leadership moves to, with its count; the partitions are in ``batches``). ``detail`` (:class:`PlanDetail`) is the whole computed blast radius and refusals
    as computed; it never travels (``to_dict`` leaves it out: it goes to the state database).
    ``state_digest`` fingerprints the cluster state the plan was computed from; the approval is bound
    to the digest of the whole plan (``remediate.digest.plan_digest``). ``completed`` names brokers an
    earlier run of the same roll already restarted (resume): they are never restarted again."""

    cluster: str
    steps: tuple[Step, ...]
    refusals: tuple[str, ...] = ()
    blast_radius: tuple[str, ...] = ()
    kind: str = "restart"  # "rolling_restart", "incident_restart"
    requested: tuple[int, ...] = ()  # the brokers asked for, before ordering
    computed_at: str | None = None
    state_digest: str | None = None
    controller_id: int | None = None
    controller_epoch: int | None = None
    warnings: tuple[str, ...] = ()  # e.g. what an unclean leader election would lose
    not_serving: Mapping[int, str] = field(default_factory=dict)  # broker -> direct evidence (the waiver)
    completed: tuple[int, ...] = ()
    roll_id: str | None = None  # the incident-store record whose ledger tracks this plan's progress
    # what must hold before it runs (a deferred election: the returning brokers, the quiet window, the deadline)
    conditions: Mapping[str, Any] = field(default_factory=dict)
    batches: tuple[ElectionBatch, ...] = ()  # a preferred election's (its ``steps`` are empty: nothing restarts)
    blast_sha256: str | None = None  # of every step's whole blast radius (``remediate.blast.plan_blast_sha256``)
    blast_topics: tuple[Mapping[str, Any], ...] = ()  # per topic, the worst step (``blast.TopicTotal``), the first ones
    blast_topic_count: int = 0  # topics touched in all
    detail: "PlanDetail | None" = field(default=None, compare=False, repr=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Plan):
            return NotImplemented
        return all(getattr(self, f.name) == getattr(other, f.name) for f in fields(Plan) if f.compare)

    __hash__ = None  # type: ignore[assignment]  # its mappings (not_serving, conditions) are never hashable

    @property
    def refused(self) -> bool:
        return bool(self.refusals)

    @property
    def broker_order(self) -> tuple[int, ...]:
        return tuple(s.broker_id for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "steps": [s.to_dict() for s in self.steps],
            "refusals": list(self.refusals),
            "blast_radius": list(self.blast_radius),
            "kind": self.kind,
            "requested": list(self.requested),
            "computed_at": self.computed_at,
            "state_digest": self.state_digest,
            "controller_id": self.controller_id,
            "controller_epoch": self.controller_epoch,
            "warnings": list(self.warnings),
            "not_serving": {str(k): v for k, v in sorted(self.not_serving.items())},
            "completed": list(self.completed),
            "roll_id": self.roll_id,
            **({"conditions": dict(self.conditions)} if self.conditions else {}),
            **({"batches": [b.to_dict() for b in self.batches]} if self.batches else {}),
            **({"blast_sha256": self.blast_sha256, "blast_topics": [dict(t) for t in self.blast_topics],
                "blast_topic_count": self.blast_topic_count} if self.blast_sha256 else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Plan":
        if cls is Plan:  # the type its kind names
            cls = plan_type(str(d.get("kind") or "restart"))
        return cls(
            cluster=str(d["cluster"]),
            steps=tuple(Step.from_dict(s) for s in d.get("steps") or ()),
            refusals=tuple(d.get("refusals") or ()),
            blast_radius=tuple(d.get("blast_radius") or ()),
            kind=str(d.get("kind") or "restart"),
            requested=tuple(int(b) for b in d.get("requested") or ()),
            computed_at=d.get("computed_at"),
            state_digest=d.get("state_digest"),
            controller_id=d.get("controller_id"),
            controller_epoch=d.get("controller_epoch"),
            warnings=tuple(d.get("warnings") or ()),
            not_serving={int(k): str(v) for k, v in (d.get("not_serving") or {}).items()},
            completed=tuple(int(b) for b in d.get("completed") or ()),
            roll_id=d.get("roll_id"),
            conditions=dict(d.get("conditions") or {}),
            batches=tuple(ElectionBatch.from_dict(b) for b in d.get("batches") or ()),
            blast_sha256=d.get("blast_sha256"),
            blast_topics=tuple(dict(t) for t in d.get("blast_topics") or ()),
            blast_topic_count=int(d.get("blast_topic_count") or 0),
        )


@dataclass(frozen=True, eq=False)
class RestartPlan(Plan):
    """A restart's plan (rolling or incident): its ``steps``, each a broker's restart, in order; no batches."""


@dataclass(frozen=True, eq=False)
class ElectionPlan(Plan):
    """A preferred-replica election's plan: its ``batches`` (:class:`ElectionBatch`); no steps -- nothing restarts."""

    steps: tuple[Step, ...] = ()


RESTART_KINDS = ("restart", "rolling_restart", "incident_restart")
ELECTION_KIND = "preferred_election"


def plan_type(kind: str) -> type[Plan]:
    """The plan type of a plan ``kind``: RestartPlan, ElectionPlan, or Plan (any other kind: a demotion)."""
    return RestartPlan if kind in RESTART_KINDS else ElectionPlan if kind == ELECTION_KIND else Plan
