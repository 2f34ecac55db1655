"""Processes of the lab: found by pid file and by the state dir named in their command line, never by name alone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Callable


class LabError(RuntimeError):
    pass


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns a truthy value; raise LabError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - report the last failure if we time out
            last_exc = exc
        if time.monotonic() >= deadline:
            raise LabError(f"timed out after {timeout:.1f}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 60)
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def proc_state(pid: int) -> str | None:
    """The /proc state letter (R, S, D, T, t, Z, ...) or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1][0]
    except (OSError, IndexError):
        return None


def alive(pid: int | None) -> bool:
    return bool(pid) and proc_state(pid) not in (None, "Z", "X")


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def is_lab_command(cmd: str, marker: str) -> bool:
    """A lab process: java (ZooKeeper, broker), sshd, the load, the bad client, or a host control script -- naming the state dir."""
    if marker not in cmd:
        return False
    argv0 = os.path.basename(cmd.split(" ", 1)[0])
    return (argv0 in ("java", "javac") or argv0.startswith("sshd") or "kafka_lab.load" in cmd or "kafka_lab.badclient" in cmd
            or "/bin/kafka-" in cmd)


def pids_mentioning(marker: str) -> list[int]:
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != me and is_lab_command(cmdline(int(d)), marker) and alive(int(d)):
            out.append(int(d))
    return sorted(out)


def signal_if_ours(pid: int | None, marker: str, sig: int = signal.SIGKILL) -> bool:
    """Send ``sig`` to ``pid`` only if its command line names the lab's state dir (pid files can be stale)."""
    if not pid or not alive(pid) or not is_lab_command(cmdline(pid), marker):
        return False
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (epoch s): /proc/<pid>/stat's starttime (clock ticks after boot) + /proc/stat's btime."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(x.split()[1]) for x in Path("/proc/stat").read_text().splitlines() if x.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return btime + ticks / os.sysconf("SC_CLK_TCK")


def forget_stale_attach_sockets(uids: set[int], tmp: Path = Path("/tmp")) -> list[Path]:
    """Removes ``/tmp/.java_pid<N>`` files of the given users that no live JVM of theirs answers on.

    A JVM that answered an attach (jstack, jcmd) and was then SIGKILLed leaves its attach socket behind. When its pid
    is reused by another JVM, attaching to the new one fails: "well-known file ... is not secure: file should be owned
    by the current user" (another user's file) or "Connection refused" (the same user's). A file is stale when its
    pid is gone, is now another user's process, or started after the file was made.
    """
    removed = []
    for f in tmp.glob(".java_pid*"):
        pid = f.name[len(".java_pid"):]
        try:
            st = f.lstat()
        except OSError:
            continue
        if not pid.isdigit() or st.st_uid not in uids:
            continue
        try:
            owner = os.stat(f"/proc/{pid}").st_uid if alive(int(pid)) else None
        except OSError:
            owner = None
        started = process_start(int(pid)) if owner is not None else None
        if owner != st.st_uid or (started is not None and st.st_mtime < started - 1):
            f.unlink(missing_ok=True)
            removed.append(f)
    return removed


def spawn(argv: list[str], log: Path, pid_file: Path, cwd: Path | None = None, env: dict | None = None) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                             start_new_session=True)
    pid_file.write_text(f"{p.pid}\n")
    return p.pid


def tail(path: Path, n: int = 30) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 256 * 1024))
            return "".join(fh.read().decode(errors="replace").splitlines(True)[-n:])
    except OSError:
        return "(none)"
