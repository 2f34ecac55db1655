"""Capture the scene on the suspect broker hosts and their peers into an evidence bundle -- fast,
bounded and gentle.

Hosts are captured in parallel (one thread and one SSH connection per host); each host's commands
run in sequence within ONE deadline (``capture.host_deadline_s``, default 90 s): every command's
timeout is cut to what is left, and what could not run in time is recorded as skipped. Per host:

1. the broker process: who listens on the broker's ports at its own addresses; its state from
   ``/proc/<pid>/stat`` -- read FIRST, because it decides which tools may run (commands.tool_plan);
2. socket tables (``ss -tanpi``: states, Recv-Q, byte counters), taken again between thread dumps
   and at the end, so the analysis can see queues grow while nothing is read;
3. thread dumps: ``jstack``; when it cannot attach, ``jcmd Thread.print``, then SIGQUIT into
   the broker's stdout file (the dump is cut out of ``kafkaServer.out``); a stopped process gets none here.
   The lock detail (``-l``: HotSpot walks the heap for java.util.concurrent lock owners at its safepoint) only on a
   suspect a deadlock or not-serving finding accuses (``commands.lock_detail``); the hosts' dumps are staggered,
   one at a time across the cluster (``DumpTurns``);
4. logs: server.log, controller.log, state-change.log, log-cleaner.log, kafkaServer.out, the GC log;
   server.properties and the JVM's command line redacted by an allow-list (``capture/redact.py``); one JmxTool
   read of the broker's JMX, as the health check takes it (read-only, one light JVM on the host, within
   ``leadership.jmx_timeout_s``; not of a stopped or zombie process);
5. suspect only: ``jcmd GC.heap_info`` (sizes, no GC).

Nothing in that first phase stops or pauses a JVM. Then, for the suspects (at most ``capture.max_suspects``),
ONE HOST AT A TIME and only under the cluster's maintenance lock (``IntrusiveGate``): a suspect whose direct
Kafka-protocol check taken just before had no answer (a time-out, a refused connection -- not an authentication
failure, not an answer as another broker id), corroborated by a not-serving finding of it
(``commands.intrusive_evidence``), gets the intrusive tools -- ``jhsdb jstack`` where no
gentle dump worked, ``jmap -histo:live``, a heap dump where configured (written, fetched and removed as the
JVM's user, in a 0700 directory) -- within ``capture.intrusive_deadline_s``. A suspect that answers gets none:
pausing a serving broker beyond its ZooKeeper session would cause the very outage being documented.

Every host ends ``complete`` (everything planned was captured), ``partial`` (something skipped or
failed: the reasons say what) or ``failed`` (unreachable, or nothing captured); the capture's
status is ``complete`` only when every host is, ``failed`` when every host failed. ``partial`` means evidence the
capture planned and could have had is missing. A probe whose silence is itself the evidence is not a gap: the
direct Kafka checks (kafka-checks.json), a thread-dump method that failed before another one worked
(``thread_dump_fallbacks``), and a JMX read that had no answer within its bound from a broker that failed every
direct check of the capture (the host's ``jmx`` entry: ``counted_as: evidence``; from a broker that answered one,
it is a failure and the host is partial).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence

from kafka_runbooks import clock, model
from kafka_runbooks.host import commands as C
from kafka_runbooks.host import sockets as S
from kafka_runbooks.capture.bundle import EvidenceBundle, atomic_write_json
from kafka_runbooks.capture.redact import redact_file
from kafka_runbooks.config import CaptureSettings, ClusterConfig
from kafka_runbooks.detect.endpoints import Endpoint, broker_endpoint
from kafka_runbooks.host.procfs import process_state
from kafka_runbooks.hooks.ssh import CommandResult, SSHError, default_runner_factory

log = logging.getLogger(__name__)

COMPLETE, PARTIAL, FAILED = "complete", "partial", "failed"
MIN_COMMAND_S = 2.0  # below this much time left, a command is skipped rather than started
KAFKA_CHECKS_FILE = "kafka-checks.json"
DUMP_TURN_WAIT_S = 15.0  # longest a host waits for another host's thread dump to end before it takes its own anyway


class DumpTurns:
    """Thread dumps staggered across the cluster's hosts: one at a time (each brings its JVM to a safepoint; the
    brokers of one cluster are not all paused together). A host waits for its turn at most ``DUMP_TURN_WAIT_S`` (and
    never past its own deadline): a dump that hangs on one host does not cost the others theirs -- the manifest's
    ``dump_turns`` says when a dump went ahead without its turn."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def turn(self, h: "_HostCapture", what: str):
        bound = max(0.0, min(DUMP_TURN_WAIT_S, h.left() - MIN_COMMAND_S - 1.0))
        t0 = time.monotonic()
        got = self._lock.acquire(timeout=bound)
        h.turns.append({"dump": what, "waited_s": round(time.monotonic() - t0, 2), "had_turn": got,
                        **({} if got else {"why": f"another host's thread dump still ran after {bound:g} s"})})
        try:
            yield
        finally:
            if got:
                self._lock.release()


class Runner(Protocol):
    host: str
    address: str

    def get_conn(self) -> Any: ...
    def run(self, argv: Sequence[str], timeout: float) -> CommandResult: ...
    def run_to_file(self, argv: Sequence[str], timeout: float, path: str) -> CommandResult: ...
    def close(self) -> None: ...


RunnerFactory = Callable[[str], Runner]
Checker = Callable[[], Sequence[model.KafkaCheck]]


class IntrusiveGate(Protocol):
    """What allows the intrusive tools: ``session()`` holds the cluster's maintenance lock for the phase (raises,
    saying who holds it, when it cannot be had); ``not_serving(broker)`` is a direct check taken now: the evidence
    that the broker does not serve, or None when it answers."""

    def session(self) -> Any: ...
    def not_serving(self, broker_id: int) -> str | None: ...


