"""Quick host probes over SSH: is the broker process there, how many files does it hold open,
and what state are the TCP connections on its port in (CLOSE_WAIT piling up, ...)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from kafka_runbooks import model
from kafka_runbooks.capture import commands as C
from kafka_runbooks.hooks.ssh import default_runner_factory
from kafka_runbooks.config import ClusterConfig

log = logging.getLogger(__name__)

PROBE_TIMEOUT_CAP_S = 20.0


def probe_host(config: ClusterConfig, broker: model.Broker, runner) -> model.HostProbe:
    """Probe one broker's host through ``runner`` (an StrictSSHHook or anything with ``run``).
    Never raises for host problems: an unusable host is ``reachable=False`` with the error."""
    t = min(config.capture.command_timeout_s, PROBE_TIMEOUT_CAP_S)
    try:
        bid = C.validate_broker_id(broker.id)
        port = C.validate_port(broker.port or config.broker_port)
    except C.UnsafeValueError as exc:
        return model.HostProbe(broker_id=int(broker.id) if str(broker.id).isdigit() else -1, reachable=False, error=str(exc))
    try:
        res = runner.run(("ss", "-Hltnp"), t)
        netstat = res.exit_code == C.EXIT_NOT_FOUND
        if netstat:
            res = runner.run(("netstat", "-ltnp"), t)
            listeners = C.parse_netstat_listeners(res.stdout.decode("utf-8", "replace"))
        else:
            listeners = C.parse_ss_listeners(res.stdout.decode("utf-8", "replace"))
        if res.error or res.exit_code != 0:
            errors = [f"listening sockets: {res.error or 'exit ' + str(res.exit_code)}"]
        else:
            errors = []
        addrs = [a for a in (broker.host, getattr(runner, "host", None)) if a]
        pid = C.find_broker_pid(listeners, port, addrs)
        if pid is None and not netstat and config.capture.jvm_tool_prefix:
            res2 = runner.run(C.listen_sockets_command(t, config.capture.jvm_tool_prefix).argv, t)
            pid = C.find_broker_pid(C.parse_ss_listeners(res2.stdout.decode("utf-8", "replace")), port, addrs)
        alive = False
        open_files = None
        if pid is None:
            errors.append(f"no visible process listening on port {port}")
        else:
            ps = runner.run(("ps", "-o", "pid=,stat=", "-p", str(pid)), t)
            lines = [l.split() for l in ps.stdout.decode("utf-8", "replace").splitlines() if l.strip()]
            alive = ps.exit_code == 0 and any(
                len(p) >= 2 and p[0] == str(pid) and not p[1].startswith(("Z", "X")) for p in lines
            )
            fd = runner.run(C.open_files_command(pid, config.capture).argv, t)
            if fd.exit_code == 0 and fd.error is None:
                open_files = C.count_lines(fd.stdout)
            else:
                errors.append(f"open files: {fd.error or fd.stderr.decode('utf-8', 'replace').strip()[:200]}")
        conns = runner.run(("netstat", "-tan") if netstat else ("ss", "-tan"), t)
        states = C.connection_states(conns.stdout.decode("utf-8", "replace"), port, broker.host, netstat=netstat)
        if conns.error or conns.exit_code != 0:
            errors.append(f"connections: {conns.error or 'exit ' + str(conns.exit_code)}")
        return model.HostProbe(
            broker_id=bid,
            reachable=True,
            pid=pid,
            process_alive=alive,
            open_files=open_files,
            connection_states=states,
            error="; ".join(errors) or None,
        )
    except Exception as exc:  # noqa: BLE001 - SSHError, or anything else: the host is unusable
        return model.HostProbe(broker_id=bid, reachable=False, error=f"{type(exc).__name__}: {exc}")


def _probe_one(config: ClusterConfig, broker: model.Broker, factory: Callable) -> model.HostProbe:
    runner = None
    try:
        runner = factory(config.ssh_conn_id(broker.id))
        return probe_host(config, broker, runner)
    except Exception as exc:  # noqa: BLE001 - missing/insecure connection config
        return model.HostProbe(broker_id=int(broker.id), reachable=False, error=f"{type(exc).__name__}: {exc}")
    finally:
        if runner is not None:
            try:
                runner.close()
            except Exception:  # noqa: BLE001
                pass


def probe_all(
    config: ClusterConfig, brokers: Iterable[model.Broker], runner_factory: Callable | None = None
) -> list[model.HostProbe]:
    """Probe every broker's host in parallel; results in the order of ``brokers``."""
    brokers = list(brokers)
    if not brokers:
        return []
    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    with ThreadPoolExecutor(max_workers=min(32, len(brokers)), thread_name_prefix="probe") as pool:
        return list(pool.map(lambda b: _probe_one(config, b, factory), brokers))
