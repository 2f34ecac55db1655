"""What a resumed restart step does with a broker whose earlier step never finished (issue 29, docs/CHAOS.md: "resuming
a step whose broker was already up again restarts it once more").

An earlier run's step recorded its intent (``step_started``) with the broker's ZooKeeper registration it was about to
stop (``registration``: the ``/brokers/ids/N`` znode's czxid and session, from the snapshot read right before the stop)
and then was cut (its worker killed) or halted after its stop. ZooKeeper orders every znode creation by its zxid, with
no clock involved: a registration whose czxid is greater than the recorded one was created after the intent -- the
broker was stopped and started again since. Restarting it once more is a needless outage; its gates are what is left.

Pure: :func:`unfinished_step` reads the ledger's entries, :func:`decide` compares two registrations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

GATES_ONLY = "gates_only"  # registered again since the intent: not stopped again; the gates only
RESTART = "restart"  # still the registration recorded before the stop: its restart did not happen
START = "start"  # not registered: started (no stop command: the step's own rule for a broker already down)
REFUSE = "refuse"  # ZooKeeper's order contradicts the record (another ensemble, a restored one): nothing is done


@dataclass(frozen=True)
class Unfinished:
    """The ``step_started`` entry of a broker's step that never ended done, and how it ended (``cut``: its worker died;
    otherwise the ``step_failed`` entry that halted it after its intent). ``gates_failed``: the ``step_failed`` of a
    later run's gates-only resume of it whose gates FAILED (``gate_*``): the broker never became healthy since."""

    started: Mapping[str, Any]
    failed: Mapping[str, Any] | None = None
    gates_failed: Mapping[str, Any] | None = None

    @property
    def how(self) -> str:
        return "the cut" if self.failed is None else "the halt"


@dataclass(frozen=True)
class Resumption:
    """What the resumed step does (``action``), the stable ``code`` and the sentence the ledger and the audit carry."""

    action: str
    code: str
    sentence: str
    recorded: Mapping[str, Any] | None = None  # the registration the intent recorded (None: not registered then)
    now: Mapping[str, Any] | None = None  # the registration now (None: not registered)

    def to_dict(self) -> dict[str, Any]:
        return {"action": self.action, "code": self.code, "sentence": self.sentence, "recorded": self.recorded,
                "now": self.now}


def unfinished_step(entries: Iterable[Mapping[str, Any]], broker_id: int) -> Unfinished | None:
    """The last restart intent (``step_started``, not an election batch's) of ``broker_id`` that no ``step_done`` of that
    broker followed -- cut (no end recorded) or halted (a ``step_failed``); None when its last step ended done or it
    has none. The entries are one roll's ledger, in order."""
    started: Mapping[str, Any] | None = None
    failed: Mapping[str, Any] | None = None
    gated_by: str | None = None  # the run whose resume of this step decided gates only
    gates_failed: Mapping[str, Any] | None = None
    for e in (e for e in entries if _of(e, broker_id) and "partitions" not in e):
        if e.get("event") == "step_started":
            started, failed, gated_by, gates_failed = e, None, None, None
        elif e.get("event") == "step_done":
            started, failed, gated_by, gates_failed = None, None, None, None
        elif e.get("event") == "resumed" and started is not None:
            gated_by = e.get("run_id") if e.get("action") == GATES_ONLY else None
        elif e.get("event") == "step_failed" and started is not None:
            # a step refused before its stop (``stopped`` False: the re-check, the intent, a termination) stopped
            # nothing: it is no unfinished restart, the next run's step is an ordinary one. A gates-only resume that
            # halted (``gates_only``) stopped nothing either, but the earlier run's stop it gated is still unfinished
            if e.get("stopped") is False and not e.get("gates_only"):
                started, failed, gated_by, gates_failed = None, None, None, None
                continue
            failed = e
            if gated_by is not None and e.get("run_id") == gated_by and str(e.get("code") or "").startswith("gate_"):
                gates_failed = e  # a gate said no (not a lost lock, a termination, ZooKeeper away: those concluded nothing)
    return Unfinished(started, failed, gates_failed) if started is not None else None


def old_process_running(step: Unfinished, running: Iterable[tuple[int, Any]], decision: Resumption) -> Resumption | None:
    """A newer registration proves a new ZooKeeper session, not a new process (a session that expired while the step was
    cut before its stop command registers again from the same JVM): a gates-only resume also needs every process the
    intent saw (``check.processes``: [pid, start]) gone. A refusal to skip the restart (RESTART) when one still runs,
    or when the intent recorded none; None when they are all gone."""
    e = step.started
    recorded = (e.get("check") or {}).get("processes")
    b = e.get("broker_id")
    if recorded is None:
        return Resumption(RESTART, "processes_not_recorded",
                          f"the intent of broker {b}'s step recorded no process: a new JVM cannot be proven; it is restarted",
                          decision.recorded, decision.now)
    still = sorted({(int(p), str(t)) for p, t in recorded} & {(int(p), str(t)) for p, t in running})
    if still:
        return Resumption(RESTART, "old_process_running",
                          f"broker {b} registered again, but the process its step was about to stop still runs "
                          f"(pid {still[0][0]}): its session was renewed, not its JVM; it is restarted",
                          decision.recorded, decision.now)
    return None