def overall_status(hosts: Mapping[str, Mapping[str, Any]]) -> str:
    statuses = [h.get("status") or FAILED for h in hosts.values()]
    if not statuses or all(s == FAILED for s in statuses):
        return FAILED
    return COMPLETE if all(s == COMPLETE for s in statuses) else PARTIAL


def capture_cluster(
    config: ClusterConfig,
    snapshot: model.ClusterSnapshot | None,
    broker_ids: Iterable[int],
    bundle: EvidenceBundle,
    runner_factory: RunnerFactory | None = None,
    *,
    trigger: model.Finding | Mapping | None = None,
    suspects: Iterable[int] | None = None,
    checker: Checker | None = None,
    known: Mapping[int, model.Broker] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    zookeeper_members: Iterable[Any] = (),
    zookeeper_affected: Iterable[str] = (),
    intrusive: IntrusiveGate | None = None,
) -> dict:
    """Capture every broker in ``broker_ids`` into ``bundle``; write manifest.json (with
    ``status`` and ``status_reasons``), snapshot.json and kafka-checks.json. ``suspects`` (default:
    the trigger's brokers, else all) get the heavy tools; the others are peers. ``checker`` runs
    the direct Kafka checks, at the start and at the end of the capture. ``zookeeper_members``
    (``detect.zk_probe.Member``) are captured too (capture/zookeeper.py), ``zookeeper_affected`` with jstack.
    ``intrusive``: the gate of the second phase (None: no intrusive tool runs; the manifest says so)."""
    factory = runner_factory or default_runner_factory(config.capture.connect_timeout_s)
    started = time.monotonic()
    trig = None
    if trigger is not None:
        trig = trigger.to_dict() if hasattr(trigger, "to_dict") else dict(trigger)
        bundle.manifest["trigger"] = trig
    if snapshot is not None:
        bundle.write_snapshot(snapshot)
    ids = list(dict.fromkeys(C.validate_broker_id(b) for b in broker_ids))
    suspect_ids = _suspects(config, bundle, ids, (trig or {}).get("broker_ids") or ids if suspects is None else suspects)
    checks = _capture_in_parallel(config, snapshot, bundle, factory, ids, suspect_ids, checker=checker, known=known,
                                  sleep=sleep, zookeeper_members=list(zookeeper_members),
                                  zookeeper_affected=zookeeper_affected)
    _intrusive_phase(config, bundle, factory, sorted(suspect_ids), intrusive, sleep)
    if checker is not None:
        checks += _checks(checker, "end")
        path = bundle.path / KAFKA_CHECKS_FILE
        atomic_write_json(path, checks)
        bundle.add_file(path, kind=C.KIND_KAFKA_CHECKS)
    _judge_jmx_no_answer(bundle, checks)
    _record_status(bundle, started)
    return bundle.write_manifest()


def _suspects(config: ClusterConfig, bundle: EvidenceBundle, ids: list[int], suspects: Iterable[int]) -> set[int]:
    """The brokers that get the heavy tools (at most ``capture.max_suspects``; the others are captured as peers),
    recorded in the manifest with every host's role."""
    wanted = [int(b) for b in dict.fromkeys(suspects) if int(b) in ids]
    cap = config.capture.max_suspects
    suspect_ids = set(wanted[:cap])
    if len(wanted) > cap:
        bundle.manifest["suspects_capped"] = {"asked": wanted, "cap": cap, "as_peers": wanted[cap:],
                                              "why": f"capture.max_suspects is {cap}: the others are captured as peers"}
    bundle.manifest["suspects"] = sorted(suspect_ids)
    bundle.manifest["deadline_s"] = config.capture.host_deadline_s
    for bid in ids:
        bundle.set_host(bid, role=C.SUSPECT if bid in suspect_ids else C.PEER, status=FAILED, status_reasons=[])
    return suspect_ids


def _capture_in_parallel(config: ClusterConfig, snapshot: model.ClusterSnapshot | None, bundle: EvidenceBundle,
                         factory: RunnerFactory, ids: list[int], suspect_ids: set[int], *, checker: Checker | None,
                         known: Mapping[int, model.Broker] | None, sleep: Callable[[float], None],
                         zookeeper_members: list[Any], zookeeper_affected: Iterable[str]) -> list[dict]:
    """The first phase, every host at once: the brokers, the ZooKeeper ensemble and the direct checks at the start;
    a failure on one is recorded and never loses the others. Returns those checks."""
    checks: list[dict] = []
    turns = DumpTurns()
    with ThreadPoolExecutor(max_workers=min(32, len(ids) + 2) or 1, thread_name_prefix="capture") as pool:
        check_first = pool.submit(_checks, checker, "start") if checker else None
        ensemble = None
        if zookeeper_members:
            from kafka_runbooks.capture.zookeeper import capture_ensemble

            ensemble = pool.submit(capture_ensemble, config, bundle, zookeeper_members, zookeeper_affected, factory)
        futures = {
            pool.submit(capture_host, config, snapshot, bid, bundle, factory, role=C.SUSPECT if bid in suspect_ids else C.PEER,
                        known=known, sleep=sleep, turns=turns): bid
            for bid in ids
        }
        for fut in as_completed(futures):
            bid = futures[fut]
            try:
                fut.result()
            except Exception as exc:  # noqa: BLE001 - a bug on one host must not lose the others
                log.exception("capture of broker %s failed", bid)
                bundle.set_host(bid, status=FAILED, error=f"capture failed: {exc!r}", status_reasons=[f"capture failed: {exc!r}"])
        if check_first is not None:
            checks += check_first.result()
        if ensemble is not None:
            try:
                ensemble.result()
            except Exception as exc:  # noqa: BLE001 - recorded, the brokers' capture stands
                log.exception("ZooKeeper capture failed")
                bundle.manifest.setdefault("zookeeper", {})["_error"] = {"status": FAILED, "status_reasons": [f"capture failed: {exc!r}"]}
    return checks


