"""Incident 004's drill: a ZooKeeper follower stalled (SIGSTOP) longer than syncLimit x tickTime, then resumed.
What ZooKeeper 3.8 really logs, on the follower and on the leader."""

from __future__ import annotations

import pytest

from kafka_lab import wait_until
from kafka_lab.zookeeper import SYNC_LIMIT, TICK_TIME_MS, mode, quorum_modes

from .lab_helpers import LogCursor

pytestmark = pytest.mark.lab


def test_zk_stall_follower_drops_out_and_rejoins(healthy_lab):
    lab = healthy_lab
    modes = quorum_modes()
    leader = next(z for z, m in modes.items() if m == "leader")
    follower = next(z for z, m in modes.items() if m == "follower")
    fcur, lcur = LogCursor(lab.zk_log(follower)), LogCursor(lab.zk_log(leader))
    info = lab.zk_stall(follower)
    assert info["seconds"] * 1000 > SYNC_LIMIT * TICK_TIME_MS
    # the leader gives up on the silent learner after syncLimit x tickTime
    lcur.wait_for(r"ERROR \[LearnerHandler-[^]]+\] - Unexpected exception in LearnerHandler: \n"
                  r"java\.net\.SocketTimeoutException: Read timed out", 30)
    lcur.wait_for(rf"INFO  \[LearnerHandler-[^]]+\] - Synchronously closing socket to learner {follower}\.", 30)
    # the follower, once resumed, finds its leader connection gone, looks for a leader and follows it again
    fcur.wait_for(r"WARN  \[QuorumPeer\[myid=\d+\].*:Follower@\d+\] - Exception when following the leader", 30)
    fcur.wait_for(r"Peer state changed: looking", 30)
    fcur.wait_for(r"FOLLOWING - LEADER ELECTION TOOK - \d+ MS", 30)
    wait_until(quorum_modes, 30, "the ensemble to serve again")
    assert mode(leader) == "leader" and mode(follower) == "follower"  # no ensemble election: same leader


def test_zk_stall_refuses_the_leader(healthy_lab):
    leader = next(z for z, m in quorum_modes().items() if m == "leader")
    with pytest.raises(Exception, match="not a serving follower"):
        healthy_lab.zk_stall(leader, seconds=0.1)