def _of(entry: Mapping[str, Any], broker_id: int) -> bool:
    try:
        return int(entry.get("broker_id")) == int(broker_id)
    except (TypeError, ValueError):
        return False


def registration_of(zxid: Any, session_id: Any) -> dict[str, Any] | None:
    """A registration as the ledger records it (``{"zxid": int, "session_id": "0x.."}``); None: not registered."""
    if zxid is None:
        return None
    return {"zxid": int(zxid), "session_id": hex(int(session_id)) if session_id is not None else None}


def _session(value: Any) -> int | None:
    try:
        return int(value, 16) if isinstance(value, str) else (int(value) if value is not None else None)
    except ValueError:
        return None


def _zxid(rec: Any) -> int | None:
    try:
        return int(rec["zxid"])
    except (TypeError, KeyError, ValueError):
        return None


def decide(broker_id: int, step: Unfinished | None, now: Mapping[str, Any] | None) -> Resumption | None:
    """What the resumed step of ``broker_id`` does, given its unfinished step (None: nothing unfinished -- an ordinary
    step, None returned) and its registration now (``registration_of``; None: not registered)."""
    if step is None:
        return None
    b, e = int(broker_id), step.started
    by = f"run {e.get('run_id')}'s step (intent at {e.get('at')})"
    if "registration" not in e:  # a ledger written before the registration was recorded with the intent
        action = RESTART if now is not None else START
        return Resumption(action, "no_recorded_registration",
                          f"{by} recorded no registration of broker {b} (an older ledger entry): whether its restart "
                          f"happened cannot be proven; the broker is {'restarted (it is up)' if now else 'started (it is down)'}"
                          ", as before", None, now)
    rec = e.get("registration")
    if rec is not None and _zxid(rec) is None:  # recorded, but not as a registration: nothing can be proven from it
        return Resumption(RESTART if now is not None else START, "unreadable_registration",
                          f"{by} recorded a registration of broker {b} that cannot be read ({str(rec)[:100]}): whether its "
                          f"restart happened cannot be proven; the broker is {'restarted' if now else 'started'}", None, now)
    if now is None:
        return Resumption(START, "not_registered", f"broker {b} is not registered after {step.how} of {by}: it is started "
                                                   "(no stop command: it is down)", rec, now)
    if rec is None:  # not registered at the intent: any registration now is "newer", which proves nothing
        return Resumption(RESTART, "not_registered_then",
                          f"broker {b} was not registered when {by} recorded its intent: whether its restart happened cannot "
                          "be proven from ZooKeeper; it is restarted", rec, now)
    if int(now["zxid"]) > int(rec["zxid"]) and step.gates_failed is not None:
        return never_healthy(b, step, by, rec, now)
    if int(now["zxid"]) > int(rec["zxid"]):
        return Resumption(GATES_ONLY, "registered_again",
                          f"broker {b} registered again (zxid {now['zxid']}, session {now.get('session_id')}) after {step.how} "
                          f"of {by} (zxid {rec['zxid']} before its stop): not restarted again; gates only", rec, now)
    if int(now["zxid"]) == int(rec["zxid"]) and _session(now.get("session_id")) == _session(rec.get("session_id")):
        return Resumption(RESTART, "same_registration",
                          f"broker {b} still holds the registration recorded before {by}'s stop (zxid {rec['zxid']}): its "
                          "restart did not happen; it is restarted", rec, now)
    return Resumption(REFUSE, "registration_order_unknown",
                      f"broker {b}'s registration now (zxid {now['zxid']}, session {now.get('session_id')}) is not newer "
                      f"than the one {by} recorded (zxid {rec['zxid']}, session {rec.get('session_id')}) and not the same: "
                      "ZooKeeper's order contradicts the record (another or a restored ensemble?); nothing is done", rec, now)


def never_healthy(b: int, step: Unfinished, by: str, rec: Mapping[str, Any], now: Mapping[str, Any]) -> Resumption:
    """Registered again since the intent, but a gates-only resume already ran its gates on it and they FAILED: it never
    became healthy after that restart. Gates only again would wait on it forever (every resume "registered again, gates
    only", every resume failing): it is restarted -- stop, start, gates, every stop checked on fresh state -- as the
    resume's plan says before anyone approves it (``plan_restart``: "restart", with this sentence)."""
    g = step.gates_failed or {}
    return Resumption(RESTART, "gates_failed_after_resume",
                      f"broker {b} registered again (zxid {now['zxid']}) after {step.how} of {by} (zxid {rec['zxid']} before "
                      f"its stop), but run {g.get('run_id')}'s gates-only resume of it failed ({g.get('phase')}: "
                      f"{str(g.get('reason') or g.get('code'))[:300]}): it never became healthy since that restart, so it "
                      "is not taken as restarted and only waiting; it is restarted (stop, start, gates)", rec, now)
