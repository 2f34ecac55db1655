"""The ZooKeeper event trigger against a real ZooKeeper: it fires within seconds of a registration
or controller change, and never for nothing."""

from __future__ import annotations

import asyncio
import json

import pytest

from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

pytestmark = pytest.mark.timeout(120)

QUIET_S = 3.0  # how long the trigger must stay silent when nothing changes (a bound, not a speed claim)
EVENT_BOUND_S = 30.0  # an event must come within this (generous: other helpers load the machine)


@pytest.fixture
def watched(zk, zookeeper, monkeypatch):
    """A Kafka-like chroot with brokers 1, 2 registered by a 'broker' session, and a connection to it."""
    zk.ensure_path("/brokers/ids")
    broker_session = zookeeper.client(zk.chroot_path)
    for b in (1, 2):
        broker_session.create(f"/brokers/ids/{b}", json.dumps({"host": f"h{b}", "port": 9092}).encode(), ephemeral=True)
    broker_session.create("/controller", b'{"version":1,"brokerid":1,"timestamp":"0"}', ephemeral=True)
    conn_id = "kr_trigger_zk"
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(
        {"conn_type": "generic", "host": zookeeper.hosts, "extra": {"chroot": zk.chroot_path}}))
    try:
        yield zk, broker_session, conn_id
    finally:
        broker_session.stop()
        broker_session.close()


async def _next(agen, timeout):
    return await asyncio.wait_for(agen.__anext__(), timeout)


def test_fires_on_registration_and_controller_changes_and_not_otherwise(watched):
    zk, broker_session, conn_id = watched
    trigger = ZooKeeperChangeTrigger(cluster="lab", zk_conn_id=conn_id, debounce_s=0.3, verify_s=1.0)
    assert trigger.serialize() == ("kafka_runbooks.triggers.zookeeper.ZooKeeperChangeTrigger",
                                   {"cluster": "lab", "zk_conn_id": conn_id, "debounce_s": 0.3, "verify_s": 1.0})

    async def scenario():
        agen = trigger.run()
        pending = asyncio.ensure_future(_next(agen, EVENT_BOUND_S + QUIET_S))
        try:
            # nothing changes: silence (while data elsewhere in the tree changes, and several verify rounds pass)
            await asyncio.sleep(QUIET_S / 2)
            await asyncio.to_thread(zk.create, "/brokers/topics/t", b"{}", makepath=True)
            await asyncio.sleep(QUIET_S / 2)
            assert not pending.done(), pending.result() if pending.done() else None

            # a broker registers
            await asyncio.to_thread(broker_session.create, "/brokers/ids/3", b'{"host":"h3","port":9092}', ephemeral=True)
            event = await asyncio.wait_for(pending, EVENT_BOUND_S)
            assert event.payload["changed"] == ["brokers"] and event.payload["after"]["brokers"] == ["1", "2", "3"]
            assert event.payload["before"]["brokers"] == ["1", "2"] and event.payload["cluster"] == "lab"

            # the controller moves (delete + re-create: a new election), with a deregistration: one event
            def move():
                broker_session.delete("/controller")
                broker_session.delete("/brokers/ids/1")
                broker_session.create("/controller", b'{"version":1,"brokerid":2,"timestamp":"1"}', ephemeral=True)

            await asyncio.to_thread(move)
            event = await _next(agen, EVENT_BOUND_S)
            assert sorted(event.payload["changed"]) == ["brokers", "controller"]
            assert event.payload["after"]["controller"] == 2 and event.payload["after"]["brokers"] == ["2", "3"]

            # a broker's session closes: its registration goes, and the trigger says so
            await asyncio.to_thread(broker_session.stop)
            event = await _next(agen, EVENT_BOUND_S)
            assert event.payload["after"]["brokers"] == [] and event.payload["after"]["controller"] is None

            # and then silence again
            pending = asyncio.ensure_future(_next(agen, EVENT_BOUND_S))
            await asyncio.sleep(QUIET_S)
            assert not pending.done()
        finally:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
            await agen.aclose()

    asyncio.run(scenario())


def test_a_quick_deregistration_and_reregistration_is_still_an_event(watched):
    # a deregistration followed by a re-registration between two reads: same children, still an event
    zk, broker_session, conn_id = watched
    trigger = ZooKeeperChangeTrigger(cluster="lab", zk_conn_id=conn_id, debounce_s=0.2, verify_s=1.0)

    async def scenario():
        agen = trigger.run()
        pending = asyncio.ensure_future(_next(agen, EVENT_BOUND_S + QUIET_S))
        try:
            await asyncio.sleep(QUIET_S / 2)

            def flap():
                broker_session.delete("/brokers/ids/2")
                broker_session.create("/brokers/ids/2", b'{"host":"h2","port":9092}', ephemeral=True)

            await asyncio.to_thread(flap)
            event = await asyncio.wait_for(pending, EVENT_BOUND_S)
            assert event.payload["changed"] == ["brokers"]
            assert event.payload["after"]["brokers"] == event.payload["before"]["brokers"] == ["1", "2"]
            assert event.payload["after"]["brokers_version"] > event.payload["before"]["brokers_version"]
        finally:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
            await agen.aclose()

    asyncio.run(scenario())
