"""Capture the scene on every suspect broker host into an evidence bundle.

Hosts are captured in parallel (one thread and one SSH connection per host); each host's commands
run in sequence. A failing command or an unreachable host is recorded in the manifest and never
aborts the rest of the capture.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from kafka_runbooks import model
from kafka_runbooks.capture import commands as C
from kafka_runbooks.capture import sockets as S
from kafka_runbooks.detect.endpoints import resolve
from kafka_runbooks.capture.bundle import EvidenceBundle
from kafka_runbooks import clock
from kafka_runbooks.hooks.ssh import CommandResult, SSHError, default_runner_factory
from kafka_runbooks.config import ClusterConfig

log = logging.getLogger(__name__)


class Runner(Protocol):
    host: str
    address: str

    def connect(self) -> Any: ...
    def run(self, argv: Sequence[str], timeout: float) -> CommandResult: ...
    def run_to_file(self, argv: Sequence[str], timeout: float, path: str) -> CommandResult: ...
    def remote_size(self, remote_path: str) -> int: ...
    def fetch(self, remote_path: str, local_path: str, max_bytes: int | None = None) -> int: ...
    def remove(self, remote_path: str) -> None: ...
    def close(self) -> None: ...


RunnerFactory = Callable[[str], Runner]


def capture_cluster(
    config: ClusterConfig,
    snapshot: model.ClusterSnapshot | None,
    broker_ids: Iterable[int],
    bundle: EvidenceBundle,
    runner_factory: RunnerFactory | None = None,
    *,
    trigger: model.Finding | Mapping | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Capture every broker in ``broker_ids`` (the suspect and its peers) into ``bundle`` and
    write manifest.json (+ snapshot.json when a snapshot is given). Returns the manifest dict."""
    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    if trigger is not None:
        bundle.manifest["trigger"] = trigger.to_dict() if hasattr(trigger, "to_dict") else dict(trigger)
    if snapshot is not None:
        bundle.write_snapshot(snapshot)
    ids = list(dict.fromkeys(C.validate_broker_id(b) for b in broker_ids))
    for bid in ids:
        bundle.set_host(bid)
    if ids:
        with ThreadPoolExecutor(max_workers=min(32, len(ids)), thread_name_prefix="capture") as pool:
            futures = {pool.submit(capture_host, config, snapshot, bid, bundle, factory, sleep=sleep): bid for bid in ids}
            for fut in as_completed(futures):
                bid = futures[fut]
                try:
                    fut.result()
                except Exception as exc:  # noqa: BLE001 - a bug on one host must not lose the others
                    log.exception("capture of broker %s failed", bid)
                    bundle.set_host(bid, error=f"capture failed: {exc!r}")
    return bundle.write_manifest()


