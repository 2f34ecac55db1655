"""What every operator shares to call a service (``runbook/``): the ``Task`` of this task instance, and the service's
``Stop`` / ``Skip`` as Airflow's exceptions. The note and the values a service pushed reach Airflow even when it stops."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_runbooks.operators.refusal import refuse
from kafka_runbooks.runbook.errors import Refusal, Skip, Stop
from kafka_runbooks.runbook.task import Task


def task_of(context, log) -> Task:
    from kafka_runbooks.operators.summary import dag_paused  # keeps DAG parsing fast: requests loads when a task runs

    ti = context["ti"]
    dag_run = context.get("dag_run")
    run_type = getattr(dag_run, "run_type", None)
    return Task(dag_id=getattr(ti, "dag_id", None) or getattr(context.get("dag"), "dag_id", ""),
                run_id=getattr(ti, "run_id", None) or context.get("run_id", ""), task_id=getattr(ti, "task_id", ""),
                try_number=int(getattr(ti, "try_number", 1) or 1),
                starter=getattr(dag_run, "triggering_user_name", None) or None,
                run_type=str(getattr(run_type, "value", run_type)) if run_type is not None else None,
                log=log, paused=lambda dag_id: dag_paused(log, dag_id), run_state=lambda d, r: run_state(ti, d, r),
                asset_payloads=asset_payloads(context))


def asset_payloads(context) -> list[dict[str, Any]]:
    """The payloads of the asset events that started this run (Airflow keeps an AssetWatcher's TriggerEvent payload in
    the event's ``extra["payload"]``); empty for a run no asset event started."""
    try:
        events = [e for evs in (context.get("triggering_asset_events") or {}).values() for e in evs]
    except Exception:  # noqa: BLE001 - no asset events in this context (a test's, an older Airflow's)
        return []
    out = []
    for e in events:
        extra = e.get("extra") if isinstance(e, dict) else getattr(e, "extra", None)
        payload = extra.get("payload") if isinstance(extra, dict) else None
        if isinstance(payload, dict):
            out.append(payload)
    return out


def run_state(ti, dag_id: str, run_id: str) -> str | None:
    """Airflow's state of a DAG run; None when it does not exist (deleted) or the API is unavailable."""
    try:
        state = ti.get_dagrun_state(dag_id, run_id)
    except Exception:  # noqa: BLE001 - the run does not exist (deleted) or the API is unavailable
        return None
    return str(getattr(state, "value", state)) if state is not None else None


@contextmanager
def service(context, log) -> Iterator[Task]:
    """``with service(context, self.log) as task: return runbook.x(..., task)``."""
    task = task_of(context, log)
    try:
        yield task
    except Refusal as exc:  # one sentence, no traceback, never retried
        refuse(context["task"], str(exc))
    except Stop as exc:
        raise AirflowFailException(str(exc)) from exc
    except Skip as exc:
        raise AirflowSkipException(str(exc)) from exc
    finally:
        said(context, log, task)


def said(context, log, task: Task) -> None:
    """Hands what the service said besides its log to Airflow: its pushed values, its run's note."""
    from kafka_runbooks.operators.summary import set_run_note  # keeps DAG parsing fast: requests loads when a task runs

    for key, value in task.pushed.items():
        context["ti"].xcom_push(key=key, value=value)
    if task.notes:
        set_run_note(context, log, task.notes[-1])


def as_dict(value: Any) -> dict[str, Any] | None:
    """A templated XCom value, when it is one (an upstream task that did not run renders None or "None")."""
    return value if isinstance(value, dict) else None