def _record_status(bundle: EvidenceBundle, started: float) -> None:
    """The bundle's status (complete, partial, failed: over the brokers and the ZooKeeper servers), the reasons of
    every host's, and how long the capture took, into the manifest."""
    hosts = bundle.manifest["hosts"]
    zk = bundle.manifest.get("zookeeper") or {}
    status = overall_status({**hosts, **{f"zookeeper/{k}": v for k, v in zk.items()}})
    reasons = [f"broker {b}: {r}" for b, h in sorted(hosts.items(), key=lambda kv: int(kv[0])) for r in h.get("status_reasons") or []]
    reasons += [f"zookeeper {z}: {r}" for z, h in sorted(zk.items()) for r in h.get("status_reasons") or []]
    bundle.manifest.update(status=status, status_reasons=reasons, duration_s=round(time.monotonic() - started, 1))


def _checks(checker: Checker, when: str) -> list[dict]:
    try:
        return [{**c.to_dict(), "during_capture": when} for c in checker()]
    except Exception as exc:  # noqa: BLE001 - the checks are evidence, not a precondition
        return [{"error": f"{type(exc).__name__}: {exc}", "during_capture": when}]


def _line_breaks(path: Path) -> int:
    n = 0
    try:
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                n += chunk.count(b"\n")
    except OSError:
        pass
    return n


def _read(path: Path, limit: int = 4 << 20) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


class _HostCapture:
    """One host's capture: runs commands within the deadline, records them, collects the reasons."""

    def __init__(self, config: ClusterConfig, bundle: EvidenceBundle, runner: Runner, bid: int, address: str,
                 sleep: Callable[[float], None]) -> None:
        self.config = config
        self.settings = config.capture
        self.bundle = bundle
        self.runner = runner
        self.bid = bid
        self.address = address
        self.sleep = sleep
        self.deadline = time.monotonic() + self.settings.host_deadline_s
        self.failed: list[str] = []  # commands that failed
        self.skipped: list[dict[str, str]] = []  # tools left out, and why
        self.absent: list[str] = []  # optional files that do not exist on this host
        self.fallbacks: list[str] = []  # thread-dump methods that failed before another one worked
        self.outputs: dict[str, CommandResult] = {}
        self.turns: list[dict[str, Any]] = []  # each thread dump's wait for its turn (DumpTurns)
        self.dump_turns: DumpTurns | None = None
        self.lock_detail = False  # thread dumps with -l (commands.lock_detail)
        self.entries: dict[str, dict[str, Any]] = {}  # each command's record in the manifest
        self.captured = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def skip(self, tool: str, reason: str) -> None:
        self.skipped.append({"tool": tool, "reason": reason})

    def do(self, cmd: C.CaptureCommand, *, optional_file: bool = False, **extra: Any) -> CommandResult | None:
        """Run one command (timeout cut to the deadline), stream its stdout into the bundle."""
        left = self.left()
        if left < MIN_COMMAND_S:
            self.skip(cmd.name, f"host deadline of {self.settings.host_deadline_s:g} s reached")
            return None
        timeout = max(1.0, min(cmd.timeout, left - 1.0))
        path = self.bundle.file_path(self.bid, f"{cmd.name}.out")
        try:
            res = self.runner.run_to_file(cmd.argv, timeout, str(path))
        except SSHError as exc:  # connection lost mid-capture: record, go on (the next command reconnects)
            path.write_bytes(b"")
            res = CommandResult(cmd.argv, "", b"", b"", None, clock.now_iso(), 0.0, f"{type(exc).__name__}: {exc}", str(path))
        if cmd.redact:
            res = redact_file(cmd.redact, path, res)
        entry = self.bundle.record_command(self.bid, self.address, cmd.name, cmd.kind, res)
        entry["timeout_s"] = timeout  # the bound it really ran under (cut to what was left of the host's deadline)
        self.entries[cmd.name] = entry
        if extra:
            entry.update(extra)
            for f in self.bundle.manifest["files"]:
                if f["path"] == entry["stdout"]:
                    f.update(extra)
        self.outputs[cmd.name] = res
        missing = optional_file and res.exit_code == 1 and b"No such file" in (res.stderr or b"")
        if missing:
            self.absent.append(cmd.argv[-1])
        elif res.error or res.exit_code != 0:
            err = (res.stderr or b"").decode("utf-8", "replace").strip().splitlines()
            self.failed.append(f"{cmd.name}: {res.error or 'exit ' + str(res.exit_code)}" + (f" ({err[-1][:160]})" if err else ""))
        elif res.stdout_bytes:
            self.captured += 1
        return res

    def text(self, name: str) -> str:
        res = self.outputs.get(name)
        return _read(Path(res.stdout_path)) if res is not None and res.stdout_path and res.exit_code == 0 else ""


def _server_log(h: _HostCapture, path: str, settings: CaptureSettings, t: float) -> None:
    """The last ``log_tail_lines`` lines of server.log; when the current file holds fewer (log4j rolled it within
    them: every hour by default), the lines before it from its newest rolled file, so an incident that began
    before the roll keeps its first records."""
    res = h.do(C.server_log_command(path, settings))
    if res is None or res.exit_code != 0 or not res.stdout_path:
        return
    want = settings.log_tail_lines - _line_breaks(Path(res.stdout_path))
    if want <= 0:
        return
    try:
        listing = C.rolled_logs_command(path, t)
    except C.UnsafeValueError as exc:  # a log name we do not put in a find pattern: its rolled files are not looked for
        h.skip("server.log's rolled files", str(exc))
        return
    if h.do(listing) is None:
        return
    name = C.newest_rolled(path.rpartition("/")[2], h.text("server-log-rolled-list"))
    if name is not None:
        h.do(C.rolled_log_command(path, name, want, t), rolled_from=name)


