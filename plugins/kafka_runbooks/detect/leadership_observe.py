"""What the health check reads for the leadership detectors (I/O), in parallel with its other observations:

* every registered broker's own metadata view (``KafkaHook.metadata_views``: one connection to that broker alone);
* on every configured broker's host, over SSH with the strict hook: the election-related keys of its
  server.properties (an allow-list: the file may hold passwords), the lines of its controller.log about
  preferred elections within ``leadership.window_s``, and -- for a registered broker with a JMX port -- its
  request-path JMX figures with Kafka's own JmxTool (``detect/jmx.py``).

A host that cannot be read leaves a note; nothing here raises for a broker or host problem.
"""

from __future__ import annotations

import datetime as dt
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.model import Broker, ClusterSnapshot, LogLineSeen, RequestMetrics

COMMAND_TIMEOUT_S = 15.0


@dataclass
class HostLeadership:
    broker_id: int
    static: dict[str, str] | None = None
    lines: list[LogLineSeen] = field(default_factory=list)
    metrics: RequestMetrics | None = None
    notes: list[str] = field(default_factory=list)


def controller_log_path(config, broker_id: int) -> str:
    return os.path.join(config.log_dir(broker_id), "controller.log")


def _text(res) -> str:
    return res.stdout.decode("utf-8", "replace") if res is not None and res.ok else ""


def tool_said(stderr: bytes | None) -> str:
    """What a failed JVM tool said, without its stack traces: its last lines that are not frames."""
    lines = [ln.strip() for ln in (stderr or b"").decode("utf-8", "replace").splitlines()
             if ln.strip() and not ln.startswith(("\t", " ")) and not ln.strip().startswith(("at ", "..."))]
    return " ".join(lines[-2:])[-300:] or "no message"


def read_host(config, broker: Broker, registered: bool, ssh, replicas: Iterable[tuple[str, int, int, bool]] = (),
              version=None, silent: str | None = None) -> HostLeadership:
    """One broker host's part (``ssh``: a StrictSSHHook or anything with ``run(argv, timeout)``). ``replicas``: (topic,
    partition, leader, this broker is the follower) of the replicas out of their ISR it takes part in
    (``detect/replicas.py``): their log end offsets and fetcher lags are read in the same JmxTool run, and a follower's
    state-change.log lines about them. ``version``: the brokers' version as observed, which decides how JmxTool is
    run. ``silent``: why JmxTool is not run on this broker this check (``observe.take_snapshot``: the broker did not
    answer Kafka requests, so its JMX read would wait behind the same stuck request path until
    ``leadership.jmx_timeout_s``; or the run was started by the serving watch); its request metrics are unknown, with
    that reason."""
    from kafka_runbooks.host.argv import UnsafeValueError, validate_abs_path
    from kafka_runbooks.detect.controller_log import controller_events
    from kafka_runbooks.detect.broker_log import lines_of_interest
    from kafka_runbooks.host.jmxtool import JmxReading, jmx_read, log_end_offset, metrics_from, parse_jmxtool_output, replica_names
    from kafka_runbooks.detect.leadership import STATIC_KEYS
    from kafka_runbooks.host.procfs import DATE_ARGV, host_clock_or_ours
    from kafka_runbooks.host.properties import parse_properties

    h = config.leadership
    out = HostLeadership(broker.id)
    replicas = list(replicas)
    now, offset, _ = host_clock_or_ours(_text(ssh.run(DATE_ARGV, COMMAND_TIMEOUT_S)))
    try:
        props_path = validate_abs_path(config.server_properties(broker.id), "server.properties path")
        res = ssh.run(("cat", "--", props_path), COMMAND_TIMEOUT_S)
        if res.ok:
            props = parse_properties(_text(res))
            out.static = {k: props[k] for k in STATIC_KEYS if k in props}
        else:
            out.notes.append(f"broker {broker.id}: {props_path} not read ({res.error or 'exit ' + str(res.exit_code)})")
        if h.controller_log:
            path = validate_abs_path(controller_log_path(config, broker.id), "controller.log path")
            res = ssh.run(("tail", "-c", str(int(h.controller_log_bytes)), "--", path), COMMAND_TIMEOUT_S)
            text = _text(res)
            if len(text.encode()) >= h.controller_log_bytes and "\n" in text:
                text = text.split("\n", 1)[1]  # the first line is probably cut
            since = now - dt.timedelta(seconds=h.window_s)
            out.lines = controller_events(text, since, utc_offset=offset, source=path, broker_id=broker.id)
            if not res.ok:
                out.notes.append(f"broker {broker.id}: {path} not read ({res.error or 'exit ' + str(res.exit_code)})")
        followed = sorted({f"{t}-{p}" for t, p, _, follower in replicas if follower})
        if followed:
            path = validate_abs_path(os.path.join(config.log_dir(broker.id), "state-change.log"), "state-change.log path")
            res = ssh.run(("tail", "-c", str(int(h.controller_log_bytes)), "--", path), COMMAND_TIMEOUT_S)
            since = now - dt.timedelta(seconds=h.window_s)
            out.lines += [LogLineSeen(x.what, x.at, x.line_no, x.excerpt, {**x.attrs, "host_broker": str(broker.id)}, x.source)
                          for x in lines_of_interest(_text(res), since, utc_offset=offset, source="state-change.log",
                                                     only=("leader_and_isr_ignored",))
                          if x.attrs.get("partition_name") in followed][-50:]
        if h.jmx and registered:
            try:
                fetchers = max(1, int((out.static or {}).get("num.replica.fetchers") or 1))
            except ValueError:
                fetchers = 1
            extra_names = tuple(dict.fromkeys(n for t, p, leader, follower in replicas
                                              for n in (replica_names(t, p, leader, fetchers) if follower else (log_end_offset(t, p),))))
            at = clock.iso(now)
            run = jmx_read(config, broker, extra_names, version)
            if silent:
                out.metrics = metrics_from(broker.id, at, JmxReading(), error=f"JmxTool not run: {silent}")
            elif run.argv is None:
                out.metrics = metrics_from(broker.id, at, JmxReading(), error=f"{run.unavailable}: request queues unknown")
            else:
                res = ssh.run(run.argv, run.timeout_s)
                reading = parse_jmxtool_output(_text(res)) if res.ok else JmxReading()
                err = None if res.ok else f"JmxTool {res.error or 'exit ' + str(res.exit_code)}: {tool_said(res.stderr)}"
                out.metrics = metrics_from(broker.id, at, reading, err)
    except UnsafeValueError as exc:
        out.notes.append(f"broker {broker.id}: refused: {exc}")
    return out


