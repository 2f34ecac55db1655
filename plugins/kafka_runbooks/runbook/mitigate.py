"""Mitigate first (issue 30): the incident response's first change -- move leadership off the broker that does not
serve, its JVM untouched -- as the application runs it, over ``remediate/demote.py`` (the plan) and
``remediate/demote_run.py`` (the run).

Plan (on fresh state, for the incident's suspects with direct evidence: a failed direct check now AND a finding of an
open incident saying so) -> the same approval as every change (``runbook/approval.py``) -> the move under the
maintenance lock -> after the restart, the original replica order written back. The mitigation has a record of its
own (its ledger must never mark the broker "done" for the restart that follows). Nothing to move, or no evidence:
Skip, saying why (the capture goes on); a refused or halted move stops (the capture goes on too)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from kafka_runbooks import clock

from kafka_runbooks.runbook import plans
from kafka_runbooks.runbook.errors import Skip, Stop
from kafka_runbooks.runbook.task import Task

GATES = (
    "every moved partition led by a registered in-sync broker other than the hung one (ZooKeeper), and each serving "
    "broker's own metadata agreeing",
    "the coordinators of moved __consumer_offsets partitions loaded (an OffsetFetch answered)",
    "a canary produce (acks=all) and consume through every serving leader",
)


def evidence(config, snapshot, suspects: Sequence[int]) -> tuple[dict[int, str], dict[int, Any]]:
    """{broker: evidence} for suspects that fail a direct check now AND that an open incident says are not serving."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.executor import check_brokers  # keeps DAG parsing fast: the clients load when a task runs
    from kafka_runbooks.remediate.safety import incident_evidence  # keeps DAG parsing fast: loaded when a task runs

    said = incident_evidence(IncidentStore(config).records(config.name), snapshot)
    checks = check_brokers(config, snapshot, [b for b in suspects if b in said])
    return ({b: f"direct check failed now ({c.error or c.error_code or 'no answer'}); {said[b]}"
             for b, c in checks.items() if not c.ok}, checks)


