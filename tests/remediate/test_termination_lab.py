"""Airflow terminating the execute task right after a real broker's stop (docs/CHAOS.md; ``remediate/termination.py``).

The lab (three Kafka 2.3.0 brokers, ZooKeeper, an sshd per broker host): the real engine restarts one broker in its own
process (``sigterm_roll.py``); once that broker's JVM is gone (the chaos table's ``after_stop`` boundary, seen in the
world), the process gets a real SIGTERM and, 5 s later if it still runs, the SIGKILL -- Airflow's supervisor
(``kill(SIGTERM, force=True)``) -- and right after the SIGTERM the state database fails (another writer holds SQLite's
write lock, as in ``test_engine_trust``; taken after the SIGTERM so that no write of the step is caught inside SQLite's
busy wait, a wait in C during which Python runs no signal handler). The broker is started again (over real SSH, before
the SIGKILL) and registers with a new session; the step's records wait in the worker's journal. On the code before:
SIGTERM changed nothing, the record after the stop waited out SQLite's busy timeout (60 s), the SIGKILL landed before
the start command and the broker stayed down.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from test_engine_trust import Blocker

HERE = Path(__file__).parent
GRACE_S = 5.0  # Airflow: SIGTERM, then SIGKILL after supervisor.kill's escalation_delay

pytestmark = [pytest.mark.lab, pytest.mark.fourth_lane, pytest.mark.timeout(900)]  # lane 4: the lab lane is the longest


def test_a_sigterm_right_after_a_real_stop_starts_the_broker_before_the_sigkill(healthy_lab, tmp_path, monkeypatch):
    from kafka_lab.procs import alive, wait_until
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.state import state_of

    lab = healthy_lab
    for k, v in lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    config = load_cluster("lab")
    blocker = Blocker(state_of(config).url.database)
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    target = next(b for b in (1, 2, 3) if b != lab.controller()["brokerid"])
    pid, registration = lab.broker_pid(target), lab.registration(target)
    log = open(tmp_path / "roll.log", "wb")
    proc = subprocess.Popen([sys.executable, str(HERE / "sigterm_roll.py"), str(tmp_path), str(target)], env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    killed = False
    try:
        wait_until(lambda: proc.poll() is not None or not alive(pid), 600,
                   f"broker {target}'s JVM to be stopped by the step", interval=0.05)
        assert proc.poll() is None, (tmp_path / "roll.log").read_text(errors="replace")[-3000:]
        proc.send_signal(signal.SIGTERM)
        blocker.hold()  # the state database fails, the broker down
        try:
            proc.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # Airflow's SIGKILL
            killed = True
            proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)
        blocker.release()
        log.close()
    text = (tmp_path / "roll.log").read_text(errors="replace")[-4000:]
    try:
        wait_until(lambda: (r := lab.registration(target)) is not None and r[1].ephemeralOwner != registration[1].ephemeralOwner,
                   180, f"broker {target} to register again", interval=0.5)
    except Exception as exc:  # noqa: BLE001 - said with what the step's process wrote
        raise AssertionError(f"broker {target} was left down (killed: {killed}): {exc}\n{text}") from exc
    record_id = (tmp_path / "record").read_text()
    journal = L.Journal.of(config, record_id).pending()
    actions = [(j.get("action"), j.get("outcome")) for j in journal if j.get("kind") == "audit"]
    assert ("guard_failed_after_stop", "noted") in actions and ("start_broker", "ok") in actions, (actions, text)
