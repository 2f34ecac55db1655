"""Per-cluster settings.

Credentials never live here: ZooKeeper and every broker host are Airflow connections, named by id.
The settings themselves come from the Airflow Variable ``kafka_runbooks_clusters`` (a JSON object
keyed by cluster name), or from a JSON file named by ``KAFKA_RUNBOOKS_CLUSTERS_FILE`` for tools
that run outside Airflow.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

VARIABLE_NAME = "kafka_runbooks_clusters"
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
FILE_ENV = "KAFKA_RUNBOOKS_CLUSTERS_FILE"


class ConfigError(ValueError):
    """A cluster's settings are missing or wrong; the message says which and why."""


class ClusterSettingsWarning(UserWarning):
    """Warned while a DAG file is parsed for a cluster whose settings are wrong (it gets no DAG): Airflow records the
    warning with the file; the message names the cluster, the key and what was expected."""


def _section(cls, d: Mapping[str, Any] | None, name: str, tuples: tuple[str, ...] = ()):
    """A settings section from its dict: unknown keys are an error naming them; lists become tuples."""
    d = dict(d or {})
    unknown = set(d) - set(cls.__dataclass_fields__)
    if unknown:
        raise ConfigError(f"unknown {name} settings: {sorted(unknown)}")
    for key in tuples:
        if key in d:
            if isinstance(d[key], str):
                raise ConfigError(f"{name}.{key} must be a list, not a string")
            d[key] = tuple(d[key])
    return cls(**d)


@dataclass(frozen=True)
class CaptureSettings:
    jstack_count: int = 3  # thread dumps of a suspect broker (a peer gets one)
    jstack_interval_s: float = 5.0
    command_timeout_s: float = 60.0
    connect_timeout_s: float = 10.0
    host_deadline_s: float = 90.0  # one host's whole capture; what is left undone is recorded as skipped
    log_tail_lines: int = 2000  # of server.log
    log_tail_bytes: int = 1 << 20  # of every other log (controller, state-change, log-cleaner, stdout, GC)
    # next to server.log unless log_dir says otherwise ("{broker_id}" allowed)
    log_dir: str | None = None
    other_logs: tuple[str, ...] = ("controller.log", "state-change.log", "log-cleaner.log", "kafkaServer.out", "kafkaServer-gc.log")
    # the JVM's stdout/stderr, a file name in the broker's log directory: a SIGQUIT thread dump lands there, and a broker
    # that fails to start says why there (the one setting for that file; the retired stdout_log_path is refused)
    stdout_log: str = "kafkaServer.out"
    # `jhsdb jstack --pid` (ptrace; needs no cooperation from the JVM). Measured here on JDK 17: fine on a small
    # JVM (< 1 s), but on a Kafka 2.3 broker it fails ("VM.initialize() was not yet called") and spins until killed
    jhsdb_timeout_s: float = 20.0
    sigquit_wait_s: float = 3.0
    heap_dump: bool = False  # heap dumps only where configured, and only of the suspect broker
    # the intrusive tools (jhsdb, jmap -histo:live, a heap dump) on a suspect proven not serving just before, one host at
    # a time under the cluster's maintenance lock; off: never
    intrusive: bool = True
    intrusive_deadline_s: float = 120.0  # one host's intrusive tools, all of them (a heap dump's own bound is inside it)
    max_suspects: int = 3  # suspects per capture (heavier treatment); the others asked for are captured as peers
    heap_dump_fetch_limit_bytes: int = 1 << 30  # larger dumps stay on the host; the manifest says where
    remote_work_dir: str = "/tmp"  # a 0700 directory is made in it, as the JVM's user, for a heap dump
    # argv prefix for JVM tools, e.g. ["sudo", "-n", "-u", "kafka"] when SSH logs in as another user
    jvm_tool_prefix: tuple[str, ...] = ()
    # incident 002b: on a suspect broker of an incident about the log cleaner or __consumer_offsets, kafka-dump-log
    # (--deep-iteration: no payloads) on the oldest and the newest segment of its largest offsets partition
    dump_log: bool = True
    dump_log_timeout_s: float = 120.0
    # captures of one cluster started in any hour (each takes thread dumps of every broker): the next is refused,
    # naming this cap; counted in the state database (audit entries "capture_started")
    max_per_hour: int = 6

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CaptureSettings":
        s = _section(cls, d, "capture", tuples=("jvm_tool_prefix", "other_logs"))
        if s.jstack_count < 1 or s.jstack_interval_s < 0 or s.command_timeout_s <= 0:
            raise ConfigError("capture: jstack_count >= 1, jstack_interval_s >= 0, command_timeout_s > 0")
        if s.host_deadline_s <= 0 or s.jhsdb_timeout_s <= 0 or s.log_tail_bytes <= 0 or s.intrusive_deadline_s <= 0:
            raise ConfigError("capture: host_deadline_s, jhsdb_timeout_s, intrusive_deadline_s and log_tail_bytes must be > 0")
        if s.max_per_hour < 1:
            raise ConfigError("capture: max_per_hour must be >= 1")
        if s.max_suspects < 1:
            raise ConfigError("capture: max_suspects >= 1")
        if not s.stdout_log or "/" in s.stdout_log or s.stdout_log in (".", ".."):
            raise ConfigError(f"capture.stdout_log must be a file name in the broker's log directory, not {s.stdout_log!r}")
        return s


