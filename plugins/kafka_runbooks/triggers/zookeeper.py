"""``ZooKeeperChangeTrigger``: an event trigger that fires when a cluster's broker registrations
(``/brokers/ids``) or its controller (``/controller``) change, for an AssetWatcher that starts the
health check within seconds of the change (dags/kafka_health_check.py).

How it watches: kazoo one-shot watches on ``/brokers/ids`` (children) and ``/controller``
(existence) wake the trigger's asyncio loop (the kazoo thread hands the wake-up over with
``call_soon_threadsafe``); the trigger then re-reads both and re-arms the watches. What counts as
a change is ZooKeeper's own bookkeeping, so nothing fires for nothing:

* ``/brokers/ids`` ``cversion`` -- bumped by every registration and deregistration (a broker that
  deregistered and re-registered between two reads is still a change);
* ``/controller`` ``czxid`` -- a new controller election creates a new ephemeral node.

The state read when the trigger starts is the baseline (no event). Changes within ``debounce_s``
of each other make one event. Every ``verify_s`` (and after a reconnect) it re-reads without a
wake-up, so a change made while a watch was not armed (a lost session) is still seen.

Kazoo calls block, so they run in a thread of the trigger's own (one per watched cluster, not the
triggerer's shared default executor): a cluster whose ZooKeeper hangs holds only its own thread,
and every other cluster's watch goes on. The connection id and the cluster settings are resolved
in the triggerer with ``sync_to_async``, the way Airflow's own triggers use hooks. A ZooKeeper
that cannot be reached (or a cluster whose settings cannot be read) is logged and tried again,
backing off up to ``RETRY_MAX_S``: the watch never ends by itself, and the cron schedule still
checks the cluster meanwhile.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from kafka_runbooks import clock

CLASSPATH = "kafka_runbooks.triggers.zookeeper.ZooKeeperChangeTrigger"
RETRY_MAX_S = 60.0


def read_state(zk, watch=None) -> dict[str, Any]:
    """What the trigger compares: registrations and the controller (arming ``watch`` on both)."""
    from kazoo.exceptions import NoNodeError

    try:
        children, stat = zk.get_children("/brokers/ids", watch=watch, include_data=True)
        ids_version = stat.cversion
    except NoNodeError:
        zk.exists("/brokers/ids", watch=watch)
        children, ids_version = [], None
    controller, controller_zxid = None, None
    stat = zk.exists("/controller", watch=watch)
    if stat is not None:
        controller_zxid = stat.czxid
        try:
            data, _ = zk.get("/controller")
            controller = json.loads(data.decode("utf-8")).get("brokerid")
        except (NoNodeError, ValueError, UnicodeDecodeError, AttributeError):
            controller = None
    return {
        "brokers": sorted(children, key=lambda c: (len(c), c)),
        "brokers_version": ids_version,
        "controller": controller,
        "controller_zxid": controller_zxid,
    }


def changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    out = []
    if before.get("brokers_version") != after.get("brokers_version"):
        out.append("brokers")
    if before.get("controller_zxid") != after.get("controller_zxid"):
        out.append("controller")
    return out


class ZooKeeperChangeTrigger(BaseEventTrigger):
    def __init__(self, cluster: str, zk_conn_id: str | None = None, debounce_s: float = 0.5, verify_s: float = 10.0) -> None:
        super().__init__()
        self.cluster = cluster
        self.zk_conn_id = zk_conn_id
        self.debounce_s = float(debounce_s)
        self.verify_s = float(verify_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {"cluster": self.cluster, "zk_conn_id": self.zk_conn_id, "debounce_s": self.debounce_s,
                           "verify_s": self.verify_s}

    async def _client(self):
        from asgiref.sync import sync_to_async

        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook

        conn_id = self.zk_conn_id
        if not conn_id:
            from kafka_runbooks.config import load_cluster

            conn_id = (await sync_to_async(load_cluster)(self.cluster)).zk_conn_id
        hook = await sync_to_async(ZooKeeperHook)(conn_id)
        return hook.get_conn()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from concurrent.futures import ThreadPoolExecutor

        from kazoo.protocol.states import KazooState

        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        # this cluster's own thread: its blocking kazoo calls never wait behind another cluster's
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"zk-watch-{self.cluster}")

        def blocking(fn, *args):
            return loop.run_in_executor(executor, fn, *args)

        def poke(*_args: Any) -> None:
            loop.call_soon_threadsafe(wake.set)

        def on_state(state) -> None:
            if state == KazooState.CONNECTED:
                poke()

        zk = None
        try:
            retry_s = 1.0
            while True:
                try:
                    zk = await self._client()
                    zk.add_listener(on_state)
                    await blocking(zk.start)
                    last = await blocking(read_state, zk, poke)
                    break
                except Exception as exc:  # noqa: BLE001 - unreachable or misconfigured: said, and tried again
                    self.log.error("cluster %s: cannot watch ZooKeeper (%s: %s); trying again in %g s",
                                   self.cluster, type(exc).__name__, exc, retry_s)
                    if zk is not None:
                        await blocking(_close, zk)
                        zk = None
                    await asyncio.sleep(retry_s)
                    retry_s = min(retry_s * 2, RETRY_MAX_S)
            self.log.info("watching %s for cluster %s: %s", "/brokers/ids and /controller", self.cluster, last)
            while True:
                try:
                    await asyncio.wait_for(wake.wait(), timeout=self.verify_s)
                except asyncio.TimeoutError:
                    pass
                wake.clear()
                try:
                    now = await blocking(read_state, zk, poke)
                    what = changes(last, now)
                    if not what:
                        continue
                    await asyncio.sleep(self.debounce_s)  # a deregistration often comes with a controller move
                    wake.clear()
                    now = await blocking(read_state, zk, poke)
                except Exception as exc:  # noqa: BLE001 - connection lost: kazoo reconnects; read again next round
                    self.log.warning("cluster %s: reading ZooKeeper failed (%s: %s); reading again within %g s",
                                     self.cluster, type(exc).__name__, exc, self.verify_s)
                    continue
                what = changes(last, now) or what
                payload = {"cluster": self.cluster, "changed": what, "at": clock.now_iso(), "before": last, "after": now}
                self.log.info("ZooKeeper change on %s: %s", self.cluster, payload)
                last = now
                yield TriggerEvent(payload)
        finally:
            if zk is not None:  # closed in the cluster's thread, after whatever call still blocks there; nobody waits
                executor.submit(_close, zk)
            executor.shutdown(wait=False)


def _close(zk) -> None:
    try:
        zk.stop()
    finally:
        zk.close()
