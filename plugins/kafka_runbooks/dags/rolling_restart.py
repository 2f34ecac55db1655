"""Rolling restart: plan (always shown) -> approval -> execute through the remediation engine -> close.

Dry run stops after the plan. Execute asks the cluster's approvers (never the person who started
the run), then restarts one broker at a time -- not-serving first, the controller last -- each stop
checked on fresh state, each start followed by the gates; a failure halts and pages on-call, and
``resume`` continues a halted roll without redoing a finished broker.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from kafka_runbooks.notify.webhook import APPROVAL_WAITING, HALTED, OnCallWebhookNotifier
from kafka_runbooks.operators.approval import DECISION_KEY, RemediationApprovalOperator
from kafka_runbooks.operators.params import maintenance_params
from kafka_runbooks.operators.remediate import ROLLING_RESTART, CloseRollOperator, ExecutePlanOperator, PlanRemediationOperator

halted = OnCallWebhookNotifier(event=HALTED, message="rolling restart of {{ params.cluster }}")

def build() -> DAG:
    """The ``kafka_rolling_restart`` DAG (one per Airflow deployment, for every cluster: the cluster is a run parameter)."""
    with DAG(
        dag_id="kafka_rolling_restart",
        doc_md=__doc__,
        description="Restart brokers one at a time, keeping a holder of every offsets partition up, gated after each start.",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        render_template_as_native_obj=True,
        tags=["kafka", "remediate", "maintenance"],
        params={
            **maintenance_params(brokers="Broker ids to restart; empty = every broker of the cluster.",
                                 execute="asks for approval, then restarts"),
            "canary": Param(True, type="boolean", description="Gate every start on a canary produce/consume (the cluster's canary topic)."),
            # a boolean in the form (Airflow renders a switch); the operator also takes a roll's record id (resume_target)
            "resume": Param(False, type="boolean", description="Continue the cluster's last halted roll from its failed step."),
        },
    ) as dag:
        plan = PlanRemediationOperator(
            task_id="plan",
            kind=ROLLING_RESTART,
            broker_ids="{{ params.brokers }}",
            reason="{{ params.reason }}",
            mode="{{ params.mode }}",
            canary="{{ params.canary }}",
            resume="{{ params.resume }}",
            on_failure_callback=halted,
        )
        approve = RemediationApprovalOperator(
            task_id="approve",
            subject="Rolling restart of {{ params.cluster }}: approve the plan?",
            plan_output=plan.output,
            notifiers=[OnCallWebhookNotifier(event=APPROVAL_WAITING, message="rolling restart of {{ params.cluster }} ({{ params.reason }})")],
            on_failure_callback=halted,
        )
        execute = ExecutePlanOperator(task_id="execute", plan_output=plan.output, on_failure_callback=halted)
        close = CloseRollOperator(
            task_id="close",
            plan_output=plan.output,
            decision="{{ ti.xcom_pull(task_ids='approve', key='" + DECISION_KEY + "') }}",
            result="{{ ti.xcom_pull(task_ids='execute') }}",
        )
        plan >> approve >> execute >> close
    return dag
