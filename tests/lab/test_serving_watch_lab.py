"""The serving watch (triggers/serving.py, issue 30) against the lab's real Kafka 2.3.0 brokers: silent while every
broker answers; it fires, naming the broker, when a broker's request path hangs or deadlocks -- faults that change
nothing in ZooKeeper (the broker stays registered with the same session), so the ZooKeeper watch never sees them."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

pytestmark = [pytest.mark.lab, pytest.mark.timeout(300)]

QUIET_S = 10.0  # every broker answers: the watch stays silent this long (several rounds)
FIRE_BOUND_S = 60.0  # a bound for a loaded machine, not a speed claim (./run bench detect_deployed measures it)
WATCH = {"serving_interval_s": 1.0, "serving_timeout_s": 2.0, "serving_failures": 2, "serving_debounce_s": 0.0}


@pytest.fixture
def watch_env(healthy_lab, monkeypatch):
    for k, v in healthy_lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    settings = healthy_lab.cluster_settings()
    for cluster in settings.values():
        cluster["health"] = {**cluster.get("health", {}), **WATCH}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(settings))
    return healthy_lab, next(iter(settings))


def _watch(cluster: str, fault) -> tuple[dict, float]:
    """Runs the trigger: silent for QUIET_S on the healthy lab, then ``fault()``; (its first event, fault -> event s)."""
    from kafka_runbooks.triggers.serving import ServingWatchTrigger

    async def scenario():
        agen = ServingWatchTrigger(cluster=cluster).run()
        pending = asyncio.ensure_future(agen.__anext__())
        try:
            await asyncio.sleep(QUIET_S)
            assert not pending.done(), f"fired with every broker serving: {pending.result().payload}"
            await asyncio.to_thread(fault)
            t0 = time.monotonic()
            event = await asyncio.wait_for(pending, FIRE_BOUND_S)
            return event.payload, time.monotonic() - t0
        finally:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
            await agen.aclose()

    return asyncio.run(scenario())


@pytest.mark.parametrize("fault", ["hang", "deadlock"])
def test_the_watch_fires_for_a_broker_whose_request_path_is_stuck_and_never_for_serving_ones(watch_env, fault):
    lab, cluster = watch_env
    registered = lab.registration(3)
    payload, took = _watch(cluster, lambda: getattr(lab, fault)(3))
    print(f"\n[{fault} -> serving watch event: {took:.1f} s]")
    assert payload["changed"] == ["serving"] and list(payload["not_answering"]) == ["3"], payload
    seen = payload["not_answering"]["3"]
    assert seen["failures"] >= WATCH["serving_failures"] and "no answer within 2 s" in seen["error"], seen
    # ZooKeeper saw nothing: the same registration, the same session -- only the serving watch can tell
    assert lab.registration(3)[1].ephemeralOwner == registered[1].ephemeralOwner
