"""The cluster's state now, read through the ZooKeeper hook (plans, close-outs and summaries)."""

from __future__ import annotations

from kafka_runbooks.detect.snapshot import read_snapshot
from kafka_runbooks.hooks.zookeeper import ZooKeeperHook


def read_snapshot_of(config):
    """The cluster's snapshot from its ZooKeeper (raises what the hook raises)."""
    with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
        return read_snapshot(zk, config.name)


def cluster_now(config):
    """The cluster's state now (None when ZooKeeper cannot be read: the close-out says so)."""
    try:
        return read_snapshot_of(config)
    except Exception:  # noqa: BLE001 - describe_state says "unknown"
        return None