def capture_host(
    config: ClusterConfig,
    snapshot: model.ClusterSnapshot | None,
    broker_id: int,
    bundle: EvidenceBundle,
    runner_factory: RunnerFactory,
    *,
    role: str = C.SUSPECT,
    known: Mapping[int, model.Broker] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    turns: DumpTurns | None = None,
) -> None:
    bid = C.validate_broker_id(broker_id)
    broker = snapshot.broker(bid) if snapshot is not None else None
    if broker is None:
        broker = (known or {}).get(bid) or model.Broker(bid, "", 0)
    bundle.set_host(bid, broker_host=broker.host or None, registered=snapshot is not None and snapshot.broker(bid) is not None)
    try:
        conn_id = config.ssh_conn_id(bid)
        bundle.set_host(bid, ssh_conn_id=conn_id)
        runner = runner_factory(conn_id)
    except Exception as exc:  # noqa: BLE001 - bad/insecure/missing connection
        bundle.set_host(bid, error=f"{type(exc).__name__}: {exc}", status=FAILED, status_reasons=[f"{type(exc).__name__}: {exc}"])
        return
    try:
        bundle.set_host(bid, address=runner.address)
        try:
            runner.get_conn()
        except SSHError as exc:
            why = f"{type(exc).__name__}: {exc}"
            bundle.set_host(bid, reachable=False, error=why, status=FAILED, status_reasons=[f"host unreachable: {why}"])
            return
        bundle.set_host(bid, reachable=True)
        # the brokers' version as the health check observed it (snapshot.kafka_version): which dump-log tool exists
        version = snapshot.version if snapshot is not None and snapshot.kafka_version else None
        _capture_reachable_host(config, broker, bid, role, bundle, runner, sleep, version, turns)
    finally:
        try:
            runner.close()
        except Exception:  # noqa: BLE001
            pass


def _capture_reachable_host(config, broker, bid, role, bundle, runner, sleep, version=None, turns=None) -> None:
    settings = config.capture
    h = _HostCapture(config, bundle, runner, bid, runner.address, sleep)
    h.dump_turns = turns
    t = settings.command_timeout_s
    endpoint, problems = broker_endpoint(broker, config.listener, config.broker_port, [getattr(runner, "host", "")])
    for port in endpoint.ports:
        C.validate_port(port)
    bundle.set_host(bid, broker_ports=list(endpoint.ports), broker_addresses=sorted(endpoint.addresses))
    notes = list(problems)

    # 1. the broker process, and its state before anything else
    pid, state, netstat = _broker_process(h, settings, endpoint, notes)
    plan = _record_tool_plan(config, bundle, h, bid, role, pid, state)
    if pid is not None:
        h.do(C.proc_threads_command(pid, t))

    # 2-3. socket tables and thread dumps, interleaved
    sockets = _socket_tables(h, t, netstat)
    sockets()
    # memory at the start and at the end (incident 000: free memory fell as CLOSE_WAIT climbed)
    h.do(C.meminfo_command(t, 1), seq=1, taken_at=clock.now_iso())
    if pid is not None:
        h.do(C.process_status_command(pid, t, 1), seq=1, taken_at=clock.now_iso())
    method = _thread_dumps(h, config, pid, plan, sockets, sleep)
    bundle.set_host(bid, thread_dump_method=method, thread_dump_fallbacks=h.fallbacks, dump_turns=h.turns)

    # 4. logs (and the broker's configuration: its log dirs, for the data evidence below), JMX
    _logs_and_jmx(h, config, bundle, broker, bid, role, pid, plan, version)

    # 5. suspect only: histogram, heap info, heap dump
    facts = _last_samples(h, pid, plan, sockets, t, settings)
    _record_host_status(bundle, bid, h, notes, settings, facts)


def _broker_process(h: _HostCapture, settings: CaptureSettings, endpoint: Endpoint, notes: list[str]) -> tuple[int | None, str | None, bool]:
    """Who listens on the broker's ports at its addresses, and that process's state: (pid, state, whether the host
    lacks ``ss`` and netstat reads its sockets); a broker without a visible process is noted."""
    t = settings.command_timeout_s
    res = h.do(C.listen_sockets_command(t))
    netstat = res is not None and res.exit_code == C.EXIT_NOT_FOUND
    if netstat:
        h.failed = [f for f in h.failed if not f.startswith("listen-sockets:")]
        h.do(C.listen_sockets_netstat_command(t))
        listeners = S.parse_listeners(h.text("listen-sockets-netstat"))
    else:
        listeners = S.parse_listeners(h.text("listen-sockets"))
    pid = S.find_broker_pid(listeners, endpoint)
    if pid is None and settings.jvm_tool_prefix and not netstat:
        h.do(C.listen_sockets_command(t, settings.jvm_tool_prefix))  # see the JVM user's sockets
        pid = S.find_broker_pid(S.parse_listeners(h.text("listen-sockets-jvm-user")), endpoint)
    state = None
    if pid is None:
        notes.append(f"no visible process listening on ports {list(endpoint.ports)} at {sorted(endpoint.addresses) or 'any address'}")
    else:
        h.do(C.process_state_command(pid, t))
        state = process_state(h.text("process-state"), pid)
        h.do(C.process_stat_command(pid, t))
    return pid, state, netstat


