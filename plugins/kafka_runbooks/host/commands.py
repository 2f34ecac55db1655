"""The capture plan for one broker host, and the parsers its decisions need. Pure: no I/O.

Every value that ends up in an argv (pid, broker id, port, paths) is validated here first, so a
hostile value read from ZooKeeper, Kafka or DAG params is refused with a clear error before it
can reach a remote command line. (The runner quotes every argv with ``shlex.join`` as well.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from kafka_runbooks.config import CaptureSettings
from kafka_runbooks.host.argv import (_SAFE_DIR_RE, UnsafeValueError, validate_abs_path, validate_argv, validate_broker_id,  # noqa: F401
                                      validate_int, validate_pid, validate_port, validate_work_dir)
from kafka_runbooks.host.jmxtool import jmx_read

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
# added for real Kafka 2.3 (docs/CONTRACTS.md, "Capture for real Kafka")
KIND_JSTACK_JHSDB = "jstack_jhsdb"  # `jhsdb jstack --pid` output: the Serviceability Agent's format, not jstack's
KIND_PROCESS_STATE = "process_state"  # /proc/<pid>/stat
KIND_CONTROLLER_LOG = "controller_log"
KIND_STATE_CHANGE_LOG = "state_change_log"
KIND_LOG_CLEANER_LOG = "log_cleaner_log"
KIND_STDOUT_LOG = "kafka_stdout"  # kafkaServer.out (SIGQUIT thread dumps land here)
KIND_GC_LOG = "gc_log"
KIND_KAFKA_CHECKS = "kafka_checks"  # kafka-checks.json: direct Kafka-protocol checks during the capture
KIND_OTHER_LOG = "log"
KIND_PROC_THREADS = "proc_threads"  # /proc/<pid>/task/*/stat: every native thread, name (15 chars) and kernel state
KIND_MEMINFO = "meminfo"  # /proc/meminfo of the host (incident 000: free memory fell as CLOSE_WAIT climbed)
KIND_PROCESS_STATUS = "process_status"  # /proc/<pid>/status (VmRSS, Threads)
KIND_KAFKA_CONFIG = "kafka_config"  # server.properties
KIND_LOG_DIR_LISTING = "log_dir_listing"  # du -sb --max-depth=1 <log dir>, ls -lR <partition dir>
KIND_OFFSETS_SEGMENTS = "offsets_segments"  # find ... -printf '%h %f %s': every __consumer_offsets segment and its size
KIND_DUMP_LOG = "dump_log"  # kafka-dump-log.sh --files ... (the broker's own Kafka, on its host)
KIND_ZK_SRVR, KIND_ZK_MNTR, KIND_ZK_CONS = "zk_srvr", "zk_mntr", "zk_cons"
KIND_ZK_LOG, KIND_ZK_CONFIG = "zk_log", "zk_config"
KIND_LOADAVG = "loadavg"
KIND_JMX = "jmx"  # Kafka's JmxTool, one read of the request path's figures (host/jmxtool.py): read-only, no pause
KIND_AUX = "aux"  # helper commands' own output (mkdir, rm, stat, kill -QUIT, jmap -dump's messages): never parsed
LOG_KINDS = {
    "controller.log": KIND_CONTROLLER_LOG,
    "state-change.log": KIND_STATE_CHANGE_LOG,
    "log-cleaner.log": KIND_LOG_CLEANER_LOG,
    "kafkaServer.out": KIND_STDOUT_LOG,
    "kafkaServer-gc.log": KIND_GC_LOG,
}

# exit code of a shell / sshd when the command is not found
EXIT_NOT_FOUND = 127

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class CaptureCommand:
    name: str  # file stem in the bundle: hosts/<broker_id>/<name>.out
    kind: str
    argv: tuple[str, ...]
    timeout: float
    to_file: bool = True  # stream stdout to the bundle file rather than memory
    # redacted before it is recorded (capture/redact.py): "properties", "zookeeper_properties", "command_line"
    redact: str | None = None

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


def sockets_command(timeout: float, seq: int = 1) -> CaptureCommand:
    """One socket table with its queues (Recv-Q, Send-Q); taken several times during a capture."""
    seq = validate_int(seq, "socket sample", minimum=1, maximum=100)
    return CaptureCommand(f"sockets-ss-{seq}", KIND_SOCKETS_SS, ("ss", "-tanp"), timeout)


def sockets_netstat_command(timeout: float, seq: int = 1) -> CaptureCommand:
    """Fallback when ``ss`` is missing (exit 127)."""
    seq = validate_int(seq, "socket sample", minimum=1, maximum=100)
    return CaptureCommand(f"sockets-netstat-{seq}", KIND_SOCKETS_NETSTAT, ("netstat", "-anp"), timeout)


def process_state_command(pid: int, timeout: float) -> CaptureCommand:
    pid = validate_pid(pid)
    return CaptureCommand("process-state", KIND_PROCESS_STATE, ("cat", f"/proc/{pid}/stat"), timeout)


def proc_threads_command(pid: int, timeout: float) -> CaptureCommand:
    """Every thread of the process as the kernel sees it (``tid (name) state ...``, one line each):
    needs nothing from the JVM, so it works on a stopped one too. HotSpot names native threads after
    the Java thread (first 15 characters: ``data-plane-kafk``, ``kafka-log-clean``). A constant script, the pid its
    argument: a thread that ends while the list is read is skipped (``find -exec cat`` failed the whole command)."""
    pid = validate_pid(pid)
    return CaptureCommand("proc-threads", KIND_PROC_THREADS,
                          ("sh", "-c", 'for f in /proc/"$0"/task/*/stat; do cat "$f" 2>/dev/null; done; [ -d /proc/"$0" ]', str(pid)),
                          timeout)


def jhsdb_jstack_command(pid: int, index: int, settings: CaptureSettings, timeout: float) -> CaptureCommand:
    """Thread dump through the Serviceability Agent (ptrace): works on a stopped JVM and on one
    that refuses the attach mechanism; the JVM does not have to cooperate."""
    pid = validate_pid(pid)
    index = validate_int(index, "jstack index", minimum=1, maximum=1000)
    return CaptureCommand(f"jstack-jhsdb-{index}", KIND_JSTACK_JHSDB, (*_prefix(settings), "jhsdb", "jstack", "--pid", str(pid)), timeout)


def sigquit_command(pid: int, settings: CaptureSettings, timeout: float, index: int = 1) -> CaptureCommand:
    """SIGQUIT: a running HotSpot JVM prints a thread dump to its stdout (kafkaServer.out)."""
    pid = validate_pid(pid)
    index = validate_int(index, "dump index", minimum=1, maximum=1000)
    return CaptureCommand(f"sigquit-{index}", KIND_AUX, (*_prefix(settings), "kill", "-QUIT", str(pid)), timeout)


def file_size_command(name: str, path: str, settings: CaptureSettings, timeout: float, *, as_jvm_user: bool = False) -> CaptureCommand:
    path = validate_abs_path(path, "file path")
    prefix = _prefix(settings) if as_jvm_user else ()
    return CaptureCommand(name, KIND_AUX, (*prefix, "stat", "-c", "%s", "--", path), timeout)


def tail_from_command(name: str, kind: str, path: str, offset: int, max_bytes: int, timeout: float) -> CaptureCommand:
    """The bytes of ``path`` after ``offset`` (``tail -c +N``), at most ``max_bytes`` of them (``head -c``
    is not needed: the stdout file only grew by one dump)."""
    path = validate_abs_path(path, "file path")
    offset = validate_int(offset, "offset", minimum=0, maximum=2**62)
    validate_int(max_bytes, "max bytes", minimum=1, maximum=1 << 30)
    return CaptureCommand(name, kind, ("tail", "-c", f"+{offset + 1}", "--", path), timeout)


def log_tail_command(log_name: str, log_dir: str, settings: CaptureSettings, timeout: float) -> CaptureCommand:
    """The last ``log_tail_bytes`` of one of the broker's other logs (controller.log, ...)."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", log_name):
        raise UnsafeValueError(f"bad log file name {log_name!r}")
    path = validate_abs_path(f"{log_dir.rstrip('/')}/{log_name}", "log path")
    n = validate_int(settings.log_tail_bytes, "log_tail_bytes", minimum=1, maximum=1 << 30)
    stem = re.sub(r"[^A-Za-z0-9_-]", "-", log_name.rsplit(".", 1)[0] if log_name.endswith((".log", ".out")) else log_name)
    return CaptureCommand(f"log-{stem}"[:64], LOG_KINDS.get(log_name, KIND_OTHER_LOG), ("tail", "-c", str(n), "--", path), timeout)


