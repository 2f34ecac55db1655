"""The restart step: stop -> old process gone -> old registration gone -> start -> new session.

Real Kafka refuses to start while its previous ZooKeeper session still holds ``/brokers/ids/N``
(``Error while creating ephemeral at /brokers/ids/N, node already exists and owner ... does not
match current session``): the step starts the broker only after the old registration is gone, and
then requires a live process registered with a NEW session within ``gates.register_s``. A broker
that dies on start fails the step at once, with its own last log lines; nothing waits out a
timeout pretending to be recovering. Every command is audited (who, what, where, when, outcome); once the stop
command has left, a failing audit is logged and never keeps the step from going on (the start, the waits): the
engine's audit is best-effort with a journal (``engine.Records``), and this step does not trust it to be.

The stop command is Kafka's controlled shutdown (SIGTERM to the broker); whether the broker's log
says ``Controlled shutdown succeeded`` is recorded. ``kill_command`` is used only when configured,
only after ``gates.stop_s`` passed with the old process still there, and never once Airflow terminates the task
(``termination``): from then on nothing that stops or kills a process is sent (``host.BrokerHost.run`` refuses too).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log
from kafka_runbooks.config import GateSettings
from kafka_runbooks.remediate.host import BrokerHost, ProcessInfo
from kafka_runbooks.remediate.termination import TERMINATION, TaskTerminated
from kafka_runbooks.remediate.waits import Waker, wait_for

CONTROLLED_OK = "Controlled shutdown succeeded"
CONTROLLED_FAILED = ("Controlled shutdown failed", "Retrying controlled shutdown", "Proceeding to do an unclean shutdown")
FATAL_START = ("Fatal error during KafkaServer startup", "Exiting Kafka", "does not match current session")

Audit = Callable[..., Any]  # audit(action, outcome, *, command=None, details=None)


class StepFailed(RuntimeError):
    """The step could not be completed; ``phase`` says where, ``logs`` holds the broker's own last lines."""

    def __init__(self, broker_id: int, phase: str, reason: str, logs: Mapping[str, str] | None = None, *,
                 stopped: bool = True, code: str | None = None):
        self.broker_id = broker_id
        self.phase = phase
        self.reason = reason
        self.logs = dict(logs or {})
        self.stopped = stopped  # False: raised before the stop command left (a refusal: nothing was stopped)
        self.code = code
        super().__init__(f"broker {broker_id}: {phase}: {reason}")


@dataclass
class Registration:
    session_id: int
    czxid: int

    def to_dict(self) -> dict[str, Any]:
        return {"session_id": hex(self.session_id), "czxid": self.czxid}


@dataclass
class RestartReport:
    broker_id: int
    old_registration: Registration | None = None
    new_registration: Registration | None = None
    old_processes: list[ProcessInfo] = field(default_factory=list)
    new_process: ProcessInfo | None = None
    controlled_shutdown: str = "not logged"  # "succeeded" / "failed" / "not logged"
    killed: bool = False
    stop_command: str = "ok"  # or why it failed ("exit 124: timeout after 10s"): a stop that timed out is said, not hidden
    seconds: dict[str, float] = field(default_factory=dict)  # phase -> duration

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_id": self.broker_id,
            "old_registration": self.old_registration.to_dict() if self.old_registration else None,
            "new_registration": self.new_registration.to_dict() if self.new_registration else None,
            "old_processes": [p.to_dict() for p in self.old_processes],
            "new_process": self.new_process.to_dict() if self.new_process else None,
            "controlled_shutdown": self.controlled_shutdown,
            "killed": self.killed,
            "stop_command": self.stop_command,
            "seconds": {k: round(v, 2) for k, v in self.seconds.items()},
        }


def registration(zk, broker_id: int, watch: Callable | None = None) -> Registration | None:
    stat = zk.exists(f"/brokers/ids/{int(broker_id)}", watch=watch)
    return Registration(int(stat.ephemeralOwner), int(stat.czxid)) if stat is not None else None