@dataclass(frozen=True)
class GateSettings:
    """Bounds of the waits around each remediation step (no fixed sleeps: each is watched or polled
    every ``poll_s``). Any bound passed halts the run."""

    stop_s: float = 120.0  # stop command → the old process is gone (then kill_command, if configured)
    # the same for a broker checked not serving just before its step (deadlocked, hung): its SIGTERM shutdown
    # waits on the stuck threads and rarely ends, so its kill comes sooner
    stop_unserving_s: float = 30.0
    deregister_s: float = 60.0  # → the old ZooKeeper registration is gone (session closed or expired)
    register_s: float = 120.0  # start command → alive and registered with a new session
    in_sync_s: float = 900.0  # → back in every ISR it belongs in
    coordinator_s: float = 600.0  # → every __consumer_offsets partition has a loaded coordinator
    canary_s: float = 120.0  # → canary produce/consume succeeding
    poll_s: float = 2.0
    lock_wait_s: float = 30.0  # a second run waits this long for the cluster's maintenance lock, then refuses
    probe_timeout_s: float = 10.0  # one Kafka client request (coordinator probe, canary round trip)
    # the last direct check of the holders is at most this old when a stop command leaves; older: checked again
    check_fresh_s: float = 5.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "GateSettings":
        s = _section(cls, d, "gates")
        values = dataclasses.asdict(s)
        if min(v for k, v in values.items() if k != "lock_wait_s") <= 0 or s.lock_wait_s < 0:
            raise ConfigError("gates: every bound must be > 0 seconds (lock_wait_s >= 0)")
        return s


