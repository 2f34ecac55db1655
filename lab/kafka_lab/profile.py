"""The lab's broker settings, in one place (lab/README.md explains each choice and what was measured).

``PROFILES[name]`` is merged over ``BASE`` and written into every broker's server.properties; the per-broker
keys (id, listeners, directories, ZooKeeper) are added by ``hosts.py``. A Kafka version whose names or defaults
differ would have its own entry in ``VERSIONS`` (keys it does not know left out, settings it spells otherwise
replaced); the lab runs Kafka 2.3.0 only.
"""

from __future__ import annotations

# Settings that make the tests fast without making them flaky on a loaded 2-core machine.
BASE: dict[str, str | int] = {
    # Kafka 2.3's default is 6 s. Measured here with other labs running (load average ~6): a restarted broker
    # reaches "Creating /brokers/ids/N" ~5 s after kafka-start, so with 6 s a killed broker's old session is
    # gone ~1 s after the new JVM would need it, and Kafka's "node already exists" refusal races with the start.
    # 10 s is ZooKeeper's maximum for the lab's tickTime (20 x 500 ms); the largest G1 pause seen was 0.13 s.
    "zookeeper.session.timeout.ms": 10000,
    "zookeeper.connection.timeout.ms": 15000,
    # default 10 s: a follower that falls behind leaves the ISR after 5 s
    "replica.lag.time.max.ms": 5000,
    # default 30 s each. A replica fetcher's request times out after request.timeout.ms (ReplicaFetcherBlockingSend);
    # replica.socket.timeout.ms bounds its connect. The peers of a stuck leader log
    # "Connection to N was disconnected before the response was read" after 10 s instead of 30 s.
    "request.timeout.ms": 10000,
    "replica.socket.timeout.ms": 10000,
    "auto.leader.rebalance.enable": "false",
    "leader.imbalance.check.interval.seconds": 300,
    # Kafka 2.3's default (0.10's default was true; KIP-106 turned it off in 0.11). With it on, the product refuses
    # to restart a broker that is the only in-sync replica of a partition (the controller would elect a replica that
    # is behind): tests/remediate shows that refusal on the pure rules.
    "unclean.leader.election.enable": "false",
    # a consumer group forms at once instead of after 3 s
    "group.initial.rebalance.delay.ms": 0,
    # fewer threads than the defaults (8 handlers, 3 processors per listener): 3 JVMs share 2 cores
    "num.io.threads": 4,
    "num.network.threads": 2,
    "num.replica.fetchers": 1,
    # the cleaner allocates its dedupe buffer on the heap (default 128 MiB of a 256 MiB heap)
    "log.cleaner.dedupe.buffer.size": 16 * 1024 * 1024,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
    "default.replication.factor": 3,
    # topics exist because the lab created them, never because a client asked for a name
    "auto.create.topics.enable": "false",
    "controlled.shutdown.enable": "true",
    # default 10 min. Each run logs "[GroupMetadataManager brokerId=N] Removed 0 expired offsets in 0 milliseconds."
    # (INFO): every lab broker writes server.log at least every 10 s, so a broker whose logging stopped (the
    # isolate fault, incident 000) is told from a quiet one in 30 s instead of 10+ minutes.
    "offsets.retention.check.interval.ms": 10000,
}

PROFILES: dict[str, dict[str, str | int]] = {
    "default": {},
    # issue 7's drill: the controller moves leadership back to preferred replicas on its own, often. Kafka elects only
    # while more than leader.imbalance.per.broker.percentage of a broker's preferred partitions are led elsewhere, and
    # never retries one whose election failed (the broker not yet in its ISR) once the rest are back: at the default 10
    # one of 20 stayed put for good (drill 003 on Kafka 0.10.2.1, 2026-11-25). 0: every check retries until all are back.
    "rebalance": {
        "auto.leader.rebalance.enable": "true",
        "leader.imbalance.check.interval.seconds": 10,
        "leader.imbalance.per.broker.percentage": 0,
    },
}

DEFAULT_PROFILE = "default"
PROFILE_KEYS = tuple(sorted({k for settings in PROFILES.values() for k in settings}))  # what tells the profiles apart

# {Kafka version: (keys it does not know or whose default the lab keeps, settings of its own)}
VERSIONS: dict[str, tuple[tuple[str, ...], dict[str, str | int]]] = {
    "2.3.0": ((), {}),
}

HEAP_OPTS = "-Xms128m -Xmx256m"
# Kafka's own kafka-run-class.sh defaults, plus C1 only (less JIT CPU on a shared 2-core machine)
JVM_PERFORMANCE_OPTS = ("-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
                        "-XX:+ExplicitGCInvokesConcurrent -XX:TieredStopAtLevel=1 -Djava.awt.headless=true")


def broker_settings(profile: str, kafka: str = "2.3.0") -> dict[str, str | int]:
    if profile not in PROFILES:
        raise ValueError(f"unknown lab profile {profile!r}; known: {sorted(PROFILES)}")
    if kafka not in VERSIONS:
        raise ValueError(f"no lab profile for Kafka {kafka!r}; known: {sorted(VERSIONS)}")
    drop, own = VERSIONS[kafka]
    return {k: v for k, v in {**BASE, **own, **PROFILES[profile]}.items() if k not in drop}