def _read(path: Path, limit: int = 4 << 20) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def capture_host(
    config: ClusterConfig,
    snapshot: model.ClusterSnapshot | None,
    broker_id: int,
    bundle: EvidenceBundle,
    runner_factory: RunnerFactory,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    settings = config.capture
    bid = C.validate_broker_id(broker_id)
    broker = snapshot.broker(bid) if snapshot is not None else None
    port = C.validate_port(broker.port if broker is not None else config.broker_port)
    bundle.set_host(bid, broker_host=broker.host if broker else None, broker_port=port)
    try:
        conn_id = config.ssh_conn_id(bid)
    except Exception as exc:  # noqa: BLE001
        bundle.set_host(bid, error=str(exc))
        return
    bundle.set_host(bid, ssh_conn_id=conn_id)
    try:
        runner = runner_factory(conn_id)
    except Exception as exc:  # noqa: BLE001 - bad/insecure/missing connection
        bundle.set_host(bid, error=f"{type(exc).__name__}: {exc}")
        return
    try:
        address = runner.address
        bundle.set_host(bid, address=address)
        try:
            runner.get_conn()
        except SSHError as exc:
            bundle.set_host(bid, reachable=False, error=f"{type(exc).__name__}: {exc}")
            return
        bundle.set_host(bid, reachable=True)
        _capture_reachable_host(config, broker, bid, port, bundle, runner, address, sleep)
    finally:
        try:
            runner.close()
        except Exception:  # noqa: BLE001
            pass


def _capture_reachable_host(config, broker, bid, port, bundle, runner, address, sleep) -> None:
    settings = config.capture
    host_errors: list[str] = []
    outputs: dict[str, CommandResult] = {}

    def do(cmd: C.CaptureCommand) -> CommandResult:
        path = bundle.file_path(bid, f"{cmd.name}.out")
        try:
            res = runner.run_to_file(cmd.argv, cmd.timeout, str(path))
        except SSHError as exc:  # connection lost mid-capture: record, go on (next command reconnects)
            path.write_bytes(b"")
            res = CommandResult(cmd.argv, "", b"", b"", None, clock.now_iso(), 0.0, f"{type(exc).__name__}: {exc}", str(path))
        bundle.record_command(bid, address, cmd.name, cmd.kind, res)
        if res.error:
            host_errors.append(f"{cmd.name}: {res.error}")
        outputs[cmd.name] = res
        return res

    t = settings.command_timeout_s
    # 1. the broker PID: the process listening on the broker port (works when hosts share a process table)
    res = do(C.listen_sockets_command(t))
    if res.exit_code == C.EXIT_NOT_FOUND:
        res = do(C.listen_sockets_netstat_command(t))
        listeners = S.parse_netstat_listeners(_read(Path(res.stdout_path or "")))
    else:
        listeners = S.parse_ss_listeners(_read(Path(res.stdout_path or "")))
    addrs = [a for a in (broker.host if broker else None, getattr(runner, "host", None)) if a]
    endpoint = S.Endpoint.of([x for a in addrs for x in resolve(a)], [port])
    pid = S.find_broker_pid(listeners, endpoint)
    if pid is None and settings.jvm_tool_prefix and res.exit_code != C.EXIT_NOT_FOUND:
        res = do(C.listen_sockets_command(t, settings.jvm_tool_prefix))  # see the JVM user's sockets
        pid = S.find_broker_pid(S.parse_ss_listeners(_read(Path(res.stdout_path or ""))), endpoint)
    bundle.set_host(bid, pid=pid)
    if pid is None:
        host_errors.append(f"no visible process listening on port {port} at {addrs or 'any address'}")

    # 2. the fixed plan; jstack dumps spaced by the sampling interval
    last_jstack: float | None = None
    for cmd in C.host_plan(pid, config.server_log(bid), settings):
        if cmd.kind == C.KIND_JSTACK:
            if last_jstack is not None:
                wait = settings.jstack_interval_s - (time.monotonic() - last_jstack)
                if wait > 0:
                    sleep(wait)
            last_jstack = time.monotonic()
        res = do(cmd)
        if cmd.name == "sockets-ss" and res.exit_code == C.EXIT_NOT_FOUND:
            do(C.sockets_netstat_command(t))

    # 3. derived facts
    hdir = bundle.host_dir(bid)
    facts: dict[str, Any] = {}
    if "process-stat" in outputs:
        facts["process"] = C.parse_ps(_read(hdir / "process-stat.out"))
    if "open-files" in outputs and outputs["open-files"].exit_code == 0:
        facts["open_files"] = C.count_lines((hdir / "open-files.out").read_bytes())
    heap = C.parse_heap_info(_read(hdir / "heap-info.out")) if "heap-info" in outputs else None
    free = C.parse_df_available(_read(hdir / "disk-free.out")) if "disk-free" in outputs else None
    rss = (facts.get("process") or {}).get("rss_bytes")

    # 4. heap dump, only with room for it
    heap_entry: dict[str, Any]
    if pid is None:
        heap_entry = {"take": False, "reason": "no broker process found", "heap_bytes": None, "free_bytes": free}
    else:
        decision = C.heap_dump_decision(heap, free, enabled=settings.heap_dump, rss_bytes=rss)
        heap_entry = decision.to_dict()
        if decision.take:
            heap_entry.update(_heap_dump(settings, bid, pid, bundle, runner, address, do))
    facts["heap_dump"] = heap_entry
    bundle.set_host(bid, error="; ".join(host_errors) or None, **facts)


def _heap_dump(settings, bid, pid, bundle, runner, address, do) -> dict[str, Any]:
    ts = clock.stamp()
    remote = C.heap_dump_path(settings, bid, ts)
    out: dict[str, Any] = {"remote_path": remote, "fetched": False, "path": None}
    res = do(C.heap_dump_command(pid, remote, settings))
    if not res.ok:
        out["error"] = res.error or f"jmap exit {res.exit_code}"
        return out
    try:
        size = runner.remote_size(remote)
        out["remote_bytes"] = size
        if size > settings.heap_dump_fetch_limit_bytes:
            out["note"] = f"{size} B > fetch limit {settings.heap_dump_fetch_limit_bytes} B: left on the host at {remote}"
            return out
        local = bundle.file_path(bid, "heap-dump.hprof")
        runner.fetch(remote, str(local), settings.heap_dump_fetch_limit_bytes)
        bundle.add_file(local, kind=C.KIND_HEAP_DUMP, broker_id=bid, host=address, command="heap-dump", stream=None,
                        remote_path=remote)
        out.update(fetched=True, path=bundle.rel(local))
        try:
            runner.remove(remote)
            out["remote_removed"] = True
        except Exception as exc:  # noqa: BLE001
            out["remote_removed"] = False
            out["note"] = f"could not remove {remote}: {exc}"
    except Exception as exc:  # noqa: BLE001
        out["error"] = f"fetch failed: {exc}"
    return out
