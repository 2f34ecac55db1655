"""The capture plan for one broker host, and the parsers its decisions need. Pure: no I/O.

Every value that ends up in an argv (pid, broker id, port, paths) is validated here first, so a
hostile value read from ZooKeeper, Kafka or DAG params is refused with a clear error before it
can reach a remote command line. (The runner quotes every argv with ``shlex.join`` as well.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from kafka_runbooks.config import CaptureSettings

# kind vocabulary (docs/CONTRACTS.md)
KIND_JSTACK = "jstack"
KIND_JMAP_HISTO = "jmap_histo"
KIND_HEAP_DUMP = "heap_dump"
KIND_HEAP_INFO = "heap_info"
KIND_SOCKETS_SS = "sockets_ss"
KIND_SOCKETS_NETSTAT = "sockets_netstat"
KIND_OPEN_FILES = "open_files"
KIND_SERVER_LOG = "server_log"
KIND_PROCESS_STAT = "process_stat"
KIND_DISK_FREE = "disk_free"

# exit code of a shell / sshd when the command is not found
EXIT_NOT_FOUND = 127

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# a directory that goes inside jmap's "-dump:live,format=b,file=PATH" option: no commas, no spaces
_SAFE_DIR_RE = re.compile(r"^/[A-Za-z0-9_./-]*$")


class UnsafeValueError(ValueError):
    """A value meant for a remote argv failed validation (hostile or malformed)."""


@dataclass(frozen=True)
class CaptureCommand:
    name: str  # file stem in the bundle: hosts/<broker_id>/<name>.out
    kind: str
    argv: tuple[str, ...]
    timeout: float
    to_file: bool = True  # stream stdout to the bundle file rather than memory

    def __post_init__(self) -> None:
        if not _NAME_RE.fullmatch(self.name):
            raise UnsafeValueError(f"bad capture command name {self.name!r}")
        validate_argv(self.argv)


@dataclass(frozen=True)
class HeapDumpDecision:
    take: bool
    reason: str
    heap_bytes: int | None
    free_bytes: int | None

    def to_dict(self) -> dict:
        return {"take": self.take, "reason": self.reason, "heap_bytes": self.heap_bytes, "free_bytes": self.free_bytes}


# ---------------------------------------------------------------------------------------------
# validation


def validate_int(value: object, what: str, *, minimum: int = 0, maximum: int = 2**31 - 1) -> int:
    """An integer (int, or a string of decimal digits only) within bounds; anything else is refused."""
    if isinstance(value, bool):
        raise UnsafeValueError(f"{what} must be an integer, got {value!r}")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and re.fullmatch(r"[0-9]{1,10}", value):
        n = int(value)
    else:
        raise UnsafeValueError(f"{what} must be an integer, got {value!r}")
    if not minimum <= n <= maximum:
        raise UnsafeValueError(f"{what} out of range [{minimum}, {maximum}]: {n}")
    return n


def validate_pid(pid: object) -> int:
    return validate_int(pid, "pid", minimum=1, maximum=2**22)


def validate_broker_id(broker_id: object) -> int:
    return validate_int(broker_id, "broker id", minimum=0)


def validate_port(port: object) -> int:
    return validate_int(port, "port", minimum=1, maximum=65535)


def validate_abs_path(path: object, what: str = "path") -> str:
    if not isinstance(path, str) or not path:
        raise UnsafeValueError(f"{what} must be a non-empty string, got {path!r}")
    if "\x00" in path or "\n" in path or "\r" in path:
        raise UnsafeValueError(f"{what} contains NUL or newline: {path!r}")
    if not path.startswith("/"):
        raise UnsafeValueError(f"{what} must be absolute: {path!r}")
    if any(part == ".." for part in path.split("/")):
        raise UnsafeValueError(f"{what} must not contain '..': {path!r}")
    return path


def validate_work_dir(path: object) -> str:
    path = validate_abs_path(path, "remote_work_dir")
    if not _SAFE_DIR_RE.fullmatch(path):
        raise UnsafeValueError(f"remote_work_dir may only contain [A-Za-z0-9_./-]: {path!r}")
    return path.rstrip("/") or "/"


def validate_argv(argv: Sequence[str]) -> tuple[str, ...]:
    if isinstance(argv, (str, bytes)) or not argv:
        raise UnsafeValueError(f"argv must be a non-empty sequence of strings, got {argv!r}")
    out = []
    for a in argv:
        if not isinstance(a, str):
            raise UnsafeValueError(f"argv element must be str, got {a!r}")
        if "\x00" in a:
            raise UnsafeValueError(f"argv element contains NUL: {a!r}")
        out.append(a)
    return tuple(out)


def _prefix(settings: CaptureSettings) -> tuple[str, ...]:
    return validate_argv(settings.jvm_tool_prefix) if settings.jvm_tool_prefix else ()


# ---------------------------------------------------------------------------------------------
# commands


def listen_sockets_command(timeout: float, prefix: Sequence[str] = ()) -> CaptureCommand:
    """Listening TCP sockets with their processes: finds the broker PID by its port.

    ``ss -p`` shows only the caller's own processes to a non-root user; with ``prefix`` (the JVM
    tool prefix, e.g. sudo -u kafka) it runs as the broker's user."""
    if prefix:
        return CaptureCommand("listen-sockets-jvm-user", KIND_SOCKETS_SS, (*validate_argv(prefix), "ss", "-Hltnp"), timeout)
    return CaptureCommand("listen-sockets", KIND_SOCKETS_SS, ("ss", "-Hltnp"), timeout)


