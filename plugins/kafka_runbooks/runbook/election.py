"""The deferred preferred-replica election, as the application runs it (dags/kafka_preferred_election.py, issue 7):
plan -> approval (``runbook/approval.py``) -> wait (deferred: the triggerer re-checks the recorded plan's conditions)
-> elect in batches under the maintenance lock (``remediate/election_run.py``) -> close. And the scheduled path: which
clusters' ``election.schedule`` fires now, and whether each has anything to move. Decisions in
``remediate/election.py`` and ``remediate/election_schedule.py``; on-call's page runbooks/preferred-election.md."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kafka_runbooks import metrics
from kafka_runbooks.runbook import plans
from kafka_runbooks.runbook.errors import Refusal, Stop
from kafka_runbooks.runbook.task import Task
from kafka_runbooks.truth import truthy

GATES = (
    "before each batch, on fresh state: the quiet window open, the target registered with a session older than stable_s, "
    "in the ISR of the batch, answering a direct check; the controller present; ZooKeeper's metadata readable",
    "ZooKeeper says every partition of the batch is led by its preferred replica",
    "every broker's own metadata (asked of each broker alone) agrees",
    "a canary produce (acks=all) and consume through every leader of the canary topic succeeds",
    "every broker's request queue was read and is not saturated (JmxTool; RequestQueueSize against queued.max.requests; "
    "unknown never passes)",
    "after __consumer_offsets batches: the new coordinators answer OffsetFetch (their groups' offsets loaded)",
)
DRY_RUN_WORDS = ("dry-run", "dry_run", "dryrun", "plan")


@dataclass(frozen=True)
class Request:
    cluster: str
    broker_ids: Sequence[Any] = ()
    reason: Any = ""
    mode: Any = "execute"
    resume: Any = False

    @property
    def dry_run(self) -> bool:
        return str(self.mode).strip().lower() in DRY_RUN_WORDS


def gates_of(config) -> list[str]:
    return [g for g in GATES if (config.election.canary or "canary" not in g) and (config.leadership.jmx or "JmxTool" not in g)]


def _resumed(request: Request, config, store, task: Task) -> tuple[str | None, list[int], list[str]]:
    """(the record, the brokers, the partitions already elected): the halted election a ``resume`` continues."""
    from kafka_runbooks.remediate import election as E  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    brokers = [int(b) for b in (request.broker_ids or [])]
    if not truthy(request.resume):
        return None, brokers, []
    found = L.find_resumable(store, config.name, E.KIND)
    if found is None:
        raise Stop(f"resume: cluster {config.name!r} has no halted preferred election to resume")
    record, progress = found
    requested = list(progress.requested or ())
    if brokers and sorted(brokers) != sorted(requested):
        task.log.warning("resume continues the halted election's brokers %s; the form's brokers %s are ignored", requested, brokers)
    task.log.warning("resuming election %s: %d partition(s) already elected and converged (not elected again); halted: %s",
                     record["id"], len(progress.partitions_done), (progress.halted or {}).get("reason", "")[:500])
    return record["id"], requested, list(progress.partitions_done)


def plan(request: Request, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Reads the cluster fresh, computes the batches and the conditions, records them (the election's own record) and
    shows them; returns the reference to the recorded plan. Dry run: shows and stops. A refused plan stops here."""
    from kafka_runbooks import clock  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.hooks.kafka import KafkaHook  # keeps DAG parsing fast: confluent_kafka loads when a task runs
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import election as E  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.digest import plan_digest  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.cluster import read_snapshot_of  # keeps DAG parsing fast: kazoo loads when a task runs

    config = config_of(request.cluster)
    store = IncidentStore(config)
    record_id, brokers, elected = _resumed(request, config, store, task)
    snapshot = read_snapshot_of(config)
    # every batch is checked against each broker's own metadata: a cluster where it cannot be read is refused now
    kafka = KafkaHook(config.kafka_conn_id, listener=config.listener)
    views = kafka.metadata_views(snapshot.brokers, config.leadership.view_timeout_s)
    deadline_at = clock.iso(E.deadline(clock.now(), config.election))
    if record_id is None and not request.dry_run:
        record_id = store.open(cluster=config.name, broker_ids=brokers or sorted(config.hosts),
                               reason=str(request.reason or "preferred-replica election"),
                               trigger={"kind": E.KIND, "requested": brokers, "started_by": task.starter},
                               opened_by=task.starter or task.actor)["id"]
    version = kafka.kafka_version(snapshot.brokers, config.health.kafka_probe_timeout_s, config.kafka_version)  # read from the brokers
    the_plan = E.plan_election(snapshot, config, brokers=brokers, roll_id=record_id, deadline_at=deadline_at, elected=elected,
                               views=views, version=version)
    digest = plan_digest(the_plan)
    task.log.info("plan (%s), digest %s:\n%s", "dry run" if request.dry_run else "to be approved", digest[:16],
                  "\n".join([f"  {b.reason}: {', '.join(b.partitions)}" for b in the_plan.batches]
                            + [f"  refused: {r}" for r in the_plan.refusals] + [f"  conditions: {dict(the_plan.conditions)}"]))
    if request.dry_run:
        return _dry_run(task, the_plan, digest)
    resumed = bool(elected) or truthy(request.resume)
    plans.record(config, the_plan, digest, task.run_id, canary=config.election.canary, gates=gates_of(config),
                 starter=task.starter, resumed=resumed)
    store.update(record_id, plan=the_plan.to_dict())
    store.audit(record_id, actor=task.starter or task.actor, action="plan_election", outcome="refused" if the_plan.refused else "ok",
                details={"refusals": list(the_plan.refusals), "plan": the_plan.to_dict(), "digest": digest, "run_id": task.run_id,
                         "resume": truthy(request.resume), "already_elected": elected})
    if the_plan.refused:
        _refused(task, store, the_plan)
    return plans.output(the_plan, digest)


