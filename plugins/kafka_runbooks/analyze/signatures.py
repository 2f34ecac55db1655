"""Every log signature the analysis recognises, in every Kafka / ZooKeeper version's wording.

One table, three users: the pure log parser (``parsers/kafka_log.py``: ``classify(record)``), the Spark
scan (``fastscan.py`` compiles each row to JVM column expressions), and ``docs/SIGNATURES.md`` (generated
from this table by ``python -m kafka_runbooks.analyze.signatures``; a test keeps the file in sync).

A row matches a log record when its logger's simple class name is one of ``loggers`` (the cheap gate the
Spark scan applies first), every string of ``literals`` occurs in the text, and ``pattern`` matches it.
The text is the record's message, or for ``on="exception"`` rows the exception line under it.
Patterns are written in the common subset of Python's and Java's regular expressions (compiled with
re.ASCII here; named groups become group numbers for Spark) and run in linear time: every quantifier
that can repeat is bounded or stops at characters the following token cannot start with (audited by
``regex_audit.py`` and by the long-line tests).

Every example line is real -- from the seed post-mortems, from a real Kafka 2.3.0 / 0.10.2.1 / ZooKeeper 3.8
cluster run on this machine (tests/analyze/fixtures/real23/, real010/), or from public logs (source named) --
except the few whose source says "wording from Kafka's source" (no real line recorded yet).

The table is append-friendly: a new version's wording is one more ``S(...)`` row under its signature's rows (the
first matching row, in table order, classifies a record).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

T = r"[A-Za-z0-9._-]{1,249}"  # a topic name (Kafka allows at most 249 of these characters)
ID = r"-?[0-9]{1,10}"  # a broker / replica id
N = r"[0-9]{1,19}"  # a count, offset, millis
IDS = r"[0-9,]{0,4000}"  # "1,2,3"

SEED000 = "seed post-mortem 000 (Kafka 0.10.2.0), /work/shared/incidents/000_175b466eab807582.txt"
SEED001 = "seed post-mortem 001 (Kafka 0.10.1.0), /work/shared/incidents/001_7b5d230daa1afc46.txt"
SEED002 = "seed post-mortem 002 (Kafka 0.9.0.1), /work/shared/incidents/002_921ee47b2f677be8.txt"
SEED004 = "seed post-mortem 004 (ZooKeeper 3.6+), /work/shared/incidents/004_e282d0e22b13844d.txt"
REAL23 = "real Kafka 2.3.0 cluster run here, tests/analyze/fixtures/real23/"
REAL0102 = "real Kafka 0.10.2.1 cluster run here (the lab), tests/analyze/fixtures/real0102/"
REALZK38 = "real ZooKeeper 3.8.0 ensemble run here, tests/analyze/fixtures/real23/"
PUB_011 = "public test log of Kafka 0.11.0.0 (blog post 'kafka使用和容错性测试', 2017-07-15)"
PUB_010 = "https://github.com/confluentinc/librdkafka/issues/948 (Kafka 0.10, 2016-12)"
PUB_10 = "public JIRA comment, Kafka 1.0 broker log of 2018-02-20 (leading '[' lost in the paste)"
PUB_2X = "public broker log of 2022-03-14 (Kafka 2.x, ReplicaFetcher with fetch sessions)"
PUB_11 = "https://github.com/vpg/disturb/pull/109 (Kafka 1.0 broker log, 2018-01)"
PUB_3X = "https://github.com/thingsboard/thingsboard/issues/9342 (Kafka 3.x broker log, 2023-09)"
PUB_3X_ISR = "https://devopsaitoolkit.com/blog/kafka-error-isr-shrink-expand/ (Kafka 3.x)"
PUB_0100_EMB = "https://github.com/sakserv/hadoop-mini-clusters/issues/16 (Kafka 0.10.0 embedded, layout class_line)"
PUB_090_CLEANER = "public JIRA comment on KAFKA-3894 (Kafka 0.9.0.1 cluster, 2017-01-24)"
PUB_ZK34 = "public ZooKeeper 3.4.9 server log (etcd/zookeeper/consul benchmark, 2017-02-10)"
PUB_ZK34_PLAIN = "public ZooKeeper 3.4 server log without myid (blog, 2016-03-21)"
PUB_ZK34_EMB = "public ZooKeeper 3.4 log inside a Kafka 0.11 log4j layout (blog, 2017-07-15)"
PUB_ZK34_EXP = "public ZooKeeper 3.4 standalone log (2017-11-08, [myid:] empty)"
PUB_ZK34_FSYNC = "public ZooKeeper 3.4 follower log (2016-05-15)"
PUB_ZK36 = "public ZooKeeper 3.6+ log (2023-03-27)"
REAL23_1124 = "real Kafka 2.3.0 lab (slot 1) run here on 2026-11-24, tests/analyze/fixtures/real23/ (see its README)"
REAL010 = "real Kafka 0.10.2.1 broker run here on 2026-11-24, tests/analyze/fixtures/real010/"
KAFKA_SRC = "wording from Kafka's source at that version (no real line recorded yet)"
ZK_SRC = "wording from ZooKeeper's source at that version (no real line recorded yet)"
REALZK38_LOAD = ("real ZooKeeper 3.8.0 server (Debian's) started here on 2026-11-29 with acceptedEpoch 3 < currentEpoch 5 in its "
                 "dataDir, tests/analyze/fixtures/realzk38/zk1.zookeeper.log.load-failed")
REAL0102_FENCE = ("real Kafka 0.10.2.1 lab (slot 3) run here on 2026-11-25 by tests/lab/test_kafka010.py, since removed with that lab (fence-fetcher, then "
                  "zk-flap), tests/analyze/fixtures/real0102/broker2.state-change.log.fence")
REAL0102_HALT = ("real Kafka 0.10.2.1 lab (slot 9) run here on 2026-11-25 by drill 003's rebalance phase (broker 3's "
                 "ZooKeeper session lost), tests/analyze/fixtures/real0102/broker3.server.log.truncation-halt")
REAL23_LAB = "real Kafka 2.3.0 lab run here on 2026-11-24, tests/analyze/fixtures/real23/drill003.broker3.server.log"


@dataclass(frozen=True)
class Example:
    version: str
    text: str  # the record as logged (header line, plus the exception line for on="exception" rows)
    source: str


@dataclass(frozen=True)
class Signature:
    name: str
    family: str  # "kafka" | "controller" | "zookeeper" | "zk_client" | "jvm"
    versions: str
    loggers: tuple[str, ...]  # simple class names that log it
    literals: tuple[str, ...]
    pattern: str
    meaning: str
    examples: tuple[Example, ...] = ()
    on: str = "message"  # "message" | "exception"

    @property
    def regex(self) -> re.Pattern:
        return _compiled(self.pattern)

    def match(self, text: str) -> dict[str, str] | None:
        for lit in self.literals:
            if lit not in text:
                return None
        m = self.regex.search(text)
        if not m:
            return None
        return {k: v for k, v in m.groupdict().items() if v}  # empty and absent groups are left out (as in Spark)


_CACHE: dict[str, re.Pattern] = {}


def _compiled(p: str) -> re.Pattern:
    r = _CACHE.get(p)
    if r is None:
        r = _CACHE[p] = re.compile(p, re.ASCII)
    return r


def java_pattern(p: str) -> tuple[str, dict[str, int]]:
    """The pattern for Spark (java.util.regex): named groups become numbered groups; returns (pattern, name->index)."""
    return re.sub(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>", "(", p), dict(_compiled(p).groupindex)


S = Signature
E = Example

SIGNATURES: tuple[Signature, ...] = (
    # ------------------------------------------------------------ replication (fetcher side)
    S("replica_fetch_error", "kafka", "0.9 – 0.11", ("ReplicaFetcherThread",), ("Error in fetch",),
      r"\[ReplicaFetcherThread-(?P<fetcher_id>[0-9]{1,9})-(?P<leader>" + ID + r")\][:,]? Error in fetch",
      "a replica fetcher of this broker could not fetch from the leader named in its thread name",
      (E("0.10.2", "[2018-10-30 07:00:34,755] WARN [ReplicaFetcherThread-0-0], Error in fetch kafka.server.ReplicaFetcherThread$FetchRequest@6a3b53b1 (kafka.server.ReplicaFetcherThread)", SEED000),
       E("0.10.1", "[2020-04-22 10:43:36,369] WARN [ReplicaFetcherThread-1-219], Error in fetch kafka.server.ReplicaFetcherThread$FetchRequest@5641fe72 (kafka.server.ReplicaFetcherThread)", SEED001),
       E("0.11.0", "[2017-07-15 16:18:05,858] WARN [ReplicaFetcherThread-0-0]: Error in fetch to broker 0, request (type=FetchRequest, replicaId=1, maxWait=500, minBytes=1, maxBytes=10485760, fetchData={zhh-replicated-partitions-topic-1=(offset=0, logStartOffset=0, maxBytes=1048576)}) (kafka.server.ReplicaFetcherThread)", PUB_011),
       E("0.10.2.1", "[2026-11-24 21:09:20,674] WARN [ReplicaFetcherThread-0-3], Error in fetch kafka.server.ReplicaFetcherThread$FetchRequest@24c7a030 (kafka.server.ReplicaFetcherThread)", REAL0102))),
    S("replica_fetch_error", "kafka", "1.0 – 1.1", ("ReplicaFetcherThread",), ("Error in fetch to broker",),
      r"\[ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader>" + ID + r"), fetcherId=(?P<fetcher_id>[0-9]{1,9})\] Error in fetch to broker",
      "the fetcher's prefix names both ends: replicaId (this broker) and leaderId",
      (E("1.0", "2018-02-20 12:02:29,204] WARN [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Error in fetch to broker 3, request (type=FetchRequest, replicaId=1, maxWait=500, minBytes=1, maxBytes=10485760, fetchData={......................}, isolationLevel=READ_UNCOMMITTED) (kafka.server.ReplicaFetcherThread)", PUB_10),)),
    S("replica_fetch_error", "kafka", "2.0 – 4.x", ("ReplicaFetcherThread",), ("Error in response for fetch request",),
      r"\[ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader>" + ID + r"), fetcherId=(?P<fetcher_id>[0-9]{1,9})\] Error in response for fetch request",
      "the cause is the exception line under it (disconnected, timeout, client shut down)",
      (E("2.x", "[2022-03-14 09:00:00,598] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error in response for fetch request (type=FetchRequest, replicaId=1, maxWait=500, minBytes=1, maxBytes=10485760, fetchData={}, isolationLevel=READ_UNCOMMITTED, toForget=, metadata=(sessionId=2095832195, epoch=8913816)) (kafka.server.ReplicaFetcherThread)", PUB_2X),
       E("2.3.0", "[2026-11-22 13:59:07,466] WARN [ReplicaFetcher replicaId=3, leaderId=2, fetcherId=0] Error in response for fetch request (type=FetchRequest, replicaId=3, maxWait=500, minBytes=1, maxBytes=10485760, fetchData={t1-2=(fetchOffset=16380, logStartOffset=0, maxBytes=1048576, currentLeaderEpoch=Optional[0])}, isolationLevel=READ_UNCOMMITTED, toForget=, metadata=(sessionId=692838506, epoch=873)) (kafka.server.ReplicaFetcherThread)", REAL23))),
    S("fetch_session_error", "kafka", "1.1 – 4.x", ("FetchSessionHandler",), ("Error sending fetch request",),
      r"\[ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader>" + ID + r"), fetcherId=(?P<fetcher_id>[0-9]{1,9})\] Error sending fetch request \(sessionId=[A-Za-z0-9_-]{1,40}, epoch=[A-Za-z0-9_-]{1,40}\) to node (?P<node>" + ID + r"):(?: (?P<cause>[A-Za-z0-9_.$]{1,200}))?",
      "INFO line logged with each failed replica fetch since fetch sessions (KIP-227); the cause is inline until 2.5, "
      "on the line under it (the exception and its stack) from 2.6 (FetchSessionHandler.handleError: \"to node {}:\", t)",
      (E("2.x", "[2022-03-14 09:00:00,597] INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error sending fetch request (sessionId=2095832195, epoch=8913816) to node 2: java.io.IOException: Connection to 2 was disconnected before the response was read. (org.apache.kafka.clients.FetchSessionHandler)", PUB_2X),
       E("2.3.0", "[2026-11-22 13:58:27,044] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Error sending fetch request (sessionId=1748714936, epoch=873) to node 3: java.io.IOException: Client was shutdown before response was read. (org.apache.kafka.clients.FetchSessionHandler)", REAL23),
       E("2.6 – 4.x", "[2021-03-01 10:00:00,597] INFO [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error sending fetch request (sessionId=2095832195, epoch=8913816) to node 2: (org.apache.kafka.clients.FetchSessionHandler)",
         KAFKA_SRC + " (2.6.0 FetchSessionHandler.handleError: log.info(\"Error sending fetch request {} to node {}:\", nextMetadata, node, t); the exception follows on its own line)"))),
    S("fetch_partition_error", "kafka", "1.0 – 4.x", ("ReplicaFetcherThread",), ("Error for partition",),
      r"\] Error for partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) at offset (?P<offset>" + N + r")",
      "a per-partition error in a fetch response (e.g. UnknownTopicOrPartition while leadership moves): not a connectivity failure",
      (E("2.3.0", "[2026-11-22 13:58:00,047] ERROR [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error for partition t1-2 at offset 0 (kafka.server.ReplicaFetcherThread)", REAL23),)),
    S("fetcher_shutdown", "kafka", "0.9 – 4.x", ("ReplicaFetcherThread",), ("Shutting down",),
      r"\[(?:ReplicaFetcherThread-(?P<fetcher_id>[0-9]{1,9})-(?P<leader>" + ID + r")|ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader2>" + ID + r"), fetcherId=(?P<fetcher_id2>[0-9]{1,9}))\][:,]? Shutting down",
      "this broker stopped a fetcher (leadership moved, or its own shutdown): its fetch errors until the fetcher's 'Stopped' are its own doing",
      (E("0.11.0", "[2017-07-15 16:18:07,312] INFO [ReplicaFetcherThread-0-0]: Shutting down (kafka.server.ReplicaFetcherThread)", PUB_011),
       E("2.3.0", "[2026-11-22 13:58:27,038] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Shutting down (kafka.server.ReplicaFetcherThread)", REAL23))),
    S("fetcher_stopped", "kafka", "0.9 – 4.x", ("ReplicaFetcherThread",), ("Stopped",),
      r"\[(?:ReplicaFetcherThread-(?P<fetcher_id>[0-9]{1,9})-(?P<leader>" + ID + r")|ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader2>" + ID + r"), fetcherId=(?P<fetcher_id2>[0-9]{1,9}))\][:,]? Stopped",
      "the fetcher's thread ended (ShutdownableThread): the end of the stretch its 'Shutting down' opened",
      (E("0.10.2", "[2017-06-20 10:12:01,114] INFO [ReplicaFetcherThread-0-2], Stopped  (kafka.server.ReplicaFetcherThread)", KAFKA_SRC + " (0.10.2.1 ShutdownableThread: info(\"Stopped \"), logIdent \"[name], \")"),
       E("2.3.0", "[2026-11-22 13:58:27,044] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Stopped (kafka.server.ReplicaFetcherThread)", REAL23))),
    S("fetcher_removed", "kafka", "0.9 – 3.x", ("ReplicaFetcherManager",), ("Removed fetcher for partitions",),
      r"\[ReplicaFetcherManager on broker (?P<broker>" + ID + r")\] Removed fetcher for partitions (?P<partitions>[A-Za-z0-9._,()\[\] -]{1,4000})",
      "this broker stopped fetching these partitions (it became their leader, or follows another leader now): an idle fetcher is then shut down",
      (E("2.3.0", "[2026-11-22 13:58:27,026] INFO [ReplicaFetcherManager on broker 1] Removed fetcher for partitions Set(__consumer_offsets-0, t1-0, compacted-2) (kafka.server.ReplicaFetcherManager)", REAL23),)),
    S("fetcher_fenced", "kafka", "2.1 – 2.4", ("ReplicaFetcherThread",), ("has an older epoch", "Will await the new LeaderAndIsr state"),
      r"\[ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader>" + ID + r"), fetcherId=[0-9]{1,9}\] Partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) has an older epoch \((?P<epoch>" + ID + r")\)",
      "the leader answered FENCED_LEADER_EPOCH: the partition left this follower's fetcher until a LeaderAndIsr with a higher leader epoch; "
      "if that never comes (the same epoch is ignored) the follower never fetches it again",
      (E("2.3.0", "[2026-11-24 20:57:59,500] INFO [ReplicaFetcher replicaId=3, leaderId=1, fetcherId=0] Partition orders-0 has an older epoch (0) than the current leader. Will await the new LeaderAndIsr state before resuming fetching. (kafka.server.ReplicaFetcherThread)", REAL23),)),
    S("fetch_partition_failed", "kafka", "2.1 – 4.x", ("ReplicaFetcherThread",), ("marked as failed",),
      r"\[ReplicaFetcher replicaId=(?P<fetcher>" + ID + r"), leaderId=(?P<leader>" + ID + r"), fetcherId=[0-9]{1,9}\] Partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) marked as failed",
      "the follower's fetcher stopped fetching the partition until the next LeaderAndIsr that resets it",
      (E("2.3.0", "[2026-11-24 20:57:59,501] WARN [ReplicaFetcher replicaId=3, leaderId=1, fetcherId=0] Partition orders-0 marked as failed (kafka.server.ReplicaFetcherThread)", REAL23),)),
    # Before KIP-101 (leader epochs, 0.11) a follower whose log end is past its new leader's truncates to the leader's end
    # (ReplicaFetcherThread.handleOffsetOutOfRange); with unclean.leader.election.enable=false for the topic it refuses:
    # logs this FATAL and exits (0.9: Runtime.halt, no shutdown; 0.10.0 - 0.10.2: System.exit(1), 0.11 - 2.0: FatalExitError
    # -> Exit.exit(1): the shutdown hook runs a controlled shutdown). 2.1+ no longer refuses.
    S("log_truncation_refused", "kafka", "0.9 – 0.10.0", ("ReplicaFetcherThread",), ("because log truncation is not allowed for topic",),
      r"\[ReplicaFetcherThread-[0-9]{1,9}-(?P<fetch_leader>" + ID + r")\][:,]? (?:Halting|Exiting) because log truncation is not allowed for topic (?P<topic>" + T + r"), Current leader (?P<leader>" + ID + r")'s latest offset (?P<leader_offset>" + N + r") is less than replica (?P<broker>" + ID + r")'s latest offset (?P<replica_offset>" + N + r")",
      "as below, in 0.9 - 0.10.0's words (the topic only, no partition; 0.9 says 'Halting' and calls Runtime.halt: no controlled shutdown)",
      (E("0.9.0.1", "[2017-03-02 10:00:00,000] FATAL [ReplicaFetcherThread-0-2], Halting because log truncation is not allowed for topic orders, Current leader 2's latest offset 1102 is less than replica 3's latest offset 1103 (kafka.server.ReplicaFetcherThread)",
         KAFKA_SRC + " (0.9.0.1 ReplicaFetcherThread.handleOffsetOutOfRange)"),)),
    S("log_truncation_refused", "kafka", "0.10.1 – 0.11", ("ReplicaFetcherThread",), ("because log truncation is not allowed for partition",),
      r"\[ReplicaFetcherThread-[0-9]{1,9}-(?P<fetch_leader>" + ID + r")\][:,]? Exiting because log truncation is not allowed for partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}), [Cc]urrent leader (?P<leader>" + ID + r")'s latest offset (?P<leader_offset>" + N + r") is less than replica (?P<broker>" + ID + r")'s latest offset (?P<replica_offset>" + N + r")",
      "(FATAL) this follower's log ends past its leader's and unclean.leader.election.enable is false for the topic, so it refused "
      "to truncate and exited: the records past the leader's end exist only on this broker. Restarting it truncates them "
      "(before KIP-101 nothing reconciles them); an operator decides first whether they must be saved (kafka-run-class "
      "kafka.tools.DumpLogSegments on its partition directory) or are lost by the restart",
      (E("0.10.2.1", "[2026-11-25 12:54:34,533] FATAL [ReplicaFetcherThread-0-2], Exiting because log truncation is not allowed for partition orders-5, Current leader 2's latest offset 1102 is less than replica 3's latest offset 1103 (kafka.server.ReplicaFetcherThread)", REAL0102_HALT),)),
    S("log_truncation_refused", "kafka", "1.0 – 2.0", ("ReplicaFetcherThread",), ("because log truncation is not allowed for partition",),
      r"\[ReplicaFetcher replicaId=(?P<broker>" + ID + r"), leaderId=(?P<leader>" + ID + r"), fetcherId=[0-9]{1,9}\] Exiting because log truncation is not allowed for partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}), current leader's latest offset (?P<leader_offset>" + N + r") is less than replica's latest offset (?P<replica_offset>" + N + r")",
      "as above, in 1.0 - 2.0's words (the ids are in the fetcher's prefix)",
      (E("1.0 – 2.0", "[2018-06-01 10:00:00,000] FATAL [ReplicaFetcher replicaId=3, leaderId=2, fetcherId=0] Exiting because log truncation is not allowed for partition orders-5, current leader's latest offset 1102 is less than replica's latest offset 1103 (kafka.server.ReplicaFetcherThread)",
         KAFKA_SRC + " (1.0.0 ReplicaFetcherThread.handleOffsetOutOfRange)"),)),
    # The equal-epoch case is the one that leaves a follower that stopped fetching stopped (issue 16): the request's
    # leader epoch (``epoch``) equals the one the broker has (``current_epoch``, printed by 0.9 - 2.2; 2.3+ says
    # "matches"). A lower request epoch is an old request whose newer state the broker already applied: harmless
    # (detect/broker_log.py reads only the equal case as evidence).
    S("leader_and_isr_ignored", "kafka", "0.9 – 0.11", ("logger",), ("ignoring LeaderAndIsr request from controller", "since its associated leader epoch"),
      r"Broker (?P<broker>" + ID + r") ignoring LeaderAndIsr request from controller (?P<controller>" + ID + r") with correlation id (?P<correlation>" + N + r") epoch (?P<controller_epoch>" + N + r") for partition \[(?P<topic>" + T + r"),(?P<partition>[0-9]{1,9})\] since its associated leader epoch (?P<epoch>" + ID + r") (?:is not higher than the current leader epoch|is old\. Current leader epoch is) (?P<current_epoch>" + ID + r")",
      "(state-change.log, WARN; ReplicaManager.becomeLeaderOrFollower) the request's leader epoch is not above the one the broker "
      "has: nothing changes, its fetcher is not reset. Equal epochs: harmless while it fetches the partition, the reason a "
      "follower that stopped fetching stays stopped; a lower one is an old request (a newer state was applied). 0.9 - 0.10.0 "
      "say 'is old. Current leader epoch is N', 0.10.1 - 0.11 'is not higher than the current leader epoch N'",
      (E("0.10.2.1", "[2026-11-25 12:28:52,661] WARN Broker 2 ignoring LeaderAndIsr request from controller 1 with correlation id 1 epoch 1 for partition [orders,0] since its associated leader epoch 0 is not higher than the current leader epoch 0 (state.change.logger)", REAL0102_FENCE),
       E("0.9.0.1", "[2017-10-12 16:52:38,141] WARN Broker 2 ignoring LeaderAndIsr request from controller 1 with correlation id 7 epoch 3 for partition [orders,0] since its associated leader epoch 5 is old. Current leader epoch is 5 (state.change.logger)",
         KAFKA_SRC + " (0.9.0.1 ReplicaManager.becomeLeaderOrFollower)"))),
    S("leader_and_isr_ignored", "kafka", "1.0 – 2.x", ("logger",), ("Ignoring LeaderAndIsr request from controller", "since its associated leader epoch"),
      r"\[Broker id=(?P<broker>" + ID + r")\] Ignoring LeaderAndIsr request from controller (?P<controller>" + ID + r") with correlation id (?P<correlation>" + N + r") epoch (?P<controller_epoch>" + N + r") for partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) since its associated leader epoch (?P<epoch>" + ID + r") (?:matches the current leader epoch|is not higher than the current leader epoch (?P<current_epoch>" + ID + r"))",
      "as above; 2.3+ logs the equal case at DEBUG, 'matches the current leader epoch' (its lower case, 'is smaller than', is "
      "not read), 1.0 - 2.2 at WARN, 'is not higher than the current leader epoch N'",
      (E("2.3.0", "[2026-11-24 20:50:39,156] DEBUG [Broker id=3] Ignoring LeaderAndIsr request from controller 1 with correlation id 3 epoch 3 for partition __consumer_offsets-35 since its associated leader epoch 9 matches the current leader epoch (state.change.logger)", REAL23),
       E("1.0 – 2.2", "[2019-03-01 10:00:00,000] WARN [Broker id=2] Ignoring LeaderAndIsr request from controller 1 with correlation id 5 epoch 4 for partition orders-0 since its associated leader epoch 7 is not higher than the current leader epoch 7 (state.change.logger)",
         KAFKA_SRC + " (2.2.0 ReplicaManager.becomeLeaderOrFollower, StateChangeLogger '[Broker id=N] ')"))),
    # ------------------------------------------------------------ ISR
    S("isr_shrink", "kafka", "0.8 – 0.10", ("Partition",), ("Shrinking ISR for partition",),
      r"Shrinking ISR for partition \[(?P<topic>" + T + r"),(?P<partition>[0-9]{1,9})\] from (?P<from>" + IDS + r") to (?P<to>" + IDS + r")",
      "the leader dropped followers that fell behind from the ISR",
      (E("0.10", "[2016-12-18 15:15:55,046] INFO Partition [topicold,24] on broker 1: Shrinking ISR for partition [topicold,24] from 1,0,2 to 1 (kafka.cluster.Partition)", PUB_010),
       E("0.10.2.1", "[2026-11-24 21:09:15,660] INFO Partition [__consumer_offsets,17] on broker 3: Shrinking ISR for partition [__consumer_offsets,17] from 3,1,2 to 3 (kafka.cluster.Partition)", REAL0102))),
    S("isr_shrink", "kafka", "0.11", ("Partition",), ("Shrinking ISR from",),
      r"Partition \[(?P<topic>" + T + r"),(?P<partition>[0-9]{1,9})\] on broker (?P<broker>" + ID + r"): Shrinking ISR from (?P<from>" + IDS + r") to (?P<to>" + IDS + r")",
      "as above",
      (E("0.11.0", "[2017-07-15 16:17:57,662] INFO Partition [zhh-replicated-partitions-topic,2] on broker 1: Shrinking ISR from 1,2,0 to 1,2 (kafka.cluster.Partition)", PUB_011),)),
    S("isr_shrink", "kafka", "1.0 – 4.x", ("Partition",), ("Shrinking ISR from",),
      r"\[Partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) broker=(?P<broker>" + ID + r")\] Shrinking ISR from (?P<from>" + IDS + r") to (?P<to>" + IDS + r")",
      "as above (2.2+ adds the leader's and the out-of-sync replicas' end offsets)",
      (E("2.3.0", "[2026-11-22 13:59:07,442] INFO [Partition __consumer_offsets-3 broker=3] Shrinking ISR from 3,2,1 to 3. Leader: (highWatermark: 303, endOffset: 306). Out of sync replicas: (brokerId: 2, endOffset: 303) (brokerId: 1, endOffset: 303). (kafka.cluster.Partition)", REAL23),
       E("3.x", "[2026-06-29 14:02:11,418] INFO [Partition topic-0 broker=1] Shrinking ISR from 1,2,3 to 1,2. Leader: (highWatermark: 884213, endOffset: 884221). Out of sync replicas: (brokerId: 3, endOffset: 883740, lastCaughtUpTimeMs: 1719669700912). (kafka.cluster.Partition)", PUB_3X_ISR))),
    S("isr_expand", "kafka", "0.8 – 0.10", ("Partition",), ("Expanding ISR for partition",),
      r"Expanding ISR for partition \[(?P<topic>" + T + r"),(?P<partition>[0-9]{1,9})\] from (?P<from>" + IDS + r") to (?P<to>" + IDS + r")",
      "a follower caught up and rejoined the ISR",
      (E("0.9 / 0.10", "[2016-03-24 14:15:44,847] INFO Partition [bier-bar,1] on broker 1: Expanding ISR for partition [bier-bar,1] from 1 to 1,2 (kafka.cluster.Partition)", "public Kafka 0.9/0.10 broker log of 2016-03-24"),)),
    S("isr_expand", "kafka", "0.10.2", ("Partition",), ("Expanding ISR for partition",),
      r"Partition \[(?P<topic>" + T + r"),(?P<partition>[0-9]{1,9})\] on broker (?P<broker>" + ID + r"): Expanding ISR for partition " + T + r"-[0-9]{1,9} from (?P<from>" + IDS + r") to (?P<to>" + IDS + r")",
      "as above; 0.10.2 names the partition twice, the second time as topic-N (its shrink line keeps [topic,N])",
      (E("0.10.2.1", "[2026-11-24 21:11:06,494] INFO Partition [orders,2] on broker 3: Expanding ISR for partition orders-2 from 3,2 to 3,2,1 (kafka.cluster.Partition)", REAL0102),)),
    S("isr_expand", "kafka", "0.11 – 4.x", ("Partition",), ("Expanding ISR from",),
      r"\[?Partition \[?(?P<topic>" + T + r")(?:,|-)(?P<partition>[0-9]{1,9})\]?(?: on broker | broker=)(?P<broker>" + ID + r")\]?:? Expanding ISR from (?P<from>" + IDS + r") to (?P<to>" + IDS + r")",
      "as above",
      (E("2.3.0", "[2026-11-22 13:59:08,519] INFO [Partition __consumer_offsets-0 broker=1] Expanding ISR from 1,2 to 1,2,3 (kafka.cluster.Partition)", REAL23),
       E("3.x", "[2026-06-29 14:02:39,902] INFO [Partition topic-0 broker=1] Expanding ISR from 1,2 to 1,2,3 (kafka.cluster.Partition)", PUB_3X_ISR))),
    S("isr_updated", "kafka", "2.7 – 4.x", ("Partition",), ("ISR updated to",),
      r"\[Partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) broker=(?P<broker>" + ID + r")\] ISR updated to (?P<isr>" + IDS + r")",
      "the ISR change was committed (by ZooKeeper or, with AlterPartition, by the controller)",
      (E("3.x", "[2026-06-29 14:02:11,420] INFO [Partition topic-0 broker=1] ISR updated to 1,2 and version updated to 47 (kafka.cluster.Partition)", PUB_3X_ISR),)),
    S("isr_update_skipped", "kafka", "0.8 – 2.6", ("Partition",), ("not equal to that in zookeeper",),
      r"Cached zkVersion \[?(?P<zk_version>[0-9]{1,10})\]? not equal to that in zookeeper, skip updating ISR",
      "the leader's ISR write was rejected: it holds stale partition state (controller moved on); repeated, it is KAFKA-2729",
      (E("0.10", "[2016-12-18 15:15:55,046] INFO Partition [topicold,0] on broker 1: Cached zkVersion [0] not equal to that in zookeeper, skip updating ISR (kafka.cluster.Partition)", PUB_010),
       E("2.3.0", "[2026-11-22 13:59:08,345] INFO [Partition __consumer_offsets-3 broker=3] Cached zkVersion [0] not equal to that in zookeeper, skip updating ISR (kafka.cluster.Partition)", REAL23))),
    # ------------------------------------------------------------ group coordinator
    S("group_load_start", "kafka", "0.9 – 0.10", ("GroupMetadataManager",), ("Loading offsets and group metadata from",),
      r"Loading offsets and group metadata from \[__consumer_offsets,(?P<partition>[0-9]{1,9})\]",
      "this broker became coordinator for an offsets partition and started loading it; its groups get NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS until it finishes",
      (E("0.9.0.1", "Loading offsets and group metadata from [__consumer_offsets,19] (kafka.coordinator.GroupMetadataManager)", SEED002 + " (the post quotes the message without its timestamp)"),
       E("0.10.0", "2016-08-02 05:38:14 INFO  GroupMetadataManager:68 - [Group Metadata Manager on Broker 0]: Loading offsets and group metadata from [__consumer_offsets,47]", PUB_0100_EMB))),
    S("group_load_start", "kafka", "0.10.2", ("GroupMetadataManager",), ("]: Loading offsets and group metadata from __consumer_offsets-",),
      r"Loading offsets and group metadata from __consumer_offsets-(?P<partition>[0-9]{1,9})",
      "as above; 0.10.2 names the partition topic-N (TopicPartition), 0.9 - 0.10.1 [topic,N]",
      (E("0.10.2.1", "[2026-11-24 21:09:00,961] INFO [Group Metadata Manager on Broker 1]: Loading offsets and group metadata from __consumer_offsets-0 (kafka.coordinator.GroupMetadataManager)", REAL0102),)),
    S("group_load_start", "kafka", "0.11 – 3.x", ("GroupMetadataManager",), ("Scheduling loading of offsets and group metadata from",),
      r"Scheduling loading of offsets and group metadata from __consumer_offsets-(?P<partition>[0-9]{1,9})(?: for epoch (?P<epoch>[0-9]{1,10}))?",
      "as above",
      (E("1.0", "[2018-01-30 14:48:38,886] INFO [GroupMetadataManager brokerId=0] Scheduling loading of offsets and group metadata from __consumer_offsets-0 (kafka.coordinator.group.GroupMetadataManager)", "https://github.com/vpg/disturb/pull/117 (Kafka 1.0 broker log, 2018-01)"),
       E("2.3.0", "[2026-11-22 13:58:00,813] INFO [GroupMetadataManager brokerId=1] Scheduling loading of offsets and group metadata from __consumer_offsets-1 (kafka.coordinator.group.GroupMetadataManager)", REAL23))),
    S("group_load_done", "kafka", "0.9 – 0.10", ("GroupMetadataManager",), ("Finished loading offsets from",),
      r"Finished loading offsets from \[__consumer_offsets,(?P<partition>[0-9]{1,9})\] in (?P<millis>" + N + r") milliseconds",
      "the offsets partition is loaded: its groups are served again",
      (E("0.9.0.1", "Finished loading offsets from [__consumer_offsets,27] in 1205 milliseconds. (kafka.coordinator.GroupMetadataManager)", SEED002 + " (quoted without timestamp)"),
       E("0.10.0", "2016-08-02 05:38:14 INFO  GroupMetadataManager:68 - [Group Metadata Manager on Broker 0]: Finished loading offsets from [__consumer_offsets,44] in 1 milliseconds.", PUB_0100_EMB))),
    S("group_load_done", "kafka", "0.10.2", ("GroupMetadataManager",), ("]: Finished loading offsets from __consumer_offsets-",),
      r"Finished loading offsets from __consumer_offsets-(?P<partition>[0-9]{1,9}) in (?P<millis>" + N + r") milliseconds",
      "as above (0.10.2's partition name)",
      (E("0.10.2.1", "[2026-11-24 21:09:01,348] INFO [Group Metadata Manager on Broker 1]: Finished loading offsets from __consumer_offsets-0 in 231 milliseconds. (kafka.coordinator.GroupMetadataManager)", REAL0102),)),
    S("group_load_done", "kafka", "0.11 – 3.x", ("GroupMetadataManager",), ("Finished loading offsets and group metadata from",),
      r"Finished loading offsets and group metadata from __consumer_offsets-(?P<partition>[0-9]{1,9}) in (?P<millis>" + N + r") milliseconds",
      "as above (3.x adds the coordinator epoch and the time spent waiting in the scheduler)",
      (E("1.0", "[2018-01-19 14:24:44,967] INFO [GroupMetadataManager brokerId=0] Finished loading offsets and group metadata from __consumer_offsets-25 in 4 milliseconds. (kafka.coordinator.group.GroupMetadataManager)", PUB_11),
       E("2.3.0", "[2026-11-22 13:58:00,825] INFO [GroupMetadataManager brokerId=1] Finished loading offsets and group metadata from __consumer_offsets-1 in 5 milliseconds. (kafka.coordinator.group.GroupMetadataManager)", REAL23),
       E("3.x", "[2023-09-30 21:00:08,981] INFO [GroupMetadataManager brokerId=0] Finished loading offsets and group metadata from __consumer_offsets-10 in 31 milliseconds for epoch 0, of which 31 milliseconds was spent in the scheduler. (kafka.coordinator.group.GroupMetadataManager)", PUB_3X))),
    S("group_load_failed", "kafka", "0.10.2 – 3.x", ("GroupMetadataManager",), ("Error loading offsets from __consumer_offsets-",),
      r"Error loading offsets from __consumer_offsets-(?P<partition>[0-9]{1,9})",
      "the load of an offsets partition ended with an exception (the next lines); Kafka then counts the partition as "
      "loaded: groups after the failure point are not in the coordinator's cache, their committed offsets unknown to it. "
      "0.9 - 0.10.1 log \"Error in loading offsets from [__consumer_offsets,N]\" (their source): no real line of it was "
      "recorded, so it has no row and those versions' failed loads read as unfinished",
      (E("2.3.0", "[2026-11-30 02:30:16,856] ERROR [GroupMetadataManager brokerId=2] Error loading offsets from __consumer_offsets-16 (kafka.coordinator.group.GroupMetadataManager)",
         "real Kafka 2.3.0 lab of a ./run test run here on 2026-11-30 (broker 3 stopped and started; broker 2 became the "
         "coordinator of __consumer_offsets-16 and its load threw java.util.NoSuchElementException from "
         "GroupCoordinator.tryCompleteHeartbeat), tests/analyze/fixtures/real23/broker2.server.log.load-failed"),)),
    # ------------------------------------------------------------ broker lifecycle
    S("kafka_version", "kafka", "0.9 – 4.x", ("AppInfoParser",), ("Kafka version",),
      r"Kafka version ?: ?(?P<version>[A-Za-z0-9._-]{1,40})",
      "the broker's Kafka version, logged at start",
      (E("0.10.1.1", "[2017-01-31 20:17:29,646] INFO Kafka version : 0.10.1.1 (org.apache.kafka.common.utils.AppInfoParser)", "public Kafka 0.10.1.1 broker log of 2017-01-31"),
       E("2.3.0", "[2026-11-22 13:57:34,239] INFO Kafka version: 2.3.0 (org.apache.kafka.common.utils.AppInfoParser)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:08:35,145] INFO Kafka version : 0.10.2.1 (org.apache.kafka.common.utils.AppInfoParser)", REAL0102 + " (kafkaServer.out: 0.10 logs org.apache.kafka.* to stdout only)"))),
    S("broker_started", "kafka", "0.9 – 3.x", ("KafkaServer",), ("started",),
      r"\[Kafka ?Server (?:id=)?(?P<broker>" + ID + r")\],? started",
      "the broker finished starting",
      (E("2.3.0", "[2026-11-22 13:57:34,240] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:08:35,315] INFO [Kafka Server 1], started (kafka.server.KafkaServer)", REAL0102))),
    S("broker_shutting_down", "kafka", "0.9 – 3.x", ("KafkaServer",), ("shutting down",),
      r"\[Kafka ?Server (?:id=)?(?P<broker>" + ID + r")\],? shutting down",
      "the broker was asked to stop (SIGTERM or kafka-server-stop)",
      (E("2.3.0", "[2026-11-22 13:59:47,802] INFO [KafkaServer id=2] shutting down (kafka.server.KafkaServer)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:12:45,582] INFO [Kafka Server 2], shutting down (kafka.server.KafkaServer)", REAL0102))),
    S("controlled_shutdown_start", "kafka", "0.9 – 3.x", ("KafkaServer",), ("Starting controlled shutdown",),
      r"\[Kafka ?Server (?:id=)?(?P<broker>" + ID + r")\],? Starting controlled shutdown",
      "the broker asks the controller to move its leaderships away before it stops",
      (E("2.3.0", "[2026-11-22 13:59:47,803] INFO [KafkaServer id=2] Starting controlled shutdown (kafka.server.KafkaServer)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:12:45,585] INFO [Kafka Server 2], Starting controlled shutdown (kafka.server.KafkaServer)", REAL0102))),
    S("controlled_shutdown_done", "kafka", "0.9 – 3.x", ("KafkaServer",), ("Controlled shutdown succeeded",),
      r"Controlled shutdown succeeded",
      "leadership moved away; the broker now stops its fetchers and closes",
      (E("2.3.0", "[2026-11-22 13:59:48,737] INFO [KafkaServer id=2] Controlled shutdown succeeded (kafka.server.KafkaServer)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:12:48,662] INFO [Kafka Server 2], Controlled shutdown succeeded (kafka.server.KafkaServer)", REAL0102))),
    S("broker_shut_down", "kafka", "0.9 – 3.x", ("KafkaServer",), ("shut down completed",),
      r"\[Kafka ?Server (?:id=)?(?P<broker>" + ID + r")\],? shut down completed",
      "the broker stopped cleanly",
      (E("2.3.0", "[2026-11-22 13:59:52,916] INFO [KafkaServer id=2] shut down completed (kafka.server.KafkaServer)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:12:53,018] INFO [Kafka Server 2], shut down completed (kafka.server.KafkaServer)", REAL0102))),
    S("registration_conflict", "kafka", "1.1 – 3.x", ("KafkaZkClient$CheckedEphemeral", "KafkaZkClient"), ("Error while creating ephemeral at",),
      r"Error while creating ephemeral at (?P<path>/[A-Za-z0-9_/.-]{1,300}), node already exists and owner '(?P<owner>[0-9]{1,20})' does not match current session '(?P<session>[0-9]{1,20})'",
      "the broker was started while its previous ZooKeeper session still held /brokers/ids/N: it exits ('Exiting Kafka.')",
      (E("2.3.0", "[2026-11-22 14:03:26,452] ERROR Error while creating ephemeral at /brokers/ids/1, node already exists and owner '144115238283051009' does not match current session '144115254472081409' (kafka.zk.KafkaZkClient$CheckedEphemeral)", REAL23),)),
    # before broker_startup_failed: on 0.9 - 1.0 the conflict is the exception under 'Fatal error during KafkaServer startup'
    S("registration_conflict", "kafka", "0.9 – 1.0", ("KafkaServer",), ("A broker is already registered on the path",),
      r"A broker is already registered on the path (?P<path>/[A-Za-z0-9_/.-]{1,300})\.",
      "as above, in 0.9 - 1.0's words: the exception line under 'Fatal error during KafkaServer startup' (no session ids: "
      "ZkUtils compares nothing)",
      (E("0.10.2.1", "[2026-11-24 21:13:54,538] FATAL [Kafka Server 3], Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)\njava.lang.RuntimeException: A broker is already registered on the path /brokers/ids/3. This probably indicates that you either have configured a brokerid that is already in use, or else you have shutdown this broker and restarted it faster than the zookeeper timeout so it appears to be re-registering.", REAL0102),),
      on="exception"),
    S("broker_startup_failed", "kafka", "0.9 – 4.x", ("KafkaServer", "BrokerServer", "ControllerServer", "KafkaServerStartable"),
      ("Fatal error during",),
      r"Fatal error during (?P<what>KafkaServer|KafkaServerStartable|broker|controller) startup\. Prepare to shutdown",
      "the broker failed to start; the exception under it is the cause (a port in use, a log directory it cannot use, out of memory, a registration still held by its previous session)",
      (E("0.10.2.1", "[2026-11-24 20:57:14,479] FATAL [Kafka Server 9], Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)\nkafka.common.KafkaException: Socket server failed to bind to 127.101.1.1:9092: Address already in use.", REAL010),
       E("0.10.2.1", "[2026-11-24 20:57:14,537] FATAL Fatal error during KafkaServerStartable startup. Prepare to shutdown (kafka.server.KafkaServerStartable)\nkafka.common.KafkaException: Socket server failed to bind to 127.101.1.1:9092: Address already in use.", REAL010),
       E("2.3.0", "[2026-11-24 20:56:55,894] ERROR [KafkaServer id=9] Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)\njava.lang.OutOfMemoryError: Java heap space", REAL23_1124),
       E("2.8 – 4.x (KRaft)", "[2026-11-24 20:56:55,894] ERROR [BrokerServer id=9] Fatal error during broker startup. Prepare to shutdown (kafka.server.BrokerServer)", KAFKA_SRC + " (BrokerServer.scala)"))),
    S("broker_exiting", "kafka", "0.9 – 4.x", ("KafkaServerStartable", "Kafka$", "Kafka"), ("Exiting Kafka",),
      r"Exiting Kafka(?P<fatal> due to fatal exception(?: during startup)?)?\.?",
      "the broker's process exits (status 1) after a fatal error: with a crash-looping service manager it starts again and fails the same way",
      (E("2.3.0", "[2026-11-24 20:57:11,466] ERROR Exiting Kafka. (kafka.server.KafkaServerStartable)", REAL23_1124),
       E("2.3 – 3.x", "[2026-11-24 20:57:11,466] ERROR Exiting Kafka due to fatal exception (kafka.Kafka$)", KAFKA_SRC + " (Kafka.scala: configuration errors before startup)"))),
    S("broker_registered", "kafka", "0.10 – 1.0 (ZkUtils)", ("ZkUtils",), ("Registered broker",),
      r"Registered broker (?P<broker>" + ID + r") at path /brokers/ids/[0-9]{1,10} with addresses: (?P<endpoints>EndPoint[A-Za-z0-9_.:,()\[\]-]{1,2000})",
      "the broker (re)registered in ZooKeeper: from now on clients and the controller see it (0.10 logs it again after "
      "each session expiry, after 're-registering broker info in ZK')",
      (E("0.10.2.1", "[2026-11-24 21:08:32,824] INFO Registered broker 1 at path /brokers/ids/1 with addresses: EndPoint(127.106.1.1,9092,ListenerName(CLIENT),PLAINTEXT),EndPoint(kafka-lab-s6-b1,9093,ListenerName(REPLICATION),PLAINTEXT) (kafka.utils.ZkUtils)", REAL0102),)),
    S("broker_registered", "kafka", "1.1 – 3.x (KafkaZkClient)", ("KafkaZkClient",), ("Registered broker",),
      r"Registered broker (?P<broker>" + ID + r") at path /brokers/ids/[0-9]{1,10} with addresses: (?:[A-Za-z0-9_.:,()\[\] -]{1,4000}, czxid \(broker epoch\): (?P<broker_epoch>[0-9]{1,19}))?",
      "as above; 2.x adds the registration's czxid (the broker epoch, KIP-380): the controller's requests to it carry it",
      (E("2.3.0", "[2026-11-22 13:57:33,702] INFO Registered broker 1 at path /brokers/ids/1 with addresses: ArrayBuffer(EndPoint(127.102.1.1,9092,ListenerName(PLAINTEXT),PLAINTEXT)), czxid (broker epoch): 4294967323 (kafka.zk.KafkaZkClient)", REAL23),)),
    S("controlled_shutdown_gave_up", "kafka", "0.9 – 3.x", ("KafkaServer",), ("Proceeding to do an unclean shutdown",),
      r"Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed",
      "the controller could not move this broker's leaderships (0.10: a stuck leader's ISRs had shrunk to itself, 'No "
      "other replicas in ISR'): it stops anyway, its partitions go offline or to an unclean leader",
      (E("0.10.2.1", "[2026-11-24 21:12:10,734] WARN [Kafka Server 1], Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed (kafka.server.KafkaServer)", REAL0102),)),
    # ------------------------------------------------------------ the controller's requests, refused or failed (2.x)
    # What the controller does next (2.3.0): it does not send a request again after an error response
    # (processLeaderAndIsrResponseReceived logs "Received error in LeaderAndIsr response" and returns); it sends new ones
    # only for the broker's next registration (processBrokerChange: a higher czxid is a bounced broker ->
    # onBrokerFailure + onBrokerStartup, requests carrying the new epoch). Hence the rule detect/broker_log.py applies:
    # a failed LeaderAndIsr stands as evidence that the follower may not fetch its partitions until this broker
    # registers again with a higher broker epoch; a request refused as older than the broker's epoch never does.
    S("control_request_failed", "kafka", "2.1 – 2.x", ("KafkaApis",), ("Error when handling request: clientId=",),
      r"\[KafkaApi-(?P<broker>" + ID + r")\] Error when handling request: clientId=(?P<client>[A-Za-z0-9._-]{0,255}), correlationId=(?P<correlation>" + N + r"), api=(?P<api>LEADER_AND_ISR|UPDATE_METADATA|STOP_REPLICA)(?:, body=\{controller_id=(?P<controller>" + ID + r"),controller_epoch=(?P<controller_epoch>" + N + r"),broker_epoch=(?P<request_broker_epoch>-?[0-9]{1,19}))?",
      "the broker failed to handle a request of the controller (KafkaApis.handleError; the exception line under it says why: "
      "'Epoch N larger than current broker epoch M' -- KIP-380's race: the request is for the registration the broker has just "
      "made and has not yet taken as its own -- or a ZooKeeper session that expired while it applied the request). The "
      "controller does not send it again (2.3.0): for LEADER_AND_ISR the partitions in its body may not be followed (their "
      "leader epoch can even be taken without a fetcher started, so the next LeaderAndIsr of that epoch is ignored) until the "
      "broker registers again with a higher broker epoch",
      (E("2.3.0", "[2026-11-24 20:51:36,097] ERROR [KafkaApi-3] Error when handling request: clientId=1, correlationId=1, api=LEADER_AND_ISR, body={controller_id=1,controller_epoch=3,broker_epoch=4294968836,topic_states=[{topic=orders,partition_states=[{partition=0,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=1,controller_epoch=3,leader=2,leader_epoch=9,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=2,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=3,controller_epoch=3,leader=1,leader_epoch=8,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=4,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=5,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false}]},{topic=kafka-runbooks-canary,partition_states=[{partition=0,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=1,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=2,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false}]},{topic=__consumer_offsets,partition_states=[{partition=0,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=1,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=2,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=3,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=4,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=5,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=6,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=7,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=8,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=9,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=10,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=11,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=12,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=13,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=14,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=15,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=16,controller_epoch=3,leader=1,leader_epoch=8,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=17,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=18,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=19,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=20,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=21,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=22,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=23,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=24,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=25,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=26,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=27,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=28,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=29,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=30,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=31,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=32,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=33,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=34,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=35,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=36,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=37,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=38,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=39,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=40,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=41,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=42,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=43,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false},{partition=44,controller_epoch=3,leader=2,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[2,3,1],is_new=false},{partition=45,controller_epoch=3,leader=2,leader_epoch=12,isr=[1,2],zk_version=20,replicas=[3,2,1],is_new=false},{partition=46,controller_epoch=3,leader=1,leader_epoch=9,isr=[1,2],zk_version=17,replicas=[1,3,2],is_new=false},{partition=47,controller_epoch=3,leader=2,leader_epoch=11,isr=[1,2],zk_version=19,replicas=[2,1,3],is_new=false},{partition=48,controller_epoch=3,leader=1,leader_epoch=13,isr=[1,2],zk_version=21,replicas=[3,1,2],is_new=false},{partition=49,controller_epoch=3,leader=1,leader_epoch=10,isr=[1,2],zk_version=18,replicas=[1,2,3],is_new=false}]}],live_leaders=[{id=2,host=kafka-lab-s2-b2,port=9093},{id=1,host=kafka-lab-s2-b1,port=9093}]} (kafka.server.KafkaApis)\norg.apache.zookeeper.KeeperException$SessionExpiredException: KeeperErrorCode = Session expired for /config/topics/__consumer_offsets", REAL23_LAB),)),
    S("control_request_stale_broker_epoch", "kafka", "2.2 – 2.x", ("KafkaApis",), ("smaller than the current broker epoch",),
      r"Received (?P<request>LeaderAndIsr|stop replica|update metadata) request with broker epoch (?P<request_broker_epoch>[0-9]{1,19}) smaller than the current broker epoch (?P<current_broker_epoch>[0-9]{1,19})",
      "(INFO) a request of the controller meant for this broker's previous registration, refused with STALE_BROKER_EPOCH: "
      "harmless -- once the controller sees the new registration it sends the requests of the new one (2.3.0 "
      "processBrokerChange); never evidence of a follower that does not fetch",
      (E("2.3.0", "[2026-11-24 20:48:06,180] INFO [KafkaApi-3] Received LeaderAndIsr request with broker epoch 4294968034 smaller than the current broker epoch 4294968040 (kafka.server.KafkaApis)",
         KAFKA_SRC + " (2.3.0 KafkaApis.handleLeaderAndIsrRequest; also 'stop replica' and 'update metadata')"),)),
    # ------------------------------------------------------------ network / requests
    S("processor_uncaught_exception", "kafka", "0.9 – 0.10", ("Processor",), ("Processor got uncaught exception",),
      r"Processor got uncaught exception",
      "a network thread failed on a request; with ArrayIndexOutOfBoundsException at ApiKeys.forId it is an API key the broker does not know (a newer client): every request selected in the same poll is dropped",
      (E("0.9.0.1", "[2017-10-12 16:52:38,141] ERROR Processor got uncaught exception. (kafka.network.Processor)", SEED002),)),
    S("invalid_request", "kafka", "0.10.1 – 3.x", ("Processor",), ("Closing socket for", "because of error"),
      r"Closing socket for (?P<connection>[A-Za-z0-9_.:\[\]-]{1,200}) because of error",
      "a request the broker could not parse (e.g. an unknown API key); the connection id names the client's address and port",
      (E("2.3.0", "[2026-11-22 14:01:04,688] ERROR Closing socket for 127.102.1.1:9092-127.0.0.1:48908-5 because of error (kafka.network.Processor)", REAL23),
       E("0.10.2.1", "[2026-11-24 21:11:18,964] ERROR Closing socket for 127.106.1.3:9092-127.106.2.50:37185 because of error (kafka.network.Processor)", REAL0102))),
    S("response_without_connection", "kafka", "0.10 – 3.x", ("Processor",), ("for which there is no open connection",),
      r"no open connection, connection id (?P<connection>[A-Za-z0-9_.:\[\]-]{1,200})",
      "a response was ready after the client had gone (clients timed out waiting): request handling is slow or stuck",
      (E("2.3.0", "[2026-11-22 13:59:10,534] WARN Attempting to send response via channel for which there is no open connection, connection id 127.102.1.2:9092-127.0.0.1:44340-4 (kafka.network.Processor)", REAL23),)),
    # ------------------------------------------------------------ log cleaner
    S("log_cleaner_died", "kafka", "0.9 – 3.x", ("LogCleaner",), ("Error due to",),
      r"\[kafka-log-cleaner-thread-(?P<thread>[0-9]{1,4})\][,:] Error due to",
      "the log cleaner thread died: compacted topics (__consumer_offsets!) stop being compacted and grow until a restart",
      (E("0.9.0.1", "[2017-01-24 17:17:30,035] ERROR [kafka-log-cleaner-thread-0], Error due to  (kafka.log.LogCleaner)", PUB_090_CLEANER),
       E("0.8.2", "2015-05-19 16:52:48,758 ERROR [kafka-log-cleaner-thread-0] kafka.log.LogCleaner - [kafka-log-cleaner-thread-0], Error due to", "public JIRA comment (2015-05-19, layout thread_logger)"),
       E("0.10.2.1", "[2026-11-24 21:12:42,567] ERROR [kafka-log-cleaner-thread-0], Error due to  (kafka.log.LogCleaner)", REAL0102))),
    S("log_cleaner_uncleanable", "kafka", "2.1 – 3.x", ("LogCleaner",), ("as uncleanable",),
      r"Marking its partition \((?P<topic>" + T + r")-(?P<partition>[0-9]{1,9})\) as uncleanable",
      "the cleaner skips this partition from now on (KAFKA-7215); it keeps growing",
      (E("2.3.0", "[2026-11-22 14:03:26,498] WARN [kafka-log-cleaner-thread-0]: Unexpected exception thrown when cleaning log Log(/tmp/ana/real/broker1/data/compacted-2). Marking its partition (compacted-2) as uncleanable (kafka.log.LogCleaner)", REAL23 + " (log-cleaner.log after a kill -9 and restart)"),)),
    # ------------------------------------------------------------ ZooKeeper client inside the broker
    S("zk_session_expired", "zk_client", "0.9 – 1.1 (zkclient)", ("ZkClient",), ("zookeeper state changed (Expired)",),
      r"zookeeper state changed \(Expired\)",
      "the broker's ZooKeeper session expired: it dropped out of /brokers/ids until it re-registered",
      (E("0.11 / 1.x (zkclient)", "[2019-05-15 22:20:14,399] INFO zookeeper state changed (Expired) (org.I0Itec.zkclient.ZkClient)", "public Kafka broker log of 2019-05-15 (zkclient era)"),
       E("0.10.2.1", "[2026-11-24 21:13:45,493] INFO zookeeper state changed (Expired) (org.I0Itec.zkclient.ZkClient)", REAL0102 + " (kafkaServer.out)"))),
    S("zk_session_expired", "zk_client", "1.1 – 3.x", ("ZooKeeperClient",), ("Session expired",),
      r"\[ZooKeeperClient(?: [A-Za-z0-9 _-]{0,60})?\] Session expired",
      "as above",
      (E("2.3.0", "[2026-11-22 13:59:08,130] INFO [ZooKeeperClient Kafka server] Session expired. (kafka.zookeeper.ZooKeeperClient)", REAL23),)),
    S("zk_session_expired", "zk_client", "ZooKeeper client 3.4 – 3.8", ("ClientCnxn",), ("has expired",),
      r"Unable to reconnect to ZooKeeper service, session (?P<session>0x[0-9a-fA-F]{1,16}) has expired",
      "as above, from the ZooKeeper client library",
      (E("2.3.0 / zk client 3.4.14", "[2026-11-22 13:59:08,128] WARN Unable to reconnect to ZooKeeper service, session 0x300000bb0b00000 has expired (org.apache.zookeeper.ClientCnxn)", REAL23),)),
    S("zk_session_timeout", "zk_client", "ZooKeeper client 3.4 – 3.8", ("ClientCnxn",), ("Client session timed out",),
      r"Client session timed out, have not heard from server in (?P<millis>" + N + r")ms for session ?id (?P<session>0x[0-9a-fA-F]{1,16})",
      "the client heard nothing from its ZooKeeper server for that long (the process was paused, or the server or the network was) and reconnects: the session survives if it reconnects within the session timeout (the same session id in 'Session establishment complete'), else it expired",
      (E("2.3.0 / zk client 3.4.14", "[2026-11-22 13:59:07,443] WARN Client session timed out, have not heard from server in 46618ms for session id 0x300000bb0b00000 (org.apache.zookeeper.ClientCnxn)", REAL23),
       E("2.3.0 (ZooKeeper server stalled 8 s)", "[2026-11-24 20:56:03,957] WARN Client session timed out, have not heard from server in 6670ms for session id 0x200001131670001 (org.apache.zookeeper.ClientCnxn)", REAL23_1124))),
    S("zk_session_established", "zk_client", "ZooKeeper client 3.4 – 3.8", ("ClientCnxn",), ("Session establishment complete",),
      r"Session establishment complete on server (?P<server>[A-Za-z0-9_./:\[\]-]{1,200}), session ?id = (?P<session>0x[0-9a-fA-F]{1,16}), negotiated timeout = (?P<timeout_ms>[0-9]{1,10})",
      "the client (re)connected; after 'Client session timed out' the same session id means the session survived (a reconnect), a new id means the old session expired",
      (E("0.10.2.1 / zk client 3.4.9", "[2026-11-24 20:57:13,860] INFO Session establishment complete on server 127.101.0.1/127.101.0.1:2181, sessionid = 0x10000112e740002, negotiated timeout = 6000 (org.apache.zookeeper.ClientCnxn)", REAL010 + " (its stdout)"),
       E("2.3.0", "[2026-11-24 20:56:04,609] INFO Session establishment complete on server /127.101.0.1:2181, session id = 0x200001131670001, negotiated timeout = 10000 (org.apache.zookeeper.ClientCnxn)", REAL23_1124))),
    # ------------------------------------------------------------ controller
    S("controller_elected", "controller", "1.1 – 3.x (ZooKeeper mode)", ("KafkaController",), ("successfully elected as the controller",),
      r"(?P<broker>" + ID + r") successfully elected as the controller(?:\. Epoch incremented to (?P<epoch>[0-9]{1,10}))?",
      "this broker became the controller",
      (E("2.3.0", "[2026-11-22 13:57:33,962] INFO [Controller id=1] 1 successfully elected as the controller. Epoch incremented to 1 and epoch zk version is now 1 (kafka.controller.KafkaController)", REAL23),)),
    S("controller_elected", "controller", "0.9 – 1.0", ("KafkaController",), ("is ready to serve as the new controller",),
      r"Broker (?P<broker>" + ID + r") is ready to serve as the new controller with epoch (?P<epoch>[0-9]{1,10})",
      "this broker became the controller (0.10's words)",
      (E("0.10.2.1", "[2026-11-24 21:08:29,468] INFO [Controller 1]: Broker 1 is ready to serve as the new controller with epoch 1 (kafka.controller.KafkaController)", REAL0102),)),
    S("controller_resigned", "controller", "1.1 – 3.x (ZooKeeper mode)", ("KafkaController",), ("Resigned",),
      r"\[Controller id=(?P<broker>" + ID + r")\] Resigned",
      "this broker stopped being the controller (session expiry or another broker won)",
      (E("2.3.0", "[2026-11-22 13:59:08,152] INFO [Controller id=3] Resigned (kafka.controller.KafkaController)", REAL23),)),
    S("controller_resigned", "controller", "0.9 – 1.0", ("KafkaController",), ("resigned as the controller",),
      r"Broker (?P<broker>" + ID + r") resigned as the controller",
      "this broker stopped being the controller (0.10's words)",
      (E("0.10.2.1", "[2026-11-24 21:12:17,424] INFO [Controller 1]: Broker 1 resigned as the controller (kafka.controller.KafkaController)", REAL0102),)),
    S("auto_preferred_election", "controller", "1.1 – 3.x", ("KafkaController",), ("Processing automatic preferred replica leader election",),
      r"Processing automatic preferred replica leader election",
      "auto.leader.rebalance.enable is on: the controller checks imbalance and moves leadership back to preferred replicas",
      (E("2.3.0", "[2026-11-22 14:00:10,225] INFO [Controller id=1] Processing automatic preferred replica leader election (kafka.controller.KafkaController)", REAL23),)),
    S("auto_preferred_election", "controller", "0.8 – 1.0", ("KafkaController",), ("checking need to trigger partition rebalance",),
      r"checking need to trigger partition rebalance",
      "the controller's periodic imbalance check (0.10's words, at TRACE: Kafka's own log4j.properties logs kafka.controller at TRACE)",
      (E("0.10.2.1", "[2026-11-25 12:54:20,348] TRACE [Controller 1]: checking need to trigger partition rebalance (kafka.controller.KafkaController)", REAL0102),)),
    S("preferred_election", "controller", "0.8 – 3.x", ("KafkaController",), ("Starting preferred replica leader election for partitions",),
      r"Starting preferred replica leader election for partitions (?P<partitions>[A-Za-z0-9._,\[\]-]{1,4000})",
      "the controller moves leadership of these partitions back to their preferred (first) replica",
      (E("2.3.0", "[2026-11-22 14:00:10,227] INFO [Controller id=1] Starting preferred replica leader election for partitions t1-2,__consumer_offsets-2,compacted-1,__consumer_offsets-5 (kafka.controller.KafkaController)", REAL23),)),
    S("preferred_election_failed", "controller", "1.1 – 3.x", ("KafkaController",), ("failed to complete preferred replica leader election",),
      r"Partition (?P<topic>" + T + r")-(?P<partition>[0-9]{1,9}) failed to complete preferred replica leader election to (?P<preferred>" + ID + r")\. Leader is still (?P<leader>" + ID + r")",
      "the preferred replica was not eligible (e.g. not in the ISR yet)",
      (E("2.3.0", "[2026-11-22 14:00:10,304] WARN [Controller id=1] Partition compacted-1 failed to complete preferred replica leader election to 2. Leader is still 3 (kafka.controller.KafkaController)", REAL23),)),
    S("broker_change", "controller", "1.1 – 3.x", ("KafkaController",), ("Newly added brokers",),
      r"Newly added brokers: (?P<added>" + IDS + r"), deleted brokers: (?P<deleted>" + IDS + r"), bounced brokers: (?P<bounced>" + IDS + r")",
      "the controller saw registrations in /brokers/ids change",
      (E("2.3.0", "[2026-11-22 14:00:07,827] INFO [Controller id=1] Newly added brokers: 2, deleted brokers: , bounced brokers: , all live brokers: 1,2,3 (kafka.controller.KafkaController)", REAL23),)),
    S("broker_change", "controller", "0.9 – 1.0", ("ReplicaStateMachine$BrokerChangeListener",), ("Newly added brokers",),
      r"\[BrokerChangeListener on Controller (?P<controller>" + ID + r")\]: Newly added brokers: (?P<added>" + IDS + r"), deleted brokers: (?P<deleted>" + IDS + r"), all live brokers: (?P<live>" + IDS + r")",
      "as above, from 0.10's broker-change listener (no 'bounced brokers' before 1.1)",
      (E("0.10.2.1", "[2026-11-24 21:14:17,632] INFO [BrokerChangeListener on Controller 1]: Newly added brokers: , deleted brokers: 2, all live brokers: 1,3 (kafka.controller.ReplicaStateMachine$BrokerChangeListener)", REAL0102),)),
    # ------------------------------------------------------------ ZooKeeper servers
    S("zk_election_took", "zookeeper", "3.4 – 3.8", ("Follower", "Leader", "Learner", "Observer"), ("LEADER ELECTION TOOK",),
      r"(?P<role>FOLLOWING|LEADING|OBSERVING) - LEADER ELECTION TOOK - (?P<millis>[0-9]{1,12})",
      "this server finished a leader election (3.4 prints the millis without a unit, 3.6+ adds MS)",
      (E("3.4.9", "2017-02-10 19:22:16,549 [myid:2] - INFO  [QuorumPeer[myid=2]/0:0:0:0:0:0:0:0:2181:Follower@61] - FOLLOWING - LEADER ELECTION TOOK - 22978", PUB_ZK34),
       E("3.4 (Kafka layout)", "[2016-07-24 07:17:50,961] INFO FOLLOWING - LEADER ELECTION TOOK - 21823 (org.apache.zookeeper.server.quorum.Learner)", "public ZooKeeper 3.4 log inside a Kafka layout (2016-07-24)"),
       E("3.6+", "2023-09-01 04:02:02,075 [myid:13] - INFO [QuorumPeer[myid=13](plain=[0:0:0:0:0:0:0:0]:2181)(secure=[0:0:0:0:0:0:0:0]:2281):Follower@77] - FOLLOWING - LEADER ELECTION TOOK - 104 MS", SEED004),
       E("3.8.0", "2026-11-22 14:01:18,854 - INFO  [QuorumPeer[myid=1](plain=127.102.0.1:2181)(secure=disabled):Follower@77] - FOLLOWING - LEADER ELECTION TOOK - 16 MS", REALZK38))),
    S("zk_follow_exception", "zookeeper", "3.4 – 3.8", ("Follower", "Observer"), ("Exception when following the leader",),
      r"Exception when following the leader",
      "this follower lost its connection to the leader (the exception says why: Connection reset, Read timed out, EOF)",
      (E("3.4", "2016-03-21 22:58:33,362 - WARN  [QuorumPeer[myid=3]/0:0:0:0:0:0:0:0:2181:Follower@89] - Exception when following the leader", PUB_ZK34_PLAIN),
       E("3.6+", "2023-09-01 04:02:01,662 [myid:13] - WARN [QuorumPeer[myid=13](plain=[0:0:0:0:0:0:0:0]:2181)(secure=[0:0:0:0:0:0:0:0]:2281):Follower@128] - Exception when following the leader java.net.SocketException: Connection reset at java.base/sun.nio.ch.NioSocketImpl.implRead(NioSocketImpl.java:323)", SEED004 + " (first characters of the line as the post prints it)"),
       E("3.8.0", "2026-11-22 14:01:31,003 [myid:2] - WARN  [QuorumPeer[myid=2](plain=127.102.0.2:2181)(secure=disabled):Follower@128] - Exception when following the leader", REALZK38))),
    S("zk_disconnected_from_leader", "zookeeper", "3.6 – 3.8", ("Follower", "Observer"), ("Disconnected from leader",),
      r"Disconnected from leader \(with address: (?P<leader>[A-Za-z0-9_./:\[\]-]{1,200})\)\. Was connected for (?P<millis>[0-9]{1,15})ms\. Sync state: (?P<sync>[a-z]{1,5})",
      "how long this follower had been connected before the drop",
      (E("3.6+", "2023-09-01 04:02:01,662 [myid:13] - INFO [QuorumPeer[myid=13](plain=[0:0:0:0:0:0:0:0]:2181)(secure=[0:0:0:0:0:0:0:0]:2281):Follower@142] - Disconnected from leader (with address: /10.14.6.56:2888). Was connected for 316796607ms. Sync state: true", SEED004),
       E("3.8.0", "2026-11-22 14:01:18,831 - INFO  [QuorumPeer[myid=1](plain=127.102.0.1:2181)(secure=disabled):Follower@142] - Disconnected from leader (with address: /127.102.0.3:2888). Was connected for 234789ms. Sync state: true", REALZK38))),
    S("zk_peer_state", "zookeeper", "3.6 – 3.8", ("QuorumPeer",), ("Peer state changed",),
      r"Peer state changed: (?P<state>[a-z]{1,12}(?: - [a-z]{1,20}){0,3})",
      "the server's quorum state (looking / following / leading and their phases)",
      (E("3.6+", "2023-09-01 04:02:01,971 [myid:13] - INFO [QuorumPeer[myid=13](plain=[0:0:0:0:0:0:0:0]:2181)(secure=[0:0:0:0:0:0:0:0]:2281):QuorumPeer@916] - Peer state changed: looking", SEED004),
       E("3.8.0", "2026-11-22 14:01:31,020 [myid:2] - INFO  [QuorumPeer[myid=2](plain=127.102.0.2:2181)(secure=disabled):QuorumPeer@917] - Peer state changed: looking", REALZK38))),
    S("zk_transaction_timeout", "zookeeper", "3.4 – 3.8", ("LearnerHandler",), ("Closing connection to peer due to transaction timeout",),
      r"Closing connection to peer due to transaction timeout",
      "the leader dropped a learner: a proposal or ping went unacknowledged for longer than syncLimit x tickTime",
      (E("3.6+", "2023-09-01 04:02:01,248 [myid:37] - WARN [QuorumPeer[myid=37](plain=[0:0:0:0:0:0:0:0]:2181)(secure=[0:0:0:0:0:0:0:0]:2281):LearnerHandler@1077] - Closing connection to peer due to transaction timeout.", SEED004),)),
    S("zk_learner_closed", "zookeeper", "3.6 – 3.8", ("LearnerHandler",), ("Synchronously closing socket to learner",),
      r"Synchronously closing socket to learner (?P<sid>[0-9]{1,10})",
      "the leader closed its connection to learner <sid>",
      (E("3.6+", "2023-09-01 04:02:01,248 [myid:37] - INFO [QuorumPeer[myid=37](plain=[0:0:0:0:0:0:0:0]:2181)(secure=[0:0:0:0:0:0:0:0]:2281):LearnerHandler@1158] - Synchronously closing socket to learner 13.", SEED004),
       E("3.8.0", "2026-11-22 14:01:14,820 [myid:3] - INFO  [LearnerHandler-/127.0.0.1:44360:LearnerHandler@1159] - Synchronously closing socket to learner 1.", REALZK38))),
    S("zk_learner_handler_error", "zookeeper", "3.4 – 3.8", ("LearnerHandler",), ("Unexpected exception",),
      r"Unexpected exception (?:causing shutdown while sock still open|in LearnerHandler)",
      "the leader's handler for one learner failed (e.g. Read timed out: the learner stopped answering)",
      (E("3.8.0", "2026-11-22 14:01:14,818 [myid:3] - ERROR [LearnerHandler-/127.0.0.1:44360:LearnerHandler@719] - Unexpected exception in LearnerHandler: ", REALZK38),)),
    S("zk_session_expiring", "zookeeper", "3.4 – 3.8", ("ZooKeeperServer", "SessionTrackerImpl"), ("Expiring session",),
      r"Expiring session (?P<session>0x[0-9a-fA-F]{1,16}), timeout of (?P<timeout_ms>[0-9]{1,10})ms exceeded",
      "the server expired a client session (for a Kafka broker: it disappears from /brokers/ids)",
      (E("3.4", "2017-11-08 15:54:10,002 [myid:] - INFO  [SessionTracker:ZooKeeperServer@347] - Expiring session 0x15f8f0496020037, timeout of 4000ms exceeded", PUB_ZK34_EXP),
       E("3.6+", "2022-12-30 11:40:30,396 [myid:2] - INFO  [SessionTracker:ZooKeeperServer@437] - Expiring session 0x3925a0001, timeout of 10000ms exceeded", "public ZooKeeper 3.6+ log (2022-12-30)"))),
    S("zk_end_of_stream", "zookeeper", "3.4", ("NIOServerCnxn",), ("caught end of stream exception",),
      r"caught end of stream exception",
      "a client closed its connection (the exception line names the session)",
      (E("3.4 (Kafka layout)", "[2017-07-15 16:17:54,394] WARN caught end of stream exception (org.apache.zookeeper.server.NIOServerCnxn)", PUB_ZK34_EMB),)),
    S("zk_end_of_stream", "zookeeper", "3.4 – 3.8", ("NIOServerCnxn", "NettyServerCnxn"), ("EndOfStreamException",),
      r"EndOfStreamException: Unable to read additional data from client,? (?:sessionid (?P<session>0x[0-9a-fA-F]{1,16})|it probably closed the socket: address = (?P<address>[A-Za-z0-9_./:\[\]-]{1,100}), session = (?P<session2>0x[0-9a-fA-F]{1,16}))",
      "as above; the exception line under 'caught end of stream exception' (3.4) or 'Unexpected exception' (3.6+)",
      (E("3.4 (Kafka layout)", "[2017-07-15 16:17:54,394] WARN caught end of stream exception (org.apache.zookeeper.server.NIOServerCnxn)\nEndOfStreamException: Unable to read additional data from client sessionid 0x15d453002070003, likely client has closed socket", PUB_ZK34_EMB),),
      on="exception"),
    S("zk_slow_fsync", "zookeeper", "3.4 – 3.8", ("FileTxnLog",), ("fsync-ing the write ahead log in",),
      r"fsync-ing the write ahead log in (?P<thread>[A-Za-z0-9:_-]{1,60}) took (?P<millis>[0-9]{1,12})ms",
      "a transaction-log fsync was slow: followers stall and may be dropped (disk, or the process was paused)",
      (E("3.4", "2016-05-15 04:04:40,569 [myid:1] - WARN  [SyncThread:1:FileTxnLog@334] - fsync-ing the write ahead log in SyncThread:1 took 2243ms which will adversely effect operation latency. See the ZooKeeper troubleshooting guide", PUB_ZK34_FSYNC),
       E("3.8.0", "2026-11-22 14:01:31,002 [myid:2] - WARN  [SyncThread:2:FileTxnLog@394] - fsync-ing the write ahead log in SyncThread:2 took 6001ms which will adversely effect operation latency.File size is 67108880 bytes. See the ZooKeeper troubleshooting guide", REALZK38))),
    S("zk_load_database_failed", "zookeeper", "3.4 – 3.8", ("QuorumPeer",), ("Unable to load database on disk",),
      r"Unable to load database on disk",
      "(ERROR) the server could not read its snapshot and transaction logs at start (the exception line says why: a "
      "truncated or corrupt file, 'The accepted epoch, N is less than the current epoch, M'); it throws 'Unable to run "
      "quorum server' and exits: the ensemble runs without it until its data directory is repaired",
      (E("3.4.13", "2019-06-11 10:02:11,503 [myid:2] - ERROR [main:QuorumPeer@692] - Unable to load database on disk", ZK_SRC + " (release-3.4.13 QuorumPeer.loadDataBase)"),
       E("3.8.0", "2026-11-29 06:03:56,323 [myid:1] - ERROR [main:QuorumPeer@1200] - Unable to load database on disk", REALZK38_LOAD))),
    S("zk_exiting_abnormally", "zookeeper", "3.4 – 3.8", ("QuorumPeerMain", "ZooKeeperServerMain"), ("exiting abnormally",),
      r"(?P<reason>Invalid arguments|Invalid config|Unable to access datadir|Unable to start AdminServer|Unexpected exception), exiting abnormally",
      "(ERROR) the ZooKeeper server's main exits with an error status: it is not running",
      (E("3.4.13", "2019-06-11 10:02:11,507 [myid:2] - ERROR [main:QuorumPeerMain@92] - Unexpected exception, exiting abnormally", ZK_SRC + " (release-3.4.13 QuorumPeerMain.main)"),
       E("3.8.0", "2026-11-29 06:03:56,360 [myid:1] - ERROR [main:QuorumPeerMain@114] - Unexpected exception, exiting abnormally", REALZK38_LOAD))),
)

# Attributes read from the exception line right under a record (the line after its header).
# (signature names, literal, pattern): the first that matches adds its groups to the record's attrs.
EXCEPTION_ATTRS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("replica_fetch_error", "fetch_session_error"), "was disconnected before the response was read",
     r"Connection to (?P<disconnected_node>-?[0-9]{1,10}) was disconnected before the response was read"),
    (("replica_fetch_error", "fetch_session_error"), "Client was shutdown before response was read", r"(?P<client_shutdown>Client was shutdown) before response was read"),
    (("replica_fetch_error", "fetch_session_error"), "Exception", r"(?P<timeout>SocketTimeoutException|TimeoutException)"),
    # NetworkClientUtils.awaitReady: "Connection to " + node + " failed." (node = host:port (id: N rack: R))
    (("replica_fetch_error", "fetch_session_error"), " failed",
     r"Connection to (?P<connection_failed>[A-Za-z0-9_.:\[\]-]{1,100})(?: \(id: -?[0-9]{1,10} rack: [A-Za-z0-9_.-]{1,60}\))? failed"),
    (("processor_uncaught_exception",), "ArrayIndexOutOfBoundsException", r"ArrayIndexOutOfBoundsException: (?P<api_key_aioobe>-?[0-9]{1,6})"),
    (("invalid_request", "processor_uncaught_exception"), "API key", r"Unknown API key (?P<api_key>-?[0-9]{1,6})"),
    (("invalid_request", "processor_uncaught_exception"), "apiKey", r"best guess of the apiKey is: (?P<api_key>-?[0-9]{1,6})"),
    (("invalid_request", "processor_uncaught_exception"), "Unexpected ApiKeys id", r"Unexpected ApiKeys id .(?P<api_key>-?[0-9]{1,6})."),
    # 0.10.1 - 0.11: "InvalidRequestException: Error getting request for apiKey: 32 and apiVersion: 0" (Caused by: ... Unexpected ApiKeys id)
    (("invalid_request",), "Error getting request for apiKey", r"Error getting request for apiKey: (?P<api_key>-?[0-9]{1,6}) and apiVersion: (?P<api_version>-?[0-9]{1,6})"),
    (("control_request_failed",), "larger than current broker epoch",
     r"Epoch (?P<request_broker_epoch>[0-9]{1,19}) larger than current broker epoch (?P<current_broker_epoch>[0-9]{1,19})"),
    (("control_request_failed",), "Exception", r"(?P<cause>[A-Za-z0-9_.$]{1,200}(?:Exception|Error))"),
    (("zk_follow_exception",), "Exception", r"(?P<cause>(?:java\.[a-z.]{1,40})?[A-Za-z]{1,60}Exception(?:: [A-Za-z ]{1,60})?)"),
    (("log_cleaner_died",), "requirement failed", r"requirement failed: (?P<requirement>[0-9]{1,20} messages in segment (?P<segment>[A-Za-z0-9._/-]{1,400}) but offset map can fit only [0-9]{1,20})"),
)
# A frame line that confirms a record's cause (the line after the exception line).
FRAME_MARKERS: tuple[tuple[str, str, str], ...] = (
    ("processor_uncaught_exception", "ApiKeys.forId", "api_key_frame"),
)

# Shapes of real files (beyond one log line) the analysis reads, each with its fixture under tests/analyze/fixtures/
# (the fuzz corpus of tests/analyze/test_analyze_fuzz.py): (shape, kind, what the analysis makes of it, fixture)
EVIDENCE_SHAPES: tuple[tuple[str, str, str, str], ...] = (
    ("deadlock report without its heading", "jstack", "entries read as jstack's report; the cycle from the holders they name",
     "shapes/deadlock_excerpt_no_header.txt"),
    ("deadlock report entries alone", "jstack", "each entry's named holder is an edge: the cycle without any stack",
     "shapes/deadlock_report_entries_only.txt"),
    ("report heading, entries, a stack without 'Java stack information'", "jstack",
     "the trailing \"Name\": is a stack, not a third entry", "shapes/deadlock_report_trailing_stack.txt"),
    ("blank lines / a date / a prompt around a dump", "jstack", "left out with a note; the dump is read",
     "jdk17_rwlock_deadlock.jstack-l.txt"),
    ("ZooKeeper client timed out, same session re-established", "server_log",
     "zk_session_timeout (a reconnect), never zk_session_expired", "real23/broker2.server.log.zk-reconnect"),
    ("fetch error between its fetcher's 'Shutting down' and 'Stopped' after 'Removed fetcher'", "server_log",
     "fetch_failures_own_doing (leadership moved), not peer_fetch_failures", "shapes/fetcher_stopped_by_leadership_change.log"),
    ("ss -a without -n: service names, %lo suffixes, wide columns", "sockets_ss", "rows; named ports mapped back, others noted",
     "real23/ss-a-service-names.txt"),
    ("macOS netstat -An: PCB address and flow hash columns", "sockets_netstat",
     "rows; addresses netstat cut to 18 characters have no port", "macos_netstat_An.txt"),
    ("jcmd Thread.dump_to_file -format=text (JDK 21)", "jstack", "threads, virtual threads (#N \"\" virtual), stacks",
     "jdk21/virtual_threads.dump_to_file.txt"),
    ("a carrier's 'Carrying virtual thread #N' (JDK 21 jstack)", "jstack", "linked to virtual thread #N",
     "jdk21/virtual_threads.jstack-l.txt"),
    ("Fatal error during KafkaServer startup / Exiting Kafka", "server_log",
     "broker_startup_failed with the exception under it as the cause", "real23/fatal-startup-oom.server.log"),
    ("the same, Kafka 0.10.2.1 (FATAL, KafkaServerStartable)", "server_log", "broker_startup_failed",
     "real010/fatal-startup-bind.server.log"),
    # issue 32 (fixtures written from the projects' source, see tests/analyze/fixtures/README.md, or recorded)
    ("ZooKeeper client 3.4.9-3.4.13: one timeout as a WARN and an INFO line (written)", "server_log",
     "one zk_session_timeout event per timeout, not one per line", "written/zk349_client_timeout_warn_info.server.log"),
    ("JDK 8 G1 -XX:+PrintGCDetails: [GC concurrent-*], [GC Worker ...] (written)", "gc_log",
     "stop-the-world pauses only (young, remark, cleanup); concurrent phases counted apart", "written/jdk8_g1_print_gc_details.gc.log"),
    ("JDK 8 CMS -XX:+PrintGCDetails: [CMS-concurrent-*] with [Times:] (written)", "gc_log",
     "ParNew, initial mark and final remark are pauses; concurrent phases are not", "written/jdk8_cms_print_gc_details.gc.log"),
    ("JDK 17 G1 -Xlog:gc*: a concurrent mark cycle", "gc_log", "Pause lines only", "jdk17_g1_concurrent_cycle.gc.log"),
    ("Kafka 2.6+ 'Error sending fetch request ... to node N:' with the exception on the next line (written)", "server_log",
     "fetch_session_error, its cause from the exception line", "written/kafka26_fetch_error_two_line.server.log"),
    ("ZooKeeper 'Unable to load database on disk', then 'exiting abnormally' (written)", "zk_log",
     "zk_database_load_failed (critical)", "written/zk3413_unable_to_load_database.zookeeper.log"),
    ("offsets load finished after minutes (written)", "server_log", "offsets_load_finished_late",
     "written/kafka23_offsets_load_slow.server.log"),
)

_BY_LOGGER: dict[str, list[Signature]] = {}
for _s in SIGNATURES:
    for _lg in _s.loggers:
        _BY_LOGGER.setdefault(_lg, []).append(_s)
ALL_LOGGERS: frozenset[str] = frozenset(_BY_LOGGER)


def candidates(logger_simple: str) -> list[Signature]:
    return _BY_LOGGER.get(logger_simple, [])


def classify_text(logger_simple: str, message: str, exception_line: str | None = None) -> tuple[Signature, dict[str, str]] | None:
    """The first signature (table order) whose logger, literals and pattern match."""
    for sig in _BY_LOGGER.get(logger_simple, ()):
        text = message if sig.on == "message" else exception_line
        if text is None:
            continue
        attrs = sig.match(text)
        if attrs is not None:
            return sig, attrs
    return None


def exception_attrs(signature: str, exception_line: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for names, lit, pat in EXCEPTION_ATTRS:
        if signature in names and lit in exception_line:
            m = _compiled(pat).search(exception_line)
            if m:
                for k, v in m.groupdict().items():
                    if v and k not in out:
                        out[k] = v
    return out


def frame_attrs(signature: str, frame_line: str) -> dict[str, str]:
    return {attr: "1" for name, lit, attr in FRAME_MARKERS if name == signature and lit in frame_line}


def names() -> list[str]:
    seen: list[str] = []
    for s in SIGNATURES:
        if s.name not in seen:
            seen.append(s.name)
    return seen


# ---------------------------------------------------------------- docs/SIGNATURES.md


def _md(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", "<br>")


def render_markdown() -> str:
    from .parsers.layouts import LAYOUTS

    out = ["# Log signatures the analysis recognises",
           "",
           "Generated from `plugins/kafka_runbooks/analyze/signatures.py` by "
           "`python -m kafka_runbooks.analyze.signatures > docs/SIGNATURES.md`; a test fails when this file is stale, "
           "and a test parses every example line below and checks it yields its signature.",
           "",
           "A record matches a row when its logger's simple class name is one of the row's loggers, every literal "
           "occurs in the message (or, for rows marked *exception*, in the exception line under it) and the "
           "pattern matches. Every example is a real line, except those whose source says \"wording from Kafka's source\" "
           "(no real line recorded yet); the source column says where each comes from.",
           "",
           "## Layouts",
           "",
           "| layout | log4j pattern | example |",
           "|---|---|---|"]
    for l in LAYOUTS:
        out.append(f"| `{l.name}` | `{_md(l.pattern)}` | `{_md(l.example)}` |")
    out += ["", "## Signatures", "",
            "| signature | family | versions | loggers | literals | pattern | meaning |",
            "|---|---|---|---|---|---|---|"]
    for s in SIGNATURES:
        on = " *(exception line)*" if s.on == "exception" else ""
        out.append(f"| `{s.name}`{on} | {s.family} | {_md(s.versions)} | {', '.join(s.loggers)} | "
                   f"{', '.join('`' + _md(x) + '`' for x in s.literals)} | `{_md(s.pattern)}` | {_md(s.meaning)} |")
    out += ["", "## Real example lines, one per version wording", "",
            "| signature | versions | Kafka/ZooKeeper version | example | source |",
            "|---|---|---|---|---|"]
    for s in SIGNATURES:
        if not s.examples:
            out.append(f"| `{s.name}` | {_md(s.versions)} | | *no real line found yet: wording from the Kafka source; untested* | |")
        for e in s.examples:
            out.append(f"| `{s.name}` | {_md(s.versions)} | {_md(e.version)} | `{_md(e.text)}` | {_md(e.source)} |")
    out += ["", "## Evidence shapes beyond one log line", "",
            "Shapes of real files the analysis reads (thread dumps, socket tables, sequences of log lines), each with "
            "its fixture under `tests/analyze/fixtures/` (also the fuzz corpus); formats in docs/CONTRACTS.md.", "",
            "| shape | kind | read as | fixture |", "|---|---|---|---|"]
    for shape, kind, what, fixture in EVIDENCE_SHAPES:
        out.append(f"| {_md(shape)} | `{kind}` | {_md(what)} | `{fixture}` |")
    out += ["", "## Exception-line attributes", "",
            "| signatures | literal | pattern |", "|---|---|---|"]
    for names_, lit, pat in EXCEPTION_ATTRS:
        out.append(f"| {', '.join(names_)} | `{_md(lit)}` | `{_md(pat)}` |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # pragma: no cover
    import sys

    sys.stdout.write(render_markdown())
