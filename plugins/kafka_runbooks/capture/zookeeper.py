"""Capture for ZooKeeper incidents (004): every member of the ensemble, in parallel, into the evidence bundle.

Per member, under ``zookeeper/<server id>/`` (files carry ``server``; the manifest's ``zookeeper.<id>`` has its
address, zone, role and status):

1. its four-letter words ``srvr``, ``mntr``, ``cons`` (kinds ``zk_srvr``, ``zk_mntr``, ``zk_cons``) -- asked at
   the start and again at the end, so connection counts and counters can be compared;
2. over SSH (when the member has an SSH connection), argv only, within ``capture.host_deadline_s``: the host's
   load (``/proc/loadavg``), its ``zoo.cfg`` (``zk_config``: tickTime, syncLimit), the tail of its log
   (``zk_log``) and of its GC log (``gc_log``), its process (``ps``), and -- for the affected server only --
   a plain ``jstack`` as the JVM's user (``zookeeper.jvm_tool_prefix``): no ``-l``, whose concurrent-locks section
   walks the heap at a safepoint and so pauses the server for longer (the rule the broker capture keeps: ``-l`` only
   where a deadlock is suspected, and no ZooKeeper finding is one).

A member ends ``complete``, ``partial`` (reasons) or ``failed`` (nothing captured).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

from kafka_runbooks import clock
from kafka_runbooks.host import commands as C
from kafka_runbooks.host import sockets as S
from kafka_runbooks.capture.bundle import EvidenceBundle
from kafka_runbooks.capture.redact import redact_file
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.host.procfs import process_state
from kafka_runbooks.detect.zk_probe import WORDS, Member
from kafka_runbooks.hooks.ssh import CommandResult, SSHError
from kafka_runbooks.zookeeper import four_letter

COMPLETE, PARTIAL, FAILED = "complete", "partial", "failed"
KINDS = {"srvr": C.KIND_ZK_SRVR, "mntr": C.KIND_ZK_MNTR, "cons": C.KIND_ZK_CONS}


def _words(bundle: EvidenceBundle, m: Member, seq: int, timeout_s: float, ask: Callable, failed: list[str]) -> int:
    got = 0
    for word in WORDS:
        started = clock.now_iso()
        t0 = time.monotonic()
        try:
            text = ask(m.host, m.port, word, timeout_s).encode()
            err = None
        except OSError as exc:
            text, err = b"", f"{type(exc).__name__}: {exc}"
            failed.append(f"{word} ({seq}): {err}")
        res = CommandResult((word,), f"four-letter word {word!r} to {m.address}", text, b"", 0 if err is None else None, started,
                            round(time.monotonic() - t0, 3), err)
        bundle.record_zk_command(m.server, m.address, f"{word}-{seq}", KINDS[word], res, seq=seq, captured_at=started)
        got += 1 if text else 0
    return got


def capture_member(config: ClusterConfig, bundle: EvidenceBundle, m: Member, affected: bool, runner_factory: Callable | None,
                   ask: Callable = four_letter) -> None:
    timeout = config.zookeeper_health.four_letter_timeout_s
    failed: list[str] = []
    skipped: list[str] = []
    bundle.set_zookeeper(m.server, address=m.address, zone=m.zone, ssh_conn_id=m.ssh_conn_id, role="affected" if affected else "member")
    captured = _words(bundle, m, 1, timeout, ask, failed)
    if not m.ssh_conn_id or runner_factory is None:
        skipped.append("host files (log, zoo.cfg, jstack): no SSH connection configured for this server")
    else:
        captured += _capture_member_host(config, bundle, m, affected, runner_factory, failed, skipped)
    captured += _words(bundle, m, 2, timeout, ask, failed)
    reasons = failed + [f"skipped {s}" for s in skipped]
    status = FAILED if captured == 0 else (PARTIAL if reasons else COMPLETE)
    bundle.set_zookeeper(m.server, status=status, status_reasons=reasons)


class _MemberHost:
    """One ZooKeeper server's host over SSH (``runner``, set once made), within the capture's deadline (counted from
    here): each command's output into the bundle, what failed or was skipped into the member's lists, and how many
    files came back with something."""

    def __init__(self, bundle: EvidenceBundle, m: Member, runner: Any, deadline_s: float, failed: list[str],
                 skipped: list[str]) -> None:
        self.bundle, self.m, self.runner = bundle, m, runner
        self.deadline_s = deadline_s
        self.deadline = time.monotonic() + deadline_s
        self.failed, self.skipped = failed, skipped
        self.captured = 0

    def do(self, cmd: C.CaptureCommand, optional: bool = False) -> CommandResult | None:
        left = self.deadline - time.monotonic()
        if left < 2.0:
            self.skipped.append(f"{cmd.name}: capture deadline of {self.deadline_s:g} s reached")
            return None
        path = self.bundle.zk_file_path(self.m.server, f"{cmd.name}.out")
        timeout = max(1.0, min(cmd.timeout, left - 1.0))
        try:
            res = self.runner.run_to_file(cmd.argv, timeout, str(path))
        except SSHError as exc:
            path.write_bytes(b"")
            res = CommandResult(cmd.argv, "", b"", b"", None, clock.now_iso(), 0.0, f"{type(exc).__name__}: {exc}", str(path))
        if cmd.redact:
            res = redact_file(cmd.redact, path, res)
        self.bundle.record_zk_command(self.m.server, self.runner.address, cmd.name, cmd.kind, res)["timeout_s"] = timeout
        if optional and res.exit_code == 1 and b"No such file" in (res.stderr or b""):
            self.skipped.append(f"{cmd.argv[-1]}: no such file on the host")
        elif res.error or res.exit_code != 0:
            self.failed.append(f"{cmd.name}: {res.error or 'exit ' + str(res.exit_code)}")
        elif res.stdout_bytes:
            self.captured += 1
        return res

    @staticmethod
    def text(res: CommandResult | None) -> str:
        if res is None or res.exit_code != 0 or not res.stdout_path:
            return ""
        with open(res.stdout_path, "rb") as fh:
            return fh.read(1 << 20).decode("utf-8", "replace")


def _capture_member_host(config: ClusterConfig, bundle: EvidenceBundle, m: Member, affected: bool,
                         runner_factory: Callable, failed: list[str], skipped: list[str]) -> int:
    """The server's host files over SSH: load, zoo.cfg, its logs, its process and (an affected server) one jstack.
    Returns how many came back with something; an unreachable host or a bad setting is recorded, never raised."""
    h = _MemberHost(bundle, m, None, config.capture.host_deadline_s, failed, skipped)
    try:
        h.runner = runner_factory(m.ssh_conn_id)
        h.runner.get_conn()
        bundle.set_zookeeper(m.server, reachable=True)
        _member_files(config, h)
        pid = _member_pid(config, h)
        state = _member_process(config, h, pid, affected) if pid is not None else None
        if pid is None:
            failed.append(f"no visible process listening on {m.address}")
        bundle.set_zookeeper(m.server, pid=pid, process_state=state)
    except SSHError as exc:
        bundle.set_zookeeper(m.server, reachable=False)
        failed.append(f"host unreachable: {type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - a bad connection or setting: recorded, never fatal for the others
        failed.append(f"{type(exc).__name__}: {exc}")
    finally:
        if h.runner is not None:
            try:
                h.runner.close()
            except Exception:  # noqa: BLE001
                pass
    return h.captured


def _member_files(config: ClusterConfig, h: _MemberHost) -> None:
    """Its host's load, its zoo.cfg (redacted) and the tails of its log and GC log, where configured."""
    zs, cs = config.zookeeper, config.capture
    t = cs.command_timeout_s
    h.do(C.loadavg_command(t))
    cfg = zs.path("config_path", h.m.server)
    if cfg:
        h.do(C.config_file_command("zoo-cfg", C.KIND_ZK_CONFIG, cfg, t, redact="zookeeper_properties"), optional=True)
    for name, which, kind in (("zookeeper-log", "log_path", C.KIND_ZK_LOG), ("zookeeper-gc-log", "gc_log_path", C.KIND_GC_LOG)):
        path = zs.path(which, h.m.server)
        if path:
            n = C.validate_int(cs.log_tail_bytes, "log_tail_bytes", minimum=1, maximum=1 << 30)
            h.do(C.CaptureCommand(name, kind, ("tail", "-c", str(n), "--", C.validate_abs_path(path, f"ZooKeeper {which}")), t), optional=True)


