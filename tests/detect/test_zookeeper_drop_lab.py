"""Incident 004 after the fact (issue 16 §2), on the lab's real ZooKeeper 3.8 ensemble: a follower stalled for
2 x syncLimit x tickTime with NO health check during the stall; the next check -- the first ever, no history -- finds
the drop from what stays behind (mntr uptime and election count, the follower's and the leader's log lines)."""

from __future__ import annotations

import os

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect.observe import check_once

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def test_a_stall_is_found_by_the_next_check_with_none_during_it(healthy_lab, tmp_path):
    from kafka_lab.zookeeper import SYNC_LIMIT, TICK_TIME_MS, quorum_modes

    os.environ.update(healthy_lab.airflow_env())
    raw = {**healthy_lab.cluster_settings()["lab"], "incident_base": str(tmp_path / "incidents")}
    config = ClusterConfig.from_dict("lab", raw)
    modes = quorum_modes()
    follower = min(z for z, m in modes.items() if m == "follower")
    leader = next(z for z, m in modes.items() if m == "leader")
    stall = healthy_lab.zk_stall(follower, 2 * SYNC_LIMIT * TICK_TIME_MS / 1000)
    snapshot, findings = check_once(config)  # the first check of this history, after the stall
    drops = [f for f in findings if f.kind == "zookeeper_follower_dropped"]
    assert [f.details["subject"] for f in drops] == [str(follower)], [(f.kind, f.summary[:200]) for f in findings]
    f = drops[0]
    d = f.details
    assert d["no_ensemble_election"] is True and d["leaders_seen"] == [str(leader)]
    assert d["sync_timeout"]["arithmetic"] == f"syncLimit {SYNC_LIMIT} x tickTime {TICK_TIME_MS} ms = {SYNC_LIMIT * TICK_TIME_MS} ms"
    (drop,) = d["drops"][:1]
    assert drop["rejoined_at"] >= _iso(stall["stopped_at"]) and drop["duration_ms"] is not None
    assert "the leader kept leading" in f.summary and "elected again after its start" in f.summary
    excerpts = "\n".join(e.excerpt for e in f.evidence)
    assert f"Synchronously closing socket to learner {follower}." in excerpts
    assert "Exception when following the leader" in excerpts and "LEADER ELECTION TOOK" in excerpts


def _iso(epoch_s: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch_s - 1, dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