def _result_details(res) -> dict[str, Any]:
    return {
        "exit_code": res.exit_code,
        "error": res.error,
        "duration_s": res.duration_s,
        "stdout_tail": res.stdout[-1500:].decode("utf-8", "replace"),
        "stderr_tail": res.stderr[-1500:].decode("utf-8", "replace"),
    }


def _new_log(host: BrokerHost, path: str, mark: int | None) -> str:
    size = host.size(path)
    if mark is None or size is None or size < mark:  # no mark, unreadable, or rotated: the tail will do
        return host.tail(path, 400)
    return host.read_from(path, mark).decode("utf-8", "replace")


def controlled_shutdown_outcome(log_text: str) -> str:
    """From the broker's log lines written during the stop: succeeded / failed / not logged."""
    messages = [ev.message for ev in parse_kafka_log(log_text).events]
    if any(CONTROLLED_OK in m for m in messages):
        return "succeeded"
    if any(any(f in m for f in CONTROLLED_FAILED) for m in messages):
        return "failed"
    return "not logged"


def fatal_start_lines(log_text: str) -> list[str]:
    return [line for line in log_text.splitlines() if any(f in line for f in FATAL_START)][:10]


def _after_stop(audit: Audit, log) -> Audit:
    """``audit`` for records after the stop command: a failure is logged, never raised (the broker must be started)."""

    def record(action, outcome, **kw):
        try:
            audit(action, outcome, **kw)
        except Exception as exc:  # noqa: BLE001 - the step goes on; the log keeps what the audit could not
            log.error("audit %s -> %s could not be recorded (%s: %s); the step goes on: %s", action, outcome,
                      type(exc).__name__, str(exc)[:300], kw.get("details"))

    return record


def restart_broker(zk, host: BrokerHost, gates: GateSettings, audit: Audit, log, *, serving: bool = True,
                   before_stop: Callable[[], Any] | None = None, guard: Callable[[], None] | None = None,
                   on_state: Callable[[str], None] | None = None) -> RestartReport:
    """``serving=False``: the broker was checked not serving just before; its stop gets ``gates.stop_unserving_s``.
    ``before_stop`` runs right before the stop command (the last safety check on state read then, and the intent's
    record; it raises to refuse, and what it returns is recorded with the stop); ``guard`` (the maintenance lock's
    check) runs at every poll of every wait and raises to halt -- before the stop command; after it, a failing guard
    no longer ends the step: it is noted (audited once) and raised once the broker is started and registered again, so
    a lost lock never leaves a broker down (the chaos table: a lock deleted or ZooKeeper unreachable after the stop
    left it down until a resume); ``on_state("stopped" | "starting")`` when the old process and its registration are
    gone, and right before the start command (the engine's unit's states). Airflow terminating the task
    (``termination``: SIGTERM, SIGKILL ~5 s later) is a failing guard like a lost lock: before the stop command nothing
    is stopped; after it the step goes on at once, its waits polling fast and its records going to the journal, so the
    broker is started before the SIGKILL where its old process and registration are gone by then."""
    b = host.broker_id
    stop_s = gates.stop_s if serving else min(gates.stop_s, gates.stop_unserving_s)
    report = RestartReport(broker_id=b)
    report.old_registration = registration(zk, b)
    report.old_processes = host.processes()
    old = {(p.pid, p.started) for p in report.old_processes}
    server_log = host.config.server_log(b)
    mark = host.size(server_log)
    log.debug("broker %s: stopping (registration %s, processes %s)", b, report.old_registration, report.old_processes)

    checked = before_stop() if before_stop is not None else None  # the last check and the intent: raises to refuse
    t0 = time.monotonic()
    audit = _stop(host, report, audit, log, stop_s, checked)  # from here on a failing record is only logged
    guard = _AfterStop(guard, audit, b)  # from here on a failing guard waits for the broker to be back
    _await_gone(host, report, audit, gates, old, stop_s, max(0.0, stop_s - (time.monotonic() - t0)), serving, guard)
    report.seconds["stop"] = time.monotonic() - t0
    waker = Waker()
    _await_deregistered(zk, report, gates, waker, guard)
    report.controlled_shutdown = controlled_shutdown_outcome(_new_log(host, server_log, mark))
    audit("broker_stopped", "ok", details={"controlled_shutdown": report.controlled_shutdown, "killed": report.killed,
                                           "seconds": round(time.monotonic() - t0, 2)})
    if on_state is not None:
        on_state("stopped")
        on_state("starting")
    _start_and_register(zk, host, report, audit, gates, old, waker, guard)
    guard.raise_noted()  # the broker is back: now the lost lock (or whatever the guard said) halts the run
    return report


