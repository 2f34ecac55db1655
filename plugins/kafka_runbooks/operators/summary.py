"""How what a service says to a person reaches Airflow (the texts: ``runbook/summary.py``): the DAG run's note, and
what a refused plan task left for its close task.

The run's note: the Task SDK offers no call to set it (task-sdk 1.3: the Execution API reads a run's note, never
writes it), so it is set through the api-server's REST API (``PATCH .../dagRuns/{run}``, ``update_mask=note``) as the
service user of the Airflow connection ``kafka_runbooks_api`` (conn_type http: host = the api-server's URL, login,
password). Without that connection the note is not set and the log says so; the summary is in the log either way.
"""

from __future__ import annotations

from typing import Any, Mapping

from kafka_runbooks.runbook.summary import REFUSED_KEY  # noqa: F401 - XCom of a refused plan task, read by its close

API_CONN_ID = "kafka_runbooks_api"
NOTE_MAX = 1000  # Airflow's dag_run_note.content (String(1000)); the api-server answers 422 to a longer note
NOTE_CUT = "\n… (cut; the whole summary is in the task's log)"


def fit_note(text: str, limit: int = NOTE_MAX) -> str:
    """``text`` as a run's note of at most ``limit`` characters: unchanged when it fits; else cut at the last line
    break (or, in a line longer than a third of the budget, the last space) that leaves room for ``NOTE_CUT``, which
    says it was cut. The suffix is inside the budget: the result is never longer than ``limit``."""
    if len(text) <= limit:
        return text
    room = limit - len(NOTE_CUT)
    head = text[:room]
    cut = head.rfind("\n")
    if cut < room * 2 // 3:  # no line break near the end: the last word boundary, else the hard limit
        space = head.rfind(" ")
        cut = max(cut, space if space >= room * 2 // 3 else room)
    return head[:cut].rstrip() + NOTE_CUT


def set_run_note(context, log, text: str) -> bool:
    """Sets the DAG run's note to ``text`` (cut to Airflow's limit); False, said in the log, when it cannot."""
    import urllib.parse

    import requests
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(API_CONN_ID)
    except AirflowNotFoundException:
        log.info("the run's note is not set: no Airflow connection %r (the summary is above)", API_CONN_ID)
        return False
    base = (conn.host or "").rstrip("/")
    if not base.startswith(("http://", "https://")):
        base = f"{conn.schema or 'http'}://{base}" + (f":{conn.port}" if conn.port else "")
    ti = context["ti"]
    note = fit_note(text)
    q = lambda v: urllib.parse.quote(str(v), safe="")  # noqa: E731
    try:
        token = requests.post(f"{base}/auth/token", json={"username": conn.login, "password": conn.password}, timeout=15)
        token.raise_for_status()
        r = requests.patch(f"{base}/api/v2/dags/{q(ti.dag_id)}/dagRuns/{q(ti.run_id)}", params={"update_mask": "note"},
                           json={"note": note}, headers={"Authorization": f"Bearer {token.json()['access_token']}"}, timeout=15)
        r.raise_for_status()
    except Exception as exc:  # noqa: BLE001 - a note never fails a run; said once, without the password
        log.warning("the run's note could not be set through %s as %s: %s", base, conn.login, type(exc).__name__ + ": " + str(exc)[:300])
        return False
    log.info("the run's note is set (%d characters)", len(note))
    return True


def dag_paused(log, dag_id: str) -> bool | None:
    """Whether ``dag_id`` is paused, asked of the api-server's REST API as the service user of ``API_CONN_ID``; None
    when it cannot be told (said in the log)."""
    import urllib.parse

    import requests
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(API_CONN_ID)
    except AirflowNotFoundException:
        return None
    base = (conn.host or "").rstrip("/")
    if not base.startswith(("http://", "https://")):
        base = f"{conn.schema or 'http'}://{base}" + (f":{conn.port}" if conn.port else "")
    try:
        token = requests.post(f"{base}/auth/token", json={"username": conn.login, "password": conn.password}, timeout=15)
        token.raise_for_status()
        r = requests.get(f"{base}/api/v2/dags/{urllib.parse.quote(dag_id, safe='')}",
                         headers={"Authorization": f"Bearer {token.json()['access_token']}"}, timeout=15)
        r.raise_for_status()
        return bool(r.json().get("is_paused"))
    except Exception as exc:  # noqa: BLE001 - the summary says "unknown"
        log.info("whether %s is paused could not be read: %s", dag_id, type(exc).__name__ + ": " + str(exc)[:200])
        return None


def refused_plan(context, plan_task: str = "plan") -> Mapping[str, Any] | None:
    value = context["ti"].xcom_pull(task_ids=plan_task, key=REFUSED_KEY)
    return value if isinstance(value, dict) else None


