"""The task a service runs for: who and where (dag, run, task, try, the person who started the run), its log, and
what it says besides its log -- the run's note and the small values pushed for the tasks after it. A service writes
them here; the operator hands them to Airflow (``operators/glue.py``) even when the service stops. Plain: a test
builds one with ``Task.plain`` and reads ``notes`` and ``pushed``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from kafka_runbooks.remediate import termination  # no imports of its own: ``terminating`` runs in a signal handler


@dataclass
class Task:
    dag_id: str
    run_id: str
    task_id: str
    try_number: int = 1
    starter: str | None = None  # the person who started the run (``dag_run.triggering_user_name``), None: nobody
    run_type: str | None = None
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("kafka_runbooks.runbook"))
    notes: list[str] = field(default_factory=list)  # the run's note (the last one counts)
    pushed: dict[str, Any] = field(default_factory=dict)  # XCom key -> value, besides the return value
    paused: Callable[[str], bool | None] = lambda dag_id: None  # whether a DAG is paused (None: cannot tell)
    # Airflow's state of a DAG run ("queued", "running", "success"...); None when Airflow does not know it
    run_state: Callable[[str, str], str | None] = lambda dag_id, run_id: None
    # the payloads of the asset events that started this run (a watcher's TriggerEvent: ``extra["payload"]``)
    asset_payloads: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def plain(cls, run_id: str = "run-1", dag_id: str = "dag", task_id: str = "task", **kw: Any) -> "Task":
        return cls(dag_id=dag_id, run_id=run_id, task_id=task_id, **kw)

    @property
    def actor(self) -> str:
        """Who acts when no person does: this DAG run."""
        return f"dag:{self.dag_id}/run:{self.run_id}"

    def note(self, text: str) -> None:
        self.notes.append(text)

    def push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def terminating(task_id: str) -> None:
    """Airflow is terminating the task (SIGTERM: its task runner calls the operator's ``on_kill`` in the main thread
    and returns; SIGKILL follows ~5 s later): noted for the engine, which begins nothing new and starts a broker it
    stopped (``remediate/termination.py``). Assignments only: safe in a signal handler."""
    termination.on_kill(task_id)