class _AfterStop:
    """The guard once the stop command was sent: the first failure is noted and audited, never raised until
    :meth:`raise_noted` (after the start); the step goes on to start the broker it stopped."""

    def __init__(self, guard: Callable[[], None] | None, audit: Audit, broker_id: int) -> None:
        self.guard, self.audit, self.broker_id, self.failure = guard, audit, broker_id, None

    def __call__(self) -> None:
        if self.guard is None or self.failure is not None:
            return
        try:
            self.guard()
        except Exception as exc:  # noqa: BLE001 - any halt the guard raises, kept for after the start
            self.failure = exc
            self.audit("guard_failed_after_stop", "noted", details={
                "error": f"{type(exc).__name__}: {exc}"[:500],
                "then": f"broker {self.broker_id} was stopped: it is started again before the run halts"})

    def raise_noted(self) -> None:
        if self.failure is not None:
            raise self.failure


def _stop(host: BrokerHost, report: RestartReport, audit: Audit, log, stop_s: float, checked: Any) -> Audit:
    """The stop command (controlled shutdown; ``checked``, what the last check returned, recorded with it) -- none when
    the broker is already down (no process, no registration: a resumed step whose worker died after its stop). Returns
    the audit to use from here on: one that never raises (the broker may be down: nothing recorded may keep it down)."""
    extra = {"before_stop": checked} if isinstance(checked, dict) else {}
    if not report.old_processes and report.old_registration is None:
        audit = _after_stop(audit, log)
        report.stop_command = "skipped: no broker process was running"
        audit("stop_broker", "skipped", details={"why": "no broker process is running on the host and it is not registered "
                                                        "in ZooKeeper: the broker was already down; no stop command sent",
                                                 **extra})
        return audit
    try:  # Airflow terminating the task (``termination``): its SIGKILL would leave the broker down
        TERMINATION.check()
        res = host.run("stop_command", stop_s)  # raises TaskTerminated unsent when the SIGTERM came in between
    except TaskTerminated:
        raise StepFailed(report.broker_id, "right before the stop", f"{TERMINATION.why}; nothing was stopped",
                         stopped=False, code=TaskTerminated.code) from None
    audit = _after_stop(audit, log)  # from here on the broker may be down: nothing recorded may keep it down
    audit("stop_broker", "ok" if res.ok else "failed", command=res.argv,
          details={**_result_details(res), "processes": [p.to_dict() for p in report.old_processes], **extra})
    if not res.ok:
        report.stop_command = f"exit {res.exit_code}: {res.error}" if res.error else f"exit {res.exit_code}"
    return audit