def _refused(task: Task, store, plan, dry_run: bool = False) -> None:
    """A refused plan: its one-line summary pushed for the close task (it has no plan to read), the record closed."""
    from kafka_runbooks.remediate.progress import refusal_summary  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.summary import REFUSED_KEY  # keeps DAG parsing fast: loaded when a task runs

    one_line = refusal_summary(plan)
    task.push(REFUSED_KEY, {"summary": one_line, "record_id": plan.roll_id, "cluster": plan.cluster, "kind": plan.kind,
                            "refusals": len(plan.refusals), **({"dry_run": True} if dry_run else {})})
    if dry_run:
        task.log.warning("DRY RUN: would be %s", one_line)
        raise Refusal(f"dry run: election would be {one_line}; nothing was asked and nothing changed")
    store.close(plan.roll_id, actor=task.starter or task.actor,
                resolution="plan refused; nothing (further) was changed: " + "; ".join(plan.refusals)[:1000])
    raise Refusal(f"election {one_line}; nothing changed (every reason is in the plan above)")


def _dry_run(task: Task, plan, digest: str) -> dict[str, Any]:
    from kafka_runbooks.remediate.progress import election_plan_note  # keeps DAG parsing fast: loaded when a task runs

    task.note(election_plan_note(plan, digest, dry_run=True))  # the plan, readable in the UI
    if plan.refused:  # as loud as a real refusal (issue 32 point 2): this task fails, the close task says why
        _refused(task, None, plan, dry_run=True)
    return plans.output(plan, digest, dry_run=True, batches=[list(b.partitions) for b in plan.batches],
                        refusals=list(plan.refusals))


def waiting_for(plan_output: Any, nothing: str = "nothing elected",
                config_of: Callable[[str], Any] = plans.load_config) -> tuple[Any, dict[str, Any], float, float]:
    """What the wait task defers on, from the recorded plan: (plan, its conditions, the poll interval, the deadline in
    seconds)."""
    recorded = plans.load(plan_output, nothing, config_of)
    plan, config = recorded.plan, recorded.config
    deadline_s = float(plan.conditions.get("deadline_s") or config.election.deadline_s) + 3600
    return plan, dict(plan.conditions), config.election.poll_s, deadline_s