def _member_pid(config: ClusterConfig, h: _MemberHost) -> int | None:
    """The server's pid: its pid file where configured, else who listens on its client port."""
    zs, t, m = config.zookeeper, config.capture.command_timeout_s, h.m
    pid_file = zs.path("pid_file", m.server)
    if pid_file:
        raw = h.text(h.do(C.config_file_command("pid-file", C.KIND_AUX, pid_file, t, redact=None)))
        return int(raw.strip()) if raw.strip().isdigit() else None
    listeners = S.parse_listeners(h.text(h.do(C.CaptureCommand("listen-sockets", C.KIND_SOCKETS_SS, ("ss", "-Hltnp"), t))))
    from kafka_runbooks.detect.endpoints import resolve

    return S.find_broker_pid(listeners, S.Endpoint.of([*resolve(m.host), m.host], [m.port]))


def _member_process(config: ClusterConfig, h: _MemberHost, pid: int, affected: bool) -> str | None:
    """The process's state and stat, and one jstack of an affected server whose process runs; returns the state."""
    t = config.capture.command_timeout_s
    state = process_state(h.text(h.do(C.process_state_command(pid, t))), pid)
    h.do(C.process_stat_command(pid, t))
    if affected:
        prefix = tuple(config.zookeeper.jvm_tool_prefix)
        if state in ("stopped", "tracing_stop", "zombie", "dead"):
            h.skipped.append(f"jstack: the process is {state}")
        else:
            h.do(C.CaptureCommand("jstack-1", C.KIND_JSTACK, (*prefix, "jstack", str(C.validate_pid(pid))), t))
    return state


def capture_ensemble(config: ClusterConfig, bundle: EvidenceBundle, members: Iterable[Member], affected: Iterable[str] = (),
                     runner_factory: Callable | None = None, ask: Callable = four_letter) -> dict:
    """Every member in parallel; returns the manifest's ``zookeeper`` section."""
    from kafka_runbooks.hooks.ssh import default_runner_factory

    members = list(members)
    affected = {str(a) for a in affected}
    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    with ThreadPoolExecutor(max_workers=min(16, len(members)) or 1, thread_name_prefix="zk-capture") as pool:
        list(pool.map(lambda m: capture_member(config, bundle, m, m.server in affected, factory, ask), members))
    return dict(bundle.manifest.get("zookeeper") or {})
