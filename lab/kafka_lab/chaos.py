"""The chaos table (issue 29 §5): a fault of the engine's own control plane at a step boundary of a rolling restart run
by the real deployment (deployment.py: PostgreSQL, Celery workers, the lab), judged from the world and the records.

    fault          what is done, at the boundary                        healed
    postgres       ``pg_ctl stop -m immediate`` of the deployment's     ``outage_s`` later (started again, crash recovery)
                   PostgreSQL: the product's state database and
                   Airflow's metadata database with it
    worker_kill    SIGKILL to the Celery worker running ``execute``,    after the first run ended (the machine is back)
                   its task and everything they started
    lock_deleted   the maintenance lock's znodes deleted (``rmr``)      not healed
    xcom_edited    the plan task's XCom rewritten in the metadata DB:   not healed
                   a not-serving waiver for the next broker, the
                   steps left cut to the first
    zk_unreachable SIGSTOP to every ZooKeeper server of the ensemble    ``stall_s`` later (SIGCONT): less than the brokers'
                                                                        session timeout, more than the engine's
    boundary       when it is reached (seen in the world, never in the engine)
    before_stop    the stop command arrived on the broker's host: it is held there (``StopHold``) while the fault is
                   injected, then runs
    after_stop     the broker's JVM is gone
    after_start    a new JVM of the broker runs
    in_gate        the new JVM is registered in ZooKeeper and some partition of the broker lacks it in its ISR

The fault hits the roll's first broker. Outcome (``verdict``, pure): at no time two brokers of the roll missing from
``/brokers/ids`` together (a watcher of our own); when the first run ended, every broker of the roll that was down is
named by the ledger (a halt at it, or its step started and never ended); ``resume`` (a second run, only when the
first did not finish the roll) completes; then every broker is registered and the record is closed naming every
broker of the roll. Nothing here reads the engine's internals: its records are read the way on-call reads them.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kafka_runbooks.remediate.executor import interrupted_step
from kafka_runbooks.remediate.ledger import progress

from kafka_lab.deployment import ACTIVE_DAGS, HEALTH_DAG, WORKERS, product_state, quote
from kafka_lab.lab import zk_connect
from kafka_lab.procs import LabError, alive, wait_until
from kafka_lab.servers import _as_postgres, _pg_bin
from kafka_lab.zookeeper import CHROOT

FAULTS = ("postgres", "worker_kill", "lock_deleted", "xcom_edited", "zk_unreachable")
BOUNDARIES = ("before_stop", "after_stop", "after_start", "in_gate")
ROLL = "kafka_rolling_restart"
RESPONSE = "kafka_incident_response"
LOCK_ROOT = "/kafka-runbooks/locks/lab"  # lock.lock_path("lab"), under the lab's chroot
HOLD_MAX_S = 30.0  # a held stop command runs after this long even if the driver never releases it


# --------------------------------------------------------------------------------------------------- pure

def most_down_at_once(timeline: Iterable[tuple[float, Iterable[int]]], roll: Iterable[int]) -> int:
    """The most brokers of ``roll`` missing from /brokers/ids at one time, over a timeline of (time, registered)."""
    roll = set(roll)
    return max((len(roll - set(regs)) for _, regs in timeline), default=0)


def down_without_record(down: Iterable[int], entries: list[Mapping[str, Any]]) -> list[int]:
    """Brokers down now that the roll's ledger does not name as down or possibly down: neither a halt at the broker, nor
    a step of it that started (its stop's intent) and never ended."""

    p = progress(entries)
    named = set()
    if p.halted is not None and p.halted.get("broker_id") is not None:
        named.add(int(p.halted["broker_id"]))
    if p.failed is not None and p.failed.get("stopped", True) and p.failed.get("broker_id") is not None:
        named.add(int(p.failed["broker_id"]))
    step = interrupted_step(entries)
    if step is not None:
        named.add(int(step["broker_id"]))
    return sorted(set(down) - named)


def verdict(case: Mapping[str, Any]) -> dict[str, Any]:
    """ok and the reasons it is not, from what ``run_case`` saw."""
    why = []
    if case.get("error"):
        why.append(f"driver error: {case['error']}")
    if case.get("most_down", 0) > 1:
        why.append(f"{case['most_down']} brokers of the roll down at once")
    if case.get("down_unrecorded"):
        why.append(f"brokers down with no record saying so after the first run: {case['down_unrecorded']}")
    if case.get("resume") not in ("not needed", "success"):
        why.append(f"resume: {case.get('resume')}")
    if case.get("left_down"):
        why.append(f"brokers not registered at the end: {case['left_down']}")
    if not case.get("record_ok"):
        why.append(f"record: {case.get('record_why') or 'not checked'}")
    return {"ok": not why, "why": why}


def record_truth(record: Mapping[str, Any] | None, roll: Iterable[int], started: Mapping[int, int]) -> tuple[bool, str]:
    """The roll's record after the last run: closed, its resolution naming every broker of the roll, and every one of
    them started at least once since the case began (``started``: broker -> JVM starts, from its own log)."""
    if record is None:
        return False, "no record"
    if record.get("status") != "closed":
        return False, f"record {record.get('status')}: {str(record.get('resolution') or '')[:200]}"
    text = str(record.get("resolution") or "")
    missing = [b for b in roll if str(b) not in text]
    if missing:
        return False, f"closed, but its resolution does not name brokers {missing}: {text[:200]}"
    never = [b for b in roll if started.get(b, 0) < 1]
    if never:
        return False, f"closed naming brokers {never} that were never started again: {text[:200]}"
    return True, text[:200]


def fault_in_record(fault: str, entries: list[Mapping[str, Any]], resolution: str, order: list[int],
                    audit: Iterable[Mapping[str, Any]] = ()) -> tuple[bool, str]:
    """Does the roll's ledger (and audit trail) tell what happened to its first run? PostgreSQL: records kept in the
    journal and written later (a ledger entry ``journaled``, an audit entry ``recorded_late``), or a halt saying why; a killed worker: the run recorded as cut; the lock deleted: a halt on the lost lock before
    the next stop (or, the fault in the roll's last step, nothing left to stop); ZooKeeper unreachable: a halt, or the
    roll done; the XCom edited: nothing of it (the recorded plan ran: the record names every broker)."""
    halts = [e for e in entries if e.get("event") == "halted"]
    codes = [str(e.get("code")) for e in halts]
    if fault == "postgres":
        late = sum(1 for e in entries if e.get("journaled"))
        late_audit = sum(1 for e in audit if (e.get("details") or {}).get("recorded_late"))
        return bool(late or late_audit or halts), (f"{late} ledger and {late_audit} audit entries written late from the "
                                                   f"journal; halts {codes}")
    if fault == "worker_kill":
        cut = [e for e in halts if e.get("cut")]
        return bool(cut or "cut" in resolution), f"cut recorded: {len(cut)}; halts {codes}"
    if fault == "lock_deleted":
        return "lock_lost" in codes or len(order) == 1, f"halts {codes}"
    if fault == "zk_unreachable":
        done = any(e.get("event") == "completed" for e in entries)
        return bool(halts or done), f"halts {codes}"
    return True, "the record names every broker of the roll"


# --------------------------------------------------------------------------------------------------- boundaries

class StopHold:
    """A breakpoint on broker b's host: its ``kafka-stop`` (the engine's stop_command) is replaced by a wrapper that
    marks its arrival and waits (at most ``HOLD_MAX_S``) for the driver's go before running the real script. Undone by
    ``remove`` (and by a lab that comes up again)."""

    def __init__(self, lab, b: int) -> None:
        self.lab, self.b = lab, int(b)
        self.script = lab.script(b, "kafka-stop")
        self.real = self.script.with_name("kafka-stop.chaos-real")
        self.arrived_file = lab.run_dir(b) / "chaos-stop-arrived"
        self.go_file = lab.run_dir(b) / "chaos-stop-go"

    def install(self) -> "StopHold":
        for f in (self.arrived_file, self.go_file):
            f.unlink(missing_ok=True)
        if not self.real.exists():
            os.replace(self.script, self.real)
        polls = int(HOLD_MAX_S / 0.05)
        self.script.write_text(
            "#!/bin/bash\n# kafka_lab/chaos.py: the stop command is held here until the chaos driver lets it go\n"
            f"touch {self.arrived_file}\n"
            f"for _ in $(seq {polls}); do [ -e {self.go_file} ] && break; sleep 0.05; done\n"
            f'exec {self.real} "$@"\n')
        os.chmod(self.script, 0o755)
        return self

    def arrived(self) -> bool:
        return self.arrived_file.exists()

    def release(self) -> None:
        self.go_file.touch()

    def remove(self) -> None:
        self.release()
        if self.real.exists():
            os.replace(self.real, self.script)


def _isr_short(lab, b: int) -> list[str]:
    return sorted(f"{t}-{p}" for (t, p), s in lab.partitions().items() if b in s["replicas"] and b not in s["isr"])


class Boundary:
    """Armed on broker ``b`` before the roll is approved; ``wait`` returns once the boundary is reached in the world."""

    def __init__(self, lab, b: int, name: str) -> None:
        if name not in BOUNDARIES:
            raise ValueError(f"no boundary {name!r}; choose from {BOUNDARIES}")
        self.lab, self.b, self.name = lab, int(b), name
        self.old_pid = lab.broker_pid(b)
        reg = lab.registration(b)
        self.old_czxid = reg[1].czxid if reg else None
        self.hold = StopHold(lab, b).install() if name == "before_stop" else None

    def _reached(self) -> dict[str, Any] | None:
        lab, b = self.lab, self.b
        if self.name == "before_stop":
            return {"stop command": "arrived on the host, held"} if self.hold.arrived() else None
        if self.name == "after_stop":
            return {"jvm": f"pid {self.old_pid} gone"} if not alive(self.old_pid) else None
        pid = lab.broker_pid(b)
        if not (pid and pid != self.old_pid and alive(pid)):
            return None
        if self.name == "after_start":
            return {"jvm": f"new pid {pid}"}
        reg = lab.registration(b)
        if reg is None or reg[1].czxid == self.old_czxid:
            return None
        short = _isr_short(lab, b)
        return {"registered": hex(reg[1].ephemeralOwner), "isr_short": len(short),
                **({} if short else {"note": "every ISR already had the broker when seen"})}

    def wait(self, timeout: float) -> dict[str, Any]:
        return wait_until(self._reached, timeout, f"boundary {self.name} of broker {self.b}", interval=0.05)

    def release(self) -> None:
        if self.hold is not None:
            self.hold.release()

    def disarm(self) -> None:
        if self.hold is not None:
            self.hold.remove()


# --------------------------------------------------------------------------------------------------- faults

@dataclass
class Ctx:
    d: Any
    lab: Any
    run_id: str
    record_id: str
    order: list[int]
    outage_s: float = 20.0
    stall_s: float = 6.0
    notes: list[str] = field(default_factory=list)
    timers: list[threading.Thread] = field(default_factory=list)
    victim: str | None = None

    def later(self, seconds: float, fn: Callable[[], Any]) -> None:
        def go():
            time.sleep(seconds)  # the fault's length: the heal happens this long after the injection
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - recorded; heal() tries again
                self.notes.append(f"timed heal failed: {exc!r}")

        t = threading.Thread(target=go, daemon=True)
        t.start()
        self.timers.append(t)


class Supervisor:
    """What systemd (``Restart=always``) does for a deployment: an Airflow component that exited (the scheduler, the
    dag-processor and the triggerer exit when their database is gone) is started again while PostgreSQL runs. Workers
    are not: a killed worker is the fault itself, back only in ``heal``."""

    def __init__(self, d, every_s: float = 3.0) -> None:
        self.d, self.every_s = d, every_s
        self.started: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> "Supervisor":
        self._thread.start()
        return self

    def _loop(self) -> None:

        while not self._stop.wait(self.every_s):
            try:
                if not self.d.postgres.running():
                    continue
                for name in self.d.process_names:
                    if name not in WORKERS and not name.endswith("-log-server") and self.d.pid(name) is None:
                        self.d.start(name)
                        self.started.append(name)
            except Exception:  # noqa: BLE001 - tried again at the next round
                continue

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(30)
        return self.started


def _pg_stop_immediate(d) -> None:

    _as_postgres([_pg_bin("pg_ctl"), "-D", str(d.postgres.data), "-m", "immediate", "-w", "-t", "30", "stop"], timeout=60)


def inject(fault: str, ctx: Ctx) -> str:
    """Does the fault now; returns what was done."""
    d, lab = ctx.d, ctx.lab
    if fault == "postgres":
        _pg_stop_immediate(d)
        ctx.later(ctx.outage_s, d.postgres.up)
        return f"pg_ctl stop -m immediate; started again {ctx.outage_s:g} s later"
    if fault == "worker_kill":
        ti = d.task_instances(ROLL, ctx.run_id).get("execute") or {}
        ctx.victim = d.worker_of(ti)
        if ctx.victim is None:
            raise LabError(f"the execute task runs on no known worker: {ti}")
        killed = d.kill_worker(ctx.victim)
        return f"SIGKILL to {ctx.victim} ({len(killed)} processes)"
    if fault == "lock_deleted":
        zk = lab.kazoo()
        nodes = zk.get_children(LOCK_ROOT)
        for n in nodes:
            zk.delete(f"{LOCK_ROOT}/{n}")
        return f"deleted {LOCK_ROOT}/{nodes}"
    if fault == "xcom_edited":
        return edit_plan_xcom(d, ctx.run_id, ctx.order)
    if fault == "zk_unreachable":
        pids = [lab.zk_pid(z) for z in (1, 2, 3)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        ctx.later(ctx.stall_s, lambda: [os.kill(p, signal.SIGCONT) for p in pids])
        return f"SIGSTOP to the 3 ZooKeeper servers; SIGCONT {ctx.stall_s:g} s later"
    raise ValueError(f"no fault {fault!r}; choose from {FAULTS}")


def edit_plan_xcom(d, run_id: str, order: list[int]) -> str:
    """The plan task's XCom rewritten in the metadata database, as someone with its credentials could. It carries only
    the reference to the recorded plan (record and digest), so the edit adds what an older XCom carried -- the next
    broker waived as not serving, the steps cut to the first -- which nothing reads: the execute task runs the plan
    recorded under the digest."""
    where = f"dag_id = '{ROLL}' AND run_id = '{run_id}' AND task_id = 'plan' AND key = 'return_value'"
    raw = d.postgres.psql(f"SELECT value::text FROM xcom WHERE {where}", database="airflow").strip()
    value = json.loads(raw)
    nested = isinstance(value, str)
    plan_out = json.loads(value) if nested else value
    plan = plan_out["plan"]
    nxt = order[1] if len(order) > 1 else order[0]
    plan["not_serving"] = {str(nxt): "edited into the XCom by the chaos driver"}
    plan["steps"] = [{"action": "restart_broker", "broker_id": order[0]}]
    text = json.dumps(json.dumps(plan_out) if nested else plan_out).replace("'", "''")
    d.postgres.psql(f"UPDATE xcom SET value = '{text}' WHERE {where}", database="airflow")
    return f"plan XCom: broker {nxt} waived as not serving, steps cut to {[s['broker_id'] for s in plan['steps']]}"


def heal(fault: str, ctx: Ctx) -> list[str]:
    """After the first run ended: whatever the fault left is back (PostgreSQL, the ensemble, the killed machine, an
    Airflow process that exited while its database was gone). Returns what was done."""
    d, lab = ctx.d, ctx.lab
    for t in ctx.timers:
        t.join(max(ctx.outage_s, ctx.stall_s) + 60)
    done = []
    if not d.postgres.running():
        d.postgres.up()
        done.append("started PostgreSQL")
    for z in (1, 2, 3):
        pid = lab.zk_pid(z)
        if alive(pid):
            os.kill(pid, signal.SIGCONT)
    for name in d.process_names:
        if d.pid(name) is None:
            if name in ("worker1", "worker2"):
                d.start_worker(name)
            else:
                d.start(name)
            done.append(f"started {name}")
    return done


# --------------------------------------------------------------------------------------------------- the world

class Registrations:
    """/brokers/ids over time, from a ZooKeeper session of our own (a long session: it outlives a stalled ensemble)."""

    def __init__(self) -> None:
        from kazoo.client import KazooClient
        from kazoo.recipe.watchers import ChildrenWatch

        self.lock = threading.Lock()
        self.timeline: list[tuple[float, frozenset[int]]] = []
        self.stopped = False
        self.zk = KazooClient(hosts=zk_connect() + CHROOT, timeout=30.0)
        self.zk.start(timeout=30)
        ChildrenWatch(self.zk, "/brokers/ids", self._ids)

    def _ids(self, children) -> bool | None:
        with self.lock:
            self.timeline.append((time.monotonic(), frozenset(int(c) for c in children)))
        return False if self.stopped else None

    def stop(self) -> list[tuple[float, frozenset[int]]]:
        self.stopped = True
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:  # noqa: BLE001
            pass
        with self.lock:
            return list(self.timeline)


def starts(lab, b: int) -> int:
    import re

    return len(re.findall(rf"\[KafkaServer id={b}\] started", lab.log_text(b)))


def _plan_output(d, run_id: str) -> dict:

    return d.call("alice", "GET", f"/api/v2/dags/{ROLL}/dagRuns/{quote(run_id)}/taskInstances/plan/xcomEntries/"
                  "return_value").json()["value"]


def _recorded_order(d, record_id: str, digest: str) -> list[int]:
    """The brokers of the plan recorded under ``digest`` (its ``planned`` ledger entry), in the roll's order."""
    entry = next((e for e in _product(d).ledger(record_id) if e.get("event") == "planned" and e.get("digest") == digest), None)
    if entry is None:
        raise LabError(f"roll {record_id}: no plan recorded under digest {digest[:12]}")
    return [int(s["broker_id"]) for s in (entry.get("plan") or {}).get("steps") or ()]


def _approve_run(d, run_id: str, timeout: float) -> None:
    d.wait_task(ROLL, run_id, "approve", ("awaiting_input",), timeout)
    r = d.answer("bob", ROLL, run_id, "approve")
    if r.status_code != 200:
        raise LabError(f"bob's approval of {run_id}: HTTP {r.status_code} {r.text[:300]}")


def _product(d):

    return product_state(d)


def prepare(d, lab) -> list[str]:
    """The healthy baseline of a case: lab healed, no open incident, both workers consuming, the product's DAGs unpaused
    but the health check (a roll changes /brokers/ids: its own tests cover that). Returns the incidents it closed."""

    # the health check first: paused, its runs in flight ended, no response left running -- else a run that started
    # while an earlier test's fault (or the heal below) was on opens an incident after the close below, and the roll's
    # plan is refused for it ("broker 2: open incident")
    d.set_paused(HEALTH_DAG, True)
    for w in WORKERS:
        if d.pid(w) is None:
            d.start_worker(w)
        d.consume(w, True)
    _end_runs(d, HEALTH_DAG, wait_s=300.0)
    _end_runs(d, RESPONSE, wait_s=0.0)
    lab.reset()
    # a case starts with no open incident: one an earlier test (or the serving watch, seeing a broker restart) left
    # names its broker "not serving", and the roll's plan is refused for it
    closed = _closed_and_quiet(d)
    for dag_id in ACTIVE_DAGS:
        d.set_paused(dag_id, dag_id == HEALTH_DAG)
    for r in d.runs(ROLL, limit=5):
        if r["state"] in ("queued", "running"):
            d.wait_run(ROLL, r["dag_run_id"], 900)
    return closed


def _closed_and_quiet(d, quiet_s: float = 10.0, rounds: int = 3) -> list[str]:
    """Closes the cluster's open incidents, then watches ``quiet_s`` for a new one (a run still finishing opens it
    after the close); closes again, at most ``rounds`` times: a case never starts beside something opening incidents."""
    why = "closed before a chaos case: a leftover of an earlier test"
    closed = _product(d).close_open("lab", "chaos-driver", why)
    for _ in range(rounds):
        time.sleep(quiet_s)
        again = _product(d).close_open("lab", "chaos-driver", why)
        if not again:
            return closed
        closed += again
    raise LabError(f"incidents keep opening on cluster lab before the chaos case (closed {closed}): something still runs")


def _end_runs(d, dag_id: str, wait_s: float) -> None:
    """Runs of ``dag_id`` still running: waited for up to ``wait_s``; then those and every queued one (a paused DAG's
    queued runs never start: Airflow only starts runs of unpaused DAGs) failed through REST, as on-call would decline
    them."""
    deadline = time.monotonic() + wait_s
    while True:
        runs = d.runs(dag_id, limit=20)
        live = [r["dag_run_id"] for r in runs if r["state"] in ("queued", "running")]
        if not [r for r in runs if r["state"] == "running"] or time.monotonic() >= deadline:
            break
        time.sleep(3.0)
    if not live:
        return
    for run_id in live:
        r = d.call("alice", "PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}", json={"state": "failed"})
        if r.status_code != 200:
            raise LabError(f"failing {dag_id} {run_id} before a chaos case: HTTP {r.status_code} {r.text[:200]}")


def _plan_refused(d, run_id: str, exc: LabError) -> LabError:
    """The approval never asked: the plan task's own last lines (its refusal, when it refused) joined to the error."""
    try:
        lines = [ln for ln in d.task_log(ROLL, run_id, "plan").splitlines() if ln.strip()]
    except Exception as log_exc:  # noqa: BLE001 - the error stands without the log
        return LabError(f"{exc}; the plan task's log could not be read: {log_exc!r}")
    said = [ln for ln in lines if "refus" in ln.lower() or "error" in ln.lower()] or lines[-8:]
    return LabError(f"{exc}; the plan task said: " + " | ".join(ln[-300:] for ln in said[-6:]))


def two_brokers(lab) -> list[int]:
    """Two brokers, neither the controller: a roll of two (the CI cases; ``--brokers two`` of the benchmark)."""
    controller = (lab.controller() or {}).get("brokerid")
    return [b for b in (1, 2, 3) if b != controller][:2]


def run_case(d, lab, fault: str, boundary: str, *, brokers: list[int] | None = None, outage_s: float = 20.0,
             stall_s: float = 6.0, timeout: float = 900.0, say: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """One cell of the table: a roll of ``brokers`` (all when empty) through REST (alice starts, bob approves), the fault
    at the boundary of its first broker, the first run's end, the heal, ``resume`` when the roll is not done. Returns
    what was seen (``verdict`` judges it)."""
    if fault not in FAULTS:
        raise ValueError(f"no fault {fault!r}; choose from {FAULTS}")
    t0 = time.monotonic()
    out: dict[str, Any] = {"fault": fault, "boundary": boundary}
    out["closed_before"] = closed = prepare(d, lab)
    if closed:
        say(f"closed the incidents an earlier test left: {closed}")
    before = {b: starts(lab, b) for b in (1, 2, 3)}
    watch = Registrations()
    supervisor = Supervisor(d).start()
    arm: Boundary | None = None
    ctx: Ctx | None = None
    try:
        reason = f"chaos {fault} at {boundary} {uuid.uuid4().hex[:6]}"
        form = {"cluster": "lab", "brokers": list(brokers or []), "reason": reason, "mode": "execute", "canary": False}
        run_id = d.trigger("alice", ROLL, form)
        try:
            d.wait_task(ROLL, run_id, "approve", ("awaiting_input",), timeout)
        except LabError as exc:
            raise _plan_refused(d, run_id, exc) from exc
        plan = _plan_output(d, run_id)  # the reference (record and digest): the plan itself is in the state database
        record_id = plan["plan"]["roll_id"]
        order = _recorded_order(d, record_id, plan["digest"])
        out.update(order=order, record_id=record_id, run_id=run_id)
        arm = Boundary(lab, order[0], boundary)
        _approve_run(d, run_id, timeout)
        seen = arm.wait(timeout)
        ctx = Ctx(d, lab, run_id, record_id, order, outage_s=outage_s, stall_s=stall_s)
        out["boundary_seen"] = seen
        out["injected"] = inject(fault, ctx)
        out["fault_at_s"] = round(time.monotonic() - t0, 1)
        say(f"{fault} at {boundary} of broker {order[0]}: {out['injected']} ({seen})")
        arm.release()
        first = d.wait_run(ROLL, run_id, timeout)
        out["first_run"] = first["state"]
        out["healed"] = heal(fault, ctx)
        _judge_first_run(d, lab, out, order, record_id)
        _resume_if_needed(d, out, form, record_id, timeout)
        lab.wait_registered(order, 120)
        out["left_down"] = sorted(set(order) - set(lab.registered_brokers()))
        after = {b: starts(lab, b) - before[b] for b in (1, 2, 3)}
        out["starts"] = after
        record = _product(d).record(record_id)
        out["record_ok"], out["record_why"] = record_truth(record, order, after)
        told, how = fault_in_record(fault, _product(d).ledger(record_id), str(record.get("resolution") or ""), order,
                                    _product(d).audit_trail(record_id))
        out["fault_recorded"] = how
        if out["record_ok"] and not told:
            out["record_ok"], out["record_why"] = False, f"the fault is not in the record: {how}"
    except Exception as exc:  # noqa: BLE001 - a cell that could not be run says why, the table goes on
        out["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    finally:
        if arm is not None:
            arm.disarm()
        if ctx is not None and "healed" not in out:
            try:
                out["healed"] = heal(fault, ctx)
            except Exception as exc:  # noqa: BLE001
                out.setdefault("error", f"heal: {exc!r}")
        timeline = watch.stop()
        out["restarted_by_supervisor"] = supervisor.stop()
        out["most_down"] = most_down_at_once(timeline, out.get("order") or [])
        out["seconds"] = round(time.monotonic() - t0, 1)
        out.update(verdict(out))
    return out


def _judge_first_run(d, lab, out: dict, order: list[int], record_id: str) -> None:
    """When the first run ended: which brokers of the roll are down, and does the ledger say so."""
    registered = set(wait_until(lambda: lab.registered_brokers() or None, 60, "ZooKeeper to answer"))
    down = sorted(set(order) - registered)
    entries = _product(d).ledger(record_id)
    out["down_after_first_run"] = down
    out["down_unrecorded"] = down_without_record(down, entries)
    p = progress(entries)
    out["first_run_ledger"] = {"completed": list(p.completed), "halted": (p.halted or {}).get("code") or (p.halted or {}).get("reason"),
                               "journaled": sum(1 for e in entries if e.get("journaled"))}


def _resume_if_needed(d, out: dict, form: Mapping[str, Any], record_id: str, timeout: float) -> None:
    record = _product(d).record(record_id)
    if record.get("status") == "closed":
        out["resume"] = "not needed"
        return
    run_id = d.trigger("alice", ROLL, {**form, "reason": form["reason"] + " resumed", "resume": True})
    _approve_run(d, run_id, timeout)
    done = d.wait_run(ROLL, run_id, timeout)
    out["resume"] = done["state"]
    out["resume_run"] = run_id


def table(cases: list[Mapping[str, Any]]) -> str:
    """The table as printed: fault x boundary -> outcome, time, record ok."""
    head = f"{'fault':<15} {'boundary':<12} {'outcome':<8} {'s':>6} {'1st run':<8} {'down after':<10} {'resume':<11} {'most down':>9} record"
    lines = [head, "-" * len(head)]
    for c in cases:
        lines.append(f"{c['fault']:<15} {c['boundary']:<12} {'OK' if c.get('ok') else 'FAIL':<8} {c.get('seconds', 0):>6.0f} "
                     f"{str(c.get('first_run', '-')):<8} {str(c.get('down_after_first_run', '-')):<10} "
                     f"{str(c.get('resume', '-')):<11} {c.get('most_down', '-'):>9} {'ok' if c.get('record_ok') else 'NO'}")
        for w in c.get("why") or []:
            lines.append(f"{'':<28}-> {w}")
    return "\n".join(lines)


def save(cases: list[Mapping[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(cases), indent=2, default=str) + "\n")
