"""The ZooKeeper health probe (I/O): every member of the ensemble, in parallel.

For each server: the four-letter words ``srvr``, ``mntr`` and ``cons`` (through the product's one
four-letter client, ``kafka_runbooks.zookeeper.four_letter``; never ``ruok``: it answers ``imok``
without a quorum). When the cluster configures the server's host (``zookeeper.servers.<id>.ssh_conn_id``),
also over SSH, argv only, within ``health.probe_host_deadline_s``: its clock, the process listening on
its client port (or its pid file) and its state, the host's load and CPU count, ``tickTime`` /
``syncLimit`` / ``initLimit`` from its ``zoo.cfg``, and the log lines of a follower dropping out (and
of a leader dropping a learner) within ``zookeeper_health.log_window_s``.

Never raises for a server's problems: an unreachable server is ``reachable=False`` with the error.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable

from kafka_runbooks import clock, model
from kafka_runbooks.host import commands as C
from kafka_runbooks.host import sockets as S
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect import zk_text
from kafka_runbooks.host import procfs
from kafka_runbooks.detect.host_probe import HostCommands
from kafka_runbooks.zookeeper import four_letter

WORDS = ("srvr", "mntr", "cons")
MAX_LINES_KEPT = 50


@dataclass(frozen=True)
class Member:
    server: str  # myid when configured, else "host:port"
    host: str
    port: int
    ssh_conn_id: str | None = None
    zone: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def members(config: ClusterConfig, connection_servers: Iterable[tuple[str, int]] = ()) -> list[Member]:
    """The configured members (``zookeeper.servers``), else every server of the ZooKeeper connection."""
    from kafka_runbooks.zookeeper import parse_hosts

    if config.zookeeper.servers:
        out = []
        for sid, s in sorted(config.zookeeper.servers.items(), key=lambda kv: (len(kv[0]), kv[0])):
            ((host, port),) = parse_hosts(s.address)
            out.append(Member(sid, host, port, s.ssh_conn_id, s.zone))
        return out
    return [Member(f"{h}:{p}", h, int(p)) for h, p in connection_servers]


def ask_words(member: Member, timeout_s: float, ask: Callable = four_letter) -> dict[str, str | Exception]:
    out: dict[str, str | Exception] = {}
    for word in WORDS:
        try:
            out[word] = ask(member.host, member.port, word, timeout_s)
        except OSError as exc:
            out[word] = exc
    return out


def probe_from_words(member: Member, answers: dict[str, str | Exception], probed_at: str) -> model.ZooKeeperProbe:
    """Pure: the probe of one server from its four-letter answers."""
    texts = {w: a for w, a in answers.items() if isinstance(a, str)}
    errors = [f"{w}: {type(a).__name__}: {a}" for w, a in answers.items() if not isinstance(a, str)]
    if not texts:
        return model.ZooKeeperProbe(member.server, member.address, reachable=False, probed_at=probed_at,
                                    error="; ".join(errors) or "no answer", zone=member.zone)
    fields, problems = zk_text.stats(texts.get("srvr"), texts.get("mntr"), texts.get("cons"))
    if fields.get("connections") is not None:
        fields["connections"] = max(0, fields["connections"] - 1)  # the server counts the probe's own connection
    return model.ZooKeeperProbe(member.server, member.address, reachable=True, probed_at=probed_at, **fields,
                                error="; ".join(errors + problems) or None, zone=member.zone)


def host_fields(config: ClusterConfig, member: Member, runner) -> dict:
    """Over SSH on the server's host: pid, process state, load, zoo.cfg limits, drop lines. Never raises
    for host problems (they go to ``host_error``)."""
    zs, zh, h = config.zookeeper, config.zookeeper_health, config.health
    host = HostCommands(runner, h.probe_command_timeout_s, h.probe_host_deadline_s)
    fields: dict = {}
    try:
        now, offset, known = procfs.host_clock_or_ours(host.text(host.run("clock", procfs.DATE_ARGV)))
        if not known:
            host.problems.append("host clock unknown: its log taken as UTC")
        pid = None
        pid_file = zs.path("pid_file", member.server)
        if pid_file:
            text = host.text(host.run("pid file", ("cat", "--", C.validate_abs_path(pid_file, "pid file")))).strip()
            pid = int(text) if text.isdigit() else None
        else:
            C.validate_port(member.port)
            listeners = S.parse_listeners(host.text(host.run("listening sockets", ("ss", "-Hltnp"))))
            pid = S.find_broker_pid(listeners, S.Endpoint.of([*_resolve(member.host), member.host], [member.port]))
        if pid is None:
            host.problems.append(f"no visible process of ZooKeeper server {member.server} (port {member.port})")
        else:
            C.validate_pid(pid)
            fields["pid"] = pid
            fields["process_state"] = procfs.process_state(host.text(host.run("process state", ("cat", f"/proc/{pid}/stat"))), pid)
            fields["process_uptime_s"] = procfs.uptime_s(host.text(host.run("process uptime", ("ps", "-o", "etimes=", "-p", str(pid)))))
        load = host.text(host.run("load", ("cat", "/proc/loadavg"))).split()
        fields["load_1m"] = float(load[0]) if load and _is_float(load[0]) else None
        cpus = host.text(host.run("cpus", ("nproc",))).strip()
        fields["cpus"] = int(cpus) if cpus.isdigit() else None
        cfg_path = zs.path("config_path", member.server)
        if cfg_path:
            cfg = zk_text.properties(host.text(host.run("zoo.cfg", ("cat", "--", C.validate_abs_path(cfg_path, "zoo.cfg path")))))
            fields.update(tick_time_ms=_int(cfg.get("tickTime")), sync_limit=_int(cfg.get("syncLimit")), init_limit=_int(cfg.get("initLimit")))
        log_path = zs.path("log_path", member.server)
        if log_path:
            n = C.validate_int(zh.log_tail_bytes, "zookeeper_health.log_tail_bytes", minimum=1, maximum=1 << 30)
            tail = host.text(host.run("zookeeper log tail", ("tail", "-c", str(n), "--", C.validate_abs_path(log_path, "ZooKeeper log path"))))
            if len(tail.encode()) >= n:
                tail = tail.split("\n", 1)[1] if "\n" in tail else ""
            since = now - dt.timedelta(seconds=zh.log_window_s)
            lines = zk_text.log_lines(tail, since, utc_offset=offset)
            fields["log_lines"] = tuple(model.LogLineSeen(x.what, clock.iso(x.at), x.line_no, x.excerpt, x.attrs, source="zookeeper.log")
                                        for x in lines[-MAX_LINES_KEPT:])
    except C.UnsafeValueError as exc:
        host.problems.append(f"refused: {exc}")
    except Exception as exc:  # noqa: BLE001 - SSHError or anything else: the host is unusable
        return {**{k: v for k, v in fields.items()}, "host_reachable": False, "host_error": f"{type(exc).__name__}: {exc}"}
    return {**fields, "host_reachable": True, "host_error": "; ".join(host.problems) or None}


def _resolve(host: str) -> tuple[str, ...]:
    from kafka_runbooks.detect.endpoints import resolve

    return resolve(host)


def _int(v: str | None) -> int | None:
    return int(v) if v is not None and v.strip().isdigit() else None


def _is_float(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def probe_member(config: ClusterConfig, member: Member, runner_factory: Callable | None, ask: Callable = four_letter) -> model.ZooKeeperProbe:
    import dataclasses

    answers = ask_words(member, config.zookeeper_health.four_letter_timeout_s, ask)
    probe = probe_from_words(member, answers, clock.now_iso())
    if not member.ssh_conn_id or runner_factory is None:
        return probe
    from kafka_runbooks.hooks.ssh import opened_runner

    try:
        with opened_runner(runner_factory, member.ssh_conn_id) as runner:
            extra = host_fields(config, member, runner)
    except Exception as exc:  # noqa: BLE001 - a missing or insecure connection
        extra = {"host_reachable": False, "host_error": f"{type(exc).__name__}: {exc}"}
    return dataclasses.replace(probe, **extra)


def probe_ensemble(config: ClusterConfig, connection_servers: Iterable[tuple[str, int]] = (), runner_factory: Callable | None = None,
                   ask: Callable = four_letter, *, ssh: bool = True) -> list[model.ZooKeeperProbe]:
    """Every member at once; results in member order. ``ssh=False``: four-letter words only."""
    from kafka_runbooks.hooks.ssh import default_runner_factory

    ms = members(config, connection_servers)
    if not ms:
        return []
    factory = (runner_factory or default_runner_factory(config.capture.connect_timeout_s)) if ssh else None
    with ThreadPoolExecutor(max_workers=min(16, len(ms)), thread_name_prefix="zk-probe") as pool:
        return list(pool.map(lambda m: probe_member(config, m, factory, ask), ms))
