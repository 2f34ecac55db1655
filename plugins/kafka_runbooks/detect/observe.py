"""Observing a cluster (I/O): ZooKeeper, direct Kafka checks, the canary and SSH host probes, in
parallel, into one ClusterSnapshot; and one whole health check outside Airflow (drills, figures)."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Mapping

from kafka_runbooks import versions


def known_registrations(config) -> dict[int, Any]:
    """The last registration the health check saw of every configured broker (from its history):
    an unregistered broker is still probed on its ports and checked on its endpoints."""
    from kafka_runbooks.detect.history import HistoryStore, broker_series
    from kafka_runbooks.model import Broker

    out = {}
    try:
        store = HistoryStore(config)
        for bid in config.hosts:
            for sample in reversed(store.read(broker_series(bid))):
                endpoints = sample.get("endpoints")
                if isinstance(endpoints, str) and endpoints:
                    eps = tuple(endpoints.split(","))
                    host, port = Broker(bid, "", 0, endpoints=eps).endpoint(None) if len(eps) == 1 else ("", 0)
                    out[bid] = Broker(bid, host, port, endpoints=eps)
                    break
    except (OSError, ValueError, KeyError):
        pass
    return out


def logged_versions(config) -> dict[int, tuple[int, str, int | None]]:
    """{broker id: (pid, version, ZooKeeper session)} of the ``Kafka version : N`` line the health check last read of
    each broker's JVM (its history; version "" when the JVM logged none): the host probe reads it once per JVM."""
    from kafka_runbooks.detect.history import HistoryStore, broker_series

    out: dict[int, tuple[int, str, int | None]] = {}
    try:
        store = HistoryStore(config)
        for bid in config.hosts:
            for sample in reversed(store.read(broker_series(bid))):
                v, pid = sample.get("kafka_version_logged"), sample.get("pid")
                if isinstance(v, str) and isinstance(pid, int):
                    session = sample.get("session_id")
                    out[bid] = (pid, v, session if isinstance(session, int) else None)
                    break
    except (OSError, ValueError, KeyError):
        pass
    return out


def with_logged(kv, logged: Mapping[int, tuple[str, str]]):
    """``kv`` (a ``versions.KafkaVersion`` without log observations) with each registered broker's own ``Kafka
    version : N`` line added ({broker id: (N, where it was read)}): exact where a broker logged one."""
    per = {b.broker_id: list(b.observations) for b in kv.brokers}
    added = False
    for bid, (v, where) in sorted(logged.items()):
        o = versions.from_log_line(bid, v, f"Kafka version : {v} ({where})") if bid in per and v else None
        if o is not None:
            per[bid].append(o)
            added = True
    if not added:
        return kv
    out = versions.cluster_version(per, kv.configured)
    return versions.KafkaVersion(out.brokers, kv.configured, kv.notes + out.notes)


def brokers_to_probe(config, snapshot, known: Mapping[int, Any] | None = None) -> tuple[list, list]:
    """(registered brokers + configured brokers that are not registered, the unregistered ids).
    An unregistered broker is its last known registration, else just its id (its SSH host and the
    configured ``broker_port`` then locate it)."""
    from kafka_runbooks.model import Broker

    known = known or {}
    brokers = list(snapshot.brokers)
    missing = sorted(set(config.hosts) - snapshot.live_broker_ids)
    for bid in missing:
        brokers.append(known.get(bid) or Broker(bid, "", 0))
    return sorted(brokers, key=lambda b: b.id), missing


def zookeeper_unreachable(exc: BaseException) -> bool:
    """Kazoo's connection time-out or loss, or a socket error: the ensemble (or our way to it) is down."""
    from kazoo.exceptions import ConnectionLoss, KazooException, SessionExpiredError
    from kazoo.handlers.threading import KazooTimeoutError

    return isinstance(exc, (KazooTimeoutError, ConnectionLoss, SessionExpiredError, OSError)) or (
        isinstance(exc, KazooException) and "connect" in str(exc).lower())


def unreachable_snapshot(config, zk_hook, exc: BaseException, *, probe_zookeeper: bool = True, ssh: bool = True):
    """The snapshot of a check that could not read ZooKeeper: no brokers or partitions (unknown, not empty), the error
    naming the ensemble, and every member's own four-letter words (which of them answer, and what they say)."""
    from kafka_runbooks import clock
    from kafka_runbooks.detect.zk_probe import probe_ensemble
    from kafka_runbooks.model import ClusterSnapshot

    servers = ",".join(f"{h}:{p}" for h, p in zk_hook.servers)
    error = f"{type(exc).__name__}: {exc} (ZooKeeper {servers}{zk_hook.chroot or ''}, connection {config.zk_conn_id!r})"
    members = probe_ensemble(config, zk_hook.servers, ssh=ssh) if probe_zookeeper else []
    return ClusterSnapshot(cluster=config.name, taken_at=clock.now_iso(), brokers=(), controller_id=None, partitions=(),
                           configured_broker_ids=tuple(sorted(config.hosts)), zookeeper=tuple(members), zookeeper_error=error)


