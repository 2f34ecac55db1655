"""What the plan and the last task of a remediation say to a person (texts: ``remediate/progress.py``): the plan
once, a refusal's one-line summary first; the summary of a finished run in the log, on the record, and as the DAG
run's note (the dry run's readable plan too).

The run's note: the Task SDK offers no call to set it (task-sdk 1.3: the Execution API reads a run's note, never
writes it), so it is set through the api-server's REST API (``PATCH .../dagRuns/{run}``, ``update_mask=note``) as the
service user of the Airflow connection ``kafka_runbooks_api`` (conn_type http: host = the api-server's URL, login,
password). Without that connection the note is not set and the log says so; the summary is in the log either way.
"""

from __future__ import annotations

from typing import Any, Mapping

from kafka_runbooks import metrics

API_CONN_ID = "kafka_runbooks_api"
REFUSED_KEY = "refused"  # XCom of the plan task when its plan is refused: the close task says what was refused
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


def election_hint(log, left) -> str | None:
    """The leftover-imbalance line's pointer to the election DAG: linked, and whether it is paused."""
    from kafka_runbooks.operators.links import _base  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate import progress  # deferred: loaded when the task runs, not when a DAG file is parsed

    if not left:
        return None
    return progress.election_hint(dag_paused(log, progress.ELECTION_DAG), f"{_base()}/dags/{progress.ELECTION_DAG}")


def _page(config, record_id: str | None) -> str | None:
    from kafka_runbooks.operators.links import incident_url  # deferred: loaded when the task runs, not when a DAG file is parsed

    return incident_url(config.name, record_id) if record_id else None


def show_plan(context, log, config, plan, digest: str, dry_run: bool, snapshot, settings, rendered: str) -> dict[str, Any]:
    """Logs the plan once (a refused plan: its one-line summary first); a dry run's and a refused plan's readable
    plan become the run's note; a refused plan is pushed for the close task (``REFUSED_KEY``)."""
    from kafka_runbooks.remediate import progress  # deferred: loaded when the task runs, not when a DAG file is parsed

    one_line = progress.refusal_summary(plan) if plan.refused else None
    if one_line:
        log.warning("%s", ("DRY RUN: " + progress.dry_run_refusal(plan)) if dry_run else one_line)
    log.info("plan (%s):\n%s", ("dry run, would be refused" if plan.refused else "dry run") if dry_run
             else ("refused" if plan.refused else "to be approved"), rendered)
    if dry_run or plan.refused:
        set_run_note(context, log, progress.plan_note(plan, digest, dry_run=dry_run, incident_url=_page(config, plan.roll_id)))
    if plan.refused and not dry_run:
        metrics.plan_refused(plan.refusals)
    if plan.refused:  # a dry run's too: its plan task fails like a refused one, and the close task says why
        context["ti"].xcom_push(key=REFUSED_KEY, value={"summary": one_line, "record_id": plan.roll_id, "cluster": plan.cluster,
                                                        "kind": plan.kind, "refusals": len(plan.refusals), "dry_run": bool(dry_run)})
    return {"summary": one_line}


def refused_plan(context, plan_task: str = "plan") -> Mapping[str, Any] | None:
    value = context["ti"].xcom_pull(task_ids=plan_task, key=REFUSED_KEY)
    return value if isinstance(value, dict) else None


def close_refused(context, log, refused: Mapping[str, Any]) -> dict[str, Any]:
    if refused.get("dry_run"):
        text = f"dry run: would be refused; nothing was asked and nothing changed. would be {refused.get('summary')}"
        log.warning("%s", text)
        return {"status": "dry run, would be refused", "record_id": refused.get("record_id"), "summary": text}
    text = f"refused; nothing changed. {refused.get('summary')}"
    log.warning("%s", text)
    return {"status": "refused", "record_id": refused.get("record_id"), "summary": text}


def finished(context, log, config, record_id: str, kind: str, result: Mapping[str, Any]) -> str:
    """The summary of a finished restart: logged, noted on the record, set as the run's note."""
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: ZooKeeper client at run time
    from kafka_runbooks.remediate import progress  # deferred: loaded when the task runs, not when a DAG file is parsed

    left = progress.not_preferred(cluster_now(config))
    text = progress.run_summary(kind, config.name, result, outcome="DONE, every gate passed", imbalance=left,
                                incident_url=_page(config, record_id), election=election_hint(log, left))
    log.info("summary:\n%s", text)
    IncidentStore(config).update(record_id, note="summary: " + text.replace("\n", "; "), leadership_not_preferred=len(left))
    set_run_note(context, log, text)
    return text


def election_finished(context, log, config, record_id: str, result: Mapping[str, Any], brokers=()) -> str:
    """The summary of a finished preferred-replica election (what was elected, the imbalance left): logged, noted on the
    record, set as the run's note."""
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: ZooKeeper client at run time
    from kafka_runbooks.remediate import progress  # deferred: loaded when the task runs, not when a DAG file is parsed

    now = cluster_now(config)
    left = progress.not_preferred_by_broker(now)
    text = progress.election_summary(config.name, result, imbalance=left, brokers=list(brokers or ()),
                                     incident_url=_page(config, record_id))
    if now is None:
        text += "\nleft: unknown (ZooKeeper could not be read after the election)"
    log.info("summary:\n%s", text)
    IncidentStore(config).update(record_id, note="summary: " + text.replace("\n", "; "),
                                 leadership_not_preferred=sum(len(v) for v in left.values()))
    set_run_note(context, log, text)
    return text


def incident_outcome(context, log, config, incident_id: str, status: str, text: str, result: Mapping[str, Any] | None = None) -> str:
    """The response run's last word: what happened to the incident (logged and as the run's note)."""
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: ZooKeeper client at run time
    from kafka_runbooks.remediate import progress  # deferred: loaded when the task runs, not when a DAG file is parsed

    left = progress.not_preferred(cluster_now(config)) if result and result.get("restarted") else []
    summary = progress.run_summary("incident response", config.name, result, outcome=f"incident {incident_id} {status}: {text}",
                                   imbalance=left, incident_url=_page(config, incident_id), election=election_hint(log, left))
    log.info("summary:\n%s", summary)
    set_run_note(context, log, summary)
    return summary