def listen_sockets_netstat_command(timeout: float) -> CaptureCommand:
    return CaptureCommand("listen-sockets-netstat", KIND_SOCKETS_NETSTAT, ("netstat", "-ltnp"), timeout)


def sockets_command(timeout: float) -> CaptureCommand:
    return CaptureCommand("sockets-ss", KIND_SOCKETS_SS, ("ss", "-tanp"), timeout)


def sockets_netstat_command(timeout: float) -> CaptureCommand:
    """Fallback when ``ss`` is missing (exit 127)."""
    return CaptureCommand("sockets-netstat", KIND_SOCKETS_NETSTAT, ("netstat", "-anp"), timeout)


def process_stat_command(pid: int, timeout: float) -> CaptureCommand:
    pid = validate_pid(pid)
    return CaptureCommand("process-stat", KIND_PROCESS_STAT, ("ps", "-o", "pid=,etimes=,rss=,args=", "-p", str(pid)), timeout)


def jstack_command(pid: int, index: int, settings: CaptureSettings) -> CaptureCommand:
    pid = validate_pid(pid)
    index = validate_int(index, "jstack index", minimum=1, maximum=1000)
    return CaptureCommand(f"jstack-{index}", KIND_JSTACK, (*_prefix(settings), "jstack", "-l", str(pid)), settings.command_timeout_s)


def jmap_histo_command(pid: int, settings: CaptureSettings) -> CaptureCommand:
    pid = validate_pid(pid)
    return CaptureCommand("jmap-histo", KIND_JMAP_HISTO, (*_prefix(settings), "jmap", "-histo:live", str(pid)), settings.command_timeout_s)


def heap_info_command(pid: int, settings: CaptureSettings) -> CaptureCommand:
    pid = validate_pid(pid)
    return CaptureCommand("heap-info", KIND_HEAP_INFO, (*_prefix(settings), "jcmd", str(pid), "GC.heap_info"), settings.command_timeout_s)


def disk_free_command(settings: CaptureSettings) -> CaptureCommand:
    return CaptureCommand("disk-free", KIND_DISK_FREE, ("df", "-Pk", validate_work_dir(settings.remote_work_dir)), settings.command_timeout_s)


def open_files_command(pid: int, settings: CaptureSettings) -> CaptureCommand:
    """One line per open fd; counted on our side (no shell pipe). /proc/PID/fd is readable only by
    the process owner, so the JVM tool prefix applies here too."""
    pid = validate_pid(pid)
    return CaptureCommand(
        "open-files",
        KIND_OPEN_FILES,
        (*_prefix(settings), "find", f"/proc/{pid}/fd", "-mindepth", "1", "-maxdepth", "1"),
        settings.command_timeout_s,
    )


def server_log_command(log_path: str, settings: CaptureSettings) -> CaptureCommand:
    log_path = validate_abs_path(log_path, "server log path")
    n = validate_int(settings.log_tail_lines, "log_tail_lines", minimum=1, maximum=10_000_000)
    return CaptureCommand("server-log", KIND_SERVER_LOG, ("tail", "-n", str(n), "--", log_path), settings.command_timeout_s)


def heap_dump_path(settings: CaptureSettings, broker_id: int, ts: str) -> str:
    broker_id = validate_broker_id(broker_id)
    if not re.fullmatch(r"[0-9A-Za-z]{1,32}", ts):
        raise UnsafeValueError(f"bad heap dump timestamp {ts!r}")
    d = validate_work_dir(settings.remote_work_dir)
    return f"{d.rstrip('/')}/kafka-{broker_id}-{ts}.hprof"


def heap_dump_command(pid: int, remote_path: str, settings: CaptureSettings) -> CaptureCommand:
    pid = validate_pid(pid)
    remote_path = validate_abs_path(remote_path, "heap dump path")
    if not _SAFE_DIR_RE.fullmatch(remote_path):
        raise UnsafeValueError(f"heap dump path may only contain [A-Za-z0-9_./-]: {remote_path!r}")
    return CaptureCommand(
        "heap-dump",
        KIND_HEAP_DUMP,
        (*_prefix(settings), "jmap", f"-dump:live,format=b,file={remote_path}", str(pid)),
        max(settings.command_timeout_s, 300.0),
    )