@dataclass(frozen=True)
class HealthSettings:
    """Detection: what the health check probes, how sure it must be before a response starts, and
    the thresholds of its detectors (per cluster; every default is explained in runbooks/detection.md)."""

    consecutive_checks: int = 2  # a finding must hold this many checks in a row before a response starts
    clear_checks: int = 3  # an incident whose finding is gone this many checks in a row resolves itself
    kafka_probe_timeout_s: float = 5.0  # direct Kafka-protocol check of one broker
    # a configured broker that is NOT registered is checked on its last known endpoint only as evidence:
    # a short bound keeps an event-triggered check quick (the finding does not depend on it)
    unregistered_probe_timeout_s: float = 1.0
    history_samples: int = 60  # probes kept per broker / ZooKeeper server
    probe_command_timeout_s: float = 15.0  # each SSH command of a host probe
    probe_host_deadline_s: float = 45.0  # one host's whole probe
    fetch_error_window_s: float = 180.0  # peers' fetch errors older than this never count
    log_tail_bytes: int = 512 * 1024  # how much of each server.log the probe reads
    startup_grace_s: float = 120.0  # a broker registered this recently may still be loading: not accused
    log_stale_s: float = 900.0  # server.log untouched this long while the process lives (a quiet 2.3 broker logs every 10 min)
    close_wait_min: int = 100  # CLOSE_WAIT count that is notable at all ...
    close_wait_ratio: float = 3.0  # ... when also this many times the median of the peers
    close_wait_growth: int = 10  # CLOSE_WAIT rising by at least this much over the trend samples
    recv_q_growth_bytes: int = 1  # Recv-Q bytes rising by at least this much (data nobody reads)
    open_files_min: int = 10_000
    open_files_ratio: float = 3.0
    trend_samples: int = 4  # how many recent samples (incl. this one) a trend is judged on
    # a finding seen for the first time is looked at again this many seconds later, in the same health run,
    # until it held for consecutive_checks observations (0: only the scheduled / event-triggered runs count)
    recheck_s: float = 10.0
    # a streak not seen by any check for this long (the checks stopped) ends: a later sighting is a new episode
    episode_gap_s: float = 900.0
    traffic_ratio: float = 0.05  # bytes/s below this fraction of the peers' median is "near zero"
    max_evidence: int = 20  # evidence items per finding; ``details`` always has the full lists
    # incident 000: a broker's server.log silent this long while its process lives and its peers' logs are
    # written (each peer's log younger than this): the broker stopped logging, not the cluster
    log_silent_s: float = 300.0
    # incident 002a: requests with an API key the broker does not know (read from its server.log tail)
    bad_request_window_s: float = 900.0  # such lines older than this never count
    # incident 002b: the log cleaner, __consumer_offsets size and loading
    cleaner_check: bool = True  # look for kafka-log-cleaner-thread-* among the broker's threads (/proc)
    offsets_segments_max: int = 200  # a __consumer_offsets partition with more segments than this is oversized
    offsets_bytes_max: int = 1 << 30  # ... or more bytes than this
    offsets_load_expected_s: float = 60.0  # loading one __consumer_offsets partition longer than this is slow
    # this cluster's health-check DAG (dags/kafka_health_check.py): its cron (UTC; None: $KAFKA_RUNBOOKS_HEALTH_SCHEDULE,
    # else every 5 minutes) and whether a ZooKeeper watch in the triggerer also starts it (None:
    # $KAFKA_RUNBOOKS_WATCH_ZOOKEEPER, else true)
    schedule: str | None = None
    watch_zookeeper: bool | None = None
    # issue 30: a watch in the triggerer asks every registered broker one tiny request (ApiVersions v0, or Metadata v0
    # where the broker may be 0.9) every serving_interval_s, each bounded by serving_timeout_s; a broker that does not
    # answer serving_failures rounds in a row (one round when its endpoint refused the connection) starts the health
    # check, each broker at most once per serving_debounce_s (triggers/serving.py). watch_serving None: $KAFKA_RUNBOOKS_WATCH_SERVING, else true
    watch_serving: bool | None = None
    serving_interval_s: float = 2.0
    serving_timeout_s: float = 2.0
    serving_failures: int = 2
    serving_debounce_s: float = 60.0
    # issue 16: a follower out of an ISR whose log end offset has not moved for this long, with no fetcher for the
    # partition, is stuck (detect/replicas.py); the preferred election gives up on it instead of waiting
    follower_stuck_s: float = 120.0

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HealthSettings":
        s = _section(cls, d, "health")
        if s.schedule is not None:
            from kafka_runbooks.schedules import schedule_error  # deferred: loaded on first use, not when a DAG file is parsed

            why = schedule_error(s.schedule, "UTC")
            if why:
                raise ConfigError(f"health.schedule: {why}")
        if s.watch_zookeeper is not None and not isinstance(s.watch_zookeeper, bool):
            raise ConfigError("health.watch_zookeeper must be true or false")
        if s.watch_serving is not None and not isinstance(s.watch_serving, bool):
            raise ConfigError("health.watch_serving must be true or false")
        if s.serving_interval_s <= 0 or s.serving_timeout_s <= 0 or s.serving_failures < 1 or s.serving_debounce_s < 0:
            raise ConfigError("health: serving_interval_s > 0, serving_timeout_s > 0, serving_failures >= 1, serving_debounce_s >= 0")
        if s.consecutive_checks < 1 or s.clear_checks < 1 or s.history_samples < 2 or s.kafka_probe_timeout_s <= 0:
            raise ConfigError("health: consecutive_checks >= 1, clear_checks >= 1, history_samples >= 2, kafka_probe_timeout_s > 0")
        if s.trend_samples < 2 or s.trend_samples > s.history_samples:
            raise ConfigError("health: 2 <= trend_samples <= history_samples")
        if s.recheck_s < 0:
            raise ConfigError("health: recheck_s >= 0")
        if min(s.probe_command_timeout_s, s.probe_host_deadline_s, s.fetch_error_window_s, s.log_tail_bytes) <= 0:
            raise ConfigError("health: probe timeouts, fetch_error_window_s and log_tail_bytes must be > 0")
        if min(s.log_silent_s, s.bad_request_window_s, s.offsets_load_expected_s, s.follower_stuck_s) <= 0 or min(s.offsets_segments_max, s.offsets_bytes_max) < 1:
            raise ConfigError("health: log_silent_s, bad_request_window_s, offsets_load_expected_s, follower_stuck_s > 0; offsets_* >= 1")
        return s


@dataclass(frozen=True)
class ZooKeeperServer:
    """One member of the cluster's ZooKeeper ensemble: where its four-letter words are asked (its client
    address) and, optionally, the Airflow SSH connection of its host (logs, zoo.cfg, process, jstack)."""

    address: str  # "host:port" (client port)
    ssh_conn_id: str | None = None
    zone: str | None = None  # zone / rack, recorded with every drop

    @classmethod
    def from_dict(cls, server_id: str, d: Mapping[str, Any]) -> "ZooKeeperServer":
        s = _section(cls, d, f"zookeeper.servers.{server_id}")
        from kafka_runbooks.zookeeper import parse_hosts  # deferred: loaded on first use, not when a DAG file is parsed

        try:
            (_, _), = parse_hosts(s.address)
        except ValueError as exc:
            raise ConfigError(f"zookeeper.servers.{server_id}.address: {exc}") from None
        return s


