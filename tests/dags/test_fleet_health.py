"""A fleet: every cluster of the Variable gets its own health-check DAG (its schedule, its ZooKeeper watcher, one run
at a time), a cluster added to the Variable gets one at the next parse, a cluster with bad settings gets none and
hides nobody; a ZooKeeper that hangs never delays another cluster's watch (real ZooKeeper, real trigger)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from kafka_lab.airflow_home import load_dags

pytestmark = [pytest.mark.usefixtures("airflow_db"), pytest.mark.timeout(300)]


def _cluster(**health) -> dict:
    return {"zk_conn_id": "zk", "hosts": {"1": "h1"}, **({"health": health} if health else {})}


def _bag(monkeypatch, clusters: dict):
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    return load_dags()


def test_every_cluster_gets_its_own_health_check(monkeypatch):
    from airflow.sdk import Asset, AssetOrTimeSchedule, CronTriggerTimetable

    from kafka_runbooks.triggers.serving import ServingWatchTrigger
    from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

    monkeypatch.setenv("KAFKA_RUNBOOKS_HEALTH_SCHEDULE", "*/7 * * * *")
    bag = _bag(monkeypatch, {"east": _cluster(), "west": _cluster(schedule="*/2 * * * *"),
                             "quiet": _cluster(watch_zookeeper=False, watch_serving=False),
                             "serving": _cluster(watch_zookeeper=False),
                             "broken": _cluster(schedule="every tuesday"), "bad name!": _cluster()})
    health = sorted(d for d in bag.dag_ids if d.startswith("kafka_health_check"))
    assert health == ["kafka_health_check_east", "kafka_health_check_quiet", "kafka_health_check_serving", "kafka_health_check_west"]
    for name, cron in (("east", "*/7 * * * *"), ("west", "*/2 * * * *")):
        dag = bag.get_dag(f"kafka_health_check_{name}")
        assert dag.max_active_runs == 1 and f"cluster:{name}" in dag.tags
        assert isinstance(dag.timetable, AssetOrTimeSchedule) and dag.timetable.timetable.expression == cron
        asset = dag.timetable.asset_condition
        assert isinstance(asset, Asset) and asset.uri == f"kafka-runbooks://zookeeper/{name}"
        zookeeper, serving = asset.watchers
        assert isinstance(zookeeper.trigger, ZooKeeperChangeTrigger) and zookeeper.trigger.cluster == name
        assert isinstance(serving.trigger, ServingWatchTrigger) and serving.trigger.cluster == name
        assert {t.task_id: getattr(t, "cluster", None) for t in dag.tasks if t.task_id != "start_incident_response"} == \
            {"snapshot": name, "detect": name}
    quiet = bag.get_dag("kafka_health_check_quiet")
    assert isinstance(quiet.timetable, CronTriggerTimetable)  # no watcher: cron only
    (only,) = bag.get_dag("kafka_health_check_serving").timetable.asset_condition.watchers  # the serving watch alone
    assert isinstance(only.trigger, ServingWatchTrigger)
    assert "Why one DAG per cluster" in bag.get_dag("kafka_health_check_east").doc_md

    # a cluster added to the Variable: its DAG at the next parse, no code change
    bag = _bag(monkeypatch, {"east": _cluster(), "north": _cluster()})
    assert sorted(d for d in bag.dag_ids if d.startswith("kafka_health_check")) == ["kafka_health_check_east",
                                                                                   "kafka_health_check_north"]


def test_no_variable_no_health_check_and_no_import_error(monkeypatch):
    monkeypatch.delenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", raising=False)
    bag = load_dags()  # raises on any import error
    assert not [d for d in bag.dag_ids if d.startswith("kafka_health_check")]
    assert "kafka_incident_response" in bag.dag_ids


def test_a_hanging_zookeeper_never_delays_another_clusters_watch(zk, zookeeper, monkeypatch):
    """Eight clusters whose 'ZooKeeper' accepts connections and never answers, and one real one: the real one's
    change is an event within the usual bound; the hanging ones keep retrying (none ends, none fires)."""
    from kafka_lab.net import service_ip
    from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

    zk.ensure_path("/brokers/ids")
    broker = zookeeper.client(zk.chroot_path)
    broker.create("/brokers/ids/1", b'{"host":"h1","port":9092}', ephemeral=True)
    monkeypatch.setenv("AIRFLOW_CONN_KR_FLEET_ZK", json.dumps(
        {"conn_type": "generic", "host": zookeeper.hosts, "extra": {"chroot": zk.chroot_path}}))
    black = socket.socket()
    black.bind((service_ip("capture_ssh_down"), 0))
    black.listen(64)  # the kernel completes the handshakes; nobody ever reads or answers
    host, port = black.getsockname()
    monkeypatch.setenv("AIRFLOW_CONN_KR_HUNG_ZK", json.dumps({"conn_type": "generic", "host": f"{host}:{port}"}))
    hung = [ZooKeeperChangeTrigger(cluster=f"hung{i}", zk_conn_id="kr_hung_zk", verify_s=1.0) for i in range(8)]
    alive = ZooKeeperChangeTrigger(cluster="alive", zk_conn_id="kr_fleet_zk", debounce_s=0.2, verify_s=1.0)

    async def scenario():
        gens = [t.run() for t in hung]
        stuck = [asyncio.ensure_future(g.__anext__()) for g in gens]
        await asyncio.sleep(1.0)  # every hanging watch is connecting, blocked in its own thread
        agen = alive.run()
        pending = asyncio.ensure_future(asyncio.wait_for(agen.__anext__(), 60))
        try:
            await asyncio.sleep(3.0)  # the live watch is armed
            assert not pending.done()
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            await asyncio.to_thread(broker.create, "/brokers/ids/2", b'{"host":"h2","port":9092}', ephemeral=True)
            event = await pending
            waited = loop.time() - t0
            assert event.payload["cluster"] == "alive" and event.payload["changed"] == ["brokers"]
            await asyncio.sleep(1.0)
            assert not any(s.done() for s in stuck), [s.exception() for s in stuck if s.done()]
            return waited
        finally:
            for f in [pending, *stuck]:
                f.cancel()
            await asyncio.gather(pending, *stuck, return_exceptions=True)
            for g in [agen, *gens]:
                await g.aclose()

    try:
        waited = asyncio.run(scenario())
    finally:
        broker.stop()
        broker.close()
        black.close()
    print(f"event of the live cluster {waited:.2f} s after its change, 8 hanging clusters beside it")