def unanswered(hook, brokers, version) -> dict[int, str]:
    """{broker id: why} of the registered brokers that were asked ApiVersions by the version probe and did not answer
    it (``KafkaHook.kafka_version``, bounded by VERSION_PROBE_S): their request path does not serve, so a JMX read of
    their request metrics would wait behind it until its own bound (lab/README.md, hang: JmxTool's RMI thread parks in
    ``RequestChannel``) -- the leadership observation skips it. A broker not asked (it may be 0.9) is never in it."""
    answered = {o.broker_id for b in version.brokers for o in b.observations if o.source == "api_versions"}
    notes = {n.split(":", 1)[0]: n for n in version.notes}
    return {b.id: notes.get(f"broker {b.id}", "no ApiVersions answer") for b in brokers
            if hook.asking(b).api_versions and b.id not in answered}


def no_jmx(hook, registered, brokers, version, jmx: bool) -> dict[int, str]:
    """{broker id: why JmxTool is not run on it this check}: the registered brokers that did not answer the version
    probe (``unanswered``); with ``jmx`` False, every broker."""
    silent = {b: f"the broker did not answer Kafka requests ({why}); a JMX read waits behind its stuck request path"
              for b, why in (unanswered(hook, registered, version) if version is not None else {}).items()}
    return {b.id: silent.get(b.id) or NO_JMX for b in brokers} if not jmx else silent


NO_JMX = ("this run was started by the serving watch: it judges the brokers that stopped answering, without a JVM per "
          "host (the cron's and the ZooKeeper watch's runs read JMX)")


def take_snapshot(config, *, probe_hosts: bool = True, check_kafka: bool = True, known: Mapping[int, Any] | None = None,
                  leadership: bool = True, probe_zookeeper: bool = True, jmx: bool = True, direct_checks: bool = True):
    """ClusterSnapshot from ZooKeeper; then, in parallel: host probes over SSH of every registered or configured broker,
    direct Kafka checks of each, the canary when the cluster enables it, the ZooKeeper probe of every ensemble member
    (four-letter words; SSH where configured), the version the brokers report (ApiVersions, registration schema:
    ``KafkaHook.kafka_version``; with the host probes, each JVM's own ``Kafka version : N`` line, read once per JVM:
    ``logged_versions``), and what the leadership detectors read (each broker's own metadata; over SSH its election
    settings, controller log lines and request-path JMX: ``detect/leadership_observe.py``). ``jmx=False``: no JmxTool
    read at all (JVMs started over SSH on every host: the longest part of a check on a loaded machine), as in a run the
    serving watch started; JmxTool is never run on a broker that did not answer the version probe (``unanswered``).
    ``direct_checks=False``: no direct check, no canary (the version probe runs): the shape of an incident's opening."""
    from concurrent.futures import ThreadPoolExecutor

    from kafka_runbooks.detect.host_probe import probe_all
    from kafka_runbooks.detect.leadership_observe import observe as observe_leadership
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.detect.zk_probe import probe_ensemble
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook

    took: dict[str, float] = {}
    t0 = time.monotonic()
    zk_hook = ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s)
    try:
        with zk_hook.session() as zk:
            snapshot = read_snapshot(zk, config.name)
        took["zookeeper"] = time.monotonic() - t0
    except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable is a finding (detect/zookeeper.py), not a failed check
        if not zookeeper_unreachable(exc):
            raise
        return unreachable_snapshot(config, zk_hook, exc, probe_zookeeper=probe_zookeeper, ssh=probe_hosts)
    snapshot = dataclasses.replace(snapshot, configured_broker_ids=tuple(sorted(config.hosts)))
    brokers, missing = brokers_to_probe(config, snapshot, known)
    logged = logged_versions(config) if probe_hosts else {}
    # the JVMs' own "Kafka version : N" lines an earlier check read, where the registration is still theirs
    early = {b.id: (logged[b.id][1], f"{config.capture.stdout_log} or server.log, read by an earlier check")
             for b in snapshot.brokers if b.id in logged and b.session_id is not None and logged[b.id][2] == b.session_id}
    # what each broker may be asked is decided before anything is sent (versions.asking, seed 002): its registration,
    # its JVM's own log line, the setting
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener, kafka_version=config.kafka_version,
                     logged={b: v for b, (v, _) in early.items() if v}).knows(snapshot.brokers)
    checkable = [b for b in brokers if b.endpoints or b.id not in missing]
    led = canary_partitions(config, snapshot)
    with ThreadPoolExecutor(max_workers=6, thread_name_prefix="snapshot") as pool:
        def submit(name, fn, *args, **kwargs):
            return pool.submit(_timed, took, name, fn, *args, **kwargs)

        # what needs no version first, beside the version probe (hooks/kafka.py VERSION_PROBE_S: a hung broker costs it
        # its bound), so the direct checks' bound and the version probe's run at the same time
        ensemble = submit("ensemble", probe_ensemble, config, zk_hook.servers, ssh=probe_hosts) if probe_zookeeper else None
        probes = (submit("host probes", probe_all, config, brokers, logged={b: (pid, v) for b, (pid, v, _) in logged.items()})
                  if probe_hosts else None)
        checks = (submit("direct checks", hook.check_all, checkable, config.health.kafka_probe_timeout_s, unregistered=missing,
                         unregistered_timeout_s=config.health.unregistered_probe_timeout_s)
                  if check_kafka and direct_checks else None)
        version = (submit("version", hook.kafka_version, list(snapshot.brokers), config.health.kafka_probe_timeout_s,
                          config.kafka_version).result() if check_kafka else None)
        if version is not None:
            snapshot = dataclasses.replace(snapshot, kafka_version=versions.to_dict(with_logged(version, early)))
        # then what depends on it: JmxTool's invocation (leadership) and the canary's producer
        silent = no_jmx(hook, snapshot.brokers, brokers, version, jmx)
        lead = (submit("leadership", observe_leadership, config, snapshot, brokers, hosts=probe_hosts, silent=silent)
                if leadership and check_kafka else None)
        canary = (submit("canary", hook.canary, list(snapshot.brokers), led, config.canary.topic, config.canary.timeout_s,
                         version=snapshot.version if snapshot.kafka_version else None)
                  if check_kafka and direct_checks and config.canary.enabled else None)
        if probes is not None:
            snapshot = _with_probes(snapshot, probes.result(), version)
        if checks is not None:
            snapshot = snapshot.with_checks(checks.result(), canary.result() if canary is not None else ())
        if lead is not None:
            fields, notes = lead.result()
            snapshot = dataclasses.replace(snapshot, **fields)
            for note in notes:
                logging.getLogger(__name__).warning("leadership: %s", note)
        if ensemble is not None:
            snapshot = dataclasses.replace(snapshot, zookeeper=tuple(ensemble.result()))
    logging.getLogger(__name__).info("snapshot of %s in %.1f s: %s", config.name, time.monotonic() - t0,
                                     ", ".join(f"{k} {v:.1f} s" for k, v in took.items()))
    return snapshot


