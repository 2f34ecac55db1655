"""Answers a parked human-in-the-loop task the way the Airflow REST endpoint does.

Drills and tests use it in place of a person clicking in the UI. It writes the response on the
task's HITL detail row and submits the resume event — exactly the two things
``PATCH /api/v2/dags/{dag}/dagRuns/{run}/taskInstances/{task}/-1/hitlDetails`` does — so the
operator's own validation and ``execute_complete`` path run unchanged.

It answers only a task that parked after it started (never a stale one from an earlier run). If it
cannot answer (an error, or ``timeout_s`` after the task parked) it fails that task, and any that
parks later, until stopped: ``dag.test()`` waits for input without bound, so a responder that gave up
silently would hang its caller.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Mapping


@dataclass
class Responder:
    dag_id: str
    task_id: str
    option: str  # "Approve" / "Reject"
    user: str = "drill-bot"
    timeout_s: float = 600.0
    answered_run_ids: list[str] = field(default_factory=list)
    answered_at: list[float] = field(default_factory=list)  # time.time() of each answer (committed)
    error: BaseException | None = None
    sweep_timeouts: bool = False  # instead of answering, run the scheduler's timeout sweep

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._parked_at: float | None = None  # when a task of this responder's first parked
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
        self._stale = self._awaiting_ids()
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
        from sqlalchemy.exc import OperationalError

        try:
            while not self._stop.is_set():
                try:
                    answered = self._answer_once()
                except OperationalError:  # SQLite busy under the task's own writes: try again
                    answered = None
                if answered is not None:
                    self.answered_run_ids.append(answered)
                    self.answered_at.append(time.time())
                    self._until_resumed(answered)
                    return
                if self._parked_at is not None and time.monotonic() - self._parked_at >= self.timeout_s:
                    raise TimeoutError(f"{self.task_id} of {self.dag_id} not answered within {self.timeout_s:.0f} s "
                                       "of parking")
                self._stop.wait(0.3)
        except BaseException as exc:  # surfaced to the caller through .error
            self.error = exc
            while not self._stop.is_set():  # also a task that parks later: nobody will answer it
                self._fail_waiting()
                self._stop.wait(0.3)

    def _awaiting(self, session):
        from sqlalchemy import select

        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.utils.state import TaskInstanceState

        return session.scalars(
            select(TI).where(
                TI.dag_id == self.dag_id,
                TI.task_id == self.task_id,
                TI.state == TaskInstanceState.AWAITING_INPUT,
            )
        ).all()

    def _awaiting_ids(self) -> frozenset:
        from airflow.utils.session import create_session

        with create_session() as session:
            return frozenset(ti.id for ti in self._awaiting(session))

    def _fail_waiting(self) -> None:
        """Ends the wait of the caller's dag.test() when this responder cannot answer."""
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        from sqlalchemy.exc import OperationalError

        try:
            with create_session() as session:
                for ti in self._awaiting(session):
                    if ti.id not in self._stale:
                        ti.set_state(TaskInstanceState.FAILED, session=session)
        except OperationalError:  # SQLite busy: the caller's loop tries again
            pass

    def _answer_once(self) -> str | None:
        """-> the run id of the task answered (its session committed), else None."""
        from sqlalchemy import select

        from airflow._shared.timezones import timezone
        from airflow.models.hitl import HITLDetail, HITLUser
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent
        from airflow.utils.session import create_session

        with create_session() as session:
            for ti in self._awaiting(session):
                if ti.id in self._stale:
                    continue
                if self._parked_at is None:
                    self._parked_at = time.monotonic()
                if self.sweep_timeouts:
                    return ti.run_id if self._sweep(ti) else None
                detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
                if detail is not None and not detail.response_received:
                    break
            else:
                return None
            if self.option not in (detail.options or []):
                raise ValueError(f"{self.option!r} is not one of {detail.options}")
            detail.responded_by = HITLUser(id=self.user, name=self.user)
            detail.responded_at = timezone.utcnow()
            detail.chosen_options = [self.option]
            detail.params_input = {}
            session.add(detail)
            handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)
            run_id = ti.run_id
        return run_id  # after the commit: a commit that fails is tried again, not counted

    def _until_resumed(self, run_id: str) -> None:
        """Until the answered task runs again (or has ended). Under load dag.test()'s loop can write its stale copy of
        the task back over the resume: the HITL row answered, the task parked for good. Seen twice: once right away,
        and once (a drill, 2026-11-28) a few seconds after the task had left AWAITING_INPUT for SCHEDULED, so leaving it
        once is not enough. While the answered task is parked, the resume event is submitted again from the recorded
        answer; after ``timeout_s`` this raises (and the caller's task is failed, never left waiting)."""
        from sqlalchemy import select
        from sqlalchemy.exc import OperationalError

        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance as TI
        from airflow.models.trigger import handle_event_submit
        from airflow.triggers.base import TriggerEvent
        from airflow.utils.session import create_session
        from airflow.utils.state import TaskInstanceState

        not_yet = {TaskInstanceState.AWAITING_INPUT, TaskInstanceState.SCHEDULED, TaskInstanceState.QUEUED, None}
        deadline = time.monotonic() + self.timeout_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._stop.wait(1.0)
            try:
                with create_session() as session:
                    mine = [ti for ti in session.scalars(select(TI).where(TI.dag_id == self.dag_id, TI.task_id == self.task_id,
                                                                          TI.run_id == run_id)).all()
                            if ti.id not in self._stale]
                    if mine and all(ti.state not in not_yet for ti in mine):
                        return
                    for ti in mine:
                        if ti.state != TaskInstanceState.AWAITING_INPUT:
                            continue
                        detail = session.scalar(select(HITLDetail).where(HITLDetail.ti_id == ti.id))
                        if detail is not None and detail.response_received:
                            handle_event_submit(TriggerEvent(detail.as_resume_event_payload()), task_instance=ti, session=session)
            except OperationalError:  # SQLite busy: tried again
                continue
        if not self._stop.is_set():
            raise TimeoutError(f"{self.task_id} of {self.dag_id} answered but not resumed within {self.timeout_s:.0f} s")

    def _sweep(self, ti) -> bool:
        """Let the scheduler's own AWAITING_INPUT timeout sweep resolve the task once it is due."""
        from airflow._shared.timezones import timezone
        from airflow.jobs.job import Job
        from airflow.jobs.scheduler_job_runner import SchedulerJobRunner

        if ti.trigger_timeout is None or ti.trigger_timeout > timezone.utcnow():
            return False
        SchedulerJobRunner(job=Job()).check_awaiting_input_timeouts()
        return True


