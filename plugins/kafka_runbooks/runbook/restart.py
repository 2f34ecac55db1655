"""The restart, as the application runs it -- the incident response's one-step restart and the rolling restart alike:
plan (on fresh state, recorded, always shown) -> the approval (``runbook/approval.py``) -> execute (the approval used,
the plan checked against fresh state, the engine run) -> close (what the record says happened). Plain functions over
the hooks and the state store; the operators (``operators/remediate.py``) call them. Side effects only in
``execute``, which is never retried."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kafka_runbooks import metrics
from kafka_runbooks.runbook import finding_records, plans
from kafka_runbooks.runbook.errors import Refusal, Stop
from kafka_runbooks.runbook.task import Task
from kafka_runbooks.truth import FALSE_WORDS, TRUE_WORDS, truthy

ROLLING_RESTART = "rolling_restart"
INCIDENT_RESTART = "incident_restart"
GATES = (
    "registered again with a new ZooKeeper session",
    "back in every ISR it belongs in",
    "every __consumer_offsets partition it leads (or that moved) answers from a loaded coordinator",
)
CANARY_GATE = "canary produce (acks=all) and consume within the latency bound"
DRY_RUN_WORDS = ("dry-run", "dry_run", "dryrun", "plan")


@dataclass(frozen=True)
class Request:
    """What a restart's plan task is asked (the form, or the incident and this run's analysis)."""

    kind: str
    cluster: str | None = None
    broker_ids: Sequence[Any] = ()
    reason: Any = ""
    mode: Any = "execute"
    canary: Any = None  # None: the cluster's setting
    resume: Any = False
    incident: dict[str, Any] | None = None  # the open_incident output (incident restart)
    report: dict[str, Any] | None = None  # the report task's reference to this run's analysis (incident restart)

    @property
    def dry_run(self) -> bool:
        return str(self.mode).strip().lower() in DRY_RUN_WORDS


def resume_target(value: Any) -> str | None:
    """The roll a ``resume`` form value names (its record id), None for a yes/no value (yes: the latest halted roll)."""
    text = str(value if value is not None else "").strip()
    if text.lower() in TRUE_WORDS + FALSE_WORDS or value is True or value is False:
        return None
    return text


def resume_wanted(value: Any) -> bool:
    """A roll is to be resumed: a record id, or a yes (the one truthiness rule: any other word is an error)."""
    return resume_target(value) is not None or truthy(value)


def find_resumable_roll(store, cluster: str, record_id: str | None = None) -> tuple[dict[str, Any], Any] | None:
    """The latest open rolling-restart record of ``cluster`` whose ledger says it halted -- or whose worker died in
    the middle of a step (a ``step_started`` that never ended: ``executor.interrupted_step``). ``record_id``: only
    that roll (None when it is not an open, resumable roll of ``cluster``)."""
    from kafka_runbooks.remediate.executor import interrupted_step  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.ledger import Ledger, find_resumable  # keeps DAG parsing fast: loaded when a task runs

    if record_id is not None:
        for record in store.records(cluster, statuses=["open"]):
            if record.get("id") == record_id and (record.get("trigger") or {}).get("kind") == ROLLING_RESTART:
                ledger = Ledger(store.db, record_id)
                p = ledger.progress()
                if p.resumable or interrupted_step(ledger.entries()) is not None:
                    return record, p
        return None
    found = find_resumable(store, cluster, ROLLING_RESTART)
    for record in reversed(store.records(cluster)):
        if found is not None and str(record.get("opened_at") or "") <= str(found[0].get("opened_at") or ""):
            break
        if record.get("status") == "open" and (record.get("trigger") or {}).get("kind") == ROLLING_RESTART:
            ledger = Ledger(store.db, record["id"])
            if interrupted_step(ledger.entries()) is not None:
                return record, ledger.progress()
    return found


def how_it_ended(store, record_id: str, progress) -> str:
    """How the roll's last run ended, for the resume's log: halted (why), or cut (the worker died: which broker's step,
    its stop sent when)."""
    from kafka_runbooks.remediate.executor import interrupted_step  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs

    halted = progress.halted or {}
    if halted.get("cut") and halted.get("broker_id") is not None:
        return (f"its run {halted.get('cut_run') or halted.get('run_id')} was cut during broker {halted.get('broker_id')}'s step "
                f"(down from {halted.get('down_since')})")
    if halted:
        return f"halted: {halted.get('reason')}"
    step = interrupted_step(Ledger(store.db, record_id).entries())
    if step is not None:
        return (f"its run {step.get('run_id')} was cut during broker {step.get('broker_id')}'s step (stop command sent at "
                f"{step.get('at')}): the broker is started if down, gated only if registered again since that stop, "
                "restarted if still registered as before it")
    return "its last run ended without a halt"


def read_cluster(config, nothing: str):
    """The cluster's snapshot from its ZooKeeper; an ensemble that does not answer stops the task naming it (which
    servers, which connection, how long it waited) -- never a bare ``KazooTimeoutError`` traceback."""
    from kafka_runbooks.detect.observe import zookeeper_unreachable  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.detect.snapshot import read_snapshot  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # keeps DAG parsing fast: kazoo loads when a task runs

    hook = ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s)
    try:
        with hook.session() as zk:
            return read_snapshot(zk, config.name)
    except Exception as exc:  # noqa: BLE001 - an unreachable ensemble is said; anything else is raised as it is
        if not zookeeper_unreachable(exc):
            raise
        raise Stop(f"cluster {config.name!r}: its ZooKeeper ensemble {hook.hosts}{hook.chroot or ''} (connection "
                   f"{config.zk_conn_id!r}) did not answer ({type(exc).__name__}: {exc}; timeout "
                   f"{config.capture.connect_timeout_s:g} s); {nothing}") from exc


def render_plan(plan, digest: str) -> str:
    lines = [f"{plan.kind} of {plan.cluster}: order {list(plan.broker_order)}, digest {digest[:16]}"
             + (f", already done {list(plan.completed)}" if plan.completed else "")]
    for i, s in enumerate(plan.steps, 1):
        lines.append(f"  {i}. broker {s.broker_id}: {s.reason}")
        shown = s.blast_radius[:15]
        lines += [f"       down: {e}" for e in shown] + ([f"       ... {s.partitions_touched - len(shown)} more (every one on the "
                                                            "incident page)"] if s.partitions_touched > len(shown) else [])
        lines += [f"       REFUSED: {r}" for r in s.refusals]
        lines += [f"       ... and {s.refusals_total - len(s.refusals)} more reason(s)"] if s.refusals_total > len(s.refusals) else []
    lines += [f"  refused: {r}" for r in plan.refusals if not r.startswith("broker ")]
    lines += [f"  warning: {w}" for w in plan.warnings]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------------------- plan

def canary_of(request: Request, config) -> bool:
    """The run's canary switch: the form's for a rolling restart, the cluster's otherwise."""
    return config.canary.enabled if request.canary is None or request.kind == INCIDENT_RESTART else truthy(request.canary)