def heap_dump_dir(settings: CaptureSettings, broker_id: int, ts: str) -> str:
    broker_id = validate_broker_id(broker_id)
    if not re.fullmatch(r"[0-9A-Za-z]{1,32}", ts):
        raise UnsafeValueError(f"bad heap dump timestamp {ts!r}")
    return f"{validate_work_dir(settings.remote_work_dir).rstrip('/')}/kafka-runbooks-{broker_id}-{ts}"


def mkdir_private_command(path: str, settings: CaptureSettings, timeout: float) -> CaptureCommand:
    """A 0700 directory made by the JVM's user (so only that user can read the dump in it)."""
    path = validate_abs_path(path, "directory")
    if not _SAFE_DIR_RE.fullmatch(path):
        raise UnsafeValueError(f"directory may only contain [A-Za-z0-9_./-]: {path!r}")
    return CaptureCommand("heap-dump-mkdir", KIND_AUX, (*_prefix(settings), "mkdir", "-m", "0700", "--", path), timeout)


def cat_as_jvm_user_command(name: str, path: str, settings: CaptureSettings, timeout: float) -> CaptureCommand:
    path = validate_abs_path(path, "file path")
    return CaptureCommand(name, KIND_HEAP_DUMP, (*_prefix(settings), "cat", "--", path), timeout)