@dataclass(frozen=True)
class ZooKeeperSettings:
    """The ensemble's members by server id (``myid``), and where their files are on their hosts.
    Without ``servers`` the health check asks the four-letter words of every server of the cluster's
    ZooKeeper connection (named by address, no SSH)."""

    servers: Mapping[str, ZooKeeperServer] = field(default_factory=dict)
    config_path: str = "/etc/zookeeper/conf/zoo.cfg"  # "{server_id}" allowed
    log_path: str = "/var/log/zookeeper/zookeeper.log"  # "{server_id}" allowed
    gc_log_path: str | None = None  # "{server_id}" allowed; None: no GC log read
    # argv prefix for JVM tools on the ZooKeeper hosts (e.g. ["sudo", "-n", "-u", "zookeeper"])
    jvm_tool_prefix: tuple[str, ...] = ()
    pid_file: str | None = None  # "{server_id}" allowed; None: the process listening on the client port

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ZooKeeperSettings":
        d = dict(d or {})
        servers = d.pop("servers", None) or {}
        if not isinstance(servers, Mapping):
            raise ConfigError("zookeeper.servers must be an object {server id: {address, ssh_conn_id, zone}}")
        s = _section(cls, d, "zookeeper", tuples=("jvm_tool_prefix",))
        parsed = {}
        for sid, v in servers.items():
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", str(sid)):
                raise ConfigError(f"zookeeper.servers: bad server id {sid!r}")
            parsed[str(sid)] = ZooKeeperServer.from_dict(str(sid), v if isinstance(v, Mapping) else {"address": v})
        return dataclasses.replace(s, servers=parsed)

    def path(self, which: str, server_id: str) -> str | None:
        template = getattr(self, which)
        return template.replace("{server_id}", str(server_id)) if template else None


@dataclass(frozen=True)
class ZooKeeperHealthSettings:
    """Thresholds of the ZooKeeper detectors (incident 004), per cluster; runbooks/zookeeper-follower-drop.md."""

    four_letter_timeout_s: float = 2.0
    # a server's client connections "dropped and stayed": at most connections_low now (seed 004: "single
    # digits") and at most connections_drop_ratio x its own median before the drop, for stay_samples samples
    connections_low: int = 9
    connections_drop_ratio: float = 0.5
    stay_samples: int = 2
    drop_window_s: float = 900.0  # a follower's drop is reported for this long after it was seen
    log_window_s: float = 900.0  # ZooKeeper log lines older than this never count
    log_tail_bytes: int = 512 * 1024
    load_per_cpu_high: float = 2.0  # 1-minute load average per CPU above this is "high load" on that host

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ZooKeeperHealthSettings":
        s = _section(cls, d, "zookeeper_health")
        if s.four_letter_timeout_s <= 0 or s.stay_samples < 1 or not 0 < s.connections_drop_ratio <= 1:
            raise ConfigError("zookeeper_health: four_letter_timeout_s > 0, stay_samples >= 1, 0 < connections_drop_ratio <= 1")
        if min(s.drop_window_s, s.log_window_s, s.log_tail_bytes, s.load_per_cpu_high) <= 0 or s.connections_low < 0:
            raise ConfigError("zookeeper_health: windows, log_tail_bytes and load_per_cpu_high must be > 0")
        return s


@dataclass(frozen=True)
class CanarySettings:
    """A small produce (acks=all) + consume on a partition led by each broker, every health check.
    The topic must exist (the canary never creates topics); its partitions should be spread over
    every broker (one partition per broker at least)."""

    enabled: bool = False
    topic: str = "kafka-runbooks-canary"
    latency_bound_ms: float = 5000.0
    timeout_s: float = 5.0  # producing, and then consuming, each bounded by this

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CanarySettings":
        s = _section(cls, d, "canary")
        if s.timeout_s <= 0 or s.latency_bound_ms <= 0:
            raise ConfigError("canary: timeout_s > 0 and latency_bound_ms > 0")
        return s


@dataclass(frozen=True)
class ApprovalSettings:
    """Who may approve a remediation of this cluster (never the person who started the run), and how
    on-call is reached. ``approvers`` are Airflow user ids (SimpleAuthManager: the user name; FAB: the
    numeric id as a string); they become the HITL request's assigned users."""

    approvers: tuple[str, ...] = ()
    # user id -> user name, where the auth manager's ids are not the names (FAB: numeric ids; a run's starter is
    # recorded by name): four eyes compares the starter with both
    approver_names: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 3600.0  # no answer in time is a Reject
    # an Approve is good for this long after it was given (a deferred election: until the deadline it approved)
    max_age_s: float = 3600.0
    # Airflow connection whose password keys the HMAC that seals each recorded decision
    secret_conn_id: str = "kafka_runbooks_approvals"
    # Airflow connection (type http) of the on-call webhook; None: no webhook notification
    oncall_conn_id: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ApprovalSettings":
        s = _section(cls, d, "approvals", tuples=("approvers",))
        if s.timeout_s <= 0 or s.max_age_s <= 0 or any(not isinstance(a, str) or not a for a in s.approvers):
            raise ConfigError("approvals: approvers must be non-empty user ids, timeout_s > 0, max_age_s > 0")
        names = dict(s.approver_names or {})
        if any(not isinstance(k, str) or not isinstance(v, str) or not v or k not in s.approvers for k, v in names.items()):
            raise ConfigError("approvals.approver_names: {approver id: user name}, for configured approvers only")
        return dataclasses.replace(s, approver_names=names)