def _record_tool_plan(config: ClusterConfig, bundle: EvidenceBundle, h: _HostCapture, bid: int, role: str,
                      pid: int | None, state: str | None) -> C.ToolPlan:
    """Which tools this host gets (``host.commands.tool_plan``: its role, its process's state), recorded in the
    manifest with the tools skipped or left out and why."""
    plan = C.tool_plan(role, pid, state, config.capture)
    if plan.thread_dumps and C.lock_detail(role, bid, [bundle.manifest.get("trigger")]):
        plan = dataclasses.replace(plan, lock_detail=True)
    h.lock_detail = plan.lock_detail
    for tool, why in plan.skipped:
        h.skip(tool, why)
    bundle.set_host(bid, left_out=[{"tool": tool, "reason": why} for tool, why in plan.left_out])
    bundle.set_host(bid, pid=pid, process_state=state, plan={"thread_dumps": plan.thread_dumps, "dump_methods": list(plan.dump_methods),
                                                            "heap_info": plan.heap_info, "intrusive": list(plan.intrusive),
                                                            "jmx": plan.jmx and config.leadership.jmx,
                                                            "lock_detail": plan.lock_detail})
    return plan


def _socket_tables(h: _HostCapture, t: float, netstat: bool) -> Callable[[], None]:
    """A function that takes the next socket table (ss, or netstat where ss is not found), numbered from 1."""
    seq = 1

    def sockets() -> None:
        nonlocal seq
        cmd = C.sockets_netstat_command(t, seq) if netstat else C.sockets_command(t, seq)
        r = h.do(cmd, seq=seq, taken_at=clock.now_iso())
        if r is not None and r.exit_code == C.EXIT_NOT_FOUND and not netstat:
            h.failed.pop()
            h.do(C.sockets_netstat_command(t, seq), seq=seq, taken_at=clock.now_iso())
        seq += 1

    return sockets


def _thread_dumps(h: _HostCapture, config: ClusterConfig, pid: int | None, plan: C.ToolPlan,
                  sockets: Callable[[], None], sleep: Callable[[float], None]) -> str | None:
    """The plan's thread dumps, ``capture.jstack_interval_s`` apart, a socket table between two; stops when the
    host's deadline leaves no time for the interval or no method dumps. Returns the method that dumped last."""
    settings = config.capture
    methods = list(plan.dump_methods)
    method = None
    last = None
    for i in range(1, plan.thread_dumps + 1):
        if last is not None:
            wait = settings.jstack_interval_s - (time.monotonic() - last)
            if wait > 0:
                if h.left() - wait < MIN_COMMAND_S:
                    h.skip(f"thread dump {i}", "host deadline: no time left for the sampling interval")
                    break
                sleep(wait)
            sockets()
        last = time.monotonic()
        method = _thread_dump(h, config, pid, i, methods)
        if method is None:
            break
    return method


def _logs_and_jmx(h: _HostCapture, config: ClusterConfig, bundle: EvidenceBundle, broker, bid: int, role: str,
                  pid: int | None, plan: C.ToolPlan, version) -> None:
    """The broker's server.properties and logs, its open files and disks, the offsets evidence of a suspect whose
    trigger is about offsets, and one bounded JmxTool read of the request path's figures (as the health check takes it)."""
    settings = config.capture
    t = settings.command_timeout_s
    props_res = h.do(C.config_file_command("server-properties", C.KIND_KAFKA_CONFIG, config.server_properties(bid), t), optional_file=True)
    _server_log(h, config.server_log(bid), settings, t)
    log_dir = config.log_dir(bid)
    for name in settings.other_logs:
        h.do(C.log_tail_command(name, log_dir, settings, t), optional_file=True)
    if pid is not None:
        h.do(C.open_files_command(pid, settings))
    h.do(C.disk_free_command(settings))
    if role == C.SUSPECT and ((bundle.manifest.get("trigger") or {}).get("kind") in OFFSETS_KINDS):
        _offsets_evidence(h, config, bid, h.text("server-properties") if props_res is not None else "", version)
    if not config.leadership.jmx:
        _leave_out(bundle, bid, "JMX read", "leadership.jmx is off for this cluster")
    elif plan.jmx:
        _jmx(h, config, broker, version)


def _last_samples(h: _HostCapture, pid: int | None, plan: C.ToolPlan, sockets: Callable[[], None], t: float,
                  settings: CaptureSettings) -> dict[str, Any]:
    """The process's figures read so far, heap info, the last socket table and memory sample (how the queues and
    memory moved during the capture), and whether a heap dump is taken: the host's facts for the manifest."""
    facts: dict[str, Any] = {}
    if "process-stat" in h.outputs:
        facts["process"] = C.parse_ps(h.text("process-stat"))
    if "open-files" in h.outputs and h.outputs["open-files"].exit_code == 0:
        facts["open_files"] = C.count_lines(h.text("open-files").encode())
    if plan.heap_info:
        h.do(C.heap_info_command(pid, settings))
    sockets()  # the last table: how the queues moved during the capture
    h.do(C.meminfo_command(t, 2), seq=2, taken_at=clock.now_iso())
    if pid is not None:
        h.do(C.process_status_command(pid, t, 2), seq=2, taken_at=clock.now_iso())
    if not plan.intrusive or "heap dump" not in plan.intrusive:
        facts["heap_dump"] = {"take": False, "reason": next((why for tool, why in plan.skipped + plan.left_out if tool == "heap dump"),
                                                            "no broker process")}
    return facts


def _record_host_status(bundle: EvidenceBundle, bid: int, h: _HostCapture, notes: list[str], settings: CaptureSettings,
                        facts: dict[str, Any]) -> None:
    """The host's status: failed (nothing captured), partial (a note, a failure or a skip), else complete."""
    reasons = notes + h.failed + [f"skipped {s['tool']}: {s['reason']}" for s in h.skipped]
    if h.captured == 0:
        status = FAILED
    elif reasons:
        status = PARTIAL
    else:
        status = COMPLETE
    bundle.set_host(bid, status=status, status_reasons=reasons, skipped=h.skipped, absent_files=h.absent,
                    error="; ".join(notes + h.failed) or None, duration_s=round(settings.host_deadline_s - h.left(), 1), **facts)


