"""Deferred preferred-replica election (issue 7, incident 003): plan -> approval -> wait -> batches -> close.

Instead of letting the controller move leadership back to a returning broker the moment it rejoins an ISR
(``auto.leader.rebalance.enable=true``, incident 003), this restores preferred leadership later: after one approval
it waits in the triggerer (no worker held) until every target broker is in every ISR it belongs in, its ZooKeeper
session has been stable for ``election.stable_s``, the quiet window is open and nobody holds the maintenance lock;
it gives up at ``election.deadline_s`` saying why. Then, under the lock, batch by batch through
``/admin/preferred_replica_election`` (the controller deletes the znode when done), each batch checked: preferred
leaders in ZooKeeper, every broker's own metadata agreeing, the canary. Anything else halts and pages on-call;
``resume`` continues a halted election (converged batches are not elected again; the rest is re-planned and approved
again). ``kafka_preferred_election_schedule`` starts this DAG for clusters with ``election.schedule``.
Runbook: runbooks/preferred-election.md.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from kafka_runbooks.notify.webhook import APPROVAL_WAITING, HALTED, OnCallWebhookNotifier
from kafka_runbooks.operators.approval import DECISION_KEY, RemediationApprovalOperator
from kafka_runbooks.operators.election import (CloseElectionOperator, ExecuteElectionOperator, PlanElectionOperator,
                                               WaitForElectionWindowOperator)
from kafka_runbooks.operators.params import maintenance_params

halted = OnCallWebhookNotifier(event=HALTED, message="preferred election of {{ params.cluster }}")

def build() -> DAG:
    """The ``kafka_preferred_election`` DAG (one per Airflow deployment, for every cluster: the cluster is a run parameter)."""
    with DAG(
        dag_id="kafka_preferred_election",
        doc_md=__doc__,
        description="Move leadership back to preferred replicas when the brokers are ready and traffic is quiet, in checked batches.",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        render_template_as_native_obj=True,
        tags=["kafka", "remediate", "maintenance"],
        params={
            **maintenance_params(
                brokers="Move leadership back to these brokers only; empty = every partition not led by its preferred replica.",
                execute="asks for approval, waits, then elects"),
            "resume": Param(False, type="boolean", description="Continue the cluster's last halted election: its converged batches "
                            "are not elected again, the rest is planned on fresh state and approved again."),
        },
    ) as dag:
        plan = PlanElectionOperator(task_id="plan", broker_ids="{{ params.brokers }}", reason="{{ params.reason }}",
                                    mode="{{ params.mode }}", resume="{{ params.resume }}", on_failure_callback=halted)
        approve = RemediationApprovalOperator(
            task_id="approve",
            subject="Preferred-replica election of {{ params.cluster }}: approve the plan?",
            plan_output=plan.output,
            notifiers=[OnCallWebhookNotifier(event=APPROVAL_WAITING, message="preferred election of {{ params.cluster }} ({{ params.reason }})")],
            on_failure_callback=halted,
        )
        wait = WaitForElectionWindowOperator(task_id="wait", plan_output=plan.output, on_failure_callback=halted)
        elect = ExecuteElectionOperator(task_id="elect", plan_output=plan.output, on_failure_callback=halted)
        close = CloseElectionOperator(
            task_id="close",
            plan_output=plan.output,
            decision="{{ ti.xcom_pull(task_ids='approve', key='" + DECISION_KEY + "') }}",
            wait="{{ ti.xcom_pull(task_ids='wait') }}",
            result="{{ ti.xcom_pull(task_ids='elect') }}",
        )
        plan >> approve >> wait >> elect >> close
    return dag