def waited(plan_output: Any, event: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """The wait's end (the trigger's event), audited; Stop (recorded ``gave_up``) when it was not ready."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs

    recorded = plans.load(plan_output, "nothing elected", config_of)
    plan, config = recorded.plan, recorded.config
    status = (event or {}).get("status")
    IncidentStore(config).audit(plan.roll_id, actor=task.actor, action="election_wait",
                                outcome="ok" if status == "ready" else "gave_up", details=dict(event or {}))
    if status != "ready":
        reason = (event or {}).get("reason") or f"unexpected event {event!r}"
        Ledger(config, plan.roll_id).append("gave_up", task.run_id, reason=reason)
        raise Stop(reason)
    task.log.info("ready after %s check(s); first waited for: %s", event.get("checks"), event.get("waited_for"))
    return dict(event)


def execute(plan_output: Any, task: Task, secret_of: Callable[[str], bytes],
            config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Uses the approval (sealed, this plan, this run, once), then runs the batches (``election_run.run``)."""
    from kafka_runbooks.remediate import election_run as R  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.runbook.restart import approved  # keeps DAG parsing fast: loaded when a task runs

    recorded, decision, approver = approved(plan_output, task, "nothing elected", secret_of, config_of)
    plan = recorded.plan
    ex = R.Execution(config=recorded.config, plan=plan, record_id=plan.roll_id, dag_id=task.dag_id, run_id=task.run_id,
                     task_id=task.task_id, try_number=task.try_number, approver=approver, starter=decision.starter,
                     canary=recorded.canary)
    try:
        result = R.run(ex)
    except (R.Refused, R.Halted) as exc:
        raise Stop(str(exc)) from exc
    task.log.info("elected %d partition(s) in %d batch(es) in %.1f s; canary failures %d (the close task says what is left)",
                  len(result["elected"]), result["batches"], result["wall_s"], result["canary_failures"])
    return result


def close(plan_output: Any, decision: Any, result: Any, refused: Any, task: Task,
          config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Last task (runs whatever happened): closes the election's record with what was done, or says why not."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook import summary  # keeps DAG parsing fast: loaded when a task runs

    out = plan_output if isinstance(plan_output, dict) else {}
    ref = out.get("plan") if isinstance(out.get("plan"), dict) else {}
    if out.get("dry_run"):
        return {"status": "dry run", "batches": list(out.get("batches") or []), "refusals": list(out.get("refusals") or [])}
    if not ref and isinstance(refused, dict):
        return summary.close_refused(task, refused)
    record_id = ref.get("roll_id")
    if not record_id:
        raise Stop("the plan was never computed (see the plan task)")
    config = config_of(ref["cluster"])
    store = IncidentStore(config)
    if isinstance(result, dict) and result.get("elected") is not None:
        store.close(record_id, actor=task.actor, resolution=f"preferred leadership restored for {len(result['elected'])} partition(s) "
                                                            f"in {result.get('batches')} batch(es), approved by {result.get('approved_by')}; "
                                                            f"canary failures {result.get('canary_failures')}")
        metrics.election_finished(result)
        requested = plans.load(plan_output, "nothing to close", config_of).plan.requested
        text = summary.election_finished(task, config, record_id, result, requested or ())
        return {"status": "closed", "record_id": record_id, "elected": result["elected"], "summary": text}
    choice = decision.get("chosen_options") if isinstance(decision, dict) else None
    if choice and choice[0] != "Approve":
        store.close(record_id, actor=task.actor, resolution=f"{choice[0]}: nothing was changed")
        return {"status": choice[0].lower(), "record_id": record_id}
    raise _not_done(task, config, store, record_id)


def _not_done(task: Task, config, store, record_id: str) -> Stop:
    """The election did not complete: gave up (closed), halted (resumable) or stopped; a batch's pending znode cleared."""
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs

    entries = Ledger(config, record_id).entries()
    cleared = clear_pending_election(config, entries)
    if cleared:
        task.log.warning("%s", cleared)
        store.audit(record_id, actor=task.actor, action="election_znode", outcome="checked", details={"what": cleared})
    last = next((e for e in reversed(entries) if e.get("event") in ("gave_up", "halted", "refused")), None)
    why = (last or {}).get("reason") or "the run stopped before electing (see the task logs)"
    resumable = Ledger(config, record_id).progress().resumable if not (last and last.get("event") == "gave_up") else False
    if last is not None and last.get("event") == "gave_up":
        store.close(record_id, actor=task.actor, resolution=f"gave up: {why}")
    elif last is not None and last.get("event") == "refused":  # a refusal is a refusal (as the roll's close says it)
        if resumable:  # batches converged before it: the rest may be elected later
            store.update(record_id, note=f"refused: {why}; nothing elected in that batch; resumable with resume=true")
        else:
            store.close(record_id, actor=task.actor, resolution=f"refused: {why}; nothing elected")
        return Stop(f"election {record_id} refused: {why}")
    else:
        store.update(record_id, note=f"halted: {why}; resumable with resume=true" if resumable else f"stopped: {why}")
    return Stop(f"election {record_id} did not complete: {why}")


def clear_pending_election(config, entries) -> str | None:
    """The close of an election whose worker died mid-batch removes the batch's own pending
    /admin/preferred_replica_election (``election_run.clear_interrupted_batch``); what it did, or None."""
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # keeps DAG parsing fast: kazoo loads when a task runs
    from kafka_runbooks.remediate.election_run import clear_interrupted_batch, open_batch  # keeps DAG parsing fast

    if open_batch(entries) is None:
        return None
    try:
        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            return clear_interrupted_batch(zk, entries)
    except Exception as exc:  # noqa: BLE001 - said on the record: on-call must look at the znode
        return (f"a batch's worker died and ZooKeeper could not be read to check /admin/preferred_replica_election "
                f"({type(exc).__name__}: {exc}); check it by hand")


# ------------------------------------------------------------------------------------------------ the schedule

def scheduled(start, end, task: Task, raw=None) -> tuple[list[dict[str, Any]], list[str]]:
    """The scheduled path: every cluster whose ``election.schedule`` fires in (start, end] is checked on its state now;
    skipped with the reason, or returned as the ``kafka_preferred_election`` run to start. Each decision is audited in
    the cluster's ``<cluster>-election-schedule`` record. Returns (the runs to start, the clusters not checked: why)."""
    from kafka_runbooks.config import ConfigError, load_cluster, raw_clusters  # keeps DAG parsing fast: loaded at run time
    from kafka_runbooks.schedules import due_at  # keeps DAG parsing fast: croniter loads when a task runs

    raw = raw_clusters() if raw is None else raw
    starts: list[dict[str, Any]] = []
    errors: list[str] = []
    for name in sorted(raw):
        try:
            config = load_cluster(name, raw)
        except ConfigError as exc:
            errors.append(f"{name}: {exc}")
            continue
        s = config.election
        fire = due_at(s.schedule, s.schedule_timezone, start, end) if s.schedule else None
        if fire is None:  # not a decision on the cluster (not audited: one a look), but said in the task's log
            if s.schedule:
                task.log.info("cluster %s: not due (election.schedule %r %s has no time in this interval)",
                              name, s.schedule, s.schedule_timezone)
            continue
        try:
            started = _decide(config, fire, task)
        except Exception as exc:  # noqa: BLE001 - one unreadable cluster does not stop the others
            _audit_schedule(config, task, "failed", {"fire_at": fire.isoformat(), "error": f"{type(exc).__name__}: {exc}"})
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        if started:
            starts.append(started)
    task.log.info("data interval %s .. %s: starting %s", start, end, [x["conf"]["cluster"] for x in starts] or "nothing")
    return starts, errors


def _decide(config, fire, task: Task) -> dict[str, Any] | None:
    import dataclasses

    from kafka_runbooks.remediate.election_schedule import imbalance_summary, skip_reason  # keeps DAG parsing fast
    from kafka_runbooks.remediate.host import read_static_configs  # keeps DAG parsing fast: paramiko loads at run time
    from kafka_runbooks.runbook.cluster import read_snapshot_of  # keeps DAG parsing fast: kazoo loads when a task runs

    snapshot = read_snapshot_of(config)
    if any(p.replicas and p.leader != p.replicas[0] for p in snapshot.partitions):
        # something to move: Kafka's threshold is in the controller's server.properties (read over SSH)
        static, _ = read_static_configs(config)
        snapshot = dataclasses.replace(snapshot, static_configs={str(b): dict(p) for b, p in static.items()})
    why = skip_reason(snapshot)
    s = config.election
    seen = {"fire_at": fire.isoformat(), "schedule": s.schedule, "timezone": s.schedule_timezone, "state_at": snapshot.taken_at}
    if why is not None:
        _audit_schedule(config, task, "skipped", {**seen, "reason": why})
        task.log.info("cluster %s: skipped: %s", config.name, why)
        return None
    reason = f"scheduled (election.schedule {s.schedule!r} {s.schedule_timezone}, due {fire.isoformat()}): {imbalance_summary(snapshot)}"
    run_id = f"scheduled__{config.name}__{fire.strftime('%Y%m%dT%H%M')}"
    conf = {"cluster": config.name, "brokers": [], "mode": "execute", "reason": reason[:2000], "resume": False}
    _audit_schedule(config, task, "started", {**seen, "election_run_id": run_id, "conf": conf})
    return {"trigger_run_id": run_id, "conf": conf}


def _audit_schedule(config, task: Task, outcome: str, details: dict[str, Any]) -> None:
    from kafka_runbooks.incidents.store import IncidentExists, IncidentStore  # keeps DAG parsing fast: loaded at run time
    from kafka_runbooks.remediate.election_schedule import AUDIT_SUFFIX  # keeps DAG parsing fast: loaded at run time

    store = IncidentStore(config)
    record_id = f"{config.name}-{AUDIT_SUFFIX}"
    try:  # created once, by whichever dispatcher run comes first
        store.open(cluster=config.name, broker_ids=[], reason="decisions of election.schedule (not an incident)",
                   trigger={"kind": "election_schedule"}, opened_by=task.actor, incident_id=record_id)
    except IncidentExists:
        pass
    else:
        store.close(record_id, actor=task.actor, resolution="the audit trail of the scheduled elections' decisions")
    store.audit(record_id, actor=task.actor, action="scheduled_election", outcome=outcome, details={**details, "run_id": task.run_id})
