"""Scheduled (and manual) health check: snapshot + host probes → detectors → incident response."""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG

from kafka_runbooks.operators.detect import ClusterSnapshotOperator, DetectFindingsOperator
from kafka_runbooks.operators.params import cluster_param

with DAG(
    dag_id="kafka_health_check",
    description="Read the cluster from ZooKeeper and probe every broker host; open an incident on a finding.",
    schedule=os.environ.get("KAFKA_RUNBOOKS_HEALTH_SCHEDULE", "*/5 * * * *"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka", "detect"],
    params={
        "cluster": cluster_param(),
    },
) as dag:
    snapshot = ClusterSnapshotOperator(task_id="snapshot", cluster="{{ params.cluster }}")
    detect = DetectFindingsOperator(task_id="detect", cluster="{{ params.cluster }}", snapshot=snapshot.output)
    # one response run per newly opened incident; its run id is recorded on the incident
    TriggerDagRunOperator.partial(
        task_id="start_incident_response",
        trigger_dag_id="kafka_incident_response",
    ).expand_kwargs(detect.output)