class Answers:
    """Several approval tasks of one DAG answered, each by a :class:`Responder` of its own: the incident response asks
    first whether to move leadership off the broker (``approve_mitigation``: mitigate first), then, after the capture
    and the analysis, whether to restart it (``approve``). ``answers``: {task_id: option}; a task that never parks
    (a mitigation planned for nobody is skipped) is simply not answered."""

    def __init__(self, dag_id: str, answers: Mapping[str, str], user: str = "drill-bot", timeout_s: float = 600.0) -> None:
        self.by_task = {t: Responder(dag_id, t, o, user=user, timeout_s=timeout_s) for t, o in answers.items()}

    @property
    def error(self) -> BaseException | None:
        return next((r.error for r in self.by_task.values() if r.error is not None), None)

    @property
    def answered_run_ids(self) -> list[str]:
        return [run_id for r in self.by_task.values() for run_id in r.answered_run_ids]

    def __getitem__(self, task_id: str) -> Responder:
        return self.by_task[task_id]

    def start(self) -> "Answers":
        for r in self.by_task.values():
            r.start()
        return self

    def stop(self) -> None:
        for r in self.by_task.values():
            r.stop()

    def __enter__(self) -> "Answers":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def incident_answers(restart: str, mitigation: str = "Approve", user: str = "drill-bot", timeout_s: float = 900.0) -> Answers:
    """The incident response's two approvals: the mitigation's (moving leadership off a broker that does not serve,
    asked before the capture) and the restart's."""
    return Answers("kafka_incident_response", {"approve_mitigation": mitigation, "approve": restart}, user=user,
                   timeout_s=timeout_s)
