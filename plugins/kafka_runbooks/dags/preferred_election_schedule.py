"""Scheduled preferred elections (issue 7: "from the incident response, the UI form, or a schedule").

Every 5 minutes (a data interval of 5 minutes) it looks for clusters whose ``election.schedule`` cron (read in
``election.schedule_timezone``, default UTC; unset = never) fires in that interval. Each due cluster is read now:
nothing to move, or the leadership imbalance within Kafka's own rule (``leader.imbalance.per.broker.percentage``),
is skipped with the reason; otherwise a ``kafka_preferred_election`` run is started for it (run id
``scheduled__<cluster>__<time>``, so a re-run starts nothing twice) -- the same plan, approval, deferred wait,
maintenance lock and checked batches as from the form. A schedule never approves. Each decision is audited in the
incident store's ``<cluster>-election-schedule`` record. A missed look (the scheduler down) is not caught up.
Runbook: runbooks/preferred-election.md.
"""

from __future__ import annotations

import datetime as dt

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, CronTriggerTimetable

from kafka_runbooks.operators.election import ScheduledElectionsOperator, ScheduleErrorsOperator
from kafka_runbooks.remediate.election_schedule import DISPATCH_EVERY_MIN

def build() -> DAG:
    """The ``kafka_preferred_election_schedule`` DAG (one per Airflow deployment, for every cluster: the cluster is a run parameter)."""
    with DAG(
        dag_id="kafka_preferred_election_schedule",
        doc_md=__doc__,
        description="Start the preferred election for clusters whose election.schedule is due and whose leadership is out of Kafka's rule.",
        schedule=CronTriggerTimetable(f"*/{DISPATCH_EVERY_MIN} * * * *", timezone="UTC", interval=dt.timedelta(minutes=DISPATCH_EVERY_MIN)),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        render_template_as_native_obj=True,
        tags=["kafka", "remediate", "maintenance", "schedule"],
    ) as dag:
        due = ScheduledElectionsOperator(task_id="due_clusters", retries=0)
        start = TriggerDagRunOperator.partial(
            task_id="start_election", trigger_dag_id="kafka_preferred_election", wait_for_completion=False,
            skip_when_already_exists=True, retries=0,
        ).expand_kwargs(due.output)
        report = ScheduleErrorsOperator(task_id="report", errors="{{ ti.xcom_pull(task_ids='due_clusters', key='errors') }}")
        due >> start >> report
    return dag