def _leave_out(bundle: EvidenceBundle, bid: int, tool: str, why: str) -> None:
    entry = bundle.manifest["hosts"][str(bid)]
    bundle.set_host(bid, left_out=[*(entry.get("left_out") or []), {"tool": tool, "reason": why}])


def _jmx(h: _HostCapture, config: ClusterConfig, broker: model.Broker, version) -> None:
    """JmxTool once into ``jmx.out`` (kind ``jmx``), within ``leadership.jmx_timeout_s``; the host's ``jmx`` entry says
    what came of it. A broker without a JMX port is left out (nothing to read); a tool that fails (exit, refused
    connection) is a failure of the capture. A read that does not answer within its bound is judged by
    ``_judge_jmx_no_answer`` once the direct checks are in: a broker that serves nothing may not answer it either."""
    from kafka_runbooks.detect.leadership_observe import tool_said

    try:
        cmd = C.jmx_command(config, broker, version)
    except C.UnsafeValueError as exc:
        h.skip("JMX read", f"refused: {exc}")
        return
    if isinstance(cmd, str):
        if broker.jmx_port:
            h.skip("JMX read", cmd)
        else:
            _leave_out(h.bundle, h.bid, "JMX read", cmd)
        return
    url = cmd.argv[cmd.argv.index("--jmx-url") + 1]
    n = len(h.failed)
    res = h.do(cmd)
    if res is None:  # the host's deadline: said in skipped
        return
    del h.failed[n:]
    bound = h.entries[cmd.name]["timeout_s"]
    record: dict[str, Any] = {"url": url, "bound_s": bound, "duration_s": res.duration_s, "answered": res.ok}
    if not res.ok:
        record.update(error=res.error or f"exit {res.exit_code}", tool_said=tool_said(res.stderr))
    if res.error is not None and res.error.startswith("timeout"):
        record["no_answer"] = f"JmxTool had no answer from {url} within {bound:g} s (it said: {record['tool_said'] or 'nothing'})"
    elif not res.ok:
        h.failed.append(f"jmx: JmxTool {record['error']} reading {url}: {record['tool_said']}")
    h.bundle.set_host(h.bid, jmx=record)


def _judge_jmx_no_answer(bundle: EvidenceBundle, checks: Sequence[Mapping[str, Any]]) -> None:
    """A JMX read that did not answer within its bound is evidence about its broker when that broker failed every
    direct Kafka-protocol check of the capture, at its start and at its end (the read between them): a broker that
    serves nothing -- its request queue's lock held, a deadlock, a stall -- does not answer JMX either (Kafka's
    RequestQueueSize gauge takes that lock). The host's status stays what the rest of its capture made it, and the
    host's ``jmx`` entry says why. Otherwise (a check answered, or none was made) the capture missed a figure it could
    have had: the host is partial, the reason said."""
    for b, host in bundle.manifest["hosts"].items():
        jmx = host.get("jmx") or {}
        if "no_answer" not in jmx:
            continue
        mine = [c for c in checks if str(c.get("broker_id")) == b]
        failed = [c for c in mine if not c.get("ok")]
        if mine and len(failed) == len(mine) and {"start", "end"} <= {c.get("during_capture") for c in failed}:
            jmx.update(counted_as="evidence", not_serving="; ".join(
                f"direct check at the {c.get('during_capture')} of the capture ({c.get('at')}): {c.get('error') or 'failed'}"
                for c in failed))
            continue
        why = ("it answered a direct Kafka-protocol check during the capture" if len(failed) < len(mine) else
               "no direct Kafka-protocol check of it at both the start and the end of the capture shows it not serving")
        jmx.update(counted_as="failure", why=why)
        status = host.get("status")
        bundle.set_host(int(b), jmx=jmx, status=PARTIAL if status == COMPLETE else status,
                        status_reasons=[*(host.get("status_reasons") or []), f"jmx: {jmx['no_answer']}, and {why}"],
                        error="; ".join(x for x in (host.get("error"), f"jmx: {jmx['error']}") if x))


def _intrusive_phase(config: ClusterConfig, bundle: EvidenceBundle, factory: RunnerFactory, suspects: Sequence[int],
                     gate: IntrusiveGate | None, sleep: Callable[[float], None]) -> None:
    """The second phase: the intrusive tools each suspect's plan allows, one host at a time, under the cluster's
    maintenance lock, each host only if a direct check taken just before proves it is not serving."""
    hosts = bundle.manifest["hosts"]
    todo = [b for b in suspects if ((hosts.get(str(b)) or {}).get("plan") or {}).get("intrusive") and hosts[str(b)].get("pid")]
    phase: dict[str, Any] = {"suspects": todo, "one_host_at_a_time": True, "deadline_s": config.capture.intrusive_deadline_s}
    bundle.manifest["intrusive"] = phase
    if not todo:
        return

    def leave(b: int, why: str, *, partial: bool) -> None:
        tools = hosts[str(b)]["plan"]["intrusive"]
        entry = hosts[str(b)]
        if partial:
            reasons = list(entry.get("status_reasons") or []) + [f"skipped {', '.join(tools)}: {why}"]
            bundle.set_host(b, status=PARTIAL if entry.get("status") == COMPLETE else entry.get("status"), status_reasons=reasons,
                            skipped=list(entry.get("skipped") or []) + [{"tool": t, "reason": why} for t in tools])
        else:
            bundle.set_host(b, left_out=list(entry.get("left_out") or []) + [{"tool": t, "reason": why} for t in tools])
        if "heap dump" in tools:
            bundle.set_host(b, heap_dump={"take": False, "reason": why})

    if gate is None:
        phase["outcome"] = "not run: no maintenance lock and direct check available to this capture"
        for b in todo:
            leave(b, phase["outcome"], partial=False)
        return
    try:
        with gate.session() as holder:
            phase["lock"] = holder
            for b in todo:
                evidence = gate.not_serving(b)
                if evidence is None:
                    leave(b, (getattr(gate, "why_not", None) or {}).get(b) or f"broker {b} answered a direct Kafka-protocol "
                          "check just now: it serves, and these tools would pause it", partial=False)
                    continue
                bundle.set_host(b, intrusive={"not_serving": evidence, "at": clock.now_iso()})
                _intrusive_host(config, bundle, factory, b, sleep)
        phase["outcome"] = "done"
    except Exception as exc:  # noqa: BLE001 - lock busy or lost, ZooKeeper unreachable: no intrusive tool, said why
        phase["outcome"] = f"not run: {type(exc).__name__}: {exc}"
        for b in todo:
            if not (hosts[str(b)].get("intrusive") or {}).get("ran"):
                leave(b, phase["outcome"], partial=True)


