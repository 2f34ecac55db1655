"""``StrictSSHHook``: the SSH provider's hook, made strict about host keys, running argv commands.

The connection is resolved by the provider's ``SSHHook`` (so env-var, secrets-backend and DB
connections all work, and ``host_key`` / ``key_file`` / ``conn_timeout`` extras are parsed the
provider's way). ``get_conn()`` is overridden: the paramiko client is built here because the
base hook's policy handling is not strict by construction:

* ``allow_host_key_change: true`` makes the hook skip known hosts and install paramiko's base
  ``MissingHostKeyPolicy`` -- which silently accepts ANY key for an unknown host;
* ``no_host_key_check: true`` makes paramiko add any unknown host key silently;
* ``get_conn()`` retries a failed connect 3 times with 3-5 s sleeps (a changed host key included).

So: those two flags are refused outright (:class:`InsecureConnectionError`), the client always gets
``RejectPolicy``, a ``host_key`` extra is pinned as the only known key for ``[host]:port`` (else
the ``known_hosts`` extra file, else ``~/.ssh/known_hosts``), and an unknown host or a changed key
raises :class:`HostKeyError`. The presented key is compared with the pinned one again after connect.

Commands are argv lists; the command line is built only with ``shlex.join`` and wrapped in the
remote ``timeout`` utility (kill after grace) while the local side enforces a deadline on the
channel, so a hung command records ``error="timeout after Ns"`` and never hangs the caller.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import selectors
import shlex
import threading
import time
from dataclasses import dataclass
from typing import IO, Any, Callable, Iterator, Sequence

import paramiko
from airflow.providers.ssh.hooks.ssh import SSHHook

from kafka_runbooks import clock
from kafka_runbooks.host.argv import UnsafeValueError, validate_argv
from kafka_runbooks.hooks.quiet import quiet_connection_noise
from kafka_runbooks.truth import truthy

quiet_connection_noise()  # connection chatter at DEBUG (hooks/quiet.py)

log = logging.getLogger(__name__)

KILL_GRACE_S = 3.0  # remote `timeout -k`: SIGKILL this long after SIGTERM
LOCAL_GRACE_S = 5.0  # local deadline = timeout + KILL_GRACE_S + LOCAL_GRACE_S
STDERR_CAP = 8 << 20
TIMEOUT_EXIT_CODES = (124, 137)


class SSHError(RuntimeError):
    """Base class: the host could not be used over SSH."""


class InsecureConnectionError(SSHError):
    """The Airflow connection asks to weaken host-key checking; we refuse to use it."""


class HostKeyError(SSHError):
    """The host is unknown (no pinned/known key) or presented a different key than the pinned one."""


class ConnectError(SSHError):
    """Network, timeout or authentication failure while connecting."""


@dataclass
class CommandResult:
    argv: tuple[str, ...]
    command: str  # exactly what was sent to the remote side (shlex.join of the wrapped argv)
    stdout: bytes
    stderr: bytes
    exit_code: int | None
    started_at: str
    duration_s: float
    error: str | None = None
    stdout_path: str | None = None  # set by run_to_file (stdout then is b"")
    stdout_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0


def _truthy(v: Any) -> bool:
    """``truth.truthy``, failing closed: a word it does not know counts as set (the connection is refused)."""
    try:
        return truthy(v)
    except ValueError:
        return True


def _check_extras(conn_id: str, extra: dict) -> None:
    for key in ("no_host_key_check", "ignore_hostkey_verification", "allow_host_key_change"):
        if key in extra and _truthy(extra[key]):
            raise InsecureConnectionError(
                f"SSH connection {conn_id!r} sets {key}=true; kafka-runbooks only connects with strict "
                f"host-key checking (set a 'host_key' extra or a known_hosts entry instead)"
            )


class StrictSSHHook(SSHHook):
    """Runs argv commands on one host over one reused SSH connection. Use one hook per host
    (and per thread); the connection is opened lazily and re-opened if it dropped."""

    def __init__(
        self,
        ssh_conn_id: str,
        *,
        connect_timeout: float | None = None,
        remote_timeout_wrapper: bool = True,
    ) -> None:
        conn = self.get_connection(ssh_conn_id)
        self._extra = dict(conn.extra_dejson or {})
        _check_extras(ssh_conn_id, self._extra)
        super().__init__(ssh_conn_id=ssh_conn_id, conn_retry_attempts=1)
        if self.no_host_key_check or self.allow_host_key_change:  # belt and braces
            raise InsecureConnectionError(f"SSH connection {ssh_conn_id!r} disables host-key checking; refused")
        self.remote_timeout_wrapper = remote_timeout_wrapper
        self.host: str = self.remote_host
        self.port: int = int(self.port or 22)
        self.connect_timeout = float(connect_timeout if connect_timeout is not None else (self.conn_timeout or 10))
        self.client: paramiko.SSHClient | None = None
        self._lock = threading.RLock()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # -- connection ---------------------------------------------------------------------------

    def _known_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def get_conn(self) -> paramiko.SSHClient:
        with self._lock:
            if self.client is not None:
                t = self.client.get_transport()
                if t is not None and t.is_active():
                    return self.client
                self.client.close()
                self.client = None
            client = paramiko.SSHClient()
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            pinned = self.host_key
            if pinned is not None:
                client.get_host_keys().add(self._known_name(), pinned.get_name(), pinned)
            elif self._extra.get("known_hosts"):
                client.load_host_keys(str(self._extra["known_hosts"]))
            else:
                client.load_system_host_keys()
            kwargs: dict[str, Any] = {
                "hostname": self.host,
                "port": self.port,
                "username": self.username,
                "timeout": self.connect_timeout,
                "banner_timeout": self.connect_timeout,
                "auth_timeout": self.connect_timeout,
                "compress": self.compress,
                "look_for_keys": self.look_for_keys,
                "allow_agent": False,
                "sock": self.host_proxy,
            }
            if self.password:
                kwargs["password"] = self.password.strip()
            if self.pkey:
                kwargs["pkey"] = self.pkey
            if self.key_file:
                kwargs["key_filename"] = self.key_file
            if self.disabled_algorithms:
                kwargs["disabled_algorithms"] = self.disabled_algorithms
            try:
                client.connect(**kwargs)
            except paramiko.BadHostKeyException as exc:
                client.close()
                raise HostKeyError(
                    f"{self.ssh_conn_id} ({self.address}): host key CHANGED - got {exc.key.get_name()} "
                    f"{exc.key.get_base64()[:24]}..., expected {exc.expected_key.get_base64()[:24]}...; refused"
                ) from exc
            except paramiko.AuthenticationException as exc:
                client.close()
                raise ConnectError(f"{self.ssh_conn_id} ({self.address}): authentication failed: {exc}") from exc
            except paramiko.SSHException as exc:
                client.close()
                if "known_hosts" in str(exc) or "host key" in str(exc).lower():
                    raise HostKeyError(f"{self.ssh_conn_id} ({self.address}): UNKNOWN host key, refused: {exc}") from exc
                raise ConnectError(f"{self.ssh_conn_id} ({self.address}): {exc}") from exc
            except (OSError, EOFError) as exc:
                client.close()
                raise ConnectError(f"{self.ssh_conn_id} ({self.address}): cannot connect: {exc!r}") from exc
            transport = client.get_transport()
            if pinned is not None and transport is not None and transport.get_remote_server_key() != pinned:
                client.close()
                raise HostKeyError(f"{self.ssh_conn_id} ({self.address}): presented host key differs from pinned key")
            if transport is not None:
                transport.set_keepalive(15)
            self.client = client
            return client

    def close(self) -> None:
        with self._lock:
            if self.client is not None:
                self.client.close()
                self.client = None

    def __enter__(self) -> "StrictSSHHook":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- commands -----------------------------------------------------------------------------

    def command_line(self, argv: Sequence[str], timeout: float) -> str:
        argv = validate_argv(argv)
        if self.remote_timeout_wrapper:
            argv = ("timeout", "-k", f"{KILL_GRACE_S:g}", f"{float(timeout):g}", *argv)
        return shlex.join(argv)

    def run(self, argv: Sequence[str], timeout: float) -> CommandResult:
        """Run argv; stdout kept in memory. Connection problems raise SSHError; command problems
        (non-zero exit, timeout, channel error) are recorded in the result."""
        buf = io.BytesIO()
        res = self._exec(argv, timeout, buf)
        res.stdout = buf.getvalue()
        return res

    def run_to_file(self, argv: Sequence[str], timeout: float, path: str) -> CommandResult:
        """Run argv, streaming stdout to the local file ``path`` (heap-sized output stays off the heap)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # evidence: its owner only
        with os.fdopen(fd, "wb") as fh:
            res = self._exec(argv, timeout, fh)
        res.stdout_path = str(path)
        return res

    def _exec(self, argv: Sequence[str], timeout: float, sink: IO[bytes]) -> CommandResult:
        argv = validate_argv(argv)
        if not timeout or timeout <= 0:
            raise UnsafeValueError(f"timeout must be > 0, got {timeout!r}")
        command = self.command_line(argv, timeout)
        client = self.get_conn()  # SSHError propagates: the host is unusable
        started_at = clock.now_iso()
        t0 = time.monotonic()
        deadline = t0 + timeout + (KILL_GRACE_S + LOCAL_GRACE_S if self.remote_timeout_wrapper else 0.0)
        err = bytearray()
        nbytes = 0
        exit_code: int | None = None
        error: str | None = None
        chan = None
        try:
            transport = client.get_transport()
            assert transport is not None
            chan = transport.open_session(timeout=self.connect_timeout)
            # stdin from /dev/null on the host, not an EOF sent by us: paramiko can send that EOF after its CLOSE when
            # the command ends at once, and OpenSSH then drops the whole connection ("ieof packet referred to
            # nonexistent channel"), seen under load in a 0.10.2.1 drill: the next command's channel was refused
            chan.exec_command(f"{command} </dev/null")
            with selectors.DefaultSelector() as sel:
                sel.register(chan, selectors.EVENT_READ)
                while True:
                    got = False
                    while chan.recv_stderr_ready():
                        data = chan.recv_stderr(65536)
                        if len(err) < STDERR_CAP:
                            err += data[: STDERR_CAP - len(err)]
                        got = True
                    while chan.recv_ready():
                        data = chan.recv(1 << 20)
                        if not data:
                            break
                        sink.write(data)
                        nbytes += len(data)
                        got = True
                    if (chan.eof_received or chan.closed) and not chan.recv_ready() and not chan.recv_stderr_ready():
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        error = f"timeout after {timeout:g}s"
                        self._kill(chan)
                        break
                    if not got:
                        sel.select(min(remaining, 0.2))
            if error is None:
                remaining = max(0.0, deadline - time.monotonic())
                if chan.status_event.wait(min(remaining, 5.0) if remaining else 0.5):
                    exit_code = chan.recv_exit_status()
                    if exit_code == -1:  # paramiko: no status (e.g. killed by signal)
                        exit_code = None
                else:
                    error = "no exit status received"
            if (
                self.remote_timeout_wrapper
                and exit_code in TIMEOUT_EXIT_CODES
                and time.monotonic() - t0 >= timeout * 0.95
            ):
                error = f"timeout after {timeout:g}s"
        except (paramiko.SSHException, OSError, EOFError) as exc:
            error = f"ssh channel error: {exc!r}"
        finally:
            if chan is not None:
                try:
                    chan.close()
                except Exception:  # noqa: BLE001 - best effort
                    pass
        return CommandResult(
            argv=argv,
            command=command,
            stdout=b"",
            stderr=bytes(err),
            exit_code=exit_code,
            started_at=started_at,
            duration_s=round(time.monotonic() - t0, 3),
            error=error,
            stdout_bytes=nbytes,
        )

    @staticmethod
    def _kill(chan: paramiko.Channel) -> None:
        """Best effort: ask sshd to SIGKILL the command (RFC 4254 'signal'), then close the channel.
        The remote `timeout` wrapper kills it anyway; closing the channel also hangs up its pipes."""
        try:
            m = paramiko.Message()
            m.add_byte(paramiko.common.cMSG_CHANNEL_REQUEST)
            m.add_int(chan.remote_chanid)
            m.add_string("signal")
            m.add_boolean(False)
            m.add_string("KILL")
            chan.transport._send_user_message(m)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001
            pass
        try:
            chan.close()
        except Exception:  # noqa: BLE001
            pass

    # -- files --------------------------------------------------------------------------------

    def remote_size(self, remote_path: str) -> int:
        with self.get_conn().open_sftp() as sftp:
            return int(sftp.stat(remote_path).st_size or 0)

    def fetch(self, remote_path: str, local_path: str, max_bytes: int | None = None) -> int:
        """Copy a remote file over SFTP; refuses (ValueError) when larger than ``max_bytes``."""
        validate_argv([remote_path])
        with self.get_conn().open_sftp() as sftp:
            size = int(sftp.stat(remote_path).st_size or 0)
            if max_bytes is not None and size > max_bytes:
                raise ValueError(f"{remote_path} is {size} B > fetch limit {max_bytes} B; left on the host")
            sftp.get(remote_path, local_path)
        return size

    def remove(self, remote_path: str) -> None:
        with self.get_conn().open_sftp() as sftp:
            sftp.remove(remote_path)


def default_runner_factory(connect_timeout: float | None = None):
    def factory(ssh_conn_id: str) -> StrictSSHHook:
        return StrictSSHHook(ssh_conn_id, connect_timeout=connect_timeout)

    return factory


@contextlib.contextmanager
def opened_runner(factory: Callable[[str], Any], ssh_conn_id: str) -> Iterator[Any]:
    """A runner from ``factory`` for one host, closed afterwards (a failing close is not the caller's problem)."""
    runner = factory(ssh_conn_id)
    try:
        yield runner
    finally:
        try:
            runner.close()
        except Exception:  # noqa: BLE001
            log.debug("closing the SSH runner for %s failed", ssh_conn_id, exc_info=True)
