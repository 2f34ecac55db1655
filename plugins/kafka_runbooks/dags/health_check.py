"""Health check of one cluster: snapshot (ZooKeeper, direct Kafka checks, canary, SSH host probes) → detectors with
the history → incidents → one incident-response run per new incident. Detection rules: runbooks/detection.md.

**One DAG per cluster** (``kafka_health_check_<cluster>``), generated from the Airflow Variable
``kafka_runbooks_clusters``: a cluster added there gets its DAG at the next parse, with no code change. Each runs

* on its own cron (``health.schedule`` of the cluster, else ``KAFKA_RUNBOOKS_HEALTH_SCHEDULE``, else every 5 minutes), OR
* within seconds of a change of that cluster's ``/brokers/ids`` or ``/controller``: an asset updated by its own
  AssetWatcher, a ``ZooKeeperChangeTrigger`` in Airflow's triggerer (``health.watch_zookeeper`` /
  ``KAFKA_RUNBOOKS_WATCH_ZOOKEEPER``, default on), OR
* within seconds of a registered broker no longer answering (a hang or a deadlock changes nothing in ZooKeeper): the
  same asset, updated by a second AssetWatcher, a ``ServingWatchTrigger`` in the triggerer that asks every broker one
  tiny request every few seconds (``health.watch_serving`` / ``KAFKA_RUNBOOKS_WATCH_SERVING``, default on;
  triggers/serving.py).

Why one DAG per cluster rather than one DAG mapping over the clusters: a cluster's check is a unit of its own. Each
cluster gets its own schedule, its own ``max_active_runs=1`` (two checks of one cluster never overlap, while a
cluster whose ZooKeeper or brokers hang holds only its own run: the next check of every other cluster starts on
time), its own run history, pause switch and failure alerts in the UI, and an asset event starts exactly the
cluster that changed. A single DAG with mapped tasks shares one run across the fleet: its next run waits for the
slowest cluster, and a watcher's event would have to be routed to one map index.

At parse time it reads the Variable and checks every section of each cluster (the typed model of settings_model.py
and config.py's range checks; no ZooKeeper, no connection): a cluster whose settings are wrong gets no DAG, and a
parse warning and the log name the cluster, the key and what was expected; the others are unaffected.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any, Mapping

import pendulum
from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import DAG, Asset, AssetOrTimeSchedule, AssetWatcher, CronTriggerTimetable

from kafka_runbooks.config import ClusterSettingsWarning, health_schedules, raw_clusters
from kafka_runbooks.operators.detect import RESPONSE_DAG, ClusterSnapshotOperator, DetectFindingsOperator, health_dag_id
from kafka_runbooks.triggers.serving import ServingWatchTrigger
from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

log = logging.getLogger(__name__)


def zookeeper_asset(cluster: str, zookeeper: bool = True, serving: bool = False) -> Asset:
    """The asset the cluster's watches update: its ZooKeeper watch and its serving watch (its name predates the
    serving watch; kept, so a deployment's asset and its history stay the same)."""
    watchers = []
    if zookeeper:
        watchers.append(AssetWatcher(name=f"zookeeper_{cluster}", trigger=ZooKeeperChangeTrigger(cluster=cluster)))
    if serving:
        watchers.append(AssetWatcher(name=f"serving_{cluster}", trigger=ServingWatchTrigger(cluster=cluster)))
    return Asset(name=f"kafka_runbooks_zookeeper_{cluster}", uri=f"kafka-runbooks://zookeeper/{cluster}", watchers=watchers)


def health_check_dag(cluster: str, cron: str, watch_zookeeper: bool, watch_serving: bool = False) -> DAG:
    timetable = CronTriggerTimetable(cron, timezone="UTC")
    watched = watch_zookeeper or watch_serving
    with DAG(
        dag_id=health_dag_id(cluster),
        description=f"Health check of cluster {cluster}: check every broker directly and probe its host; open an "
                    "incident when a finding holds.",
        doc_md=__doc__,
        schedule=(AssetOrTimeSchedule(timetable=timetable, assets=zookeeper_asset(cluster, watch_zookeeper, watch_serving))
                  if watched else timetable),
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        max_active_runs=1,
        tags=["kafka", "detect", f"cluster:{cluster}"],
    ) as dag:
        snapshot = ClusterSnapshotOperator(task_id="snapshot", cluster=cluster)
        detect = DetectFindingsOperator(task_id="detect", cluster=cluster, snapshot=snapshot.output)
        # one response run per newly opened incident; its run id is recorded on the incident
        TriggerDagRunOperator.partial(task_id="start_incident_response", trigger_dag_id=RESPONSE_DAG).expand_kwargs(detect.output)
    return dag


def health_check_dags(raw: Mapping[str, Any] | None = None) -> dict[str, DAG]:
    """``{dag_id: DAG}``: one health check per configured cluster whose settings are valid (``raw``: the settings, else
    the Variable / file). A cluster with bad settings gets no DAG; its error is logged and warned (the warning names
    the cluster, the key and what was expected) and the other clusters are unaffected."""
    schedules, errors = health_schedules(raw_clusters(missing_ok=True) if raw is None else raw)
    for name, why in errors.items():
        log.error("cluster %r gets no health-check DAG: %s", name, why)
        warnings.warn(f"kafka-runbooks: cluster {name!r} gets no health-check DAG: {why}", ClusterSettingsWarning, stacklevel=2)
    return {health_dag_id(s.cluster): health_check_dag(s.cluster, s.cron, s.watch_zookeeper, s.watch_serving) for s in schedules}