def remove_dump_commands(path: str, directory: str, settings: CaptureSettings, timeout: float) -> list[CaptureCommand]:
    path = validate_abs_path(path, "file path")
    directory = validate_abs_path(directory, "directory")
    return [
        CaptureCommand("heap-dump-rm", KIND_AUX, (*_prefix(settings), "rm", "-f", "--", path), timeout),
        CaptureCommand("heap-dump-rmdir", KIND_AUX, (*_prefix(settings), "rmdir", "--", directory), timeout),
    ]


def meminfo_command(timeout: float, seq: int = 1) -> CaptureCommand:
    seq = validate_int(seq, "meminfo sample", minimum=1, maximum=100)
    return CaptureCommand(f"meminfo-{seq}", KIND_MEMINFO, ("cat", "/proc/meminfo"), timeout)


def process_status_command(pid: int, timeout: float, seq: int = 1) -> CaptureCommand:
    pid = validate_pid(pid)
    seq = validate_int(seq, "status sample", minimum=1, maximum=100)
    return CaptureCommand(f"process-status-{seq}", KIND_PROCESS_STATUS, ("cat", f"/proc/{pid}/status"), timeout)


def loadavg_command(timeout: float) -> CaptureCommand:
    return CaptureCommand("loadavg", KIND_LOADAVG, ("cat", "/proc/loadavg"), timeout)


def config_file_command(name: str, kind: str, path: str, timeout: float, redact: str = "properties") -> CaptureCommand:
    """A configuration file, its values off the allow-list redacted before it is recorded (capture/redact.py)."""
    return CaptureCommand(name, kind, ("cat", "--", validate_abs_path(path, "config file path")), timeout, redact=redact)


def offsets_segments_command(log_dir: str, timeout: float, index: int = 1) -> CaptureCommand:
    """Every ``__consumer_offsets-N/*.log`` segment of one log dir with its size (``%h %f %s``): segment
    counts and bytes per offsets partition (incident 002b). The glob is find's own pattern, never a shell's."""
    log_dir = validate_abs_path(log_dir, "log dir").rstrip("/") or "/"
    index = validate_int(index, "log dir index", minimum=1, maximum=100)
    return CaptureCommand(f"offsets-segments-{index}", KIND_OFFSETS_SEGMENTS,
                          ("find", log_dir, "-mindepth", "2", "-maxdepth", "2", "-path", f"{log_dir}/__consumer_offsets-*/*.log",
                           "-printf", "%h %f %s\n"), timeout)


