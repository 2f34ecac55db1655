"""Is each cluster watched? What the incidents page says per cluster so that "0 open" cannot pass for healthy when
nothing looks (issue 32 point 3): the last health check and its result, whether the cluster's health-check DAG is
paused (the product's DAGs arrive paused), whether the triggerer -- where the ZooKeeper watch runs -- is alive, and
"no check for N minutes" as a warning.

:func:`airflow_facts` reads Airflow's metadata database (the api-server's own session: it runs inside the api-server);
:func:`watch_status` is pure.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock

HEALTH_DAG_PREFIX = "kafka_health_check_"  # runbook/detect.py's, without importing the services here
DEFAULT_STALE_S = 15 * 60.0
_EVERY_N_MINUTES = re.compile(r"^\*/(\d+) \* \* \* \*$")


def health_dag_id(cluster: str) -> str:
    return f"{HEALTH_DAG_PREFIX}{cluster}"


def stale_after_s(cron: str | None) -> float:
    """How long without a check counts as "not watched": three cycles of an ``*/N * * * *`` cron (at least 10
    minutes), else 15 minutes."""
    m = _EVERY_N_MINUTES.match(str(cron or "").strip())
    return max(600.0, 3 * 60.0 * int(m[1])) if m and int(m[1]) > 0 else DEFAULT_STALE_S


def airflow_facts(dag_ids: Iterable[str]) -> dict[str, Any]:
    """From Airflow's metadata database: per DAG id {"exists", "paused", "last_run": {state, run_id, at}}, and the
    triggerer's {"alive", "heartbeat"} (None when no triggerer ever ran). Raises what the database raises."""
    from sqlalchemy import select

    from airflow.jobs.job import Job
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    dag_ids = list(dag_ids)
    out: dict[str, Any] = {"dags": {d: {"exists": False, "paused": None, "last_run": None} for d in dag_ids}, "triggerer": None}
    with create_session() as session:
        for dm in session.scalars(select(DagModel).where(DagModel.dag_id.in_(dag_ids))):
            out["dags"][dm.dag_id].update(exists=not getattr(dm, "is_stale", False), paused=bool(dm.is_paused))
        for dag_id in dag_ids:
            run = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)
                                  .order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(1)).first()
            if run is not None:
                at = run.end_date or run.start_date or run.run_after
                out["dags"][dag_id]["last_run"] = {"state": str(getattr(run.state, "value", run.state)), "run_id": run.run_id,
                                                   "at": at.isoformat() if at else None}
        job = session.scalars(select(Job).where(Job.job_type == "TriggererJob")
                              .order_by(Job.latest_heartbeat.desc()).limit(1)).first()
        if job is not None:
            out["triggerer"] = {"alive": bool(job.is_alive()),
                                "heartbeat": job.latest_heartbeat.isoformat() if job.latest_heartbeat else None}
    return out


def _minutes(seconds: float) -> str:
    m = int(seconds // 60)
    return f"{m} minute{'s' if m != 1 else ''}" if m < 120 else f"{m // 60} hours"


def watch_status(cluster: str, fleet: Mapping[str, Any] | None, facts: Mapping[str, Any] | None, *, now: str,
                 stale_s: float = DEFAULT_STALE_S, watch_zookeeper: bool = True, facts_error: str | None = None) -> dict[str, Any]:
    """What the page says about whether ``cluster`` is watched. ``fleet``: its entry of the fleet overview (last_check);
    ``facts``: :func:`airflow_facts`. Returns {"lines": [...], "warnings": [...]} -- a warning for every reason the
    quiet page may not mean healthy."""
    fleet = fleet or {}
    dag_id = health_dag_id(cluster)
    lines: list[str] = []
    warnings: list[str] = []
    last = fleet.get("last_check")
    age = (clock.parse(now) - clock.parse(last)).total_seconds() if last else None
    dag = ((facts or {}).get("dags") or {}).get(dag_id) or {}
    run = dag.get("last_run") or {}
    result = f"; its last run {run.get('state')}" if run.get("state") else ""
    if last:
        lines.append(f"last health check {last} ({_minutes(age)} ago){result}")
    else:
        lines.append(f"no health check has ever recorded a result for this cluster{result}")
    if age is None or age > stale_s:
        warnings.append(f"no check for {_minutes(age)}" if age is not None else "never checked")
    if run.get("state") == "failed":
        warnings.append(f"the last health check run failed ({run.get('run_id')})")
    if facts_error:
        warnings.append(f"Airflow's state could not be read: {facts_error}")
    elif facts is not None:
        if not dag.get("exists"):
            warnings.append(f"the health-check DAG {dag_id} does not exist (is the cluster in the Variable kafka_runbooks_clusters "
                            "and the DAG file parsed?)")
        elif dag.get("paused"):
            warnings.append(f"the health-check DAG {dag_id} is PAUSED: nothing checks this cluster (unpause it)")
        else:
            lines.append(f"health-check DAG {dag_id}: active")
        trig = (facts or {}).get("triggerer")
        if watch_zookeeper:
            if not trig:
                warnings.append("no triggerer has ever run: the ZooKeeper watch does not run (changes are seen only by the schedule)")
            elif not trig.get("alive"):
                warnings.append(f"the triggerer is not alive (last heartbeat {trig.get('heartbeat')}): the ZooKeeper watch does not run")
            else:
                lines.append(f"ZooKeeper watch: triggerer alive (heartbeat {trig.get('heartbeat')})")
    return {"dag_id": dag_id, "lines": lines, "warnings": warnings, "last_check": last,
            "last_check_age_s": round(age, 1) if age is not None else None}
