"""reset() heals everything at once and is cheap when nothing is broken; the command line drives the same faults."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from kafka_lab import BROKER_IDS, wait_until
from kafka_lab.procs import alive, proc_state
from kafka_lab.zookeeper import ZK_IDS, quorum_modes

from .lab_helpers import thread_blocks, jstack

pytestmark = pytest.mark.lab


def cli(lab, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kafka_lab", "--state", str(lab.state), *args], capture_output=True,
                          text=True, timeout=timeout, env=os.environ.copy())


def assert_baseline(lab) -> None:
    st = lab.status()
    for name, proc in st["processes"].items():
        assert proc is not None and proc["state"] not in ("T", "t", "Z"), (name, proc)
    for b in BROKER_IDS:
        a = lab.agent_state(b)
        assert a["pid"] == lab.broker_pid(b) and a["active"] == [] and a["needs_restart"] is None
    assert all(st["registered"][b] for b in BROKER_IDS)
    assert st["under_replicated"] == [] and st["not_preferred"] == []
    assert quorum_modes() is not None
    s = lab.load_stats()
    assert time.time() - s["last_produce_ok_at"] < 15
    assert all(time.time() - g["last_commit_ok_at"] < 15 for g in s["groups"].values())


def test_reset_heals_many_faults_at_once(healthy_lab):
    lab = healthy_lab
    follower = next(z for z, m in quorum_modes().items() if m == "follower")
    lab.hang(1)
    lab.deadlock(2)
    lab.pause(3)
    os.kill(lab.zk_pid(follower), signal.SIGSTOP)  # left stopped
    wait_until(lambda: proc_state(lab.zk_pid(follower)) == "T", 10, "the follower to stop")
    os.kill(int((lab.state / "run" / "load.pid").read_text()), signal.SIGKILL)
    done = lab.reset()
    assert any("released" in d and "broker 1" in d for d in done)
    assert any("killed broker 2" in d for d in done) and "started broker 2" in done
    assert "resumed broker 3" in done and f"resumed zk{follower}" in done and "started the load" in done
    assert_baseline(lab)
    assert "lab-fault-deadlock-a" not in thread_blocks(jstack(lab, 2))


def test_reset_with_nothing_broken_does_nothing(healthy_lab):
    t0 = time.monotonic()
    assert healthy_lab.reset() == []
    print(f"reset with nothing broken: {time.monotonic() - t0:.2f}s")
    assert_baseline(healthy_lab)


def test_cli_status_and_faults(healthy_lab):
    lab = healthy_lab
    p = cli(lab, "status")
    assert p.returncode == 0, p.stderr
    st = json.loads(p.stdout)
    assert sorted(st["zookeeper"]) == [str(z) for z in ZK_IDS] and st["profile"] == "default"
    p = cli(lab, "hang", "2")
    assert p.returncode == 0 and json.loads(p.stdout)["active"] == ["requests-held"], p.stderr
    p = cli(lab, "unhang", "2")
    assert p.returncode == 0 and json.loads(p.stdout)["active"] == [], p.stderr
    p = cli(lab, "pause", "7")
    assert p.returncode == 1 and "broker 7 is not running" in p.stderr
    p = cli(lab, "bad-request", "1", "--api-key", "57")
    assert p.returncode == 0 and json.loads(p.stdout)["api_key"] == 57, p.stderr
    pid = lab.broker_pid(3)
    p = cli(lab, "pause", "3")
    assert p.returncode == 0 and proc_state(pid) == "T"
    p = cli(lab, "reset")
    assert p.returncode == 0 and "resumed broker 3" in json.loads(p.stdout)["reset"], p.stderr
    assert alive(pid) and proc_state(pid) != "T"