def plan(incident: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Plans moving leadership off the incident's not-serving broker; records it under a record of its own; returns the
    reference to it. Skip when off, when nothing is to move or when it is refused."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import demote as D  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.demote_run import to_plan  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.digest import plan_digest  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.cluster import read_snapshot_of  # keeps DAG parsing fast: kazoo loads when a task runs

    incident = incident if isinstance(incident, dict) else {}
    if not incident.get("broker_ids"):
        raise Skip("no suspect broker: nothing to move (a ZooKeeper incident, or none named)")
    config = config_of(incident["cluster"])
    if not config.mitigation.enabled:
        raise Skip(f"mitigation is off for cluster {config.name!r} (mitigation.enabled): leadership stays where it is; the "
                   "capture goes on")
    snapshot = read_snapshot_of(config)
    found, checks = evidence(config, snapshot, [int(b) for b in incident["broker_ids"]])
    for b, c in sorted(checks.items()):
        task.log.info("direct check of broker %s: %s", b, "ok" if c.ok else c.error)
    if not found:
        raise Skip(f"no suspect of {sorted(incident['broker_ids'])} fails a direct check now while an open incident says it "
                   "is not serving: leadership stays where it is; the capture goes on")
    b = sorted(found)[0]
    dplan = D.plan_demote(snapshot, b, found)
    for line in dplan.blast_radius():
        task.log.info("%s", line)
    if dplan.refused:
        raise Skip("moving leadership off broker %s is refused: %s; the capture goes on"
                   % (b, "; ".join(str(r) for r in dplan.refusals)))
    store = IncidentStore(config)
    actor = task.starter or f"dag:{task.dag_id}"
    record = store.open(cluster=config.name, broker_ids=[b], opened_by=actor,
                        reason=f"move leadership off broker {b}, which does not serve (incident {incident.get('incident_id')})",
                        trigger={"kind": D.KIND, "incident_id": incident.get("incident_id"), "broker_ids": [b]})
    the_plan = to_plan(dplan, snapshot, record["id"])
    digest = plan_digest(the_plan)
    plans.record(config, the_plan, digest, task.run_id, canary=config.canary.enabled, gates=GATES,
                 approval_wait_s=config.mitigation.approval_wait_s, starter=task.starter)
    store.update(record["id"], plan=the_plan.to_dict(), plan_digest=digest)
    store.audit(record["id"], actor=actor, action="plan_demote", outcome="ok",
                details={"plan": the_plan.to_dict(), "digest": digest, "run_id": task.run_id})
    return plans.output(the_plan, digest, incident_id=incident.get("incident_id"))


def execute(plan_output: Any, task: Task, secret_of: Callable[[str], bytes],
            config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Moves leadership as approved (``remediate/demote_run.py``); Stop when refused or halted."""
    from kafka_runbooks.remediate import demote_run as R  # keeps DAG parsing fast: the engine loads when a task runs
    from kafka_runbooks.remediate.executor import Execution, Halted, Refused  # keeps DAG parsing fast
    from kafka_runbooks.runbook.restart import approved  # keeps DAG parsing fast: loaded when a task runs

    recorded, decision, approver = approved(plan_output, task, "leadership was not moved", secret_of, config_of)
    plan = recorded.plan
    ex = Execution(config=recorded.config, plan=plan, record_id=plan.roll_id, dag_id=task.dag_id, run_id=task.run_id,
                   task_id=task.task_id, try_number=task.try_number, approver=approver, starter=decision.starter,
                   canary=bool((decision.binding or {}).get("canary", {}).get("enabled")))
    started = clock.now_iso()
    try:
        result = R.run(ex)
    except (Refused, Halted) as exc:
        on_incident(recorded.config, plan_output, approver, started, task, error=exc)
        _record_end(recorded.config, plan.roll_id, approver, exc)
        raise Stop(str(exc)) from exc
    task.log.info("moved %d partition(s) off broker %s; staying down until its restart: %s",
                  len(result["moved"]), result["broker_id"], sorted(result["stays_offline"]) or "none")
    on_incident(recorded.config, plan_output, approver, started, task, result=result)
    return result


def _record_end(config, record_id: str, actor: str, exc: BaseException) -> None:
    """The mitigation's own record at its end without a move: refused (nothing moved: closed), halted (left open with
    the halt as its note: what moved before it keeps its new order until written back by hand)."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.engine import Refused  # keeps DAG parsing fast: the engine loads when a task runs

    first = str(exc).splitlines()[0][:500] if str(exc) else type(exc).__name__
    store = IncidentStore(config)
    if isinstance(exc, Refused):
        store.close(record_id, actor=actor, resolution=f"refused: {first}; nothing moved")
    else:
        store.update(record_id, note=f"halted: {first}; partitions moved before the halt keep their new replica order "
                                     "until it is written back (restore_order after the restart, or by hand)")


def recorded_restore(plan_output: Any, cluster: str, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """{"record_id", "broker_id", "restore"} of the mitigation this response recorded: the order its intent kept
    (``remediate/demote_run``'s ``step_started``, committed before anything was moved). Skip when no mitigation was
    planned or none got as far as its intent; Stop when the reference names another cluster or no recorded plan."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: loaded when a task runs

    if not isinstance(plan_output, dict) or not plan_output.get("digest"):
        raise Skip("no mitigation was planned in this response: no replica order to write back")
    recorded = plans.load(plan_output, "no replica order was written back", config_of)
    if recorded.config.name != cluster or recorded.plan.kind != "demote":
        raise Stop(f"the reference names a {recorded.plan.kind} plan of cluster {recorded.config.name!r}, not a mitigation of "
                   f"{cluster!r}: nothing written back")
    record_id = recorded.plan.roll_id
    intents = [e for e in L.Ledger(recorded.config, record_id).entries() if e.get("event") == L.STEP_STARTED and e.get("restore")]
    if not intents:
        raise Skip(f"mitigation {record_id} moved nothing (not approved, refused, or stopped before its intent): no replica "
                   "order to write back")
    last = intents[-1]
    return {"record_id": record_id, "broker_id": last.get("broker_id"),
            "restore": {str(k): [int(r) for r in v] for k, v in dict(last["restore"]).items()}}


def mitigation_summary(started: str, result: Mapping[str, Any] | None = None, error: BaseException | None = None) -> dict[str, Any]:
    """What the mitigation did and when, as the incident keeps it (its page and its audit trail show it). A move that
    did not happen keeps its reason's stable ``code`` (the engine's, e.g. ``not_reordered``: the controller never took
    the reassignment; None where the refusal came before the engine, e.g. a busy lock) and its words."""
    from kafka_runbooks.remediate.engine import Refused  # keeps DAG parsing fast: the engine loads when a task runs

    if result is None:
        return {"outcome": "refused" if isinstance(error, Refused) else "halted", "code": getattr(error, "code", None),
                "started_at": started, "ended_at": clock.now_iso(), "reason": str(error).splitlines()[:12],
                "jvm_touched": False}
    return {"outcome": "moved", "started_at": started, "ended_at": result.get("at"), "broker_id": result["broker_id"],
            "moved": list(result["moved"]), "new_leaders": dict(result.get("new_leaders") or {}),
            "stays_offline": dict(result.get("stays_offline") or {}), "timing": dict(result.get("timing") or {}),
            "approved_by": result.get("approved_by"), "record_id": result.get("record_id"), "jvm_touched": False}


def on_incident(config, plan_output: Mapping[str, Any], approver: str, started: str, task: Task,
                error: BaseException | None = None, result: Mapping[str, Any] | None = None) -> None:
    """The incident the mitigation served records what it did and when (``mitigation`` on the record, and its audit
    trail); a record that cannot be written is logged, never hides the move's own outcome (its own record has it all)."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    incident_id = plan_output.get("incident_id") if isinstance(plan_output, Mapping) else None
    if not incident_id:
        return
    summary = mitigation_summary(started, result, error)
    summary["record_id"] = summary.get("record_id") or (plan_output.get("plan") or {}).get("roll_id")
    try:
        store = IncidentStore(config)
        store.update(incident_id, mitigation=summary)
        store.audit(incident_id, actor=approver, action="mitigation", outcome=summary["outcome"], details=summary)
    except Exception as exc:  # noqa: BLE001 - the mitigation's own record and ledger are complete
        task.log.warning("could not record the mitigation on incident %s: %s", incident_id, exc)


def restore_resolution(broker_id: Any, out: Mapping[str, Any]) -> str:
    """How the mitigation's record ends once nothing is left to write back: what was written back, or that nothing was
    needed (no partition of its intent has another order now: a move that halted before the controller reordered
    anything, e.g. a controller that was the hung broker itself, or leadership moved by the election alone)."""
    if out.get("restored"):
        return (f"leadership moved off broker {broker_id} for the restart; the replica order of {len(out['restored'])} "
                "partition(s) written back after it (the deferred preferred election returns leadership)")
    return (f"nothing to write back after broker {broker_id}'s restart: every partition of the mitigation's intent has its "
            "original replica order (none was reordered, or it was written back already)")


def restore(plan_output: Any, cluster: str, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """After the restart passed its gates and the cluster recovered: the original replica order written back under the
    maintenance lock, so the deferred preferred election returns leadership to the broker. What is written back is
    what the recorded mitigation (``plan_output``: its plan's reference, checked against the recorded digest) wrote in
    its intent before it moved anything -- never a map handed over in XCom."""
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # keeps DAG parsing fast: kazoo loads when a task runs
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate import demote as D  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.demote_run import restore_order  # keeps DAG parsing fast: the engine loads at run time
    from kafka_runbooks.remediate.lock import MaintenanceLock  # keeps DAG parsing fast: kazoo loads when a task runs

    m = recorded_restore(plan_output, cluster, config_of)
    config = config_of(cluster)
    with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
        lock = MaintenanceLock(zk, config.name, run=task.run_id, dag=task.dag_id, user=None, purpose=D.KIND)
        lock.acquire(config.gates.lock_wait_s)
        try:
            out = restore_order(zk, config, m["restore"], guard=lock.check)
        finally:
            lock.release()
    store = IncidentStore(config)
    store.audit(m["record_id"], actor=f"dag:{task.dag_id}", action="restore_order",
                outcome="ok" if not out["left"] else "partial", details=out)
    if not out["left"]:  # the mitigation's whole life is over: moved (or halted), restarted, its order written back
        store.close(m["record_id"], actor=f"dag:{task.dag_id}", resolution=restore_resolution(m.get("broker_id"), out))
    else:
        store.update(m["record_id"], note=f"order not written back for {len(out['left'])} partition(s): "
                                          + "; ".join(out["left"][:5]))
    for line in out["left"]:
        task.log.warning("not written back: %s", line)
    return out