def brokers_of(request: Request, config, store, task: Task) -> tuple[str | None, list[int], list[int]]:
    """(the record, the brokers asked for, those an earlier run of the same roll already restarted)."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.executor import interrupted_step  # keeps DAG parsing fast: the engine loads when a task runs

    if request.incident:
        record_id = request.incident["incident_id"]
        ledger = L.Ledger(config, record_id)
        progress = ledger.progress()
        done = list(progress.completed) if progress.resumable or interrupted_step(ledger.entries()) is not None else []
        return record_id, [int(b) for b in request.incident["broker_ids"]], done
    if not resume_wanted(request.resume):
        return None, [int(b) for b in (request.broker_ids or [])] or sorted(config.hosts), []
    named = resume_target(request.resume)
    found = find_resumable_roll(store, config.name, named)
    if found is None:
        raise Stop(f"resume: roll {named!r} is not an open, halted rolling restart of cluster {config.name!r}" if named else
                   f"resume: cluster {config.name!r} has no halted rolling restart to resume")
    record, progress = found
    requested = list(progress.requested or record.get("broker_ids") or [])
    task.log.warning("resuming roll %s: requested %s, already done %s; %s", record["id"], requested, list(progress.completed),
                     how_it_ended(store, record["id"], progress))
    if request.broker_ids and sorted(int(b) for b in request.broker_ids) != sorted(requested):
        task.log.warning("resume continues the halted roll's brokers %s; the form's brokers %s are ignored", requested,
                         list(request.broker_ids))
    return record["id"], requested, list(progress.completed)


def waiver_evidence(config, snapshot, findings):
    """The not-serving waiver's evidence: this run's stuck-thread / stalled-request findings AND a direct check failing
    now. Returns (evidence, the checks taken)."""
    from kafka_runbooks.remediate.executor import check_brokers  # keeps DAG parsing fast: the clients load when a task runs
    from kafka_runbooks.remediate.safety import NOT_SERVING_FINDING_KINDS, not_serving_evidence  # keeps DAG parsing fast: loaded when a task runs

    suspects = sorted({b for f in findings if f.kind in NOT_SERVING_FINDING_KINDS for b in f.broker_ids})
    checks = check_brokers(config, snapshot, suspects)
    return not_serving_evidence(checks.values(), findings), checks


def compute_plan(config, snapshot, requested, completed, *, kind: str, waived=None, checked=None, record_id=None,
                 canary: bool = False, records=(), static=None, unread=None, log=None,
                 open_record: Callable[[], str] | None = None):
    """The restart plan on ``snapshot``: the serving evidence, the version the brokers report, the safety settings.
    ``open_record``: opens the plan's record once the evidence is in (a new roll). Returns (plan, settings, notes)."""
    from kafka_runbooks.hooks.kafka import KafkaHook  # keeps DAG parsing fast: confluent_kafka loads when a task runs
    from kafka_runbooks.remediate.executor import resume_decisions, serving_evidence  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.host import unreachable_hosts  # keeps DAG parsing fast: paramiko loads when a task runs
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.plan import plan_restart, safety_settings  # keeps DAG parsing fast: loaded when a task runs

    todo = [b for b in requested if b not in completed]
    # what a resume does with a step an earlier run left unfinished (gates only, start, restart): the plan says it
    resumed = resume_decisions(Ledger(config, record_id).entries(), snapshot, todo) if record_id is not None else {}
    not_serving, unresponsive, checked, notes = serving_evidence(config, snapshot, todo, waived or {}, list(records),
                                                                 *([checked] if checked is not None else []))
    for b, c in sorted((checked or {}).items()):
        if log is not None:
            log.info("direct check of broker %s: %s", b, "ok" if c.ok else c.error)
    if open_record is not None:
        record_id = open_record()
    version = KafkaHook(config.kafka_conn_id, listener=config.listener).kafka_version(
        snapshot.brokers, config.health.kafka_probe_timeout_s, config.kafka_version)  # read from the brokers
    notes = list(notes) + [f"Kafka version as the brokers report it: {version.describe()}"] + list(version.notes)
    settings = safety_settings(config, static, unread, version)
    plan = plan_restart(snapshot, requested, config, kind=kind, not_serving=not_serving, settings=settings,
                        completed=completed, roll_id=record_id, canary_topic=config.canary.topic if canary else None,
                        unresponsive=unresponsive, unreachable=unreachable_hosts(config, [b for b in todo if b in config.hosts]),
                        resumed=resumed)
    return plan, settings, notes


