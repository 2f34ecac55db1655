"""Incident 002b's drill, the data side: one real ``__consumer_offsets`` partition made large.

With the log cleaner dead (``kill-cleaner`` on every broker that holds the partition) nothing compacts it, as in
seed 002 (2,000+ segments of ~100 MB). One group id that Kafka maps to the chosen partition commits offsets with
``metadata_bytes`` of metadata for every partition of a fill topic, again and again, until the partition's
directory on its leader holds ``target_bytes``. ``segment_bytes`` (``__consumer_offsets``' own segment.bytes,
set through the Admin API's IncrementalAlterConfigs) makes it roll into many segments, as a partition that grew for
months would. ``undo()`` removes the override and the fill topic; the data stays until a cleaner compacts it.
"""

from __future__ import annotations

import time
from pathlib import Path

from .load import offsets_partition
from .procs import LabError
from .topics import OFFSETS, OFFSETS_PARTITIONS, admin, delete_topic

FILL_TOPIC = "kafka-lab-offsets-fill"


def group_for(partition: int, prefix: str = "kafka-lab-big-") -> str:
    return next(g for g in (f"{prefix}{i}" for i in range(100_000)) if offsets_partition(g, OFFSETS_PARTITIONS) == partition)


OFFSETS_SEGMENT_BYTES = 104857600  # Kafka's offsets.topic.segment.bytes: what __consumer_offsets is created with


def _set_segment_bytes(value: int, timeout: float = 30) -> None:
    """IncrementalAlterConfigs (Kafka 2.3+): only segment.bytes changes. (The older AlterConfigs replaces every
    override of the topic -- it would drop __consumer_offsets' cleanup.policy=compact.)"""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    res = ConfigResource(ConfigResource.Type.TOPIC, OFFSETS,
                         incremental_configs=[ConfigEntry("segment.bytes", str(int(value)), incremental_operation=AlterConfigOpType.SET)])
    a = admin()  # referenced until its futures resolve
    for f in a.incremental_alter_configs([res]).values():
        f.result(timeout=timeout)


def partition_bytes(data_dirs: list[Path], partition: int) -> dict[str, int]:
    """{data dir: bytes of its __consumer_offsets-<partition>/*.log} on the lab's hosts (read locally)."""
    out = {}
    for d in data_dirs:
        pd = d / f"{OFFSETS}-{partition}"
        out[str(d)] = sum(f.stat().st_size for f in pd.glob("*.log")) if pd.exists() else 0
    return out


def segment_counts(data_dirs: list[Path], partition: int) -> dict[str, int]:
    """Segments that hold data (a compaction leaves empty ones until its next pass merges them)."""
    return {str(d): sum(1 for f in (d / f"{OFFSETS}-{partition}").glob("*.log") if f.stat().st_size > 0)
            for d in data_dirs if (d / f"{OFFSETS}-{partition}").exists()}


def grow(data_dirs: list[Path], partition: int, target_bytes: int, *, segment_bytes: int = 1 << 20, metadata_bytes: int = 3000,
         fill_partitions: int = 100, timeout_s: float = 600) -> dict:
    """Commit until the partition holds ``target_bytes`` on every replica's disk; returns what was done."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import NewTopic

    t0 = time.monotonic()
    _set_segment_bytes(segment_bytes)
    a = admin()
    fs = a.create_topics([NewTopic(FILL_TOPIC, fill_partitions, 1)])
    try:
        fs[FILL_TOPIC].result(60)
    except Exception as exc:  # noqa: BLE001 - already there from an earlier drill is fine
        if "already exists" not in str(exc):
            raise
    group = group_for(partition)
    meta = "x" * int(metadata_bytes)
    commits = 0
    n = 0
    while min(partition_bytes(data_dirs, partition).values()) < target_bytes:
        if time.monotonic() - t0 > timeout_s:
            raise LabError(f"{OFFSETS}-{partition} did not reach {target_bytes} bytes in {timeout_s:.0f}s: {partition_bytes(data_dirs, partition)}")
        n += 1
        tps = [TopicPartition(FILL_TOPIC, p, n, metadata=meta) for p in range(fill_partitions)]
        a.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(60)
        commits += 1
    sizes = partition_bytes(data_dirs, partition)
    return {"partition": partition, "group": group, "commits": commits, "bytes": sizes, "seconds": round(time.monotonic() - t0, 1),
            "segments": {d: len(list((Path(d) / f"{OFFSETS}-{partition}").glob("*.log"))) for d in sizes}}


def undo(timeout: float = 60) -> None:
    """segment.bytes back to what Kafka created the topic with, and the fill topic deleted."""
    _set_segment_bytes(OFFSETS_SEGMENT_BYTES, timeout)
    delete_topic(FILL_TOPIC, timeout)
