"""One broker's host, as the restart step needs it: its Kafka process, its logs, its commands.

Every command is an argv run through the strict SSH hook; the only values in them come from the
cluster's configuration (paths, the process pattern, the configured stop/start/kill commands) and
from numbers this module parsed itself (pids, byte offsets).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.host.properties import parse_properties  # noqa: F401 - the one parser; callers import it from here too
from kafka_runbooks.remediate.termination import TERMINATION, TaskTerminated

MAX_LOG_READ = 4 << 20  # bytes of new log read at once
READ_RETRY_PAUSE_S = 1.0
TAIL_LINES = 40
CMD_TIMEOUT_S = 20.0
STOPPING_COMMANDS = ("stop_command", "kill_command")  # what stops or kills a process: never sent once terminated


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    state: str  # ps STAT: R/S/D running, T stopped (SIGSTOP), Z zombie
    started: str  # ps lstart: tells a new process from an old one with a reused pid

    @property
    def alive(self) -> bool:
        return not self.state.startswith(("Z", "X"))

    @property
    def running(self) -> bool:
        return self.alive and not self.state.startswith("T")

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "state": self.state, "started": self.started}

    def describe(self) -> str:
        """As a person reads it in a log line: "pid 4242 (started Sun Nov 29 05:33:01 2026, state S)"."""
        return f"pid {self.pid} (started {self.started}, state {self.state})"


_PS_LINE = re.compile(r"^\s*(\d+)\s+(\S+)\s+(.+?)\s*$")


def parse_ps(text: str) -> list[ProcessInfo]:
    """``ps -o pid=,stat=,lstart=`` output -> processes (lines that do not parse are skipped)."""
    out = []
    for line in text.splitlines():
        m = _PS_LINE.match(line)
        if m:
            out.append(ProcessInfo(int(m.group(1)), m.group(2), m.group(3)))
    return out


class BrokerHost:
    def __init__(self, config: ClusterConfig, broker_id: int, ssh) -> None:
        self.config = config
        self.broker_id = int(broker_id)
        self.ssh = ssh  # StrictSSHHook (or anything with .run(argv, timeout) -> CommandResult)
        self.conn_id = config.ssh_conn_id(broker_id)

    def run(self, which: str, timeout: float):
        """The configured stop/start/kill command for this broker (built from config, now). Once Airflow terminates
        the task (``termination``), nothing that stops or kills a process leaves: the stop and the kill raise
        TaskTerminated unsent (the start still goes: it brings a broker this step stopped back)."""
        if which in STOPPING_COMMANDS and TERMINATION.noticed():
            raise TaskTerminated(f"{which} of broker {self.broker_id} not sent: {TERMINATION.why}")
        return self.ssh.run(self.config.argv(which, self.broker_id), timeout)

    def processes(self) -> list[ProcessInfo]:
        """The broker's JVMs on this host (zombies excluded). Raises RuntimeError when the host
        cannot be asked (a restart must not guess)."""
        res = self.ssh.run(("pgrep", "-f", self.config.process_regex(self.broker_id)), CMD_TIMEOUT_S)
        if res.error or res.exit_code not in (0, 1):
            raise RuntimeError(f"pgrep on {self.conn_id} failed: {res.error or 'exit ' + str(res.exit_code)}: "
                               f"{res.stderr.decode('utf-8', 'replace')[:300]}")
        pids = [p for p in res.stdout.decode("utf-8", "replace").split() if p.isdigit()]
        if not pids:
            return []
        ps = self.ssh.run(("ps", "-o", "pid=,stat=,lstart=", "-p", ",".join(pids)), CMD_TIMEOUT_S)
        if ps.error:
            raise RuntimeError(f"ps on {self.conn_id} failed: {ps.error}")
        return [p for p in parse_ps(ps.stdout.decode("utf-8", "replace")) if p.alive]

    def size(self, path: str) -> int | None:
        res = self.ssh.run(("stat", "-c", "%s", path), CMD_TIMEOUT_S)
        text = res.stdout.decode("ascii", "replace").strip()
        return int(text) if res.ok and text.isdigit() else None

    def read_from(self, path: str, offset: int, max_bytes: int = MAX_LOG_READ) -> bytes:
        """Bytes of ``path`` from ``offset`` (a log's new part since a mark); b"" when unreadable."""
        res = self.ssh.run(
            ("dd", f"if={path}", f"skip={int(offset)}", f"count={int(max_bytes)}", "iflag=skip_bytes,count_bytes", "status=none"),
            CMD_TIMEOUT_S,
        )
        return res.stdout if res.ok else b""

    def tail(self, path: str, lines: int = TAIL_LINES) -> str:
        res = self.ssh.run(("tail", "-n", str(int(lines)), path), CMD_TIMEOUT_S)
        if not res.ok:
            return f"(could not read {path}: {res.error or res.stderr.decode('utf-8', 'replace').strip()[:200]})"
        return res.stdout.decode("utf-8", "replace")

    def last_log_lines(self, lines: int = TAIL_LINES) -> dict[str, str]:
        """The broker's own last words: server.log and its stdout (kafkaServer.out)."""
        return {
            self.config.server_log(self.broker_id): self.tail(self.config.server_log(self.broker_id), lines),
            self.config.stdout_log(self.broker_id): self.tail(self.config.stdout_log(self.broker_id), lines),
        }

    def server_properties(self) -> dict[str, str] | None:
        res = self.ssh.run(("cat", self.config.server_properties(self.broker_id)), CMD_TIMEOUT_S)
        return parse_properties(res.stdout.decode("utf-8", "replace")) if res.ok else None

    def broker_id_on_host(self, props: dict[str, str] | None = None) -> tuple[int | None, str]:
        """The broker id this host's configuration gives the broker (``broker.id`` of its server.properties, else
        the ``meta.properties`` Kafka wrote into its first log dir when ids are generated): (id, where read)."""
        props = self.server_properties() if props is None else props
        path = self.config.server_properties(self.broker_id)
        if props is None:
            return None, f"{path} could not be read on {self.conn_id}"
        value = props.get("broker.id", "").strip()
        if value.lstrip("-").isdigit() and int(value) >= 0:
            return int(value), f"broker.id in {path}"
        dirs = [d for d in (props.get("log.dirs") or props.get("log.dir") or "").split(",") if d.strip()]
        if not dirs:
            return None, f"{path} sets neither broker.id nor log.dirs"
        meta = f"{dirs[0].strip().rstrip('/')}/meta.properties"
        res = self.ssh.run(("cat", "--", meta), CMD_TIMEOUT_S)
        value = parse_properties(res.stdout.decode("utf-8", "replace")).get("broker.id", "").strip() if res.ok else ""
        if value.isdigit():
            return int(value), f"broker.id in {meta}"
        return None, f"{path} sets no broker.id and {meta} could not be read"

    def identity_refusal(self, props: dict[str, str] | None = None) -> str | None:
        """None when this host really runs broker ``broker_id``; else why acting on it would hit another broker."""
        found, where = self.broker_id_on_host(props)
        if found == self.broker_id:
            return None
        if found is None:
            return f"cannot prove host {self.conn_id} runs broker {self.broker_id}: {where}"
        return (f"host {self.conn_id} runs broker {found} ({where}), not broker {self.broker_id}: the cluster's host map or "
                "server_properties_path is wrong; refusing to act on it")


def static_config_state(config: ClusterConfig) -> tuple[dict[int, dict[str, str]], dict[int, str]]:
    """server.properties of every configured broker host, read in parallel (for min ISR and unclean election):
    (configs, unread) -- ``unread`` says, per broker, why its file could not be read or is not that broker's
    (another ``broker.id``): its static values are unknown, never assumed."""
    from concurrent.futures import ThreadPoolExecutor

    from kafka_runbooks.hooks.ssh import StrictSSHHook

    def read(b: int):
        try:
            with StrictSSHHook(config.ssh_conn_id(b), connect_timeout=config.capture.connect_timeout_s) as ssh:
                host = BrokerHost(config, b, ssh)
                props = host.server_properties()
                if props is None:
                    return b, None, f"{config.server_properties(b)} not readable on {config.ssh_conn_id(b)}", True
                wrong = host.identity_refusal(props)
            return (b, None, wrong, False) if wrong else (b, props, None, False)
        except Exception as exc:  # noqa: BLE001 - a host we cannot read: its values are unknown
            return b, None, f"server.properties not read ({type(exc).__name__}: {exc})", True

    def one(b: int):
        # a read, not a change: tried once more after a short pause (an SSH handshake lost under load), then unknown
        b, props, why, again = read(b)
        if again:
            time.sleep(READ_RETRY_PAUSE_S)
            b, props, why, _ = read(b)
        return b, props, why

    ids = sorted(config.hosts)
    if not ids:
        return {}, {}
    with ThreadPoolExecutor(max_workers=min(8, len(ids)), thread_name_prefix="props") as pool:
        results = list(pool.map(one, ids))
    return {b: p for b, p, _ in results if p is not None}, {b: why for b, _, why in results if why}


def read_static_configs(config: ClusterConfig) -> tuple[dict[int, dict[str, str]], list[str]]:
    """As :func:`static_config_state`, the unread ones as notes (``broker N: why``)."""
    configs, unread = static_config_state(config)
    return configs, [f"broker {b}: {why}" for b, why in sorted(unread.items())]


def unreachable_hosts(config: ClusterConfig, broker_ids) -> dict[int, str]:
    """{broker: why} for the brokers whose host the product cannot reach over SSH now (strict host keys): a plan that
    would stop or start them there is refused before anyone is asked to approve it. In parallel, one ``true`` each."""
    from concurrent.futures import ThreadPoolExecutor

    from kafka_runbooks.hooks.ssh import StrictSSHHook

    def one(b: int) -> tuple[int, str | None]:
        try:
            conn_id = config.ssh_conn_id(b)
            with StrictSSHHook(conn_id, connect_timeout=config.capture.connect_timeout_s) as ssh:
                res = ssh.run(("true",), config.capture.connect_timeout_s)
            return b, None if res.ok else f"{conn_id}: `true` failed ({res.error or 'exit ' + str(res.exit_code)})"
        except Exception as exc:  # noqa: BLE001 - the reason is the refusal
            return b, f"{config.hosts.get(b, '?')}: {type(exc).__name__}: {exc}"

    ids = sorted({int(b) for b in broker_ids})
    if not ids:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(ids)), thread_name_prefix="ssh-reach") as pool:
        return {b: why for b, why in pool.map(one, ids) if why}
