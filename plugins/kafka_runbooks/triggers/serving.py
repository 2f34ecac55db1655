"""``ServingWatchTrigger``: an event trigger that fires when a registered broker stops answering, for an
AssetWatcher that starts the health check within seconds (dags/kafka_health_check.py). A hang or a deadlock changes
nothing in ZooKeeper -- the broker stays registered, its session alive -- so ``ZooKeeperChangeTrigger`` never sees it.

How it watches: every ``health.serving_interval_s`` it asks every registered broker one tiny request on a connection
of its own (``hooks/kafka_wire.answers``: asyncio streams, no thread and no JVM per check), each bounded by
``health.serving_timeout_s``. The request goes through the broker's request handler threads, which a hung or
deadlocked broker never reaches (a TCP connect alone would succeed: the kernel and the acceptor still accept):
``ApiVersions`` v0, or ``Metadata`` v0 where the broker may be older than 0.10.0 (``versions.asking`` from its
registration's schema version and the ``kafka_version`` setting: never ApiVersions to a 0.9 broker, seed 002).
``detect/serving_watch.py`` decides (pure): a broker that failed ``health.serving_failures`` rounds in a row (one
round when its endpoint refused the connection) fires once per outage, and a broker at most once per ``health.serving_debounce_s``.

Where it looks: the registrations in ``/brokers/ids`` (its own kazoo client in a thread of its own, as the ZooKeeper
watch does; the registrations are read again only when the children's ``cversion`` moved) on
the cluster's ``listener`` endpoint; the Kafka connection's TLS settings. The settings are read again every
``RELOAD_S``. A ZooKeeper that cannot be read keeps the last registrations; one that was never read is tried again,
backing off up to ``RETRY_MAX_S``: the watch never ends by itself.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from kafka_runbooks import clock, versions
from kafka_runbooks.detect.serving_watch import Answer, ServingWatch
from kafka_runbooks.detect.snapshot import Unparsable, parse_broker
from kafka_runbooks.hooks.kafka_wire import answers

CLASSPATH = "kafka_runbooks.triggers.serving.ServingWatchTrigger"
RETRY_MAX_S = 60.0
RELOAD_S = 60.0


def read_registrations(zk, last: tuple[int | None, list] | None) -> tuple[int | None, list]:
    """(``/brokers/ids`` cversion, [Broker]) -- the registrations read again only when the cversion moved."""
    from kazoo.exceptions import NoNodeError

    try:
        children, stat = zk.get_children("/brokers/ids", include_data=True)
    except NoNodeError:
        return None, []
    if last is not None and last[0] == stat.cversion:
        return last
    brokers = []
    for child in children:
        if not child.isdigit():
            continue
        try:
            data, _ = zk.get(f"/brokers/ids/{child}")
            brokers.append(parse_broker(int(child), json.loads(data.decode("utf-8"))))
        except (NoNodeError, Unparsable, ValueError, UnicodeDecodeError):
            continue  # deregistered meanwhile, or unreadable: the health check reports an unparsable registration
    return stat.cversion, sorted(brokers, key=lambda b: b.id)


async def ask(broker, listener: str | None, timeout_s: float, tls: dict[str, Any], configured: str | None):
    """One broker's answer this round (``detect.serving_watch.Answer``)."""
    try:
        host, port = broker.endpoint(listener)
    except KeyError as exc:
        return Answer(broker.id, False, "", str(exc.args[0]))
    endpoint = f"{host}:{port}"
    may = versions.asking(broker.id, broker.schema_version, None, configured).api_versions
    t0 = time.monotonic()
    try:
        await answers(host, port, timeout_s, tls, ask_versions=may)
    except asyncio.TimeoutError:
        return Answer(broker.id, False, endpoint, f"no answer within {timeout_s:g} s", time.monotonic() - t0)
    except ConnectionRefusedError as exc:
        return Answer(broker.id, False, endpoint, f"connection refused: {exc}", time.monotonic() - t0, refused=True)
    except Exception as exc:  # noqa: BLE001 - refused, reset, unreadable: not answering
        return Answer(broker.id, False, endpoint, f"{type(exc).__name__}: {exc}", time.monotonic() - t0)
    return Answer(broker.id, True, endpoint, None, time.monotonic() - t0)


def unsupported(tls: dict[str, Any]) -> str | None:
    """Why the watch cannot ask this cluster's brokers anything (a SASL listener: not spoken by ``kafka_wire``), or
    None. Such a cluster is not watched for serving (said in the log), rather than every broker counted as not
    answering."""
    protocol = str((tls or {}).get("security.protocol", "PLAINTEXT")).upper()
    return None if protocol in ("PLAINTEXT", "SSL") else f"security.protocol {protocol} is not spoken by the serving watch"