def du_log_dir_command(log_dir: str, timeout: float, index: int = 1) -> CaptureCommand:
    """Bytes per partition directory of one log dir (``du -b --max-depth=1``: no shell glob needed)."""
    log_dir = validate_abs_path(log_dir, "log dir")
    index = validate_int(index, "log dir index", minimum=1, maximum=100)
    return CaptureCommand(f"du-log-dir-{index}", KIND_LOG_DIR_LISTING, ("du", "-b", "--max-depth=1", "--", log_dir), timeout)


def ls_partition_command(partition_dir: str, timeout: float) -> CaptureCommand:
    """``ls -lR`` of one partition directory: its ``dir:`` heading and every segment with its size."""
    return CaptureCommand("ls-offsets-partition", KIND_LOG_DIR_LISTING, ("ls", "-lR", "--", validate_abs_path(partition_dir, "partition dir")), timeout)


_SEGMENT_RE = re.compile(r"^[0-9]{20}\.(log|index|timeindex)$")


def dump_log_command(kafka_home: str, files: Sequence[str], name: str, timeout: float, version=None) -> CaptureCommand:
    """``kafka-dump-log.sh --deep-iteration --files A,B,...`` (stderr joined to stdout) with the broker's own Kafka (``kafka_home``):
    record batches with every record's offset, timestamp and key/value sizes -- no payloads -- and the tool's own
    index verification. Only segment files (``<20 digits>.log|.index|.timeindex``) of absolute paths.
    The script exists from Kafka 2.0 (KAFKA-6615); where the brokers' version (``version``, a
    ``kafka_runbooks.versions.KafkaVersion``) is older or unknown, the class it runs is run directly:
    ``kafka-run-class.sh kafka.tools.DumpLogSegments`` (0.10.2.1 has only that), with the same options."""
    home = validate_abs_path(kafka_home, "kafka_home").rstrip("/")
    checked = []
    for f in files:
        f = validate_abs_path(f, "segment file")
        if not _SEGMENT_RE.fullmatch(f.rsplit("/", 1)[-1]) or "," in f:
            raise UnsafeValueError(f"not a segment file: {f!r}")
        checked.append(f)
    if not checked:
        raise UnsafeValueError("no segment file to dump")
    # the tool prints its index verification ("Indexed offset: N, found log offset: M") on stderr: one file holds both,
    # through a constant script -- the values are its arguments, never part of the script
    tool = ((f"{home}/bin/kafka-dump-log.sh",) if version is not None and version.has("dump_log_script")
            else (f"{home}/bin/kafka-run-class.sh", "kafka.tools.DumpLogSegments"))
    return CaptureCommand(name, KIND_DUMP_LOG, ("sh", "-c", 'exec "$0" "$@" 2>&1', *tool, "--deep-iteration",
                                                "--files", ",".join(checked)), timeout)


def process_stat_command(pid: int, timeout: float) -> CaptureCommand:
    pid = validate_pid(pid)
    return CaptureCommand("process-stat", KIND_PROCESS_STAT, ("ps", "-o", "pid=,etimes=,rss=,args=", "-p", str(pid)), timeout,
                          redact="command_line")


def jstack_command(pid: int, index: int, settings: CaptureSettings, *, locks: bool = False) -> CaptureCommand:
    """``jstack PID``; ``locks``: ``jstack -l PID``, the lock detail (``ToolPlan.lock_detail``)."""
    pid = validate_pid(pid)
    index = validate_int(index, "jstack index", minimum=1, maximum=1000)
    return CaptureCommand(f"jstack-{index}", KIND_JSTACK, (*_prefix(settings), "jstack", *(("-l",) if locks else ()), str(pid)),
                          settings.command_timeout_s)


def jcmd_thread_print_command(pid: int, index: int, settings: CaptureSettings, *, locks: bool = False) -> CaptureCommand:
    """``jcmd PID Thread.print`` (``-l`` with ``locks``): the same dump as jstack through the attach mechanism."""
    pid = validate_pid(pid)
    index = validate_int(index, "jstack index", minimum=1, maximum=1000)
    return CaptureCommand(f"jstack-jcmd-{index}", KIND_JSTACK,
                          (*_prefix(settings), "jcmd", str(pid), "Thread.print", *(("-l",) if locks else ())), settings.command_timeout_s)


