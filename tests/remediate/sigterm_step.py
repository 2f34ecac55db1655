"""The execute task's process for ``test_engine_termination``: a restart step of broker 2, killed as Airflow kills it.

Run as ``python sigterm_step.py WORK RECORD_ID``. It installs the SIGTERM handler Airflow 3's task runner installs
(``airflow/sdk/execution_time/task_runner.py``, ``_run_task_and_map_outcome._on_term``: in the task's own process it
calls the operator's ``on_kill()`` and returns) around the real ``ExecutePlanOperator``, then runs the real restart step
(``steps.restart_broker``) with the engine's real records (``engine.Records``: the state database -- SQLite under WORK
-- with the worker's journal), its real stop gate (the intent) and its real guard (``engine.Guard`` over a lock that
holds). The broker is a simulation of one broker's host and ZooKeeper registration, driven through files under WORK:
``commands`` (every command sent, one a line), the stop command held until ``release`` exists (as the chaos driver's
``StopHold`` holds the real one), a controlled shutdown of ``SHUTDOWN_S`` after it, a start that registers with a new
session ``REGISTER_S`` after the start command. ``result`` says how the step ended, if it ended before the SIGKILL.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

SHUTDOWN_S = 2.5  # the broker's controlled shutdown: its process exits and its registration goes this long after the stop
REGISTER_S = 0.5


class Host:
    broker_id = 2

    def __init__(self, work: Path) -> None:
        self.work = work
        self.stopped_at: float | None = None
        self.started_at: float | None = None
        self.config = SimpleNamespace(server_log=lambda b: "/var/log/kafka/server.log", kill_command=())

    def _phase(self) -> str:
        now = time.monotonic()
        if self.started_at is not None:
            return "started" if now - self.started_at >= REGISTER_S else "starting"
        if self.stopped_at is not None:
            return "stopping" if now - self.stopped_at < SHUTDOWN_S else "down"
        return "up"

    def processes(self):
        from kafka_runbooks.remediate.host import ProcessInfo

        phase = self._phase()
        if phase in ("up", "stopping"):
            return [ProcessInfo(4242, "Sl", "Sun Nov 29 10:00:00 2026")]
        return [ProcessInfo(5151, "Sl", "Sun Nov 29 10:05:00 2026")] if phase in ("starting", "started") else []

    def exists(self, path, watch=None):  # /brokers/ids/2
        reg = {"up": (0x77, 5), "stopping": (0x77, 5), "started": (0x78, 9)}.get(self._phase())
        return None if reg is None else SimpleNamespace(ephemeralOwner=reg[0], czxid=reg[1])

    def run(self, which, timeout):
        from kafka_runbooks.hooks.ssh import CommandResult

        with open(self.work / "commands", "a") as f:
            f.write(which + "\n")
        if which == "stop_command":
            deadline = time.monotonic() + 120
            while not (self.work / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.02)
            self.stopped_at = time.monotonic()
        elif which == "start_command":
            self.started_at = time.monotonic()
        return CommandResult((which,), "", b"", b"", 0, None, 0.01)

    def size(self, path):
        return 0

    def tail(self, path, n):
        return ""

    def read_from(self, path, mark):
        return b""

    def last_log_lines(self):
        return {}


def main(work: Path, record_id: str) -> None:
    from kafka_runbooks.config import ClusterConfig, GateSettings
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.model import Plan, Step
    from kafka_runbooks.operators.remediate import ExecutePlanOperator
    from kafka_runbooks.remediate import engine as G
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate.ledger import Ledger
    from kafka_runbooks.remediate.steps import restart_broker
    from kafka_runbooks.state import db as D

    D.SQLITE_BUSY_TIMEOUT_S = 0.3  # a database that fails fast (as a stopped PostgreSQL refuses connections)
    operator = ExecutePlanOperator(task_id="execute", plan_output={})
    parent_pid = os.getpid()

    def _on_term(signum, frame):  # Airflow's task runner's handler, as it is
        if os.getpid() != parent_pid:
            return
        operator.on_kill()

    signal.signal(signal.SIGTERM, _on_term)
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"},
                        incident_base=str(work / "state"))
    plan = Plan(cluster="c1", steps=(Step("restart_broker", 2, "r"),), roll_id=record_id)
    ex = E.Execution(config=cfg, plan=plan, record_id=record_id, dag_id="d", run_id="run-1", task_id="execute",
                     try_number=1, approver="alice", starter="bob", canary=False)
    records = G.Records(ex, Ledger(cfg, record_id), IncidentStore(cfg))
    host = Host(work)
    registration = {"registration": {"zxid": 5, "session_id": "0x77"}}
    before_stop = E.stop_gate(records, 2, lambda: ([], registration), fresh_s=5.0)
    lock = SimpleNamespace(check=lambda: None)  # a maintenance lock that holds
    guard = (G.Guard(lock) if hasattr(G, "Guard") else lock).check  # (the code before the fix had no Guard: the lock's)
    (work / "ready").write_text("ready")
    try:
        restart_broker(host, host, GateSettings(), E._step_audit(records, 2, "ssh_b2"), logging.getLogger("step"),
                       before_stop=before_stop, guard=guard)
        outcome = "returned"
    except Exception as exc:  # noqa: BLE001 - how it ended is the result (TaskTerminated: the SIGTERM, raised at the end)
        outcome = f"{type(exc).__name__}: {exc}"
    (work / "result").write_text(json.dumps({"outcome": outcome}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
