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
   errors its replica fetchers logged within the window (the analysis' ``fetch_errors``, ``analyze/parsers/kafka_log.py``);
   the ``Kafka version : N`` line its JVM wrote at start, once per JVM (from that tail, else one ``grep`` of its
   stdout log, kafkaServer.out: 0.10 writes it there only).

Never raises for host problems: an unusable host is ``reachable=False`` with the error; a failing
command leaves its figures ``None`` and says so in ``error``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Mapping

from kafka_runbooks import clock, model
from kafka_runbooks.host import commands as C
from kafka_runbooks.host import sockets as S
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.host import procfs
from kafka_runbooks.detect.endpoints import Endpoint, Resolver, broker_endpoint, resolve
from kafka_runbooks.analyze.parsers.kafka_log import UNREACHABLE_CAUSES, fetch_errors
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
    logged: tuple[int, str] | None = None,
) -> model.HostProbe:
    """Probe one broker's host through ``runner`` (a StrictSSHHook, or anything with ``run`` and ``host``).
    ``logged``: (pid, version) an earlier check read of the broker's ``Kafka version`` line ("" for none found)."""
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
        now, offset, known = procfs.host_clock_or_ours(host.text(host.run("clock", procfs.DATE_ARGV)))
        if not known:
            host.problems.append("host clock unknown: using this worker's clock and UTC for its logs")
        fields["probed_at"] = clock.iso(now)

        pid, netstat = _probe_process(config, host, endpoint, fields)  # 2-3: who listens on its ports, its state
        text = _probe_connections(host, endpoint, netstat, fields)  # 4: its connections
        tail, rolled, rolled_text = _probe_server_log(config, host, bid, fields, now, offset)  # 5: its server.log
        # 5b. the version the JVM logged at its start: once per JVM (``logged``: what an earlier check read of this pid)
        if pid is not None:
            started = now - dt.timedelta(seconds=fields["process_uptime_s"]) if fields.get("process_uptime_s") is not None else None
            fields.update(_logged_version(config, host, bid, pid, started, offset, (tail, rolled_text), logged))
        # 6-9: memory, threads, __consumer_offsets on disk, the other log lines of interest (incidents 000, 002)
        _more(config, host, bid, fields, now, offset, tail, text, (rolled, rolled_text) if rolled else None)
    except _Deadline as exc:
        host.problems.append(str(exc))
    except C.UnsafeValueError as exc:
        host.problems.append(f"refused: {exc}")
    except Exception as exc:  # noqa: BLE001 - SSHError or anything else: the host is unusable
        return model.HostProbe(broker_id=bid, reachable=False, error=f"{type(exc).__name__}: {exc}", **_safe(fields))
    return model.HostProbe(broker_id=bid, reachable=True, error="; ".join(host.problems) or None, **fields)


def _probe_process(config: ClusterConfig, host: HostCommands, endpoint: Endpoint, fields: dict) -> tuple[int | None, bool]:
    """Steps 2 and 3 of ``probe_host``: the broker's process (who listens on its ports at its addresses) and its
    state, into ``fields``; returns (its pid or None, whether the host lacks ``ss`` and netstat reads its sockets)."""
    h = config.health
    # 2. the broker process: who listens on its ports at its addresses
    res = host.run("listening sockets", ("ss", "-Hltnp"))
    netstat = res is not None and res.exit_code == C.EXIT_NOT_FOUND
    if netstat:
        listeners = S.parse_listeners(host.text(host.run("listening sockets", ("netstat", "-ltnp"))))
    else:
        listeners = S.parse_listeners(host.text(res))
    pid = S.find_broker_pid(listeners, endpoint)
    if pid is None and not netstat and config.capture.jvm_tool_prefix:
        argv = C.listen_sockets_command(h.probe_command_timeout_s, config.capture.jvm_tool_prefix).argv
        listeners = S.parse_listeners(host.text(host.run("listening sockets as the JVM user", argv)))
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
    return pid, netstat


def _probe_connections(host: HostCommands, endpoint: Endpoint, netstat: bool, fields: dict) -> str:
    """Step 4 of ``probe_host``: the broker's connections, summed into ``fields``; returns the socket table read."""
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
    return text


