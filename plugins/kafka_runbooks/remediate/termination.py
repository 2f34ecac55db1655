"""The execute task being terminated by Airflow (docs/CHAOS.md: a ~20 s outage of Airflow's database).

What the task process sees (Airflow 3.1's task SDK, read in ``airflow/sdk/execution_time``): the task supervisor,
after ``[workers] max_failed_heartbeats`` failed heartbeats in a row (``supervisor._handle_heartbeat_failures``) -- or
when the api-server says the task should no longer run -- calls ``kill(SIGTERM, force=True)``: SIGTERM to the task
process, then SIGKILL ``escalation_delay`` (5 s) later if it has not exited. In the task process, the task runner's
SIGTERM handler (``task_runner._run_task_and_map_outcome._on_term``) calls the operator's ``on_kill()`` in the main
thread, between two bytecodes of whatever runs there, and returns: no exception is raised, the task goes on until it
ends or the SIGKILL lands. (A SIGTERM to the Celery worker itself is forwarded to the task the same way.)

So ``on_kill`` of every cluster-changing operator only notes it here (:data:`TERMINATION`, plain assignments: safe in
a signal handler) and the engine reads it where it decides: nothing new is stopped or elected (the intent is not
recorded, the guard raises before the action); a broker already stopped is started within those 5 s where its old
process and registration are gone by then (``steps._AfterStop``); the waits poll fast; the records go to the worker's
journal at once instead of waiting on a database that is likely down (``ledger.Recorder``).
"""

from __future__ import annotations

import time

HURRY_POLL_S = 0.2  # how often a wait re-checks once the task is being terminated (the SIGKILL is ~5 s away)
GRACE_S = 5.0  # Airflow's escalation_delay from SIGTERM to SIGKILL (supervisor.kill's default)


class TaskTerminated(RuntimeError):
    """The execute task is being terminated (SIGTERM from Airflow's task supervisor; SIGKILL follows)."""

    code = "task_terminated"


class Termination:
    """Whether (and why, since when) this process was told it is being terminated."""

    def __init__(self) -> None:
        self.why: str | None = None
        self.at: float | None = None  # time.monotonic() when noticed

    def notice(self, why: str) -> None:
        """Called from the SIGTERM handler (``on_kill``): assignments only, no lock, no I/O."""
        if self.why is None:
            self.at = time.monotonic()
            self.why = why

    def noticed(self) -> bool:
        return self.why is not None

    def check(self) -> None:
        """Raises :class:`TaskTerminated` once the termination was noticed."""
        if self.why is not None:
            raise TaskTerminated(f"{self.why}; the SIGKILL follows about {GRACE_S:g} s after it")

    def clear(self) -> None:
        self.why, self.at = None, None


TERMINATION = Termination()


def on_kill(operator: str) -> None:
    """What a cluster-changing operator's ``on_kill`` does (Airflow calls it on SIGTERM, in the task's main thread)."""
    TERMINATION.notice(f"task {operator} is being terminated by Airflow (SIGTERM: its supervisor failed "
                       "[workers] max_failed_heartbeats heartbeats in a row, or the task was stopped)")
