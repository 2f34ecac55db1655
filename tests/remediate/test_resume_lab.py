"""The chaos table's ``worker_kill`` / ``after_start`` row (``starts 2``) on the lab, without the deployment: the real
engine restarts one broker in its own process (``sigterm_roll.py``); once the broker's new JVM is registered with a
new ZooKeeper session, the process is SIGKILLed (the worker killed mid-step: its ``step_started`` never ends). The
resume -- the engine again, on the same record -- proves from the registration recorded with that intent that the
restart happened (``remediate/resumption.py``): the broker is not stopped again (the same JVM afterwards), its gates
are run, the ledger says why. On the code before: the resume stopped and started the broker a second time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).parent

pytestmark = [pytest.mark.lab, pytest.mark.fourth_lane, pytest.mark.timeout(900)]  # lane 4: the lab lane is the longest


def test_a_resume_after_a_worker_killed_after_the_start_does_not_restart_the_broker_again(healthy_lab, tmp_path,
                                                                                        monkeypatch):
    from kafka_lab.procs import alive, wait_until
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.plan import plan_restart

    lab = healthy_lab
    for k, v in lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    target = next(b for b in (1, 2, 3) if b != lab.controller()["brokerid"])
    pid, czxid = lab.broker_pid(target), lab.registration(target)[1].czxid
    log = open(tmp_path / "roll.log", "wb")
    # held in its in-sync gate once there (ci13: killed a moment late at load ~20, the step had ended and the resume
    # rightly restarted a broker no unfinished step named)
    proc = subprocess.Popen([sys.executable, str(HERE / "sigterm_roll.py"), str(tmp_path), str(target), "hold-in-sync"],
                            env={**os.environ, "PYTHONPATH": str(HERE)}, stdout=log, stderr=subprocess.STDOUT)

    def registered_anew():
        reg = lab.registration(target)
        return proc.poll() is not None or ((tmp_path / "in_gate").exists() and reg is not None and reg[1].czxid != czxid
                                           and not alive(pid))

    try:
        wait_until(registered_anew, 600, f"broker {target} to be restarted by the step", interval=0.05)
        assert proc.poll() is None, (tmp_path / "roll.log").read_text(errors="replace")[-3000:]
        proc.kill()  # the worker killed: the step started, its broker restarted, nothing recorded its end
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)
        log.close()
    new_pid, new_czxid = lab.broker_pid(target), lab.registration(target)[1].czxid
    lab.wait_full_isr(180)

    config = load_cluster("lab")
    record_id = (tmp_path / "record").read_text()
    from kafka_runbooks.remediate.lock import holders

    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        # the killed process's lock znode lives until its session expires: the resume waits only lock_wait_s for it
        wait_until(lambda: holders(zk, "lab") == [], 60, "the killed run's maintenance lock to go", interval=0.5)
        plan = plan_restart(read_snapshot(zk, "lab"), [target], config, roll_id=record_id)
    assert not plan.refused, plan.refusals
    ex = E.Execution(config=config, plan=plan, record_id=record_id, dag_id="test", run_id=f"resume-{uuid.uuid4().hex[:6]}",
                     task_id="execute", try_number=1, approver="oncall-carol", starter="someone", canary=False)
    result = E.run(ex)
    assert result["restarted"] == [target]
    assert lab.broker_pid(target) == new_pid and alive(new_pid), "the resume restarted the broker a second time"
    assert lab.registration(target)[1].czxid == new_czxid
    entries = [e for e in L.Ledger(config, record_id).entries() if e["run_id"] == ex.run_id]
    (decided,) = [e for e in entries if e["event"] == "resumed"]
    assert decided["action"] == "gates_only", decided
    assert decided["sentence"].startswith(f"broker {target} registered again (zxid {new_czxid}, ")
    assert f"(zxid {czxid} before its stop): not restarted again; gates only" in decided["sentence"]
    (done,) = [e for e in entries if e["event"] == L.STEP_DONE]
    assert [s["state"] for s in done["states"]] == ["planned", "checking", "gating", "done"]