def canary_partitions(config, snapshot) -> dict[int, int]:
    """``{broker id: the canary topic's partition it leads}`` (the first by index), when the canary is enabled."""
    led: dict[int, int] = {}
    if config.canary.enabled:
        for p in sorted(snapshot.partitions, key=lambda p: p.index):
            if p.topic == config.canary.topic and p.leader in snapshot.live_broker_ids:
                led.setdefault(p.leader, p.index)
    return led


def _with_probes(snapshot, probes, version):
    """The snapshot with its host probes; with a version read, every broker's own "Kafka version : N" line makes it
    exact."""
    snapshot = snapshot.with_probes(probes)
    if version is not None:
        found = {p.broker_id: (p.kafka_version_logged, p.kafka_version_log) for p in snapshot.probes
                 if p.kafka_version_logged and p.kafka_version_log}
        snapshot = dataclasses.replace(snapshot, kafka_version=versions.to_dict(with_logged(version, found)))
    return snapshot


def _timed(took: dict[str, float], name: str, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its wall time kept in ``took[name]`` (the snapshot's log line says where a check's time
    went: the slowest part is the check's length)."""
    t = time.monotonic()
    try:
        return fn(*args, **kwargs)
    finally:
        took[name] = time.monotonic() - t


def check_once(config, *, probe_hosts: bool = True, activity=()):
    """One health check as the health DAG does it, outside Airflow: observe, append to the history, run the detectors on
    the history (``activity``: the product's own remediations, ``remediate/activity.product_activity``). Returns
    (snapshot, findings); opens no incident."""
    from kafka_runbooks.detect.detectors import detect
    from kafka_runbooks.detect.history import HistoryStore
    from kafka_runbooks.detect.record import record_check

    snapshot = take_snapshot(config, probe_hosts=probe_hosts, known=known_registrations(config))
    history = record_check(HistoryStore(config), snapshot)
    return snapshot, detect(snapshot, config.health, history, config.zookeeper_health, leadership=config.leadership,
                            kafka_version=config.kafka_version, activity=activity)
