"""Incident response: capture → analyze (Spark) → report → plan → approval → restart → verify → close.

The restart is a one-step plan through the remediation engine (``operators/remediate.py``): the
same safety rules on fresh state, approval bound to the plan and this run, maintenance lock, gates
and halt as every other restart.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from kafka_runbooks.operators.analyze import AnalyzeBundleOperator, PublishReportOperator
from kafka_runbooks.notify.webhook import APPROVAL_WAITING, HALTED, OnCallWebhookNotifier
from kafka_runbooks.operators.approval import DECISION_KEY, RemediationApprovalOperator
from kafka_runbooks.operators.capture import CaptureEvidenceOperator
from kafka_runbooks.operators.incident import CloseIncidentOperator, OpenIncidentOperator
from kafka_runbooks.operators.params import cluster_param
from kafka_runbooks.operators.remediate import INCIDENT_RESTART, ClusterRecoveredSensor, ExecutePlanOperator, PlanRemediationOperator

RECOVERY_TIMEOUT = timedelta(seconds=float(os.environ.get("KAFKA_RUNBOOKS_RECOVERY_TIMEOUT_S", 600)))


def xcom(task_id: str, field: str | None = None, key: str = "return_value") -> str:
    path = f"['{field}']" if field else ""
    return "{{ ti.xcom_pull(task_ids='" + task_id + "', key='" + key + "')" + path + " }}"


with DAG(
    dag_id="kafka_incident_response",
    description="Capture evidence, analyze it on Spark, and restart the broker only after on-call approves.",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    render_template_as_native_obj=True,
    tags=["kafka", "capture", "analyze", "remediate"],
    params={
        "cluster": cluster_param(),
        "broker_ids": Param([], type="array", items={"type": "integer", "minimum": 0}, minItems=1,
                            description="Suspect broker ids (they are captured and, if approved, restarted)."),
        "reason": Param("", type="string", maxLength=2000, description="Why this response was started."),
        "incident_id": Param(None, type=["null", "string"], description="Set by the health check; empty opens a new incident."),
    },
) as dag:
    incident = OpenIncidentOperator(
        task_id="open_incident",
        request={
            "cluster": "{{ params.cluster }}",
            "broker_ids": "{{ params.broker_ids }}",
            "reason": "{{ params.reason }}",
            "incident_id": "{{ params.incident_id }}",
        },
    )
    capture = CaptureEvidenceOperator(task_id="capture", incident=incident.output)
    analyze = AnalyzeBundleOperator(
        task_id="analyze",
        bundle_dir=xcom("capture", "bundle_dir"),
        kafka_version=xcom("open_incident", "kafka_version"),
        conn_id="spark_default",
    )
    report = PublishReportOperator(task_id="report", incident=incident.output, bundle_dir=xcom("capture", "bundle_dir"))
    # --- remediation: the one engine (plan / approve / restart); the stages above are detection's
    halted = OnCallWebhookNotifier(event=HALTED, message="incident response on {{ params.cluster }}")
    plan = PlanRemediationOperator(
        task_id="plan", kind=INCIDENT_RESTART, incident=incident.output, report=report.output, on_failure_callback=halted
    )
    approve = RemediationApprovalOperator(
        task_id="approve",
        subject="Restart Kafka broker(s) {{ params.broker_ids }} on {{ params.cluster }}?",
        plan_output=plan.output,
        notifiers=[OnCallWebhookNotifier(event=APPROVAL_WAITING, message="restart of {{ params.broker_ids }} on {{ params.cluster }}")],
        on_failure_callback=halted,
    )
    restart = ExecutePlanOperator(task_id="restart", plan_output=plan.output, on_failure_callback=halted)
    verify = ClusterRecoveredSensor(task_id="verify_recovery", incident=incident.output, timeout=RECOVERY_TIMEOUT.total_seconds())
    close = CloseIncidentOperator(
        task_id="close_incident",
        incident=incident.output,
        # pulled by template, not XComArg: a Reject skips the approval's direct downstream tasks,
        # and this one must still run to record the decision
        approval=xcom("approve", key=DECISION_KEY),
        restart=xcom("restart"),
        verify=xcom("verify_recovery"),
        report=xcom("report"),
    )
    incident >> capture >> analyze >> report >> plan >> approve >> restart >> verify >> close
