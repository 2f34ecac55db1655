"""The execute task's process for ``test_termination_lab``: the real engine restarting one broker of the lab, killed
as Airflow kills it.

Run as ``python sigterm_roll.py WORK BROKER [hold-in-sync]`` with the lab's Airflow environment (its connections and
Variable). ``hold-in-sync``: the step's in-sync gate, once reached (the broker stopped, started and registered again),
writes WORK/in_gate and waits to be killed -- the worker killed inside its gates, never a step that ended first. It
plans the restart of BROKER on the lab as it is (``plan_restart``, its own record), installs the SIGTERM handler Airflow
3's task runner installs (``airflow/sdk/execution_time/task_runner.py``, ``_run_task_and_map_outcome._on_term``: in the
task's own process it calls the operator's ``on_kill()`` and returns) around the real ``ExecutePlanOperator``, writes
the record's id to WORK/record and runs the engine (``executor.run``). WORK/result says how it ended, if it ended
before the SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path


def _hold_in_sync(work: Path) -> None:
    import time

    from kafka_runbooks.remediate import gates

    def held(*_a, **_k):
        (work / "in_gate").write_text("1")
        while True:  # until the test kills this process
            time.sleep(1)

    gates.in_sync_gate = held


def main(work: Path, broker: int, hold: bool = False) -> None:
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.operators.remediate import ExecutePlanOperator
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.plan import plan_restart

    if hold:
        _hold_in_sync(work)
    config = load_cluster("lab")
    record = IncidentStore(config).open(cluster="lab", broker_ids=[broker], reason="SIGTERM mid-step",
                                        trigger={"kind": "rolling_restart"}, opened_by="test")
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        plan = plan_restart(read_snapshot(zk, "lab"), [broker], config, roll_id=record["id"])
    if plan.refused:
        raise SystemExit(f"the plan was refused: {plan.refusals}")
    ex = E.Execution(config=config, plan=plan, record_id=record["id"], dag_id="test", run_id="sigterm-1",
                     task_id="execute", try_number=1, approver="oncall-carol", starter="someone", canary=False)
    operator = ExecutePlanOperator(task_id="execute", plan_output={})
    parent_pid = os.getpid()

    def _on_term(signum, frame):  # Airflow's task runner's handler, as it is
        if os.getpid() != parent_pid:
            return
        operator.on_kill()

    signal.signal(signal.SIGTERM, _on_term)
    (work / "record").write_text(record["id"])
    try:
        E.run(ex)
        outcome = "done"
    except Exception as exc:  # noqa: BLE001 - how it ended is the result
        outcome = f"{type(exc).__name__}: {str(exc)[:2000]}"
    (work / "result").write_text(json.dumps({"outcome": outcome}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), hold=sys.argv[3:] == ["hold-in-sync"])