def jmx_command(config, broker, version=None) -> CaptureCommand | str:
    """The broker's JMX, read once by Kafka's JmxTool on its host exactly as the health check reads it
    (``host.jmxtool.jmx_read``: its argv per version, its light JVM, its timeout); or why it cannot be read."""
    run = jmx_read(config, broker, (), version)
    return run.unavailable if run.argv is None else CaptureCommand("jmx", KIND_JMX, run.argv, run.timeout_s)


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


_LOG_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def rolled_logs_command(log_path: str, timeout: float, within_minutes: int | None = None,
                        name: str = "server-log-rolled-list") -> CaptureCommand:
    """The modification times and names of a log's rolled files beside it (log4j rolls Kafka's server.log every
    hour into ``server.log.yyyy-MM-dd-HH``; a size-based appender into ``server.log.1``, ...), those written in
    the last ``within_minutes`` only when given: ``find`` matches the name itself, no shell glob."""
    log_path = validate_abs_path(log_path, "log path")
    folder, _, base = log_path.rpartition("/")
    if not _LOG_FILE_NAME.fullmatch(base):
        raise UnsafeValueError(f"bad log file name {base!r}")
    recent = ("-mmin", f"-{validate_int(within_minutes, 'minutes', minimum=1, maximum=10_000_000)}") if within_minutes else ()
    return CaptureCommand(name, KIND_AUX, ("find", folder or "/", "-maxdepth", "1", "-type", "f", "-name", f"{base}.*",
                                           *recent, "-printf", "%T@ %f\\0"), timeout)


_ROLLED_SUFFIX = re.compile(r"\.(?:[0-9]{4}-[0-9]{2}(?:-[0-9]{2}){0,3}|[0-9]{1,6})")


def newest_rolled(log_name: str, listing: str) -> str | None:
    """The most recently written rolled file of ``log_name`` in ``rolled_logs_command``'s output (``mtime name``
    per entry, entries ended by NUL: a file name may hold a line break): only names that are the log's name plus a
    date (``.yyyy-MM-dd-HH``, ``.yyyy-MM-dd``) or an index (``.1``) count; anything else is ignored."""
    best = None
    for line in listing.split("\0"):
        at, _, name = line.partition(" ")
        if not name.startswith(log_name) or not _ROLLED_SUFFIX.fullmatch(name[len(log_name):]):
            continue
        try:
            key = (float(at), name)
        except ValueError:
            continue
        if best is None or key > best:
            best = key
    return best[1] if best else None


def rolled_log_command(log_path: str, rolled_name: str, lines: int, timeout: float) -> CaptureCommand:
    """The last ``lines`` lines of a log's newest rolled file (the lines before the current file's first)."""
    log_path = validate_abs_path(log_path, "server log path")
    folder, _, name = log_path.rpartition("/")
    if not _LOG_FILE_NAME.fullmatch(rolled_name) or not rolled_name.startswith(name + "."):
        raise UnsafeValueError(f"bad rolled log file name {rolled_name!r}")
    n = validate_int(lines, "log_tail_lines", minimum=1, maximum=10_000_000)
    return CaptureCommand("server-log-rolled", KIND_SERVER_LOG,
                          ("tail", "-n", str(n), "--", validate_abs_path(f"{folder}/{rolled_name}", "rolled log path")), timeout)


def heap_dump_command(pid: int, remote_path: str, settings: CaptureSettings, timeout: float | None = None) -> CaptureCommand:
    pid = validate_pid(pid)
    remote_path = validate_abs_path(remote_path, "heap dump path")
    if not _SAFE_DIR_RE.fullmatch(remote_path):
        raise UnsafeValueError(f"heap dump path may only contain [A-Za-z0-9_./-]: {remote_path!r}")
    return CaptureCommand(
        "heap-dump-jmap",
        KIND_AUX,
        (*_prefix(settings), "jmap", f"-dump:live,format=b,file={remote_path}", str(pid)),
        timeout or max(settings.command_timeout_s, 300.0),
    )


# ---------------------------------------------------------------------------------------------
# what to run on a host


SUSPECT = "suspect"
PEER = "peer"
RUNNABLE_STATES = ("running", "sleeping", "disk_sleep", "idle", "parked", "paging")
# tools that stop or pause the JVM: a full GC (jmap -histo:live, a heap dump) or ptrace (jhsdb). A pause beyond the
# ZooKeeper session timeout (6 s by default in Kafka 2.3) moves leaders and coordinators: the outage the capture documents
INTRUSIVE_TOOLS = ("jhsdb", "jmap -histo:live", "heap dump")
GENTLE_DUMPS = ("jstack", "jcmd", "sigquit")


