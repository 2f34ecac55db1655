"""The one vocabulary of finding kinds: what detection (``detect/``) and analysis (``analyze/``) may call a finding,
what the runbooks and reports name, and what the state database stores (an incident's ``trigger.kind``).

One name per kind: where detection and analysis once spelled the same condition differently, the name the state
database already stored is kept (detection's) and the other spelling is an alias, read back as the kind
(``canonical``): reports and bundles written before keep their old spelling on disk, and the fleet analytics read
them through ``canonical``. An analysis kind whose name could be read as another kind's was renamed the same way,
its old name an alias: ``group_load_slow`` (a load that finished, but after 60 s or more) is
``offsets_load_finished_late``, apart from ``offsets_load_slow`` (a load not finished).

A finding's ``details["problem"]`` is a coarser word, the incident's (``broker_not_serving``, ``log_cleaner_stopped``,
``leadership``, ...): several kinds open one incident for one problem. Those words are stored in incident records
(an open incident is matched by them) and are not finding kinds.

Pure; the meaning of each kind is one line here, and the runbooks (``runbooks/*.md``) say more.
"""

from __future__ import annotations

import enum


class FindingKind(enum.StrEnum):
    # detection: a broker that does not serve (runbooks/detection.md, broker-silently-isolated.md)
    BROKER_UNRESPONSIVE = "broker_unresponsive"
    BROKER_CHECK_FAILED = "broker_check_failed"
    BROKER_UNREGISTERED_ALIVE = "broker_unregistered_alive"
    BROKER_ABSENT = "broker_absent"
    BROKER_STARTING = "broker_starting"
    BROKER_SOCKET_PILEUP = "broker_socket_pileup"
    HOST_UNREACHABLE = "host_unreachable"
    # detection: partitions and replicas
    OFFLINE_PARTITIONS = "offline_partitions"
    UNDER_REPLICATED_PARTITIONS = "under_replicated_partitions"
    ISR_SHAPE_SUSPECT = "isr_shape_suspect"
    FOLLOWER_STUCK = "follower_stuck"
    FOLLOWER_CATCHING_UP = "follower_catching_up"
    # detection: clients, requests, offsets, leadership, ZooKeeper, versions
    UNKNOWN_API_REQUESTS = "unknown_api_requests"
    REQUEST_QUEUE_SATURATED = "request_queue_saturated"
    REQUESTS_FAILING = "requests_failing"
    REQUEST_METRICS_UNKNOWN = "request_metrics_unknown"
    CONNECTION_STORM = "connection_storm"
    LOG_CLEANER_NOT_RUNNING = "log_cleaner_not_running"
    OFFSETS_PARTITION_OVERSIZED = "offsets_partition_oversized"
    OFFSETS_LOAD_SLOW = "offsets_load_slow"
    OFFSETS_LOAD_FAILED = "offsets_load_failed"
    ELECTION_STORM = "election_storm"
    METADATA_DIVERGENCE = "metadata_divergence"
    REBALANCE_HAZARD = "rebalance_hazard"
    LEADERSHIP_IMBALANCE = "leadership_imbalance"
    ZOOKEEPER_FOLLOWER_DROPPED = "zookeeper_follower_dropped"
    ZOOKEEPER_SERVER_NOT_SERVING = "zookeeper_server_not_serving"
    ZOOKEEPER_QUORUM_LOST = "zookeeper_quorum_lost"
    ZOOKEEPER_SERVER_RESTARTED = "zookeeper_server_restarted"
    ZOOKEEPER_UNREACHABLE = "zookeeper_unreachable"
    KAFKA_VERSION_MISMATCH = "kafka_version_mismatch"
    UNPARSABLE = "unparsable"
    # analysis of an evidence bundle (docs/CONTRACTS.md, docs/SIGNATURES.md)
    JVM_DEADLOCK = "jvm_deadlock"
    DEADLOCK_UNKNOWN = "deadlock_unknown"
    LOCK_OWNER_UNKNOWN = "lock_owner_unknown"
    REQUEST_HANDLING_STALLED = "request_handling_stalled"
    PROCESS_STOPPED = "process_stopped"
    GC_PAUSE_LONG = "gc_pause_long"
    BROKER_STARTUP_FAILED = "broker_startup_failed"
    OFFSETS_LOAD_FINISHED_LATE = "offsets_load_finished_late"
    LOG_CLEANER_UNCLEANABLE = "log_cleaner_uncleanable"
    LOG_TRUNCATION_REFUSED = "log_truncation_refused"
    SEGMENT_DAMAGE = "segment_damage"
    PEER_FETCH_FAILURES = "peer_fetch_failures"
    EARLIER_FETCH_FAILURES = "earlier_fetch_failures"
    FETCH_FAILURES_OWN_DOING = "fetch_failures_own_doing"
    ZK_SERVER_STARVED = "zk_server_starved"
    ZK_DATABASE_LOAD_FAILED = "zk_database_load_failed"
    ZK_SESSION_EXPIRED = "zk_session_expired"
    ZK_SESSION_TIMEOUT = "zk_session_timeout"
    DAMAGED_EVIDENCE = "damaged_evidence"
    REGISTRATION_CONFLICT = "registration_conflict"
    RESPONSES_AFTER_CLIENT_LEFT = "responses_after_client_left"
    ISR_UPDATE_SKIPPED = "isr_update_skipped"
    ISR_SHRINK = "isr_shrink"
    PREFERRED_ELECTIONS = "preferred_elections"
    OWN_CONTROLLED_SHUTDOWN = "own_controlled_shutdown"