def read_hosts(config, brokers: Iterable[Broker], registered: set[int], runner_factory: Callable | None = None,
               replicas: Mapping[int, Iterable[tuple[str, int, int, bool]]] | None = None,
               version=None, silent: Mapping[int, str] | None = None) -> list[HostLeadership]:
    from kafka_runbooks.hooks.ssh import default_runner_factory, opened_runner

    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    replicas = replicas or {}

    def one(b: Broker) -> HostLeadership:
        try:
            with opened_runner(factory, config.ssh_conn_id(b.id)) as ssh:
                return read_host(config, b, b.id in registered, ssh, replicas.get(b.id, ()), version, (silent or {}).get(b.id))
        except Exception as exc:  # noqa: BLE001 - an unusable host is a note, never a failed health check
            return HostLeadership(b.id, notes=[f"broker {b.id}: host not read ({type(exc).__name__}: {exc})"])

    brokers = list(brokers)
    if not brokers:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(brokers)), thread_name_prefix="leadership") as pool:
        return list(pool.map(one, brokers))


def replica_roles(snapshot: ClusterSnapshot) -> dict[int, list[tuple[str, int, int, bool]]]:
    """{broker: [(topic, partition, leader, follower?)]} of the replicas out of their ISR (``detect/replicas.py``)."""
    from kafka_runbooks.detect.replicas import out_of_isr

    out: dict[int, list[tuple[str, int, int, bool]]] = {}
    for b, p in out_of_isr(snapshot):
        out.setdefault(b, []).append((p.topic, p.index, p.leader, True))
        out.setdefault(p.leader, []).append((p.topic, p.index, p.leader, False))
    return out


def observe(config, snapshot: ClusterSnapshot, brokers: Iterable[Broker], *, hosts: bool = True,
            silent: Mapping[int, str] | None = None) -> tuple[dict[str, Any], list[str]]:
    """(the snapshot fields of issue 7 -- ``metadata_views``, ``request_metrics``, ``controller_log``,
    ``static_configs`` -- and notes about what could not be read)."""
    from kafka_runbooks.hooks.kafka import KafkaHook

    h = config.leadership
    brokers = list(brokers)
    fields: dict[str, Any] = {}
    notes: list[str] = []
    live = [b for b in brokers if b.id in snapshot.live_broker_ids]
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="leadership-obs") as pool:
        views = pool.submit(KafkaHook(config.kafka_conn_id, listener=config.listener).metadata_views, live, h.view_timeout_s) \
            if h.metadata_views else None
        host = pool.submit(read_hosts, config, [b for b in brokers if b.id in config.hosts], set(snapshot.live_broker_ids),
                           None, replica_roles(snapshot), snapshot.version if snapshot.kafka_version else None, silent) if hosts else None
        if views is not None:
            fields["metadata_views"] = tuple(views.result())
        if host is not None:
            parts = host.result()
            fields["static_configs"] = {str(x.broker_id): x.static for x in parts if x.static is not None}
            fields["controller_log"] = tuple(line for x in parts for line in x.lines)
            fields["request_metrics"] = tuple(x.metrics for x in parts if x.metrics is not None)
            notes = [n for x in parts for n in x.notes]
    return fields, notes