def _probe_server_log(config: ClusterConfig, host: HostCommands, bid: int, fields: dict, now: dt.datetime,
                      offset: dt.timedelta) -> tuple[str, str | None, str]:
    """Step 5 of ``probe_host``: the server.log's last write and the fetch errors within the window, into ``fields``;
    returns (its tail, the rolled file read too or None, that file's tail)."""
    h = config.health
    # 5. its server.log: last written, and the fetch errors within the window
    log_path = C.validate_abs_path(config.server_log(bid), "server log path")
    mtime = procfs.mtime(host.text(host.run("server.log mtime", ("stat", "-c", "%Y", "--", log_path))))
    if mtime is not None:
        fields["server_log_mtime"] = clock.iso(mtime)
        fields["server_log_age_s"] = round(max(0.0, (now - mtime).total_seconds()), 1)
    since = now - dt.timedelta(seconds=h.fetch_error_window_s)
    fields["fetch_errors_since"] = clock.iso(since)
    n = C.validate_int(h.log_tail_bytes, "log_tail_bytes", minimum=1, maximum=1 << 30)
    tail = _cut(host.text(host.run("server.log tail", ("tail", "-c", str(n), "--", log_path))), n)
    # log4j rolls server.log (Kafka's default: hourly, server.log.YYYY-MM-DD-HH): the file rolled within the
    # windows is read too, so the errors and lines written just before the hour are not lost at the hour
    rolled = _rolled(host, log_path, max(h.fetch_error_window_s, h.bad_request_window_s))
    rolled_text = _cut(host.text(host.run("server.log rolled tail", ("tail", "-c", str(n), "--", rolled))), n) if rolled else ""
    if tail or rolled_text:
        errors = [e for text in (rolled_text, tail)
                  for e in fetch_errors(text, since=since, until=now, broker_id=bid, utc_offset=offset)
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
    return tail, rolled, rolled_text


def _newest_of_this_jvm(text: str, started: dt.datetime | None, offset: dt.timedelta) -> str | None:
    """The newest ``Kafka version`` line of ``text`` if the JVM that started at ``started`` (UTC) wrote it: in a log
    appended across restarts, a JVM that has not reached that line yet would otherwise get its predecessor's."""
    from kafka_runbooks import versions

    found = versions.logged_lines(text)
    if not found:
        return None
    # several files' lines: the newest by time (a line without one counts as the newest so far)
    ts, version = max(enumerate(found), key=lambda x: (x[1][0] or "9999", x[0]))[1]
    if started is not None and ts:
        try:
            at = dt.datetime.strptime(ts, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc) - offset
        except ValueError:
            at = None
        # ps's elapsed seconds are whole: 2 s of slack
        if at is not None and at < started - dt.timedelta(seconds=2):
            return None
    return version


def _logged_version(config: ClusterConfig, host: "HostCommands", bid: int, pid: int, started: dt.datetime | None,
                    offset: dt.timedelta, texts: tuple[str, ...], logged: tuple[int, str] | None) -> dict:
    """The ``Kafka version : N`` line the broker's JVM (``pid``) wrote at its start (``versions.logged_version``):
    what an earlier check of the same JVM read, else the server.log this probe already read (2.x logs it there too,
    found when the broker started recently), else one ``grep`` of its stdout log (``capture.stdout_log``, in its log
    directory: 0.10 logs ``org.apache.kafka.*`` to kafkaServer.out only; 2.x to both). A grep that fails leaves it
    unread (read again next time); one that finds nothing is remembered as looked for. A line older than the JVM's
    start (``started``, UTC) is its predecessor's: not this JVM's version, looked for again next time."""
    from kafka_runbooks import versions

    if logged is not None and logged[0] == pid:
        return {"kafka_version_logged": logged[1] or None, "kafka_version_log": "history"}
    for text in texts:  # the current file first: a line there is newer than any in the rolled one
        found = _newest_of_this_jvm(text, started, offset)
        if found:
            return {"kafka_version_logged": found, "kafka_version_log": "server.log"}
    stdout = C.validate_abs_path(config.stdout_log(bid), "stdout log path")
    server_log = C.validate_abs_path(config.server_log(bid), "server log path")
    name = f"{stdout.rsplit('/', 1)[-1]} or {server_log.rsplit('/', 1)[-1]}"
    res = host.run("Kafka version line", ("grep", "-a", "-h", "-E", versions.LOGGED_GREP, "--", stdout, server_log))
    if res is None or res.error is not None or res.exit_code not in (0, 1, 2):
        return {}
    if res.exit_code != 0:
        host.problems.pop()  # 1: no such line; 2: a file missing (the other one's lines, if any, are on stdout)
    text = (res.stdout or b"").decode("utf-8", "replace")
    found = _newest_of_this_jvm(text, started, offset)
    if found is None and versions.logged_lines(text):
        return {}  # only its predecessors' lines so far: this JVM has not logged its own yet
    errors = [x for x in (res.stderr or b"").decode("utf-8", "replace").splitlines() if x.strip()]
    if found is None and res.exit_code == 2 and not all("No such file" in x for x in errors):
        return {}  # a file it could not read: looked for again next time (a missing one -- no stdout log where the
        # broker is not started by kafka-server-start.sh -daemon -- is looked for no more)
    return {"kafka_version_logged": found, "kafka_version_log": name}


LOADER_THREAD = "group-metadata-"  # comm of group-metadata-manager-N (15 characters): loads __consumer_offsets
CLEANER_THREAD = "kafka-log-clean"  # comm of kafka-log-cleaner-thread-N
MAX_LINES_KEPT = 30


def _more(config: ClusterConfig, host: "HostCommands", bid: int, out: dict, now, offset, tail: str, sockets_text: str,
          server_log_rolled: tuple[str, str] | None = None) -> None:
    """Steps 6-9 of the probe, into ``out`` as they are read (each figure stays None when it could not be read);
    ``tail`` and ``server_log_rolled`` (path, its tail): what step 5 read of server.log."""
    from kafka_runbooks.detect import broker_log, zk_text

    h = config.health
    pid = out.get("pid")
    prefix = C.validate_argv(config.capture.jvm_tool_prefix) if config.capture.jvm_tool_prefix else ()
    # 6. memory: the host's MemAvailable, the JVM's RSS
    out["mem_available_bytes"] = procfs.meminfo_available(host.text(host.run("memory", ("cat", "/proc/meminfo"))))
    if pid is not None:
        out["process_rss_bytes"] = procfs.status_rss(host.text(host.run("process memory", ("cat", f"/proc/{int(pid)}/status"))))
        # 7. threads by name (/proc: nothing asked of the JVM): the log cleaner's, the offsets loader's bytes read
        threads = procfs.thread_names(host.text(host.run("threads", C.proc_threads_command(pid, h.probe_command_timeout_s).argv)))
        if threads:
            if h.cleaner_check:
                out["log_cleaner_threads"] = sum(1 for name in threads.values() if name.startswith(CLEANER_THREAD))
            loaders = sorted(tid for tid, name in threads.items() if name.startswith(LOADER_THREAD))
            if loaders:
                io = host.text(host.run("loader io", (*prefix, "cat", *(f"/proc/{int(pid)}/task/{t}/io" for t in loaders))))
                out["loader_read_bytes"] = procfs.io_rchar_total(io)
    # 8. __consumer_offsets directories of the broker's log dirs (server.properties: log.dirs)
    t = h.probe_command_timeout_s
    res = host.run("server.properties", C.config_file_command("server-properties", C.KIND_KAFKA_CONFIG, config.server_properties(bid), t).argv)
    if res is not None and res.exit_code == 1 and b"No such file" in (res.stderr or b""):
        host.problems.pop()  # not where the cluster's settings say: no log dirs to look at, not a probe failure
    props = zk_text.properties(host.text(res))
    if props.get("log.cleaner.enable", "").strip().lower() == "false":
        out.pop("log_cleaner_threads", None)  # no cleaner on purpose
    dirs: list[model.OffsetsPartitionDir] = []
    for i, d in enumerate(log_dirs_of(props)[:16], 1):
        listing = host.text(host.run("offsets segments", C.offsets_segments_command(d, t, i).argv))
        dirs += procfs.offsets_dirs(listing, d)
    out["offsets_dirs"] = tuple(sorted(dirs, key=lambda x: x.partition))
    # 9. log lines: unknown API keys, offsets loads, session expiries (server.log); the cleaner's death (log-cleaner.log).
    # The file log4j rolled within the window is read too (server.log's by step 5)
    # a follower's fetcher dropping a partition counts as long as the leadership window (it stays stuck: issue 16)
    since_bad = now - dt.timedelta(seconds=h.bad_request_window_s)
    since = min(since_bad, now - dt.timedelta(seconds=config.leadership.window_s))
    n = C.validate_int(h.log_tail_bytes, "log_tail_bytes", minimum=1, maximum=1 << 30)
    log_path = C.validate_abs_path(config.server_log(bid), "server log path")
    cleaner_log = C.validate_abs_path(f"{config.log_dir(bid).rstrip('/')}/log-cleaner.log", "log-cleaner.log path")
    lines = []
    for path, current in ((log_path, tail), (cleaner_log, None)):
        name = path.rsplit("/", 1)[-1]
        if current is None:
            rolled = _rolled(host, path, h.bad_request_window_s)
            text = _cut(host.text(host.run(f"{rolled} tail", ("tail", "-c", str(n), "--", rolled))), n) if rolled else ""
        else:
            rolled, text = server_log_rolled or (None, "")
        if rolled is not None:
            lines += broker_log.lines_of_interest(text, since, utc_offset=offset, source=rolled.rsplit("/", 1)[-1])
        if current is None:
            res = host.run(f"{name} tail", ("tail", "-c", str(n), "--", path))
            if res is not None and res.exit_code == 1 and b"No such file" in (res.stderr or b""):
                host.problems.pop()  # an absent log-cleaner.log is not a problem
            current = _cut(host.text(res), n)
        lines += broker_log.lines_of_interest(current, since, utc_offset=offset, source=name)
    lines = [x for x in lines if x.what in broker_log.REPLICA_LINES or (x.at or "") >= clock.iso(since_bad)]
    out["log_lines"] = _keep(lines, sockets_text)


def log_dirs_of(props: dict[str, str]) -> list[str]:
    """``log.dirs`` (else ``log.dir``) of a broker's server.properties."""
    return [d.strip() for d in (props.get("log.dirs") or props.get("log.dir") or "").split(",") if d.strip()]


def _cut(text: str, n: int) -> str:
    """A tail of ``n`` bytes without its (probably cut) first line."""
    if len(text.encode()) >= n:
        return text.split("\n", 1)[1] if "\n" in text else ""
    return text


def _rolled(host: "HostCommands", path: str, window_s: float) -> str | None:
    """The newest file log4j rolled ``path`` into (``path.<date>``) if it was written within ``window_s``."""
    directory, name = path.rsplit("/", 1)
    minutes = max(1, int(window_s // 60) + 1)
    try:
        cmd = C.rolled_logs_command(path, host.command_timeout_s, minutes, "rolled-list")
    except C.UnsafeValueError:
        return None  # a log name we do not put in a find pattern: its rolled files are not looked for
    newest = C.newest_rolled(name, host.text(host.run(f"{name} rolled", cmd.argv)))
    return f"{directory or ''}/{newest}" if newest else None


def _keep(lines: list[model.LogLineSeen], sockets_text: str) -> tuple[model.LogLineSeen, ...]:
    """Every offsets load still open or ended by a failure (each partition's newest load line when it is a start or
    a failure), the five slowest finished ones and the newest of the rest; each unknown-API-key line gets the sockets
    its client holds right now on this host (address and port, from the socket table)."""
    import dataclasses

    loads = ("group_load_start", "group_load_done", "group_load_failed")
    done = {x.attrs.get("partition"): x for x in lines if x.what == "group_load_done"}
    newest = {}
    for x in sorted((x for x in lines if x.what in loads), key=lambda x: (x.at or "", x.line_no)):
        newest[x.attrs.get("partition")] = x
    starts = {k: x for k, x in newest.items() if x.what != "group_load_done"}
    slow_done = sorted(done.values(), key=lambda x: -int(x.attrs.get("millis") or 0))[:5]
    rest = [x for x in lines if x.what not in loads][-MAX_LINES_KEPT:]
    conns = S.parse_connections(sockets_text) if sockets_text else []
    with_sockets = []
    for x in rest:
        client = x.attrs.get("client_host")
        if x.what == "unknown_api_key" and client:
            held = [f"{c.state} {c.local_addr}:{c.local_port} <- {c.peer_addr}:{c.peer_port}" for c in conns if c.peer_addr == S.norm_addr(client)]
            x = dataclasses.replace(x, attrs={**x.attrs, "client_sockets_now": "; ".join(held[:10]) or "none"})
        with_sockets.append(x)
    return tuple(sorted([*starts.values(), *slow_done, *with_sockets], key=lambda x: (x.at or "", x.line_no)))


def _safe(fields: dict) -> dict:
    return {k: v for k, v in fields.items() if k in ("ports", "addresses", "probed_at")}


def _probe_one(config: ClusterConfig, broker: model.Broker, factory: Callable, resolver: Resolver,
               logged: tuple[int, str] | None = None) -> model.HostProbe:
    from kafka_runbooks.hooks.ssh import opened_runner

    try:
        with opened_runner(factory, config.ssh_conn_id(broker.id)) as runner:
            return probe_host(config, broker, runner, resolver=resolver, logged=logged)
    except Exception as exc:  # noqa: BLE001 - missing/insecure connection config
        return model.HostProbe(broker_id=int(broker.id), reachable=False, error=f"{type(exc).__name__}: {exc}")


def probe_all(
    config: ClusterConfig,
    brokers: Iterable[model.Broker],
    runner_factory: Callable | None = None,
    *,
    resolver: Resolver = resolve,
    logged: Mapping[int, tuple[int, str]] | None = None,
) -> list[model.HostProbe]:
    """Probe every broker's host in parallel; results in the order of ``brokers``. ``logged``: {broker id: (pid,
    version)} of the ``Kafka version`` lines earlier checks read (``detect/observe.logged_versions``)."""
    brokers = list(brokers)
    if not brokers:
        return []
    logged = logged or {}
    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    with ThreadPoolExecutor(max_workers=min(32, len(brokers)), thread_name_prefix="probe") as pool:
        return list(pool.map(lambda b: _probe_one(config, b, factory, resolver, logged.get(b.id)), brokers))