class ServingWatchTrigger(BaseEventTrigger):
    def __init__(self, cluster: str, zk_conn_id: str | None = None) -> None:
        super().__init__()
        self.cluster = cluster
        self.zk_conn_id = zk_conn_id

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {"cluster": self.cluster, "zk_conn_id": self.zk_conn_id}

    async def _settings(self):
        """(the cluster's settings, the Kafka connection's TLS settings), read in the triggerer as Airflow's own
        triggers use hooks."""
        from asgiref.sync import sync_to_async

        from kafka_runbooks.config import load_cluster  # deferred: the DAG file imports this module at every parse
        from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: as above (it imports Airflow's hook machinery)

        config = await sync_to_async(load_cluster)(self.cluster)
        tls = await sync_to_async(KafkaHook(config.kafka_conn_id).base_config)()
        return config, tls

    async def _client(self, config):
        from asgiref.sync import sync_to_async

        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: as above

        hook = await sync_to_async(ZooKeeperHook)(self.zk_conn_id or config.zk_conn_id)
        return hook.get_conn()

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from concurrent.futures import ThreadPoolExecutor

        loop = asyncio.get_running_loop()
        # this cluster's own thread: its blocking kazoo calls never wait behind another cluster's
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"serving-watch-{self.cluster}")

        def blocking(fn, *args):
            return loop.run_in_executor(executor, fn, *args)

        zk = None
        try:
            retry_s = 1.0
            while True:
                try:
                    config, tls = await self._settings()
                    zk = await self._client(config)
                    await blocking(zk.start)
                    registrations = await blocking(read_registrations, zk, None)
                    break
                except Exception as exc:  # noqa: BLE001 - unreachable or misconfigured: said, and tried again
                    self.log.error("cluster %s: cannot watch its brokers (%s: %s); trying again in %g s",
                                   self.cluster, type(exc).__name__, exc, retry_s)
                    if zk is not None:
                        await blocking(_close, zk)
                        zk = None
                    await asyncio.sleep(retry_s)
                    retry_s = min(retry_s * 2, RETRY_MAX_S)
            h = config.health
            watch = ServingWatch(h.serving_failures, h.serving_debounce_s)
            loaded = time.monotonic()
            self.log.info("watching brokers %s of cluster %s: one request each every %g s (bound %g s), fires after %d "
                          "rounds without an answer, at most once per %g s", [b.id for b in registrations[1]], self.cluster,
                          h.serving_interval_s, h.serving_timeout_s, h.serving_failures, h.serving_debounce_s)
            while True:
                t0 = time.monotonic()
                if t0 - loaded >= RELOAD_S:
                    try:
                        config, tls = await self._settings()
                        h, loaded = config.health, t0
                        watch.failures, watch.debounce_s = h.serving_failures, h.serving_debounce_s
                    except Exception as exc:  # noqa: BLE001 - the last settings go on
                        self.log.warning("cluster %s: settings not read again (%s: %s)", self.cluster, type(exc).__name__, exc)
                why = unsupported(tls)
                if why:  # said once per settings read; the cron and the ZooKeeper watch still check the cluster
                    if t0 - loaded < h.serving_interval_s:
                        self.log.error("cluster %s: not watched for serving: %s", self.cluster, why)
                    await asyncio.sleep(h.serving_interval_s)
                    continue
                try:
                    registrations = await asyncio.wait_for(blocking(read_registrations, zk, registrations), h.serving_timeout_s)
                except Exception as exc:  # noqa: BLE001 - ZooKeeper slow or lost: the last registrations are asked
                    self.log.warning("cluster %s: /brokers/ids not read (%s: %s); asking the brokers last seen",
                                     self.cluster, type(exc).__name__, exc)
                round_ = await asyncio.gather(*(ask(b, config.listener, h.serving_timeout_s, tls, config.kafka_version)
                                                for b in registrations[1]))
                fire = watch.observe(round_, time.monotonic(), clock.now_iso())
                if fire is not None:
                    payload = {"cluster": self.cluster, "changed": ["serving"], "at": clock.now_iso(),
                               "not_answering": {str(b): d for b, d in fire.brokers.items()}}
                    self.log.warning("cluster %s: %s: starting the health check", self.cluster, fire.summary())
                    yield TriggerEvent(payload)
                await asyncio.sleep(max(0.0, h.serving_interval_s - (time.monotonic() - t0)))
        finally:
            if zk is not None:  # closed in the cluster's thread, after whatever call still blocks there; nobody waits
                executor.submit(_close, zk)
            executor.shutdown(wait=False)


def _close(zk) -> None:
    try:
        zk.stop()
    finally:
        zk.close()
