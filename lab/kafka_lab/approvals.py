"""Answers a parked human-in-the-loop task the way the Airflow REST endpoint does.

Drills and tests use it in place of a person clicking in the UI. It writes the response on the
task's HITL detail row and submits the resume event — exactly the two things
``PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/-1/hitlDetails`` does — so the
operator's own validation and ``execute_complete`` path run unchanged.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class Responder:
    dag_id: str
    task_id: str
    option: str  # "Approve" / "Reject"
    user: str = "drill-bot"
    timeout_s: float = 600.0
    answered_run_ids: list[str] = field(default_factory=list)
    error: BaseException | None = None
    sweep_timeouts: bool = False  # instead of answering, run the scheduler's timeout sweep

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"hitl-responder-{self.task_id}", daemon=True)

    def start(self) -> "Responder":
        # import in the caller's thread: two threads importing Airflow's models at once can deadlock
        # on the import locks (seen with dag.test() starting in the main thread)
        import airflow.jobs.scheduler_job_runner  # noqa: F401
        import airflow.models.hitl  # noqa: F401
        import airflow.models.taskinstance  # noqa: F401
        import airflow.models.trigger  # noqa: F401
        import airflow.triggers.base  # noqa: F401
        import airflow.utils.session  # noqa: F401
        from airflow.models import import_all_models

        import_all_models()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def __enter__(self) -> "Responder":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            deadline = time.monotonic() + self.timeout_s
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._answer_once():
                    return
                self._stop.wait(0.3)
        except BaseException as exc:  # surfaced to the caller through .error
            self.error = exc

    def _answer_once(self) -> bool:
        from sqlalchemy import select

        from airflow._shared.timezones import timezone
        from airflow.models.hitl import HITLDetail, HITLUser
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        with create_session() as session:
            ti = session.scalar(
                select(TI).where(
                    TI.dag_id == self.dag_id,
                    TI.task_id == self.task_id,
                    TI.state == TaskInstanceState.AWAITING_INPUT,
                )
            )
            if ti is None:
                return False
            if self.sweep_timeouts:
                return self._sweep(ti)
            detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
            if detail is None or detail.response_received:
                return False
            if self.option not in (detail.options or []):
                raise ValueError(f"{self.option!r} is not one of {detail.options}")
            detail.responded_by = HITLUser(id=self.user, name=self.user)
            detail.responded_at = timezone.utcnow()
            detail.chosen_options = [self.option]
            detail.params_input = {}
            session.add(detail)
            handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)
            self.answered_run_ids.append(ti.run_id)
            return True

    def _sweep(self, ti) -> bool:
        """Let the scheduler's own AWAITING_INPUT timeout sweep resolve the task once it is due."""
        from airflow._shared.timezones import timezone
        from airflow.jobs.job import Job
        from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

        if ti.trigger_timeout is None or ti.trigger_timeout > timezone.utcnow():
            return False
        SchedulerJobRunner(job=Job()).check_awaiting_input_timeouts()
        self.answered_run_ids.append(ti.run_id)
        return True