_JVM_SIZE = re.compile(r"-X(?:mx|ms|ss)[0-9]+[kKmMgG]?")


def jvm_sizes(value: str, where: str) -> tuple[str, ...]:
    """A setting that becomes JVM options on a broker's host (``leadership.jmx_heap``): -Xmx/-Xms/-Xss sizes only,
    never an agent or a system property. Raises ConfigError naming ``where``."""
    opts = tuple(str(value).split())
    if not opts or any(not _JVM_SIZE.fullmatch(o) for o in opts):
        raise ConfigError(f"{where} {value!r}: only -Xmx/-Xms/-Xss sizes are accepted (e.g. -Xmx64m)")
    return opts


@dataclass(frozen=True)
class LeadershipSettings:
    """Detecting leadership trouble (issue 7, incident 003): what the health check reads and its thresholds
    (runbooks/preferred-election.md explains each)."""

    metadata_views: bool = True  # ask every broker for its own metadata (a connection to it alone)
    view_timeout_s: float = 3.0
    jmx: bool = True  # request queues and times with Kafka's JmxTool, run over SSH on each broker host
    jmx_timeout_s: float = 15.0  # JmxTool takes ~2 s; a read that hangs behind a stuck broker's lock costs the check this
    jmx_host: str | None = None  # where the JMX port listens, from the broker host; None: the broker's registered host
    jmx_heap: str = "-Xmx64m"  # JmxTool's own JVM
    controller_log: bool = True  # the controllers' log lines about preferred elections, over SSH
    controller_log_bytes: int = 512 * 1024
    window_s: float = 1800.0  # "recent": the storm, flapping and divergence are judged over this much history
    storm_epoch_changes: int = 3  # leader-epoch changes of one partition within window_s that make a storm
    returned_s: float = 1800.0  # a broker registered (again) within this is "returning"
    flap_registrations: int = 2  # this many registrations (sessions) within window_s: its session flaps
    divergence_critical_s: float = 30.0  # a divergence that lasted this long is critical
    queue_ratio: float = 0.8  # RequestQueueSize at this share of queued.max.requests is saturation
    queue_time_ms: float = 1000.0  # RequestQueueTimeMs / ResponseQueueTimeMs 99th percentile above this is saturation
    connection_ratio: float = 2.0  # ESTABLISHED on the broker's ports this many times its recent median ...
    connection_min: int = 200  # ... and at least this many: a connection storm

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LeadershipSettings":
        s = _section(cls, d, "leadership")
        if min(s.view_timeout_s, s.jmx_timeout_s, s.window_s, s.returned_s, s.queue_ratio, s.connection_ratio) <= 0:
            raise ConfigError("leadership: timeouts, windows and ratios must be > 0")
        if s.storm_epoch_changes < 2 or s.flap_registrations < 2:
            raise ConfigError("leadership: storm_epoch_changes >= 2 and flap_registrations >= 2")
        jvm_sizes(s.jmx_heap, "leadership.jmx_heap")
        return s


ELECTION_METHODS = ("auto", "zookeeper", "admin")