def host_plan(pid: int | None, log_path: str, settings: CaptureSettings) -> list[CaptureCommand]:
    """The fixed part of a host's capture, in order, once the PID is known (or not).

    jstack dumps come first (the collector waits ``jstack_interval_s`` between their starts), then
    the rest. The socket-table fallback, the heap dump decision and the dump itself depend on
    earlier results and are built by the collector from the functions above.
    """
    t = settings.command_timeout_s
    plan: list[CaptureCommand] = []
    if pid is not None:
        plan.append(process_stat_command(pid, t))
        plan += [jstack_command(pid, i, settings) for i in range(1, settings.jstack_count + 1)]
        plan.append(jmap_histo_command(pid, settings))
        plan.append(heap_info_command(pid, settings))
        plan.append(open_files_command(pid, settings))
    plan.append(sockets_command(t))
    plan.append(disk_free_command(settings))
    plan.append(server_log_command(log_path, settings))
    return plan


# ---------------------------------------------------------------------------------------------
# parsers


def count_lines(data: bytes) -> int:
    return sum(1 for line in data.splitlines() if line.strip())


def parse_df_available(text: str) -> int | None:
    """Available bytes from ``df -Pk DIR`` (POSIX format, 1024-byte blocks)."""
    lines = [l for l in text.splitlines() if l.strip()]
    if len(lines) < 2:
        return None
    parts = lines[-1].split()
    if len(parts) < 6:
        return None
    try:
        return int(parts[-3]) * 1024
    except ValueError:
        return None


_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def _size(num: str, unit: str) -> int:
    return int(float(num) * _UNITS[unit.upper()])


def parse_heap_info(text: str) -> int | None:
    """Committed heap size in bytes from ``jcmd PID GC.heap_info`` (G1, Parallel, Serial, ZGC,
    Shenandoah). Metaspace is not heap. None when nothing is recognised."""
    total = 0
    found = False
    for line in text.splitlines():
        s = line.strip()
        if not s or s.lower().startswith(("metaspace", "class space")):
            continue
        m = re.search(r"\btotal\s+(\d+)([KMGT]?)\s*,", s, re.I)
        if m and not line.startswith((" region", "  region")):
            total += _size(m.group(1), m.group(2))
            found = True
            continue
        m = re.search(r"\bcapacity\s+(\d+)([KMGT]?)B?\b", s)  # ZGC: "ZHeap used 8M, capacity 64M, max capacity 1G"
        if m and s.startswith("ZHeap"):
            total += _size(m.group(1), m.group(2))
            found = True
            continue
        m = re.search(r"(\d+)([KMGT]?)\s+committed", s)  # Shenandoah
        if m:
            total += _size(m.group(1), m.group(2))
            found = True
    return total if found else None


def parse_ps_rss(text: str) -> int | None:
    """RSS in bytes from ``ps -o pid=,etimes=,rss=,args=``."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].isdigit():
            try:
                return int(parts[2]) * 1024
            except ValueError:
                return None
    return None


def parse_ps(text: str) -> dict | None:
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[0].isdigit():
            try:
                return {
                    "pid": int(parts[0]),
                    "uptime_s": int(parts[1]),
                    "rss_bytes": int(parts[2]) * 1024,
                    "args": parts[3] if len(parts) > 3 else "",
                }
            except ValueError:
                return None
    return None


def heap_dump_decision(
    heap_bytes: int | None,
    free_bytes: int | None,
    *,
    enabled: bool = True,
    rss_bytes: int | None = None,
    factor: float = 2.0,
) -> HeapDumpDecision:
    """Take a heap dump only when the work dir has at least ``factor`` x the heap free.

    When the heap size is unknown the process RSS (always larger than the live heap) is used
    instead; when neither is known, or the free space is unknown, no dump is taken.
    """
    if not enabled:
        return HeapDumpDecision(False, "heap dumps disabled in capture settings", heap_bytes, free_bytes)
    size = heap_bytes
    basis = "heap"
    if size is None:
        size, basis = rss_bytes, "process RSS (heap size unknown)"
    if size is None:
        return HeapDumpDecision(False, "heap size unknown (GC.heap_info and ps both failed)", heap_bytes, free_bytes)
    if free_bytes is None:
        return HeapDumpDecision(False, "free disk space in the work dir unknown", heap_bytes, free_bytes)
    need = int(size * factor)
    if free_bytes >= need:
        return HeapDumpDecision(
            True, f"free {free_bytes} B >= {factor:g} x {basis} {size} B = {need} B", heap_bytes, free_bytes
        )
    return HeapDumpDecision(
        False, f"not enough disk: free {free_bytes} B < {factor:g} x {basis} {size} B = {need} B", heap_bytes, free_bytes
    )