def plan(request: Request, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Computes the plan on fresh state, records it (the ledger's ``planned`` entry, the plan's detail, the record, the
    audit) and shows it; returns the reference to it (``plans.output``). A refused plan stops here (nothing is asked,
    nothing changes; a rolling restart that did nothing is closed) -- a dry run's too, which records nothing."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.digest import plan_digest  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.executor import unconfigured_replicas  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.host import static_config_state  # keeps DAG parsing fast: paramiko loads when a task runs

    config = config_of(request.incident["cluster"] if request.incident else request.cluster)
    store = IncidentStore(config)
    canary = canary_of(request, config)
    # this run's analysis, as the report task recorded it on the incident (its output is only a reference to it)
    findings = (finding_records.analysis_of(finding_records.incident_record(config, request.incident), request.report)
                if request.incident and request.report else ())
    static, unread = static_config_state(config)
    snapshot = read_cluster(config, "nothing was planned or changed")
    unread.update(unconfigured_replicas(config, snapshot))
    notes = [f"broker {b}: {why} (its min.insync.replicas is unknown: stops that depend on it are refused)"
             for b, why in sorted(unread.items())]
    for note in notes:
        task.log.warning("%s", note)
    record_id, requested, completed = brokers_of(request, config, store, task)
    waived, checked = waiver_evidence(config, snapshot, findings) if request.kind == INCIDENT_RESTART else ({}, {})

    def open_record() -> str:  # a new roll's record, opened once the evidence is in (as before: nothing opened on a failure)
        return store.open(cluster=config.name, broker_ids=requested, reason=str(request.reason or "rolling restart"),
                          trigger={"kind": ROLLING_RESTART, "requested": requested, "canary": canary,
                                   "started_by": task.starter}, opened_by=task.starter or task.actor)["id"]

    the_plan, _, more = compute_plan(config, snapshot, requested, completed, kind=request.kind, waived=waived, checked=checked,
                                     record_id=record_id, canary=canary, records=store.records(config.name), static=static,
                                     unread=unread, log=task.log,
                                     open_record=open_record if record_id is None and not request.dry_run else None)
    digest = plan_digest(the_plan)
    from kafka_runbooks.runbook.summary import show_plan  # keeps DAG parsing fast: loaded when a task runs

    shown = show_plan(task, config, the_plan, digest, request.dry_run, render_plan(the_plan, digest))
    if request.dry_run:
        if the_plan.refused:  # as loud as a real refusal (issue 32 point 2): the plan task fails, the note and the close say why
            raise Refusal(f"dry run: would be {shown['summary']}; nothing was asked and nothing changed (every reason is in the "
                       "plan above)")
        return plans.output(the_plan, digest, dry_run=True, order=list(the_plan.broker_order),
                            refusals=list(the_plan.refusals))
    gates = list(GATES) + ([CANARY_GATE] if canary else [])
    record_plan(task, config, store, the_plan, digest, notes + more, findings, canary=canary, gates=gates,
                report=(request.report or {}).get("report"))
    if the_plan.refused:
        if request.kind == ROLLING_RESTART and not completed:
            # nothing was done and nothing can be: the roll's record ends here (an incident stays open)
            store.close(the_plan.roll_id, actor=task.starter or task.actor, resolution="plan refused; nothing was changed")
        raise Refusal(f"{shown['summary']}; nothing changed (every reason is in the plan above and on the incident page)")
    return plans.output(the_plan, digest, notes=notes + more)


def record_plan(task: Task, config, store, plan, digest: str, notes, findings, *, canary: bool, gates, report) -> None:
    """The plan where the approval and the execution read it: its detail, the ledger's ``planned`` entry (with the
    findings, the canary switch, the gates and the report the approval shows), the record and its audit."""
    from kafka_runbooks.state.plans import PlanDetails  # keeps DAG parsing fast: loaded when a task runs

    PlanDetails(config).put(plan.roll_id, digest, plan)  # every line and refusal; the plan carries its fingerprint
    plans.record(config, plan, digest, task.run_id, canary=canary, gates=gates, report=report,
                 findings=findings, starter=task.starter, notes=list(notes))
    store.update(plan.roll_id, plan=plan.to_dict(), plan_digest=digest)
    store.audit(plan.roll_id, actor=task.starter or task.actor, action="plan_restart", outcome="refused" if plan.refused else "ok",
                details={"refusals": list(plan.refusals), "plan": plan.to_dict(), "digest": digest, "notes": list(notes),
                         "run_id": task.run_id})


# ------------------------------------------------------------------------------------------------------ execute

def use_approval(task: Task, plan, config, nothing: str, *, canary: bool, secret_of: Callable[[str], bytes]):
    """Verifies that a sealed Approve of THIS plan -- and of everything that will run for it, built from the
    configuration now (``digest.execution_binding``, with the recorded canary switch) -- in THIS run exists, is not
    older than ``approvals.max_age_s`` and has not been used, and uses it (recorded in the ledger and the audit).
    Returns (decision, approver); Stop saying ``nothing`` and what changed otherwise. ``secret_of``: the seal key of a
    connection id (``approvals.secret_conn_id``). Every change's execute task calls this before it changes anything."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.approvals import ApprovalError, Decision, usable_refusals  # keeps DAG parsing fast
    from kafka_runbooks.remediate.digest import approval_digest, execution_binding  # keeps DAG parsing fast
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs

    store = IncidentStore(config)
    ledger = Ledger(config, plan.roll_id)
    binding = execution_binding(config, plan, canary)
    digest = approval_digest(plan, binding)
    try:
        secret = secret_of(config.approvals.secret_conn_id)
    except ApprovalError as exc:
        raise Stop(f"{exc}; {nothing}") from exc
    with ledger.locked():
        refusals, entry = usable_refusals(ledger.entries(), secret=secret, dag_id=task.dag_id, run_id=task.run_id,
                                          plan_digest=digest, approvers=config.approvals.approvers,
                                          names=config.approvals.approver_names, plan=plan.to_dict(), binding=binding,
                                          max_age_s=config.approvals.max_age_s, now=store.db.now(),  # the database's clock
                                          valid_until=(plan.conditions or {}).get("deadline_at"))
        if not refusals:
            decision = Decision.from_payload(entry["decision"])
            ledger.append("approval_used", task.run_id, _locked=True, dag_id=task.dag_id, approval_try=decision.try_number,
                          task_id=task.task_id, by_try=task.try_number, digest=digest)
    if refusals:
        store.audit(plan.roll_id, actor=task.actor, action="execute_plan", outcome="refused",
                    details={"refusals": refusals, "run_id": task.run_id, "try": task.try_number})
        raise Stop(f"no usable approval; {nothing}:\n" + "\n".join(f"- {r}" for r in refusals))
    approver = decision.user_name or decision.user_id or "unknown"
    store.audit(plan.roll_id, actor=approver, action="approval_verified", outcome="ok",
                details={"digest": digest, "approval_try": decision.try_number, "run_id": task.run_id, "by_try": task.try_number,
                         "started_by": decision.started_by, "automatic_run": decision.automatic is not None})
    return decision, approver


def approved(plan_output: Any, task: Task, nothing: str, secret_of: Callable[[str], bytes],
             config_of: Callable[[str], Any] = plans.load_config):
    """(the recorded plan, decision, approver) of a change's execute task: the plan the plan task recorded under the
    digest its output names (whatever else the output carries is not read) and a usable approval of it."""
    recorded = plans.load(plan_output, nothing, config_of)
    decision, approver = use_approval(task, recorded.plan, recorded.config, nothing, canary=recorded.canary,
                                      secret_of=secret_of)
    return recorded, decision, approver


def fresh_plan(config, approved_plan, canary: bool = False):
    """The approved plan computed again on the cluster as it is now -- the same evidence gathered the same way
    (static configs, the open incidents, direct checks of every holder and of every waived broker) -- for
    ``executor.plan_changed``."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.executor import unconfigured_replicas  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.host import static_config_state  # keeps DAG parsing fast: paramiko loads when a task runs
    from kafka_runbooks.runbook.cluster import read_snapshot_of  # keeps DAG parsing fast: kazoo loads when a task runs

    static, unread = static_config_state(config)
    snapshot = read_snapshot_of(config)
    unread.update(unconfigured_replicas(config, snapshot))
    plan, _, _ = compute_plan(config, snapshot, list(approved_plan.requested), list(approved_plan.completed),
                              kind=approved_plan.kind, waived=approved_plan.not_serving, record_id=approved_plan.roll_id,
                              canary=canary, records=IncidentStore(config).records(config.name), static=static, unread=unread)
    return plan


def execute(plan_output: Any, task: Task, secret_of: Callable[[str], bytes],
            config_of: Callable[[str], Any] = plans.load_config, fresh: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Runs the approved restart plan through the engine, after checking it against fresh state (``fresh``: the plan
    computed again now) and the waiver against the findings recorded with it. Stop when refused or halted."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import executor as E  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    recorded, decision, approver = approved(plan_output, task, "nothing restarted", secret_of, config_of)
    config, plan = recorded.config, recorded.plan
    changed = L.waiver_refusals(plan, recorded.findings)
    if not changed:
        changed = E.plan_changed(plan, (fresh or fresh_plan)(config, plan, canary=recorded.canary))
    if changed:
        reason = L.Reason("plan_changed", "; ".join(changed))
        L.Ledger(config, plan.roll_id).append(L.REFUSED, task.run_id, state=L.StepState.REFUSED.value, reason=reason.sentence,
                                              **reason.to_dict())
        IncidentStore(config).audit(plan.roll_id, actor=approver, action="execute_plan", outcome="refused",
                                    details={"refusals": changed, "run_id": task.run_id, "code": reason.code})
        raise Stop("\n".join(changed) + "; nothing restarted")
    execution = E.Execution(
        config=config, plan=plan, record_id=plan.roll_id, dag_id=task.dag_id, run_id=task.run_id, task_id=task.task_id,
        try_number=task.try_number, approver=approver, starter=decision.starter,
        canary=bool((decision.binding or {}).get("canary", {}).get("enabled")),
    )
    try:
        return E.run(execution)
    except (E.Refused, E.Halted) as exc:
        raise Stop(str(exc)) from exc


# -------------------------------------------------------------------------------------------------------- close

def replay_journal(config, ledger, store) -> int:
    """Writes what an execute task on this worker kept in its journal (``remediate/ledger.Journal``) while the state
    database failed; the rest stays in the file (said in the log)."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    try:
        return L.Journal.of(config, ledger.record_id).replay(L.store_writer(ledger, store))
    except Exception:  # noqa: BLE001 - the journal stays; the close goes on from what the database has
        return 0


def refused_in(entries: Sequence[dict[str, Any]], run_id: str) -> dict[str, Any] | None:
    """The ``refused`` entry of ``run_id`` (its execution ended before any stop), when it is its last word."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    mine = [e for e in entries if e.get("run_id") == run_id and e.get("event") in (L.REFUSED, L.HALTED, L.COMPLETED)]
    return mine[-1] if mine and mine[-1].get("event") == L.REFUSED else None


def across_runs(entries: Sequence[dict[str, Any]]) -> tuple[list[int], str]:
    """(every broker restarted by the roll, in order, across all its runs; what cut a run, or "")."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    restarted = list(L.progress(entries).completed)
    said = []
    for e in (e for e in entries if e.get("event") == L.HALTED and e.get("cut")):
        where = (f"during broker {e.get('broker_id')}'s step (down from {e.get('down_since')})" if e.get("broker_id") is not None
                 else "between steps")
        said.append(f"run {e.get('cut_run') or e.get('run_id')} was cut {where} and resumed")
    return restarted, "; ".join(said)


def interrupted_execution(entries: Sequence[dict[str, Any]], run_id: str) -> str | None:
    """Why the roll must count as halted when ``run_id``'s execution used its approval and then recorded no end (no
    step failure, refusal, halt or completion): its task died with its worker (SIGKILL, a lost machine) and Airflow
    failed it. None when the execution ended by itself or never started."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    mine = [e for e in entries if e.get("run_id") == run_id]
    if not any(e.get("event") == L.APPROVAL_USED for e in mine):
        return None
    if any(e.get("event") in (L.STEP_FAILED, L.HALTED, L.COMPLETED, L.REFUSED) for e in mine):
        return None
    done = {e.get("broker_id") for e in mine if e.get("event") == L.STEP_DONE}
    open_steps = [e.get("broker_id") for e in mine if e.get("event") == L.STEP_STARTED and e.get("broker_id") not in done]
    where = f"broker {open_steps[-1]}'s restart had started and not finished" if open_steps else "between steps"
    return (f"the execution of run {run_id} ended without recording an outcome ({where}): its task was failed by Airflow, "
            "its worker lost or killed; resume re-plans what is left on fresh state")


@dataclass(frozen=True)
class Outcome:
    """What the close task was given: the plan task's output, the approval's decision, the execution's result, and
    what the plan task pushed when its plan was refused."""

    plan_output: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None


def close(outcome: Outcome, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Last task of a rolling restart (runs whatever happened): closes the roll's record when every step is done;
    otherwise says why on it (rejected, refused: closed; halted, cut: left open, resumable) and stops."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook import summary  # keeps DAG parsing fast: loaded when a task runs

    out = outcome.plan_output or {}
    ref = out.get("plan") if isinstance(out.get("plan"), dict) else {}
    if out.get("dry_run"):
        return {"status": "dry run", "order": list(out.get("order") or []), "refusals": list(out.get("refusals") or [])}
    if not ref and outcome.refused:
        return summary.close_refused(task, outcome.refused)
    record_id = ref.get("roll_id")
    if not record_id:
        raise Stop("the plan was never computed (see the plan task)")
    config = config_of(ref["cluster"])
    store = IncidentStore(config)
    ledger = Ledger(config, record_id)
    replay_journal(config, ledger, store)  # records the execute task kept locally while the database failed
    return _close_roll(outcome, task, config, store, ledger, ref.get("kind") or ROLLING_RESTART)


def _close_roll(outcome: Outcome, task: Task, config, store, ledger, kind: str) -> dict[str, Any]:
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook import summary  # keeps DAG parsing fast: loaded when a task runs

    record_id, entries = ledger.record_id, ledger.entries()
    progress = L.progress(entries)
    result, decision = outcome.result, outcome.decision or {}
    if progress.done and isinstance(result, dict):
        restarted, cut = across_runs(entries)
        store.close(record_id, actor=task.actor, resolution=f"restarted {restarted} (in order, across every run of this roll), "
                                                            f"approved by {result.get('approved_by')}; every gate passed"
                                                            + (f"; {cut}" if cut else ""))
        metrics.roll_finished(result)
        text = summary.finished(task, config, record_id, kind, {**result, "restarted": restarted})
        return {"status": "closed", "record_id": record_id, "restarted": restarted, "summary": text}
    choice = decision.get("chosen_options")
    refused = list(decision.get("refusals") or [])
    if refused and not progress.completed and not progress.resumable:
        # an answer that did not count (four eyes, a changed plan): nothing ran; the record ends saying why
        who = (decision.get("responded_by_user") or {}).get("name") or "nobody"
        store.close(record_id, actor=task.actor, resolution=f"approval by {who} refused: {'; '.join(refused)}; nothing was changed")
        metrics.plan_refused(refused)
        raise Stop(f"roll {record_id} refused: approval by {who} refused: {'; '.join(refused)}; nothing was changed")
    if choice and choice[0] != "Approve":
        who = (decision.get("responded_by_user") or {}).get("name") or "nobody (timed out)"
        store.close(record_id, actor=task.actor, resolution=f"{choice[0]} by {who}: nothing was changed")
        return {"status": choice[0].lower(), "record_id": record_id}
    raise _not_complete(task, config, store, ledger, entries, progress)


def _not_complete(task: Task, config, store, ledger, entries, progress) -> Stop:
    """The roll did not finish: a refusal (closed unless a broker was done), a cut step (said, resumable), a lost
    execution, or a halt. Returns the Stop that says which."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.executor import interrupted_step, interruption_report  # keeps DAG parsing fast
    from kafka_runbooks.runbook.cluster import cluster_now  # keeps DAG parsing fast: kazoo loads when a task runs

    record_id, run_id, actor = ledger.record_id, task.run_id, task.actor
    refusal = refused_in(entries, run_id)
    if refusal is not None:
        why = f"refused: {refusal.get('reason')}; nothing stopped"
        if not progress.completed:
            store.close(record_id, actor=actor, resolution=why)
        else:
            store.update(record_id, note=f"{why} by run {run_id}; brokers done before: {list(progress.completed)}; "
                                         "resumable with resume=true")
        return Stop(f"roll {record_id} {why}")
    step = interrupted_step(entries)
    if step is not None:
        # the worker died in the middle of a step: say exactly what state the cluster was left in, and make it resumable
        lines = interruption_report(step, cluster_now(config), config.hosts)
        ledger.append(L.HALTED, run_id, broker_id=step.get("broker_id"), phase="interrupted", code="worker_lost",
                      reason=lines[0], state=lines[1:-1], at_step=step.get("broker_id"), cut=True,
                      step_state=L.StepState.CUT.value, down_since=step.get("at"), cut_run=step.get("run_id"))
        store.audit(record_id, actor=actor, action="halt", outcome="failed",
                    details={"broker_id": step.get("broker_id"), "phase": "interrupted", "code": "worker_lost",
                             "reason": lines[0], "state": lines[1:-1]})
        store.update(record_id, note="halted: " + "; ".join(lines))
        return Stop(f"roll {record_id} is not complete:\n" + "\n".join(lines))
    lost = interrupted_execution(entries, run_id)
    if lost and not progress.resumable:  # the executor died with its worker between steps: nothing recorded how it ended
        ledger.append(L.HALTED, run_id, reason=lost, at_step=None, code="worker_lost", cut=True)
        store.audit(record_id, actor=actor, action="halt", outcome="recorded", details={"reason": lost, "run_id": run_id})
        progress = ledger.progress()
    why = (progress.halted or {}).get("reason") or (
        "the run stopped before executing: nothing was changed (see the plan and approve tasks)" if not progress.completed
        else "the run stopped between steps (see the task logs)")
    store.update(record_id, note=f"halted: {why}; resumable with resume=true" if progress.resumable else f"stopped: {why}")
    return Stop(f"roll {record_id} is not complete: {why}")


def recovered(incident: dict[str, Any], task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any] | None:
    """The whole cluster is back (the restarted brokers registered, no under-replicated or offline partition): when and
    which brokers; None (said in the log) while it is not."""
    from kafka_runbooks.detect.detectors import detect  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.detect.observe import take_snapshot  # keeps DAG parsing fast: the clients load at run time

    config = config_of(incident["cluster"])
    snapshot = take_snapshot(config, probe_hosts=False)
    missing = sorted(set(incident["broker_ids"]) - snapshot.live_broker_ids)
    problems = [f for f in detect(snapshot) if f.kind in ("under_replicated_partitions", "offline_partitions")]
    if missing or problems:
        task.log.info("not yet recovered: unregistered brokers %s; %s", missing, [f.summary for f in problems])
        return None
    return {"verified_at": snapshot.taken_at, "brokers": sorted(snapshot.live_broker_ids)}