# findings that say a broker does not serve, each corroborated there by an independent signal (detect/serving.py)
NOT_SERVING_KINDS = ("broker_unresponsive", "broker_unregistered_alive")
# where a deadlock is suspected: the lock detail of the thread dumps (-l) is worth its cost there
LOCK_DETAIL_KINDS = (*NOT_SERVING_KINDS, "jvm_deadlock")
# how a direct check fails when nobody answers: no answer in time (librdkafka's _TIMED_OUT, a socket timeout) or the
# connection refused or dropped (_TRANSPORT, ConnectionRefusedError). Not an authentication or TLS failure (the
# product's own credential expired), not an answer as another broker id, not an unsupported request: those brokers
# may serve everyone else, and the intrusive tools would pause them
NO_ANSWER_CODES = frozenset(("_TIMED_OUT", "_MSG_TIMED_OUT", "_TIMED_OUT_QUEUE", "_TRANSPORT", "_ALL_BROKERS_DOWN",
                             "TimeoutError", "timeout", "ConnectionRefusedError", "ConnectionResetError"))


def _get(f, key: str):
    return f.get(key) if isinstance(f, dict) else getattr(f, key, None)


def not_serving_finding(findings, broker_id: int, kinds: Sequence[str] = NOT_SERVING_KINDS):
    """The first of ``findings`` (Finding objects or their dicts) of ``kinds`` about ``broker_id`` (by default: that
    says it does not serve), or None."""
    for f in findings or ():
        if f is not None and _get(f, "kind") in kinds and int(broker_id) in {int(b) for b in _get(f, "broker_ids") or ()}:
            return f
    return None


def lock_detail(role: str, broker_id: int, findings) -> bool:
    """Thread dumps with their lock detail (``jstack -l``, ``jcmd Thread.print -l``) only for a suspect a deadlock or
    not-serving finding accuses: ``-l`` makes HotSpot walk the whole heap for the owners of java.util.concurrent locks at
    its safepoint (the "concurrent locks" dump), a pause that grows with the heap. Every other host gets a plain dump
    (its monitors, and HotSpot's own deadlock detection, are in it)."""
    return role == SUSPECT and not_serving_finding(findings, broker_id, LOCK_DETAIL_KINDS) is not None


def intrusive_evidence(check, findings) -> tuple[str | None, str]:
    """Whether the intrusive tools (jmap -histo:live, jhsdb, a heap dump) may run on ``check``'s broker: only when the
    direct check taken just now found nobody answering (``NO_ANSWER_CODES``) AND a not-serving finding of that broker
    corroborates it. -> (the evidence, "") or (None, why not)."""
    bid = int(check.broker_id)
    if check.ok:
        return None, f"broker {bid} answered a direct Kafka-protocol check just now: it serves, and these tools would pause it"
    code = str(check.error_code or "")
    if code not in NO_ANSWER_CODES:
        return None, (f"broker {bid}'s direct check failed with {code or 'no error code'} ({check.error}), not a time-out or a "
                      "refused connection: it may serve everyone else, and these tools would pause it")
    finding = not_serving_finding(findings, bid)
    if finding is None:
        return None, (f"broker {bid}'s direct check had no answer ({code}) but no not-serving finding of it corroborates "
                      f"that (one of {', '.join(NOT_SERVING_KINDS)}): a busy broker is not paused on one slow answer")
    return (f"direct check at {check.at} on {check.endpoint}: {check.error} ({code}), corroborated by {_get(finding, 'kind')}: "
            f"{str(_get(finding, 'summary') or '')[:300]}"), ""