@dataclass(frozen=True)
class ElectionSettings:
    """The deferred preferred-replica election (dags/kafka_preferred_election.py): batches, when it may run,
    and how each batch is checked (runbooks/preferred-election.md)."""

    batch_size: int = 10  # partitions per batch
    offsets_batch_size: int = 5  # __consumer_offsets partitions per batch: their group coordinators move with them
    # partitions one election moves at most; the rest are left to the next one (its schedule, or a new run): the plan
    # stays well under 1 MB in XCom and the approval, and a person approves a bounded change
    max_partitions: int = 5000
    stable_s: float = 600.0  # the returning broker's ZooKeeper session must be this old
    # UTC windows "HH:MM-HH:MM" (may wrap midnight) the election may run in; empty: any time
    window: tuple[str, ...] = ()
    max_bytes_in_per_s: float | None = None  # every broker's BytesInPerSec (1-min rate) at most this ...
    max_requests_per_s: float | None = None  # ... and produce + fetch requests/s at most this (JMX)
    deadline_s: float = 86400.0  # gives up this long after the approval
    poll_s: float = 30.0  # how often the wait re-checks
    convergence_s: float = 60.0  # after each batch: leaders preferred, every broker agrees, canary ok, queues fine
    # auto/zookeeper: /admin/preferred_replica_election (every ZooKeeper-mode Kafka); admin: elect_leaders (Kafka >= 2.2:
    # ElectLeaders v0 on 2.2/2.3, measured on the lab's 2.3.0; refused when kafka_version says older; the only way on KRaft)
    method: str = "auto"
    znode_timeout_s: float = 60.0  # the controller deletes /admin/preferred_replica_election within this
    canary: bool = True  # the canary must succeed after each batch (the cluster's canary topic)
    # cron (5 fields) at which kafka_preferred_election_schedule plans an election for this cluster; None: never
    schedule: str | None = None
    schedule_timezone: str = "UTC"  # the timezone the cron is read in (IANA name)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ElectionSettings":
        s = _section(cls, d, "election", tuples=("window",))
        if s.batch_size < 1 or s.offsets_batch_size < 1 or s.max_partitions < 1:
            raise ConfigError("election: batch_size, offsets_batch_size and max_partitions >= 1")
        if min(s.stable_s, s.deadline_s, s.poll_s, s.convergence_s, s.znode_timeout_s) <= 0:
            raise ConfigError("election: stable_s, deadline_s, poll_s, convergence_s and znode_timeout_s must be > 0")
        if s.method not in ELECTION_METHODS:
            raise ConfigError(f"election.method must be one of {list(ELECTION_METHODS)}, not {s.method!r}")
        from kafka_runbooks.schedules import parse_window  # deferred: loaded on first use, not when a DAG file is parsed

        for w in s.window:
            try:
                parse_window(w)
            except ValueError as exc:
                raise ConfigError(f"election.window: {exc}") from None
        if s.schedule is not None:
            from kafka_runbooks.schedules import schedule_error  # deferred: loaded on first use, not when a DAG file is parsed

            why = schedule_error(s.schedule, s.schedule_timezone)
            if why:
                raise ConfigError(f"election.schedule: {why}")
        return s


@dataclass(frozen=True)
class MitigationSettings:
    """Mitigate first (runbooks/mitigate-first.md): the incident response offers to move leadership off a broker that
    does not serve before the capture (its own approval: the drills and end-to-end tests answer both)."""

    enabled: bool = True  # offer the move (its own four-eyes approval) before the capture
    approval_wait_s: float = 600.0  # the capture waits this long at most for that answer; none: nothing moves

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "MitigationSettings":
        s = _section(cls, d, "mitigation")
        if s.approval_wait_s <= 0:
            raise ConfigError("mitigation: approval_wait_s > 0")
        return s