def _await_gone(host: BrokerHost, report: RestartReport, audit: Audit, gates: GateSettings, old: set, stop_s: float,
                remaining: float, serving: bool, guard: Callable[[], None] | None) -> None:
    """The old process gone within ``remaining`` s of the stop; else ``kill_command`` (when configured), then gone."""
    b, cfg = host.broker_id, host.config

    def process_gone() -> bool | None:
        return True if not any((p.pid, p.started) in old for p in host.processes()) else None

    if wait_for(process_gone, timeout_s=remaining, poll_s=gates.poll_s, guard=guard) is not None:
        return
    alive = ", ".join(p.describe() for p in host.processes() if (p.pid, p.started) in old)  # as a person reads it
    if TERMINATION.noticed():  # nothing that stops or kills a process leaves once the task is being terminated
        raise StepFailed(b, "stop", f"the broker process {alive} is still alive {stop_s:g}s after the stop command and "
                         f"{TERMINATION.why}: kill_command was not sent (nothing that stops or kills a process is sent "
                         "once termination began); the broker is left as it is", host.last_log_lines(),
                         code=TaskTerminated.code)
    if not cfg.kill_command:
        raise StepFailed(b, "stop", f"the broker process {alive} is still alive {stop_s:g}s after the stop command "
                         "and no kill_command is configured; the broker is left as it is", host.last_log_lines())
    res = host.run("kill_command", stop_s)
    report.killed = True
    audit("kill_broker", "ok" if res.ok else "failed", command=res.argv,
          details={**_result_details(res), "grace_s": stop_s,
                   "why": f"process {alive} outlived the stop command by {stop_s:g}s"
                          + ("" if serving else " (the broker was not serving: gates.stop_unserving_s)")})
    if wait_for(process_gone, timeout_s=stop_s, poll_s=gates.poll_s, guard=guard) is None:
        raise StepFailed(b, "kill", f"the broker process {alive} is still alive after kill_command", host.last_log_lines())


def _await_deregistered(zk, report: RestartReport, gates: GateSettings, waker: Waker,
                        guard: Callable[[], None] | None) -> None:
    """The old registration gone (session closed, or expired after a kill) within ``gates.deregister_s``."""
    b = report.broker_id
    t1 = time.monotonic()

    def deregistered() -> bool | None:
        now = registration(zk, b, watch=waker)
        if now is None or report.old_registration is None or now.session_id != report.old_registration.session_id:
            return True
        return None

    if wait_for(deregistered, timeout_s=gates.deregister_s, poll_s=gates.poll_s, waker=waker, guard=guard) is None:
        raise StepFailed(
            b, "deregister",
            f"/brokers/ids/{b} is still held by the old ZooKeeper session {hex(report.old_registration.session_id)} "
            f"{gates.deregister_s:g}s after the process was gone; starting now would fail with 'node already exists'",
        )
    report.seconds["deregister"] = time.monotonic() - t1


def _start_and_register(zk, host: BrokerHost, report: RestartReport, audit: Audit, gates: GateSettings, old: set,
                        waker: Waker, guard: Callable[[], None] | None) -> None:
    """The start command, then a live process registered with a new session within ``gates.register_s``; a broker
    that dies on start fails at once, with its own last lines."""
    b = host.broker_id
    server_log = host.config.server_log(b)
    t2 = time.monotonic()
    mark = host.size(server_log)
    res = host.run("start_command", gates.register_s)
    audit("start_broker", "ok" if res.ok else "failed", command=res.argv, details=_result_details(res))
    if not res.ok:
        raise StepFailed(b, "start", f"the start command failed (exit {res.exit_code}, {res.error or 'no error text'})", host.last_log_lines())
    misses = {"n": 0}

    def registered_anew() -> Registration | None:
        reg = registration(zk, b, watch=waker)
        procs = [p for p in host.processes() if (p.pid, p.started) not in old]
        running = [p for p in procs if p.running]
        fatal = fatal_start_lines(_new_log(host, server_log, mark))
        if fatal and not running:
            raise StepFailed(b, "start", "the broker died on start: " + " | ".join(fatal[:3]), host.last_log_lines())
        if not running:
            misses["n"] += 1
            if misses["n"] >= 2:  # absent at two checks after the start command returned: it is not coming
                raise StepFailed(b, "start", "no broker process is running after the start command", host.last_log_lines())
            return None
        misses["n"] = 0
        if reg is not None and (report.old_registration is None or reg.session_id != report.old_registration.session_id):
            report.new_process = running[0]
            return reg
        return None

    report.new_registration = wait_for(registered_anew, timeout_s=gates.register_s, poll_s=gates.poll_s, waker=waker, guard=guard)
    if report.new_registration is None:
        raise StepFailed(b, "register", f"not registered with a new ZooKeeper session within {gates.register_s:g}s of the start",
                         host.last_log_lines())
    report.seconds["start_register"] = time.monotonic() - t2
    audit("broker_registered", "ok", details=report.to_dict())
