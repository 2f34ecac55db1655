"""Host probes over SSH, one per broker host (registered or only configured), in parallel.

For one broker, within one deadline (``health.probe_host_deadline_s``), as argv commands only:

1. ``date +'%s.%N %z'`` -- the host's clock and UTC offset (its logs are in local time);
2. ``ss -Hltnp`` (``netstat -ltnp`` where ss is missing) -- the process listening on the broker's
   ports at the broker's own addresses (:mod:`kafka_runbooks.detect.endpoints`);
3. ``cat /proc/<pid>/stat`` -- running / sleeping / stopped (T) / zombie; ``ps -o etimes=`` -- uptime;
   the number of entries in ``/proc/<pid>/fd``;
4. ``ss -Htani`` (``netstat -tan``) -- state counts, Recv-Q and byte counters of the broker's own
   connections;
5. ``stat -c %Y`` and ``tail -c N`` of ``server.log`` -- when it was last written, and the fetch
   errors its replica fetchers logged within the window (:mod:`kafka_runbooks.detect.fetch_errors`).

Never raises for host problems: an unusable host is ``reachable=False`` with the error; a failing
command leaves its figures ``None`` and says so in ``error``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from kafka_runbooks import clock, model
from kafka_runbooks.capture import commands as C
from kafka_runbooks.capture import sockets as S
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect import procfs
from kafka_runbooks.detect.endpoints import Resolver, broker_endpoint, resolve
from kafka_runbooks.detect.fetch_errors import UNREACHABLE_CAUSES, fetch_errors
from kafka_runbooks.hooks.ssh import CommandResult, default_runner_factory

log = logging.getLogger(__name__)

MAX_FETCH_ERRORS_KEPT = 50  # newest ones; ``fetch_errors_total`` has the count


class _Deadline(Exception):
    pass


class HostCommands:
    """Runs the probe's commands within the host's deadline, collecting problems."""

    def __init__(self, runner, command_timeout_s: float, deadline_s: float) -> None:
        self.runner = runner
        self.command_timeout_s = command_timeout_s
        self.deadline = time.monotonic() + deadline_s
        self.problems: list[str] = []

    def run(self, what: str, argv) -> CommandResult | None:
        remaining = self.deadline - time.monotonic()
        if remaining < 1.0:
            raise _Deadline(f"probe deadline reached before {what}")
        res = self.runner.run(tuple(argv), min(self.command_timeout_s, remaining))
        if res.error or res.exit_code not in (0,):
            if res.exit_code == C.EXIT_NOT_FOUND:
                return res
            err = (res.stderr or b"").decode("utf-8", "replace").strip()[:200]
            self.problems.append(f"{what}: {res.error or 'exit ' + str(res.exit_code)}{': ' + err if err else ''}")
        return res

    @staticmethod
    def text(res: CommandResult | None) -> str:
        return res.stdout.decode("utf-8", "replace") if res is not None and res.exit_code == 0 and res.error is None else ""


def probe_host(
    config: ClusterConfig,
    broker: model.Broker,
    runner,
    *,
    resolver: Resolver = resolve,
) -> model.HostProbe:
    """Probe one broker's host through ``runner`` (a StrictSSHHook, or anything with ``run`` and ``host``)."""
    h = config.health
    try:
        bid = C.validate_broker_id(broker.id)
    except C.UnsafeValueError as exc:
        return model.HostProbe(broker_id=-1, reachable=False, error=str(exc))
    host = HostCommands(runner, h.probe_command_timeout_s, h.probe_host_deadline_s)
    endpoint, problems = broker_endpoint(broker, config.listener, config.broker_port, [getattr(runner, "host", "")], resolver)
    host.problems += problems
    fields: dict = {"ports": endpoint.ports, "addresses": tuple(sorted(endpoint.addresses))}
    try:
        for port in endpoint.ports:
            C.validate_port(port)
        # 1. the host's clock
        now, offset = clock.now(), dt.timedelta(0)
        got = procfs.host_clock(host.text(host.run("clock", ("date", "+%s.%N %z"))))
        if got is not None:
            now, offset = got
        else:
            host.problems.append("host clock unknown: using this worker's clock and UTC for its logs")
        fields["probed_at"] = clock.iso(now)

        # 2. the broker process: who listens on its ports at its addresses
        res = host.run("listening sockets", ("ss", "-Hltnp"))
        netstat = res is not None and res.exit_code == C.EXIT_NOT_FOUND
        if netstat:
            listeners = S.parse_netstat_listeners(host.text(host.run("listening sockets", ("netstat", "-ltnp"))))
        else:
            listeners = S.parse_ss_listeners(host.text(res))
        pid = S.find_broker_pid(listeners, endpoint)
        if pid is None and not netstat and config.capture.jvm_tool_prefix:
            argv = C.listen_sockets_command(h.probe_command_timeout_s, config.capture.jvm_tool_prefix).argv
            listeners = S.parse_ss_listeners(host.text(host.run("listening sockets as the JVM user", argv)))
            pid = S.find_broker_pid(listeners, endpoint)
        fields["listening"] = pid is not None or S.listening(listeners, endpoint)
        fields["pid"] = pid

        # 3. its state
        if pid is None:
            host.problems.append(f"no visible process listening on ports {list(endpoint.ports)} at {sorted(endpoint.addresses) or 'any address'}")
        else:
            C.validate_pid(pid)
            state = procfs.process_state(host.text(host.run("process state", ("cat", f"/proc/{pid}/stat"))), pid)
            fields["process_state"] = state
            fields["process_alive"] = state is not None and state not in ("zombie", "dead")
            fields["process_uptime_s"] = procfs.uptime_s(host.text(host.run("process uptime", ("ps", "-o", "etimes=", "-p", str(pid)))))
            fd = host.run("open files", C.open_files_command(pid, config.capture).argv)
            if fd is not None and fd.exit_code == 0 and fd.error is None:
                fields["open_files"] = C.count_lines(fd.stdout)

        # 4. its connections
        res = host.run("connections", ("netstat", "-tan") if netstat else ("ss", "-Htani"))
        if res is not None and res.exit_code == C.EXIT_NOT_FOUND and not netstat:
            netstat = True
            res = host.run("connections", ("netstat", "-tan"))
        text = host.text(res)
        if text:
            summary = S.summarize(S.parse_connections(text, netstat=netstat), endpoint)
            fields.update(
                connection_states=summary.states,
                recv_q_bytes=summary.recv_q_bytes,
                recv_q_sockets=summary.recv_q_sockets,
                bytes_received=summary.bytes_received,
                bytes_acked=summary.bytes_acked,
            )

        # 5. its server.log: last written, and the fetch errors within the window
        log_path = C.validate_abs_path(config.server_log(bid), "server log path")
        mtime = procfs.mtime(host.text(host.run("server.log mtime", ("stat", "-c", "%Y", "--", log_path))))
        if mtime is not None:
            fields["server_log_mtime"] = clock.iso(mtime)
            fields["server_log_age_s"] = round(max(0.0, (now - mtime).total_seconds()), 1)
        since = now - dt.timedelta(seconds=h.fetch_error_window_s)
        fields["fetch_errors_since"] = clock.iso(since)
        n = C.validate_int(h.log_tail_bytes, "log_tail_bytes", minimum=1, maximum=1 << 30)
        tail = host.text(host.run("server.log tail", ("tail", "-c", str(n), "--", log_path)))
        if tail:
            if len(tail.encode()) >= n:  # the first line is probably cut
                tail = tail.split("\n", 1)[1] if "\n" in tail else ""
            errors = [e for e in fetch_errors(tail, since=since, until=now, broker_id=bid, utc_offset=offset)
                      if e.cause in UNREACHABLE_CAUSES and e.at is not None]
            fields["fetch_errors_total"] = len(errors)
            fields["fetch_errors"] = tuple(
                model.FetchErrorSeen(
                    at=clock.iso(e.at),
                    fetcher_broker_id=e.fetcher_broker_id if e.fetcher_broker_id is not None else bid,
                    leader_broker_id=e.leader_broker_id,
                    line_no=e.line_no,
                    excerpt=e.excerpt,
                    cause=e.cause,
                )
                for e in errors[-MAX_FETCH_ERRORS_KEPT:]
            )
    except _Deadline as exc:
        host.problems.append(str(exc))
    except C.UnsafeValueError as exc:
        host.problems.append(f"refused: {exc}")
    except Exception as exc:  # noqa: BLE001 - SSHError or anything else: the host is unusable
        return model.HostProbe(broker_id=bid, reachable=False, error=f"{type(exc).__name__}: {exc}", **_safe(fields))
    return model.HostProbe(broker_id=bid, reachable=True, error="; ".join(host.problems) or None, **fields)


def _safe(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if k in ("ports", "addresses", "probed_at")}


def _probe_one(config: ClusterConfig, broker: model.Broker, factory: Callable, resolver: Resolver) -> model.HostProbe:
    runner = None
    try:
        runner = factory(config.ssh_conn_id(broker.id))
        return probe_host(config, broker, runner, resolver=resolver)
    except Exception as exc:  # noqa: BLE001 - missing/insecure connection config
        return model.HostProbe(broker_id=int(broker.id), reachable=False, error=f"{type(exc).__name__}: {exc}")
    finally:
        if runner is not None:
            try:
                runner.close()
            except Exception:  # noqa: BLE001
                pass


def probe_all(
    config: ClusterConfig,
    brokers: Iterable[model.Broker],
    runner_factory: Callable | None = None,
    *,
    resolver: Resolver = resolve,
) -> list[model.HostProbe]:
    """Probe every broker's host in parallel; results in the order of ``brokers``."""
    brokers = list(brokers)
    if not brokers:
        return []
    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    with ThreadPoolExecutor(max_workers=min(32, len(brokers)), thread_name_prefix="probe") as pool:
        return list(pool.map(lambda b: _probe_one(config, b, factory, resolver), brokers))