_SECTIONS = {
    "capture": CaptureSettings,
    "gates": GateSettings,
    "health": HealthSettings,
    "canary": CanarySettings,
    "approvals": ApprovalSettings,
    "zookeeper": ZooKeeperSettings,
    "zookeeper_health": ZooKeeperHealthSettings,
    "leadership": LeadershipSettings,
    "election": ElectionSettings,
    "mitigation": MitigationSettings,
}
_ARGV_FIELDS = ("stop_command", "start_command", "kill_command")
# settings the remediation engine replaced: a clear error instead of a silently ignored value
_RETIRED = {
    "restart_command": "split into stop_command and start_command (plus kill_command for escalation)",
    "recovery_timeout_s": "replaced by the gates section (register_s, in_sync_s, coordinator_s, canary_s)",
    "approval_timeout_s": "moved to approvals.timeout_s",
    "stdout_log_path": "replaced by capture.stdout_log (the file name of the broker's stdout in its log directory, "
                       "capture.log_dir or server.log's; default kafkaServer.out): one setting for one file",
}


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    zk_conn_id: str  # Airflow connection: host "h1:p1,h2:p2", extra {"chroot": "/kafka"}
    hosts: Mapping[int, str]  # broker id -> Airflow SSH connection id of its host
    kafka_conn_id: str | None = None  # optional Airflow connection with librdkafka security settings
    broker_port: int = 9092  # fallback when a registration carries no port
    # the listener probes and clients use (e.g. "REPLICATION"); None: the registration's only endpoint
    listener: str | None = None
    # argv run over SSH on the broker's host; "{broker_id}" is the only placeholder.
    stop_command: tuple[str, ...] = ("sudo", "-n", "systemctl", "stop", "kafka")  # controlled shutdown
    start_command: tuple[str, ...] = ("sudo", "-n", "systemctl", "start", "kafka")
    kill_command: tuple[str, ...] = ()  # escalation when the process outlives gates.stop_s; empty: never kill
    server_log_path: str = "/var/log/kafka/server.log"  # "{broker_id}" allowed
    # regex (pgrep -f) for the broker's process; "{server_properties}" becomes the escaped properties path
    process_pattern: str = r"kafka\.Kafka .*{server_properties}"
    server_properties_path: str = "/etc/kafka/server.properties"  # "{broker_id}" allowed
    kafka_home: str = "/opt/kafka"  # on the broker hosts: bin/kafka-dump-log.sh, bin/kafka-run-class.sh, libs/ (JmxTool)
    kafka_version: str | None = None
    min_insync_replicas: int | None = None  # cluster default; topic overrides are read from ZooKeeper
    # cluster setting of unclean.leader.election.enable; None: Kafka's default for kafka_version
    unclean_leader_election: bool | None = None
    bundle_base: str = "/var/lib/kafka-runbooks/bundles"
    incident_base: str = "/var/lib/kafka-runbooks/incidents"
    spark_conn_id: str = "spark_default"
    capture: CaptureSettings = field(default_factory=CaptureSettings)
    gates: GateSettings = field(default_factory=GateSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    canary: CanarySettings = field(default_factory=CanarySettings)
    approvals: ApprovalSettings = field(default_factory=ApprovalSettings)
    zookeeper: ZooKeeperSettings = field(default_factory=ZooKeeperSettings)
    zookeeper_health: ZooKeeperHealthSettings = field(default_factory=ZooKeeperHealthSettings)
    leadership: LeadershipSettings = field(default_factory=LeadershipSettings)
    election: ElectionSettings = field(default_factory=ElectionSettings)
    mitigation: MitigationSettings = field(default_factory=MitigationSettings)
    # read by settings_model.py, the strict model derived from these dataclasses (it imports nothing of this module)
    NAME_PATTERN: ClassVar[re.Pattern[str]] = _CLUSTER_NAME
    RETIRED: ClassVar[Mapping[str, str]] = _RETIRED
    ARGV_FIELDS: ClassVar[tuple[str, ...]] = _ARGV_FIELDS

    def ssh_conn_id(self, broker_id: int) -> str:
        try:
            return self.hosts[int(broker_id)]
        except KeyError:
            raise ConfigError(f"cluster {self.name!r} has no SSH connection for broker {broker_id}") from None

    def argv(self, which: str, broker_id: int) -> tuple[str, ...]:
        """``stop_command`` / ``start_command`` / ``kill_command`` for one broker, built from this
        configuration at execution time (never from XCom)."""
        if which not in _ARGV_FIELDS:
            raise ConfigError(f"no command {which!r}")
        return tuple(part.replace("{broker_id}", str(int(broker_id))) for part in getattr(self, which))

    def server_log(self, broker_id: int) -> str:
        return self.server_log_path.replace("{broker_id}", str(int(broker_id)))

    def log_dir(self, broker_id: int) -> str:
        """The broker's log directory: ``capture.log_dir``, else the directory of its server.log."""
        if self.capture.log_dir:
            return self.capture.log_dir.replace("{broker_id}", str(int(broker_id)))
        return self.server_log(broker_id).rsplit("/", 1)[0] or "/"

    def server_properties(self, broker_id: int) -> str:
        return self.server_properties_path.replace("{broker_id}", str(int(broker_id)))

    def stdout_log(self, broker_id: int) -> str:
        """The broker's stdout/stderr (kafka-server-start.sh writes kafkaServer.out into its log directory): the one
        setting ``capture.stdout_log``, in ``log_dir``."""
        return f"{self.log_dir(broker_id).rstrip('/')}/{self.capture.stdout_log}"

    def process_regex(self, broker_id: int) -> str:
        """The pgrep -f pattern that finds this broker's JVM on its host."""
        import re

        pattern = self.process_pattern.replace("{server_properties}", re.escape(self.server_properties(broker_id)))
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"cluster {self.name!r}: process_pattern is not a valid regex: {exc}") from None
        return pattern

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> "ClusterConfig":
        """One cluster's settings, checked in full: first the typed model (settings_model.py: shapes and strict types,
        unknown and retired keys by name), then every section's range checks; errors name the cluster and the key."""
        from kafka_runbooks.settings_model import errors  # deferred: loaded on first use, not when a DAG file is parsed

        found = errors(cls, name, d)
        if found:
            raise ConfigError("; ".join(dict.fromkeys(found)))
        try:
            return cls._from_checked(name, d)
        except ConfigError as exc:
            text = str(exc)
            raise ConfigError(text if text.startswith("cluster ") else f"cluster {name!r}: {text}") from None

    @classmethod
    def _from_checked(cls, name: str, d: Mapping[str, Any]) -> "ClusterConfig":
        try:
            hosts = {int(k): str(v) for k, v in dict(d["hosts"]).items()}
            retired = sorted(set(d) & set(_RETIRED))
            if retired:
                raise ConfigError(f"cluster {name!r}: " + "; ".join(f"{k} is retired: {_RETIRED[k]}" for k in retired))
            unknown = set(d) - set(cls.__dataclass_fields__)
            if unknown:
                raise ConfigError(f"cluster {name!r}: unknown settings {sorted(unknown)}")
            known = {k: v for k, v in d.items() if k not in ("hosts", "name", *_SECTIONS)}
            for key in _ARGV_FIELDS:
                if key in known:
                    if isinstance(known[key], str):
                        raise ConfigError(f"cluster {name!r}: {key} must be an argv list, not a shell string")
                    known[key] = tuple(str(x) for x in known[key])
            sections = {key: section.from_dict(d.get(key) or {}) for key, section in _SECTIONS.items()}
            return cls(name=name, hosts=hosts, **sections, **known)
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"cluster {name!r}: bad settings: {exc!r}") from exc


