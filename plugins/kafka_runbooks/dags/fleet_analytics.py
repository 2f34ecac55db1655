"""Fleet analytics, daily: every analysed bundle under the bundle base -> one Parquet dataset partitioned by
cluster and date, and the on-call queries' answers (runbooks/fleet-analytics.md). Thin: the work is the
Spark job spark_apps/fleet_analytics.py, submitted through SparkSubmitOperator (connection spark_default)."""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param

from kafka_runbooks.operators.analyze import FleetAnalyticsOperator

def build() -> DAG:
    """The ``kafka_fleet_analytics`` DAG (one per Airflow deployment, for every cluster: the cluster is a run parameter)."""
    with DAG(
        dag_id="kafka_fleet_analytics",
        description="Every evidence bundle into one Parquet dataset; CLOSE_WAIT/deadlocks by broker, ZooKeeper drops by server and hour.",
        schedule=os.environ.get("KAFKA_RUNBOOKS_FLEET_SCHEDULE", "@daily"),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["kafka", "analyze", "fleet"],
        doc_md="Runbook: runbooks/fleet-analytics.md",
        params={
            "base": Param(os.environ.get("KAFKA_RUNBOOKS_BUNDLE_BASE", "/var/lib/kafka-runbooks/bundles"), type="string",
                          description="Bundle base location (path on storage the Spark executors share, s3a://, hdfs://)."),
            "out": Param(os.environ.get("KAFKA_RUNBOOKS_FLEET_OUT", "/var/lib/kafka-runbooks/fleet"), type="string",
                         description="Where the fleet dataset and answers.json are written."),
        },
    ) as dag:
        FleetAnalyticsOperator(
            task_id="fleet_analytics",
            base="{{ params.base }}",
            out="{{ params.out }}",
            days=int(os.environ.get("KAFKA_RUNBOOKS_FLEET_DAYS", 30)),
            conn_id="spark_default",
            retries=1,
        )
    return dag
