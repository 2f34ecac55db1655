"""The plan a change runs is the plan the plan task recorded (issue 29 §2): XCom names it (record and digest), the
state database holds it. Shared by the approval task and the tasks that change a cluster (below both of them)."""

from __future__ import annotations

from typing import Any

from airflow.sdk.exceptions import AirflowFailException


def _config(cluster: str):
    from kafka_runbooks.config import ConfigError, load_cluster  # deferred: keeps DAG parsing free of the settings model

    try:
        return load_cluster(str(cluster))
    except ConfigError as exc:
        raise AirflowFailException(str(exc)) from exc


def plan_reference(plan_output: Any) -> tuple[str, str, str]:
    """(cluster, record id, digest): all XCom is trusted for -- which recorded plan."""
    plan = (plan_output or {}).get("plan") if isinstance(plan_output, dict) else None
    if not isinstance(plan, dict) or not plan.get("roll_id") or not plan_output.get("digest"):
        raise ValueError("the plan task's output names no recorded plan (record and digest)")
    return str(plan.get("cluster")), str(plan["roll_id"]), str(plan_output["digest"])


def load_recorded_plan(plan_output: Any, nothing: str):
    """(plan, config, findings) of the plan the plan task recorded (its ``planned`` ledger entry) under the digest the
    plan output names; AirflowFailException saying ``nothing`` was done otherwise."""
    from kafka_runbooks.remediate.ledger import Ledger, PlanNotRecorded, recorded_plan  # deferred: the task runs it

    try:
        cluster, record_id, digest = plan_reference(plan_output)
    except ValueError as exc:
        raise AirflowFailException(f"{exc}; {nothing}") from exc
    config = _config(cluster)
    try:
        plan, findings = recorded_plan(Ledger(config, record_id).entries(), digest)
    except PlanNotRecorded as exc:
        raise AirflowFailException(f"{exc}; {nothing}") from exc
    if plan.cluster != config.name:
        raise AirflowFailException(f"the recorded plan is of cluster {plan.cluster!r}, not {config.name!r}; {nothing}")
    return plan, config, findings