def all_errors(raw: Any) -> dict[str, list[str]]:
    """``{cluster: [problems]}`` for every cluster of a settings document (the Variable's value), checked in full (the
    typed model, then the range checks, as the DAG file's parse does): the clusters without problems are left out."""
    from kafka_runbooks.settings_model import errors  # deferred: loaded on first use, not when a DAG file is parsed

    if not isinstance(raw, Mapping):
        return {"(settings)": [f"expected an object {{cluster name: settings}}, got {type(raw).__name__}"]}
    out: dict[str, list[str]] = {}
    for name in sorted(raw, key=str):
        found = errors(ClusterConfig, name, raw[name])
        if not found:
            try:
                ClusterConfig.from_dict(name, raw[name])
            except ConfigError as exc:
                found = [str(exc)]
        if found:
            out[str(name)] = found
    return out


def raw_clusters(*, missing_ok: bool = False) -> Mapping[str, Any]:
    """Every cluster's settings as configured (the file at $KAFKA_RUNBOOKS_CLUSTERS_FILE, else the Airflow Variable).
    ``missing_ok``: no Variable is no cluster (``{}``) instead of an error."""
    path = os.environ.get(FILE_ENV)
    if path:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    from airflow.sdk import Variable  # imported late: nothing slow at DAG parse time

    if missing_ok:
        return Variable.get(VARIABLE_NAME, default=None, deserialize_json=True) or {}
    return Variable.get(VARIABLE_NAME, deserialize_json=True)


HEALTH_SCHEDULE_ENV = "KAFKA_RUNBOOKS_HEALTH_SCHEDULE"
WATCH_ZOOKEEPER_ENV = "KAFKA_RUNBOOKS_WATCH_ZOOKEEPER"
WATCH_SERVING_ENV = "KAFKA_RUNBOOKS_WATCH_SERVING"
DEFAULT_HEALTH_SCHEDULE = "*/5 * * * *"


@dataclass(frozen=True)
class HealthSchedule:
    """When one cluster's health-check DAG runs: what its DAG needs at parse time, nothing more."""

    cluster: str
    cron: str
    watch_zookeeper: bool
    watch_serving: bool = False


def health_schedules(raw: Mapping[str, Any]) -> tuple[list[HealthSchedule], dict[str, str]]:
    """Every configured cluster's health schedule, and the clusters that cannot get one (name -> why): a cluster with
    bad settings does not hide the others. Every section of each cluster is checked (parse time; no I/O)."""
    default_cron = os.environ.get(HEALTH_SCHEDULE_ENV) or DEFAULT_HEALTH_SCHEDULE
    default_watch = os.environ.get(WATCH_ZOOKEEPER_ENV, "true").strip().lower() not in ("0", "false", "no", "off")
    default_serving = os.environ.get(WATCH_SERVING_ENV, "true").strip().lower() not in ("0", "false", "no", "off")
    out: list[HealthSchedule] = []
    errors: dict[str, str] = {}
    for name in sorted(raw, key=str):
        try:
            if not isinstance(name, str) or not _CLUSTER_NAME.fullmatch(name):
                raise ConfigError(f"invalid cluster name {name!r}: letters, digits, '_', '.', '-'")
            health = ClusterConfig.from_dict(name, raw[name]).health  # every section, not only health
        except (ConfigError, AttributeError, TypeError) as exc:
            errors[str(name)] = str(exc)
            continue
        out.append(HealthSchedule(name, health.schedule or default_cron,
                                  default_watch if health.watch_zookeeper is None else health.watch_zookeeper,
                                  default_serving if health.watch_serving is None else health.watch_serving))
    return out, errors


def load_cluster(name: str, raw: Mapping[str, Any] | None = None) -> ClusterConfig:
    clusters = raw if raw is not None else raw_clusters()
    if name not in clusters:
        raise ConfigError(f"unknown cluster {name!r}; configured: {sorted(clusters)}")
    return ClusterConfig.from_dict(name, clusters[name])
