"""The lab cluster's health DAG runs on its cron OR when the ZooKeeper watch updates its asset."""

import json

import pytest

from kafka_lab.airflow_home import load_dags

pytestmark = pytest.mark.usefixtures("airflow_db")


def test_health_check_is_scheduled_on_cron_or_the_zookeeper_asset(monkeypatch):
    from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable

    from kafka_runbooks.triggers.serving import ServingWatchTrigger
    from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps({"lab": {"zk_conn_id": "zk", "hosts": {"1": "h1"}}}))
    dag = load_dags().get_dag("kafka_health_check_lab")
    schedule = dag.timetable
    assert isinstance(schedule, AssetOrTimeSchedule) and isinstance(schedule.timetable, CronTriggerTimetable)
    asset = schedule.asset_condition
    assert isinstance(asset, Asset) and asset.uri == "kafka-runbooks://zookeeper/lab"
    zookeeper, serving = asset.watchers  # issue 30: a hang changes nothing in ZooKeeper; the serving watch sees it
    assert isinstance(zookeeper.trigger, ZooKeeperChangeTrigger) and zookeeper.trigger.cluster == "lab"
    assert isinstance(serving.trigger, ServingWatchTrigger) and serving.trigger.cluster == "lab"
    assert dag.max_active_runs == 1