K = FindingKind

MEANING: dict[FindingKind, str] = {
    K.BROKER_UNRESPONSIVE: "registered, its direct Kafka check failed, and something else agrees (detection.md)",
    K.BROKER_CHECK_FAILED: "its direct check failed, nothing agrees yet; counts toward the consecutive checks",
    K.BROKER_UNREGISTERED_ALIVE: "its Kafka process lives on its host but it is not registered in ZooKeeper",
    K.BROKER_ABSENT: "a configured broker neither registered nor running (or its host cannot be probed)",
    K.BROKER_STARTING: "registered moments ago, never answered yet, its process running",
    K.BROKER_SOCKET_PILEUP: "CLOSE_WAIT sockets piling up on a broker's ports (live: rising while it still answers; "
                            "in a bundle: from its socket tables)",
    K.HOST_UNREACHABLE: "a broker's host could not be probed over SSH",
    K.OFFLINE_PARTITIONS: "partitions without a registered leader",
    K.UNDER_REPLICATED_PARTITIONS: "partitions whose ISR is smaller than their replica list",
    K.ISR_SHAPE_SUSPECT: "one broker explains the partitions' missing ISR members (not checked directly)",
    K.FOLLOWER_STUCK: "a registered broker out of a partition's ISR whose log end has not moved (detection.md)",
    K.FOLLOWER_CATCHING_UP: "the same, catching up: how far behind, and when in sync at its pace",
    K.UNKNOWN_API_REQUESTS: "a client sends API keys or versions the brokers do not know (unsupported-client-request.md)",
    K.REQUEST_QUEUE_SATURATED: "a broker's request queue at its bound (queued.max.requests): requests wait or are refused",
    K.REQUESTS_FAILING: "a broker's produce or fetch requests failing at a rate, its queue not at its bound",
    K.REQUEST_METRICS_UNKNOWN: "a broker's request figures could not be read over JMX: unknown, never taken as fine",
    K.CONNECTION_STORM: "a broker's established connections far above their median",
    K.LOG_CLEANER_NOT_RUNNING: "a running broker without its log cleaner thread: absent from its threads, or its death "
                               "logged (offsets-load-stalled.md)",
    K.OFFSETS_PARTITION_OVERSIZED: "a __consumer_offsets partition grown past the thresholds (offsets-load-stalled.md)",
    K.OFFSETS_LOAD_SLOW: "a __consumer_offsets load started and not finished (live: unfinished past the expected time, "
                         "offsets_load_expected_s; in a bundle: started without a matching finish in the captured log) "
                         "(offsets-load-stalled.md)",
    K.OFFSETS_LOAD_FAILED: "a __consumer_offsets load that ended with an exception, on the partition's coordinator: groups "
                           "after the failure point unknown to it (offsets-load-stalled.md)",
    K.ELECTION_STORM: "leadership of partitions moving again and again (preferred-election.md)",
    K.METADATA_DIVERGENCE: "brokers' metadata disagreeing with ZooKeeper's about leaders (preferred-election.md)",
    K.REBALANCE_HAZARD: "automatic leader rebalancing on where it would move leaders at a bad time (preferred-election.md)",
    K.LEADERSHIP_IMBALANCE: "brokers leading more or fewer partitions than their preferred share (preferred-election.md)",
    K.ZOOKEEPER_FOLLOWER_DROPPED: "a ZooKeeper follower left the quorum and came back without an ensemble election "
                                  "(zookeeper-follower-drop.md)",
    K.ZOOKEEPER_SERVER_NOT_SERVING: "a ZooKeeper member down while a quorum serves",
    K.ZOOKEEPER_QUORUM_LOST: "no ZooKeeper quorum",
    K.ZOOKEEPER_SERVER_RESTARTED: "a ZooKeeper member's process restarted",
    K.ZOOKEEPER_UNREACHABLE: "the check could not read ZooKeeper at all",
    K.KAFKA_VERSION_MISMATCH: "the configured kafka_version disagrees with what the brokers report",
    K.UNPARSABLE: "something read (a znode, a captured file) could not be understood: that part is unknown",
    K.JVM_DEADLOCK: "a Java-level deadlock in a broker's thread dumps (broker-jvm-deadlock.md)",
    K.DEADLOCK_UNKNOWN: "a broker's only thread dumps carry no lock data (jcmd Thread.dump_to_file): a deadlock cannot be told",
    K.LOCK_OWNER_UNKNOWN: "threads wait on a lock whose owner the thread dumps do not show",
    K.REQUEST_HANDLING_STALLED: "a broker's request handling stalled: its direct checks failed while it ran",
    K.PROCESS_STOPPED: "a broker's process stopped (T) or in uninterruptible sleep (D) in /proc",
    K.GC_PAUSE_LONG: "GC pauses long enough to stall the broker",
    K.BROKER_STARTUP_FAILED: "a broker's start failed (its log says why)",
    K.OFFSETS_LOAD_FINISHED_LATE: "a __consumer_offsets load that finished, after 60 s or more (offsets-load-stalled.md)",
    K.LOG_CLEANER_UNCLEANABLE: "the log cleaner marked partitions uncleanable: no longer compacted",
    K.LOG_TRUNCATION_REFUSED: "a broker exited rather than truncate a partition below its high watermark",
    K.SEGMENT_DAMAGE: "kafka-dump-log found problems in a log segment",
    K.PEER_FETCH_FAILURES: "followers failing to fetch from one leader",
    K.EARLIER_FETCH_FAILURES: "fetch failures from a leader in earlier episodes",
    K.FETCH_FAILURES_OWN_DOING: "fetch failures a broker logged that are its own doing, not its leaders'",
    K.ZK_SERVER_STARVED: "a ZooKeeper server serving far fewer clients than its peers",
    K.ZK_DATABASE_LOAD_FAILED: "a ZooKeeper server that could not load its database on disk and exited",
    K.ZK_SESSION_EXPIRED: "a broker's ZooKeeper session expired",
    K.ZK_SESSION_TIMEOUT: "a broker's ZooKeeper client heard nothing from its server for long",
    K.DAMAGED_EVIDENCE: "a captured file was analysed with damage (cut, undecodable)",
    K.REGISTRATION_CONFLICT: "a broker started while its previous session still held its registration",
    K.RESPONSES_AFTER_CLIENT_LEFT: "a broker finished requests after their client had disconnected",
    K.ISR_UPDATE_SKIPPED: "ISR updates skipped on stale cached state (KAFKA-2729 when repeated)",
    K.ISR_SHRINK: "ISR shrinks a broker logged",
    K.PREFERRED_ELECTIONS: "preferred replica leader elections the controller ran",
    K.OWN_CONTROLLED_SHUTDOWN: "a broker's own controlled shutdown (its fetch errors around it are not its peers' fault)",
}

# Old spellings of a kind, as reports and bundles written before one name per kind hold them.
ALIASES: dict[str, FindingKind] = {
    "unknown_api_request": K.UNKNOWN_API_REQUESTS,
    "oversized_offsets_partition": K.OFFSETS_PARTITION_OVERSIZED,
    "zk_follower_drop": K.ZOOKEEPER_FOLLOWER_DROPPED,
    "log_cleaner_dead": K.LOG_CLEANER_NOT_RUNNING,
    "log_cleaner_missing": K.LOG_CLEANER_NOT_RUNNING,
    "close_wait_pileup": K.BROKER_SOCKET_PILEUP,
    "group_load_unfinished": K.OFFSETS_LOAD_SLOW,
    "group_load_slow": K.OFFSETS_LOAD_FINISHED_LATE,
}

def canonical(kind: str) -> str:
    """The kind's one name (an old spelling read back as its kind); a word that is no kind is returned as it is."""
    if kind in ALIASES:
        return ALIASES[kind].value
    return kind


def is_kind(kind: str) -> bool:
    return kind in FindingKind._value2member_map_