def _intrusive_host(config: ClusterConfig, bundle: EvidenceBundle, factory: RunnerFactory, bid: int,
                    sleep: Callable[[float], None]) -> None:
    settings = config.capture
    entry = bundle.manifest["hosts"][str(bid)]
    tools = list(entry["plan"]["intrusive"])
    pid = int(entry["pid"])
    runner = factory(config.ssh_conn_id(bid))
    ran: list[str] = []
    try:
        h = _HostCapture(config, bundle, runner, bid, runner.address, sleep)
        h.deadline = time.monotonic() + settings.intrusive_deadline_s
        if "jhsdb" in tools and entry.get("thread_dump_method") is None:
            timeout = min(settings.jhsdb_timeout_s, max(MIN_COMMAND_S, h.left() - 1.0))
            h.do(C.jhsdb_jstack_command(pid, 1, settings, timeout))
            ran.append("jhsdb")
            if '"' in h.text("jstack-jhsdb-1"):
                bundle.set_host(bid, thread_dump_method="jhsdb")
        elif "jhsdb" in tools:
            h.skip("jhsdb", f"not needed: the thread dumps came from {entry.get('thread_dump_method')}")
        if "jmap -histo:live" in tools and entry.get("process_state") not in ("stopped", "tracing_stop"):
            h.do(C.jmap_histo_command(pid, settings))
            ran.append("jmap -histo:live")
        if "heap dump" in tools:
            files = bundle.path / "hosts" / str(bid)
            heap = C.parse_heap_info(_read(files / "heap-info.out"))
            free = C.parse_df_available(_read(files / "disk-free.out"))
            decision = C.heap_dump_decision(heap, free, enabled=True, rss_bytes=((entry.get("process") or {}).get("rss_bytes")))
            facts = decision.to_dict()
            if decision.take:
                facts.update(_heap_dump(h, settings, bid, pid))
                ran.append("heap dump")
            else:
                h.skip("heap dump", decision.reason)
            bundle.set_host(bid, heap_dump=facts)
        reasons = list(entry.get("status_reasons") or []) + h.failed + [f"skipped {s['tool']}: {s['reason']}" for s in h.skipped
                                                                         if s["tool"] != "jhsdb"]
        status = entry.get("status")
        if status == COMPLETE and (h.failed or [s for s in h.skipped if s["tool"] != "jhsdb"]):
            status = PARTIAL
        bundle.set_host(bid, status=status, status_reasons=reasons,
                        skipped=list(entry.get("skipped") or []) + h.skipped,
                        intrusive={**(entry.get("intrusive") or {}), "ran": ran,
                                   "duration_s": round(settings.intrusive_deadline_s - h.left(), 1)})
    finally:
        try:
            runner.close()
        except Exception:  # noqa: BLE001
            pass


# incidents about the log cleaner / __consumer_offsets: their suspects' data is evidence too
OFFSETS_KINDS = ("log_cleaner_not_running", "offsets_partition_oversized", "offsets_load_slow", "offsets_load_failed")


def _offsets_evidence(h: _HostCapture, config: ClusterConfig, bid: int, server_properties: str, version=None) -> None:
    """Bytes per partition of every log dir, the segments of every __consumer_offsets partition, ``ls -lR`` of the
    largest one, and kafka-dump-log of its oldest and newest segments (.log, .index, .timeindex; ``version``, the
    brokers' as the health check observed it, picks the script or DumpLogSegments: commands.dump_log_command)."""
    from kafka_runbooks.detect import zk_text
    from kafka_runbooks.host import procfs
    from kafka_runbooks.detect.host_probe import log_dirs_of

    settings, t = h.settings, h.settings.command_timeout_s
    dirs = log_dirs_of(zk_text.properties(server_properties))
    if not dirs:
        h.skip("log dir evidence", f"no log.dirs readable in {config.server_properties(bid)}")
        return
    found = []
    for i, d in enumerate(dirs[:16], 1):
        h.do(C.du_log_dir_command(d, t, i))
        h.do(C.offsets_segments_command(d, t, i))
        found += procfs.offsets_dirs(h.text(f"offsets-segments-{i}"), d)
    if not found:
        return
    largest = max(found, key=lambda o: o.bytes)
    pdir = f"{largest.log_dir.rstrip('/')}/{largest.name}"
    h.do(C.ls_partition_command(pdir, t), partition=largest.name)
    if not settings.dump_log:
        h.skip("kafka-dump-log", "capture.dump_log is off for this cluster")
        return
    for label, seg in (("oldest", largest.oldest_segment), ("newest", largest.newest_segment)):
        if seg is None or (label == "newest" and seg == largest.oldest_segment):
            continue
        stem = f"{pdir}/{seg[:-len('.log')]}"
        h.do(C.dump_log_command(config.kafka_home, [f"{stem}.log", f"{stem}.index", f"{stem}.timeindex"], f"dump-log-{label}",
                                settings.dump_log_timeout_s, version), partition=largest.name, segment=seg)


