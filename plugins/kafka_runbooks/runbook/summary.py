"""What a remediation says to a person (texts: ``remediate/progress.py``): the plan once, a refusal's one-line summary
first; the summary of a finished run in the log, on the record and as the run's note (``Task.note``; the operator sets
it through the api-server, ``operators/summary.py``)."""

from __future__ import annotations

from typing import Any, Mapping

from kafka_runbooks import metrics
from kafka_runbooks.runbook.task import Task
from kafka_runbooks.urls import _base, incident_url

REFUSED_KEY = "refused"  # pushed by the plan task when its plan is refused: the close task says what was refused


def page(config, record_id: str | None) -> str | None:
    return incident_url(config.name, record_id) if record_id else None


def election_hint(task: Task, left) -> str | None:
    """The leftover-imbalance line's pointer to the election DAG: linked, and whether it is paused."""
    from kafka_runbooks.remediate import progress  # keeps DAG parsing fast: loaded when a task runs

    if not left:
        return None
    return progress.election_hint(task.paused(progress.ELECTION_DAG), f"{_base()}/dags/{progress.ELECTION_DAG}")


def show_plan(task: Task, config, plan, digest: str, dry_run: bool, rendered: str) -> dict[str, Any]:
    """Logs the plan once (a refused plan: its one-line summary first); a dry run's and a refused plan's readable
    plan become the run's note; a refused plan is pushed for the close task (``REFUSED_KEY``)."""
    from kafka_runbooks.remediate import progress  # keeps DAG parsing fast: loaded when a task runs

    log = task.log
    one_line = progress.refusal_summary(plan) if plan.refused else None
    if one_line:
        log.warning("%s", ("DRY RUN: " + progress.dry_run_refusal(plan)) if dry_run else one_line)
    log.info("plan (%s):\n%s", ("dry run, would be refused" if plan.refused else "dry run") if dry_run
             else ("refused" if plan.refused else "to be approved"), rendered)
    if dry_run or plan.refused:
        task.note(progress.plan_note(plan, digest, dry_run=dry_run, incident_url=page(config, plan.roll_id)))
    if plan.refused and not dry_run:
        metrics.plan_refused(plan.refusals)
    if plan.refused:  # a dry run's too: its plan task fails like a refused one, and the close task says why
        task.push(REFUSED_KEY, {"summary": one_line, "record_id": plan.roll_id, "cluster": plan.cluster, "kind": plan.kind,
                                "refusals": len(plan.refusals), "dry_run": bool(dry_run)})
    return {"summary": one_line}


def close_refused(task: Task, refused: Mapping[str, Any]) -> dict[str, Any]:
    """The close of a run whose plan was refused (what the plan task pushed under ``REFUSED_KEY``)."""
    if refused.get("dry_run"):
        text = f"dry run: would be refused; nothing was asked and nothing changed. would be {refused.get('summary')}"
        task.log.warning("%s", text)
        return {"status": "dry run, would be refused", "record_id": refused.get("record_id"), "summary": text}
    text = f"refused; nothing changed. {refused.get('summary')}"
    task.log.warning("%s", text)
    return {"status": "refused", "record_id": refused.get("record_id"), "summary": text}


def finished(task: Task, config, record_id: str, kind: str, result: Mapping[str, Any]) -> str:
    """The summary of a finished restart: logged, noted on the record, the run's note."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import progress  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: ZooKeeper client at run time

    left = progress.not_preferred(cluster_now(config))
    text = progress.run_summary(kind, config.name, result, outcome="DONE, every gate passed", imbalance=left,
                                incident_url=page(config, record_id), election=election_hint(task, left))
    task.log.info("summary:\n%s", text)
    IncidentStore(config).update(record_id, note="summary: " + text.replace("\n", "; "), leadership_not_preferred=len(left))
    task.note(text)
    return text


def election_finished(task: Task, config, record_id: str, result: Mapping[str, Any], brokers=()) -> str:
    """The summary of a finished preferred-replica election (what was elected, the imbalance left): logged, noted on the
    record, the run's note."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import progress  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: ZooKeeper client at run time

    now = cluster_now(config)
    left = progress.not_preferred_by_broker(now)
    text = progress.election_summary(config.name, result, imbalance=left, brokers=list(brokers or ()),
                                     incident_url=page(config, record_id))
    if now is None:
        text += "\nleft: unknown (ZooKeeper could not be read after the election)"
    task.log.info("summary:\n%s", text)
    IncidentStore(config).update(record_id, note="summary: " + text.replace("\n", "; "),
                                 leadership_not_preferred=sum(len(v) for v in left.values()))
    task.note(text)
    return text


def incident_outcome(task: Task, config, incident_id: str, status: str, text: str,
                     result: Mapping[str, Any] | None = None) -> str:
    """The response run's last word: what happened to the incident (logged and as the run's note)."""
    from kafka_runbooks.remediate import progress  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: ZooKeeper client at run time

    left = progress.not_preferred(cluster_now(config)) if result and result.get("restarted") else []
    summary = progress.run_summary("incident response", config.name, result, outcome=f"incident {incident_id} {status}: {text}",
                                   imbalance=left, incident_url=page(config, incident_id), election=election_hint(task, left))
    task.log.info("summary:\n%s", summary)
    task.note(summary)
    return summary