@dataclass(frozen=True)
class ToolPlan:
    """Which JVM tools a host gets, decided from its role and its process state. ``skipped``: tools
    the circumstances ruled out (a stopped process: the capture is partial); ``left_out``: tools
    this host never gets by design (a peer, heap dumps not configured: the capture stays complete).
    ``intrusive``: tools that may run later, one host at a time under the cluster's maintenance lock, only if
    the broker is proven not serving just before (``collector``'s second phase). The manifest carries all of it."""

    thread_dumps: int  # how many
    # thread-dump methods, tried in order until one works: "jstack" and "jcmd" (attach: a safepoint, no GC), "sigquit"
    # (into the stdout file: needs a running JVM, not the attach mechanism)
    dump_methods: tuple[str, ...]
    heap_info: bool  # jcmd GC.heap_info (reads the heap's sizes: no GC) -- suspect only
    intrusive: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()
    jmx: bool = True  # one JmxTool read (every host, read-only): not of a process that cannot answer it
    lock_detail: bool = False  # the dumps with -l (``lock_detail``): a suspect a deadlock or not-serving finding accuses


def tool_plan(role: str, pid: int | None, process_state: str | None, settings: CaptureSettings) -> ToolPlan:
    """Pure: the JVM tools for one host (every host with a process also gets its /proc thread list).

    Nothing here stops or pauses a JVM: thread dumps by jstack, jcmd Thread.print or SIGQUIT, heap sizes by
    jcmd GC.heap_info, one JmxTool read (``jmx``; also where no process was found: the port may still answer). The intrusive tools (jhsdb, jmap -histo:live, a heap dump) are only planned, for a suspect,
    and run only if it is proven not serving right before (see ``ToolPlan.intrusive``).

    * no process: logs and sockets only;
    * stopped (SIGSTOP) or traced: no attach-based tool (they wait for a JVM that cannot answer) and no SIGQUIT
      (delivered only when it resumes); a suspect's thread dump may come from jhsdb (intrusive);
    * zombie / dead: nothing can be asked;
    * a running suspect: ``jstack_count`` dumps, heap sizes; jmap -histo:live and (where configured) a heap dump
      intrusive, jhsdb too if no gentle dump works; a running peer: one thread dump, never an intrusive tool.
    """
    intrusive_ok = settings.intrusive
    off = "capture.intrusive is off for this cluster"
    if pid is None:
        return ToolPlan(0, (), False, skipped=(("JVM tools", "no broker process found"),))
    if process_state in ("zombie", "dead"):
        return ToolPlan(0, (), False, skipped=(("JVM tools", f"the process is a {process_state}: no JVM to ask"),), jmx=False)
    if process_state in ("stopped", "tracing_stop"):
        why = f"the process is {process_state} (SIGSTOP?): attach-based tools would wait for a JVM that cannot answer"
        skipped = [("jstack", why), ("SIGQUIT thread dump", "a stopped JVM handles the signal only when it resumes"),
                   ("JMX read", f"the process is {process_state}: its JMX cannot answer until it resumes")]
        left = [("jmap -histo:live", why)] + ([("heap dump", why)] if settings.heap_dump else [])
        if role == SUSPECT and intrusive_ok:
            return ToolPlan(0, (), False, ("jhsdb",), tuple(skipped), tuple(left), jmx=False)
        left.append(("jhsdb", off if role == SUSPECT else "stops the process while it reads it: suspect broker only"))
        return ToolPlan(0, (), False, (), tuple(skipped), tuple(left), jmx=False)
    skipped: list[tuple[str, str]] = []
    if process_state is not None and process_state not in RUNNABLE_STATES:
        skipped.append(("process state", f"unexpected state {process_state!r}: tools tried anyway, within the deadline"))
    if role == SUSPECT:
        left_out = [] if settings.heap_dump else [("heap dump", "heap dumps not configured for this cluster (capture.heap_dump)")]
        if not intrusive_ok:
            left_out += [(tool, off) for tool in INTRUSIVE_TOOLS if tool != "heap dump" or settings.heap_dump]
            return ToolPlan(settings.jstack_count, GENTLE_DUMPS, True, (), tuple(skipped), tuple(left_out))
        intrusive = ("jhsdb", "jmap -histo:live") + (("heap dump",) if settings.heap_dump else ())
        return ToolPlan(settings.jstack_count, GENTLE_DUMPS, True, intrusive, tuple(skipped), tuple(left_out))
    left_out = (("jmap -histo:live", "stop-the-world tool: suspect broker only, never a healthy peer"),
                ("jhsdb", "stops the process while it reads it: suspect broker only"),
                ("heap dump", "suspect broker only"))
    return ToolPlan(1, GENTLE_DUMPS, False, (), tuple(skipped), left_out)


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