def _thread_dump(h: _HostCapture, config: ClusterConfig, pid: int, i: int, methods: list[str]) -> str | None:
    """Thread dump number ``i`` with the first method in ``methods`` that works; a method that
    failed is dropped from ``methods`` (the next dumps start with the one that worked). Returns it.
    The methods that failed before one worked are ``h.fallbacks`` (evidence about the JVM -- e.g. its attach
    listener did not answer -- with their commands in the manifest), not failures: the dump was captured."""
    n = len(h.failed)
    with (h.dump_turns.turn(h, f"thread dump {i}") if h.dump_turns is not None else contextlib.nullcontext()):
        method = _first_dump(h, config, pid, i, methods)
    if method is not None and len(h.failed) > n:
        h.fallbacks += h.failed[n:]
        del h.failed[n:]
    return method


def _first_dump(h: _HostCapture, config: ClusterConfig, pid: int, i: int, methods: list[str]) -> str | None:
    while methods:
        method = methods[0]
        if method == "jstack":
            res = h.do(C.jstack_command(pid, i, h.settings, locks=h.lock_detail))
            if res is None:
                return None
            if res.exit_code == 0 and res.error is None and _looks_like_dump(h.text(f"jstack-{i}")):
                return "jstack"
        elif method == "jcmd":
            res = h.do(C.jcmd_thread_print_command(pid, i, h.settings, locks=h.lock_detail))
            if res is None:
                return None
            if res.exit_code == 0 and res.error is None and _looks_like_dump(h.text(f"jstack-jcmd-{i}")):
                return "jcmd"
        elif method == "sigquit":
            if _sigquit_dump(h, config, pid, i):
                return "sigquit"
        elif method == "jhsdb":
            timeout = min(h.settings.jhsdb_timeout_s, max(MIN_COMMAND_S, h.left() - 1.0))
            res = h.do(C.jhsdb_jstack_command(pid, i, h.settings, timeout))
            if res is None:
                return None
            if res.exit_code == 0 and res.error is None and '"' in h.text(f"jstack-jhsdb-{i}"):
                return "jhsdb"
        h.failed.append(f"thread dump {i}: {method} did not produce a dump" + (f"; trying {methods[1]}" if len(methods) > 1 else ""))
        methods.pop(0)
    h.skip(f"thread dump {i}", "no thread-dump method worked (see the failures above)")
    return None


def _looks_like_dump(text: str) -> bool:
    return "Full thread dump" in text or '"main"' in text


def _sigquit_dump(h: _HostCapture, config: ClusterConfig, pid: int, i: int) -> bool:
    """SIGQUIT (only to a running JVM): it prints a thread dump to its stdout file; cut it out."""
    settings = h.settings
    stdout_log = f"{config.log_dir(h.bid).rstrip('/')}/{settings.stdout_log}"
    t = min(settings.command_timeout_s, 10.0)
    res = h.do(C.file_size_command(f"sigquit-{i}-before", stdout_log, settings, t))
    before = h.text(f"sigquit-{i}-before").strip()
    if res is None or not before.isdigit():
        return False
    if h.do(C.sigquit_command(pid, settings, t, i)) is None:
        return False
    h.sleep(min(settings.sigquit_wait_s, max(0.0, h.left() - MIN_COMMAND_S)))
    res = h.do(C.tail_from_command(f"jstack-sigquit-{i}", C.KIND_JSTACK, stdout_log, int(before), settings.log_tail_bytes, t),
               method="sigquit", source_file=stdout_log)
    return res is not None and res.exit_code == 0 and "Full thread dump" in h.text(f"jstack-sigquit-{i}")


def _heap_dump(h: _HostCapture, settings, bid: int, pid: int) -> dict[str, Any]:
    """jmap -dump into a fresh 0700 directory made by the JVM's user; fetched with `cat` as that
    user (streamed into the bundle), then removed with the directory."""
    t = settings.command_timeout_s
    directory = C.heap_dump_dir(settings, bid, clock.stamp())
    remote = f"{directory}/heap.hprof"
    out: dict[str, Any] = {"take": True, "remote_path": remote, "fetched": False, "path": None, "remote_removed": False}
    res = h.do(C.mkdir_private_command(directory, settings, t))
    if res is None or res.exit_code != 0:
        out["error"] = "could not make the private dump directory"
        return out
    try:
        res = h.do(C.heap_dump_command(pid, remote, settings, timeout=max(t, 300.0)))
        if res is None or not res.ok:
            out["error"] = (res.error if res else "host deadline") or f"jmap exit {res.exit_code}"
            return out
        h.do(C.file_size_command("heap-dump-size", remote, settings, t, as_jvm_user=True))
        size = h.text("heap-dump-size").strip()
        out["remote_bytes"] = int(size) if size.isdigit() else None
        if out["remote_bytes"] is None or out["remote_bytes"] > settings.heap_dump_fetch_limit_bytes:
            out["note"] = f"{size} B > fetch limit {settings.heap_dump_fetch_limit_bytes} B: left on the host (0700, the JVM user's) at {remote}"
            out["kept_on_host"] = True
            return out
        res = h.do(C.cat_as_jvm_user_command("heap-dump-hprof", remote, settings, max(t, 300.0)))
        if res is not None and res.ok:
            out.update(fetched=True, path=h.bundle.rel(h.bundle.file_path(bid, "heap-dump-hprof.out")))
        return out
    finally:
        if not out.get("kept_on_host"):
            removed = [h.do(cmd) for cmd in C.remove_dump_commands(remote, directory, settings, t)]
            out["remote_removed"] = all(r is not None and r.exit_code == 0 for r in removed)


__all__ = ["COMPLETE", "FAILED", "PARTIAL", "capture_cluster", "capture_host", "overall_status"]
