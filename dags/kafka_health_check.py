"""Health check: snapshot (ZooKeeper, direct Kafka checks, canary, SSH host probes) → detectors with
the history → incidents → one incident-response run per new incident.

Scheduled on a cron (``KAFKA_RUNBOOKS_HEALTH_SCHEDULE``, default every 5 minutes) OR by an asset
that a ZooKeeper watch updates within seconds of a change of ``/brokers/ids`` or ``/controller``
(an AssetWatcher running ZooKeeperChangeTrigger in Airflow's triggerer; off with
``KAFKA_RUNBOOKS_WATCH_ZOOKEEPER=false``). The watched cluster is ``KAFKA_RUNBOOKS_DEFAULT_CLUSTER``.
Detection rules: runbooks/detection.md.
"""

from __future__ import annotations

import os

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, AssetWatcher, CronTriggerTimetable

from kafka_runbooks.operators.detect import ClusterSnapshotOperator, DetectFindingsOperator
from kafka_runbooks.operators.params import cluster_param
from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

CLUSTER = os.environ.get("KAFKA_RUNBOOKS_DEFAULT_CLUSTER", "lab")
CRON = os.environ.get("KAFKA_RUNBOOKS_HEALTH_SCHEDULE", "*/5 * * * *")
WATCH = os.environ.get("KAFKA_RUNBOOKS_WATCH_ZOOKEEPER", "true").strip().lower() not in ("0", "false", "no", "off")

timetable = CronTriggerTimetable(CRON, timezone="UTC")
if WATCH:
    zookeeper_changed = Asset(
        name=f"kafka_runbooks_zookeeper_{CLUSTER}",
        uri=f"kafka-runbooks://zookeeper/{CLUSTER}",
        watchers=[AssetWatcher(name=f"zookeeper_{CLUSTER}", trigger=ZooKeeperChangeTrigger(cluster=CLUSTER))],
    )
    schedule = AssetOrTimeSchedule(timetable=timetable, assets=zookeeper_changed)
else:
    schedule = timetable

with DAG(
    dag_id="kafka_health_check",
    description="Check every broker directly and probe its host; open an incident when a finding holds.",
    doc_md=__doc__,
    schedule=schedule,
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
