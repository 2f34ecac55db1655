"""Remediate through the one engine: plan (always shown) -> approval -> execute -> close.

Every restart in the product -- the incident response's one-step plan and the rolling restart --
runs these operators. The plan task reads the cluster fresh and computes the plan; the approval
task (``operators/approval.py``) binds a person's Approve to it; the execute task verifies that
approval, takes the cluster's maintenance lock and runs ``remediate.executor``. Side effects only in
the execute task, which never retries.
"""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator, BaseSensorOperator, PokeReturnValue, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks.policies import POOL  # per cluster at run time: kafka_runbooks/policies.py
from kafka_runbooks import metrics
from kafka_runbooks.truth import FALSE_WORDS, TRUE_WORDS, truthy as _truthy
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.operators.refusal import refuse
from kafka_runbooks.operators.recorded import _config, load_recorded_plan, plan_reference  # noqa: F401 - their home before

ROLLING_RESTART = "rolling_restart"
INCIDENT_RESTART = "incident_restart"
GATES = (
    "registered again with a new ZooKeeper session",
    "back in every ISR it belongs in",
    "every __consumer_offsets partition it leads (or that moved) answers from a loaded coordinator",
)
CANARY_GATE = "canary produce (acks=all) and consume within the latency bound"


def _actor(context) -> str:
    return f"dag:{context['ti'].dag_id}/run:{context['ti'].run_id}"




def resume_target(value: Any) -> str | None:
    """The roll a ``resume`` form value names (its record id), None for a yes/no value (yes: the latest halted roll)."""
    text = str(value if value is not None else "").strip()
    if text.lower() in TRUE_WORDS + FALSE_WORDS or value is True or value is False:
        return None
    return text


def resume_wanted(value: Any) -> bool:
    """A roll is to be resumed: a record id, or a yes (the one truthiness rule: any other word is an error)."""
    return resume_target(value) is not None or _truthy(value)


def find_resumable_roll(store, cluster: str, record_id: str | None = None) -> tuple[dict[str, Any], Any] | None:
    """The latest open rolling-restart record of ``cluster`` whose ledger says it halted -- or whose worker died in
    the middle of a step (a ``step_started`` that never ended: ``executor.interrupted_step``). ``record_id``: only
    that roll (None when it is not an open, resumable roll of ``cluster``)."""
    from kafka_runbooks.remediate.executor import interrupted_step  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.ledger import Ledger, find_resumable  # deferred: loaded when the task runs, not when a DAG file is parsed

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
            entries = ledger.entries()
            if interrupted_step(entries) is not None:
                return record, ledger.progress()
    return found


def how_it_ended(store, record_id: str, progress) -> str:
    """How the roll's last run ended, for the resume's log: halted (why), or cut (the worker died: which broker's step,
    its stop sent when)."""
    from kafka_runbooks.remediate.executor import interrupted_step  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.ledger import Ledger  # deferred: loaded when the task runs, not when a DAG file is parsed

    halted = progress.halted or {}
    if halted.get("cut") and halted.get("broker_id") is not None:
        return (f"its run {halted.get('cut_run') or halted.get('run_id')} was cut during broker {halted.get('broker_id')}'s step "
                f"(down from {halted.get('down_since')})")
    if halted:
        return f"halted: {halted.get('reason')}"
    step = interrupted_step(Ledger(store.db, record_id).entries())
    if step is not None:
        return (f"its run {step.get('run_id')} was cut during broker {step.get('broker_id')}'s step (stop command sent at "
                f"{step.get('at')}): the broker is started if down, restarted if up")
    return "its last run ended without a halt"


def read_cluster(config, nothing: str):
    """The cluster's snapshot from its ZooKeeper; an ensemble that does not answer fails the task naming it (which
    servers, which connection, how long it waited) -- never a bare ``KazooTimeoutError`` traceback."""
    from kafka_runbooks.detect.observe import zookeeper_unreachable  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed

    hook = ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s)
    try:
        with hook.session() as zk:
            return read_snapshot(zk, config.name)
    except Exception as exc:  # noqa: BLE001 - an unreachable ensemble is said; anything else is raised as it is
        if not zookeeper_unreachable(exc):
            raise
        raise AirflowFailException(
            f"cluster {config.name!r}: its ZooKeeper ensemble {hook.hosts}{hook.chroot or ''} (connection "
            f"{config.zk_conn_id!r}) did not answer ({type(exc).__name__}: {exc}; timeout "
            f"{config.capture.connect_timeout_s:g} s); {nothing}") from exc


def use_approval(context, plan, config, nothing: str, canary: bool = False):
    """Verifies that a sealed Approve of THIS plan -- and of everything that will run for it, built from the
    configuration now (``digest.execution_binding``, with this run's ``canary`` switch) -- in THIS run exists, is
    not older than ``approvals.max_age_s`` and has not been used, and uses it (recorded in the ledger and the
    audit). Returns (decision, approver); AirflowFailException saying ``nothing`` and what changed otherwise.
    Every remediation's execute task calls this before it changes anything."""
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.operators.approval import approval_secret  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.approvals import ApprovalError, Decision, usable_refusals  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.digest import approval_digest, execution_binding  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.ledger import Ledger  # deferred: loaded when the task runs, not when a DAG file is parsed

    ti = context["ti"]
    store = IncidentStore(config)
    ledger = Ledger(config, plan.roll_id)
    binding = execution_binding(config, plan, canary)
    digest = approval_digest(plan, binding)
    try:
        secret = approval_secret(config.approvals.secret_conn_id)
    except ApprovalError as exc:
        raise AirflowFailException(f"{exc}; {nothing}") from exc
    with ledger.locked():
        refusals, entry = usable_refusals(ledger.entries(), secret=secret, dag_id=ti.dag_id, run_id=ti.run_id,
                                          plan_digest=digest, approvers=config.approvals.approvers,
                                          names=config.approvals.approver_names, plan=plan.to_dict(), binding=binding,
                                          max_age_s=config.approvals.max_age_s, now=store.db.now(),  # the database's clock
                                          valid_until=(plan.conditions or {}).get("deadline_at"))
        if not refusals:
            decision = Decision.from_payload(entry["decision"])
            ledger.append("approval_used", ti.run_id, _locked=True, dag_id=ti.dag_id, approval_try=decision.try_number,
                          task_id=ti.task_id, by_try=int(ti.try_number), digest=digest)
    if refusals:
        store.audit(plan.roll_id, actor=_actor(context), action="execute_plan", outcome="refused",
                    details={"refusals": refusals, "run_id": ti.run_id, "try": int(ti.try_number)})
        raise AirflowFailException(f"no usable approval; {nothing}:\n" + "\n".join(f"- {r}" for r in refusals))
    approver = decision.user_name or decision.user_id or "unknown"
    store.audit(plan.roll_id, actor=approver, action="approval_verified", outcome="ok",
                details={"digest": digest, "approval_try": decision.try_number, "run_id": ti.run_id, "by_try": int(ti.try_number),
                         "started_by": decision.started_by, "automatic_run": decision.automatic is not None})
    return decision, approver


def show_plan(context, log, config, plan, digest: str, dry_run: bool, snapshot, settings) -> dict[str, Any]:
    """The plan as a person reads it (``operators/summary.py``): a refusal's one-line summary first, the plan once,
    a dry run's plan as the run's note. Returns the refusal's one-line summary."""
    from kafka_runbooks.operators import summary  # deferred: loaded when the task runs, not when a DAG file is parsed

    return summary.show_plan(context, log, config, plan, digest, dry_run, snapshot, settings, render_plan(plan, digest))


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


def fresh_plan(config, approved, canary: bool = False):
    """The approved plan computed again on the cluster as it is now -- the same evidence gathered the same way
    (static configs, the open incidents, direct checks of every holder and of every waived broker) -- for
    ``executor.plan_changed``."""
    from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.executor import serving_evidence, unconfigured_replicas  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.host import static_config_state, unreachable_hosts  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.plan import plan_restart, safety_settings  # deferred: loaded when the task runs, not when a DAG file is parsed

    static, unread = static_config_state(config)
    with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
        snapshot = read_snapshot(zk, config.name)
    unread.update(unconfigured_replicas(config, snapshot))
    todo = [b for b in approved.requested if b not in approved.completed]
    not_serving, unresponsive, _, _ = serving_evidence(config, snapshot, todo, approved.not_serving,
                                                       IncidentStore(config).records(config.name))
    version = KafkaHook(config.kafka_conn_id, listener=config.listener).kafka_version(
        snapshot.brokers, config.health.kafka_probe_timeout_s, config.kafka_version)
    return plan_restart(snapshot, approved.requested, config, kind=approved.kind, not_serving=not_serving,
                        settings=safety_settings(config, static, unread, version), completed=approved.completed,
                        roll_id=approved.roll_id, unresponsive=unresponsive, canary_topic=config.canary.topic if canary else None,
                        unreachable=unreachable_hosts(config, [b for b in todo if b in config.hosts]))


class PlanRemediationOperator(BaseOperator):
    """Computes the plan on fresh state, records it, and shows it (task log, XCom, the record).

    Rolling restart: ``broker_ids`` empty = every configured broker; ``resume`` continues the
    latest halted roll of the cluster (its requested brokers, minus those already done).
    Incident restart: ``incident`` (the open_incident output) and ``report`` (this run's analysis)
    give the brokers and the evidence for the not-serving waiver. A refused plan fails here (nothing
    is asked, nothing changes) unless it is a dry run."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("cluster", "broker_ids", "reason", "mode", "canary", "resume", "incident", "report")

    def __init__(self, *, kind: str, cluster: str = "{{ params.cluster }}", broker_ids: Any = None, reason: Any = "",
                 mode: Any = "execute", canary: Any = None, resume: Any = False, incident: Any = None, report: Any = None,
                 **kwargs: Any) -> None:
        if kind not in (ROLLING_RESTART, INCIDENT_RESTART):
            raise ValueError(f"unknown remediation kind {kind!r}")
        super().__init__(**kwargs)
        self.kind = kind
        self.cluster = cluster
        self.broker_ids = broker_ids
        self.reason = reason
        self.mode = mode
        self.canary = canary
        self.resume = resume
        self.incident = incident
        self.report = report

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.model import Finding  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.digest import plan_digest  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.executor import interrupted_step, serving_evidence, unconfigured_replicas  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.host import static_config_state, unreachable_hosts  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.plan import plan_restart, safety_settings  # deferred: loaded when the task runs, not when a DAG file is parsed

        incident = self.incident if isinstance(self.incident, dict) else None
        cluster = incident["cluster"] if incident else self.cluster
        config = _config(cluster)
        store = IncidentStore(config)
        dry_run = str(self.mode).strip().lower() in ("dry-run", "dry_run", "dryrun", "plan")
        canary = config.canary.enabled if self.canary is None or self.kind == INCIDENT_RESTART else _truthy(self.canary)
        starter = getattr(context.get("dag_run"), "triggering_user_name", None)
        report = self.report if isinstance(self.report, dict) else {}
        findings = [Finding.from_dict(f) for f in report.get("findings") or []]

        static, unread = static_config_state(config)
        snapshot = read_cluster(config, "nothing was planned or changed")
        unread.update(unconfigured_replicas(config, snapshot))
        notes = [f"broker {b}: {why} (its min.insync.replicas is unknown: stops that depend on it are refused)"
                 for b, why in sorted(unread.items())]
        for note in notes:
            self.log.warning("%s", note)

        completed: list[int] = []
        record_id: str | None = None
        if incident:
            record_id = incident["incident_id"]
            requested = [int(b) for b in incident["broker_ids"]]
            ledger = L.Ledger(config, record_id)
            progress = ledger.progress()
            if progress.resumable or interrupted_step(ledger.entries()) is not None:
                completed = list(progress.completed)
        elif resume_wanted(self.resume):
            named = resume_target(self.resume)
            found = find_resumable_roll(store, config.name, named)
            if found is None:
                raise AirflowFailException(f"resume: roll {named!r} is not an open, halted rolling restart of cluster "
                                           f"{config.name!r}" if named else
                                           f"resume: cluster {config.name!r} has no halted rolling restart to resume")
            record, progress = found
            record_id = record["id"]
            requested = list(progress.requested or record.get("broker_ids") or [])
            completed = list(progress.completed)
            self.log.warning("resuming roll %s: requested %s, already done %s; %s", record_id, requested, completed,
                             how_it_ended(store, record_id, progress))
            if self.broker_ids and sorted(int(b) for b in self.broker_ids) != sorted(requested):
                self.log.warning("resume continues the halted roll's brokers %s; the form's brokers %s are ignored",
                                 requested, list(self.broker_ids))
        else:
            requested = [int(b) for b in (self.broker_ids or [])] or sorted(config.hosts)

        waived, checked = self._not_serving(config, snapshot, findings) if self.kind == INCIDENT_RESTART else ({}, {})
        todo = [b for b in requested if b not in completed]
        not_serving, unresponsive, checked, more = serving_evidence(config, snapshot, todo, waived,
                                                                    store.records(config.name), checked)
        notes += more
        for b, c in sorted(checked.items()):
            self.log.info("direct check of broker %s: %s", b, "ok" if c.ok else c.error)
        if record_id is None and not dry_run:
            record = store.open(
                cluster=config.name, broker_ids=requested, reason=str(self.reason or "rolling restart"),
                trigger={"kind": ROLLING_RESTART, "requested": requested, "canary": canary, "started_by": starter},
                opened_by=starter or _actor(context),
            )
            record_id = record["id"]
        from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded when the task runs, not when a DAG file is parsed

        version = KafkaHook(config.kafka_conn_id, listener=config.listener).kafka_version(
            snapshot.brokers, config.health.kafka_probe_timeout_s, config.kafka_version)  # read from the brokers
        notes = notes + [f"Kafka version as the brokers report it: {version.describe()}"] + list(version.notes)
        settings = safety_settings(config, static, unread, version)
        plan = plan_restart(
            snapshot, requested, config, kind=self.kind, not_serving=not_serving, settings=settings,
            completed=completed, roll_id=record_id, canary_topic=config.canary.topic if canary else None, unresponsive=unresponsive,
            unreachable=unreachable_hosts(config, [b for b in requested if b not in completed and b in config.hosts]),
        )
        digest = plan_digest(plan)
        shown = show_plan(context, self.log, config, plan, digest, dry_run, snapshot, settings)
        if dry_run and plan.refused:
            # as loud as a real refusal (issue 32 point 2): the plan task fails, the note and the close task say why
            refuse(self, f"dry run: would be {shown['summary']}; nothing was asked and nothing changed (every reason is in "
                         "the plan above)")
        if not dry_run:
            from kafka_runbooks.state.plans import PlanDetails  # deferred: loaded when the task runs, not when a DAG file is parsed

            PlanDetails(config).put(record_id, digest, plan)  # every line and refusal; the plan carries its fingerprint
            L.Ledger(config, record_id).append(L.PLANNED, context["ti"].run_id, plan=plan.to_dict(), digest=digest,
                                                             starter=starter, notes=notes,
                                                             findings=[f.to_dict() for f in findings])
            store.update(record_id, plan=plan.to_dict(), plan_digest=digest)
            store.audit(record_id, actor=starter or _actor(context), action="plan_restart",
                        outcome="refused" if plan.refused else "ok",
                        details={"refusals": list(plan.refusals), "plan": plan.to_dict(), "digest": digest, "notes": notes,
                                 "run_id": context["ti"].run_id})
            if plan.refused:
                if self.kind == ROLLING_RESTART and not completed:
                    # nothing was done and nothing can be: the roll's record ends here (an incident stays open)
                    store.close(record_id, actor=starter or _actor(context), resolution="plan refused; nothing was changed")
                refuse(self, f"{shown['summary']}; nothing changed (every reason is in the plan above and on the incident page)")
        return {
            "plan": plan.to_dict(),
            "digest": digest,
            "dry_run": dry_run,
            "canary": canary,
            "findings": [f.to_dict() for f in findings],
            "report": report.get("report"),
            "gates": list(GATES) + ([CANARY_GATE] if canary else []),
            "notes": notes,
        }

    def _not_serving(self, config, snapshot, findings):
        """The waiver's evidence: this run's stuck-thread / stalled-request findings AND a direct check failing now.
        Returns (evidence, the checks taken)."""
        from kafka_runbooks.remediate.executor import check_brokers  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.safety import NOT_SERVING_FINDING_KINDS, not_serving_evidence  # deferred: loaded when the task runs, not when a DAG file is parsed

        suspects = sorted({b for f in findings if f.kind in NOT_SERVING_FINDING_KINDS for b in f.broker_ids})
        checks = check_brokers(config, snapshot, suspects)
        return not_serving_evidence(checks.values(), findings), checks


class ClusterChangingOperator(BaseOperator):
    """Base of every task that changes a cluster: never retries, runs in the remediation pool, and acts only on
    a plan with a sealed Approve of THIS plan in THIS run that has not been used (``approved_plan``)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("plan_output",)

    def __init__(self, *, plan_output: Any, **kwargs: Any) -> None:
        if kwargs.get("retries"):
            raise ValueError("a task that changes a cluster never retries (retries must be 0)")
        kwargs["retries"] = 0
        kwargs.setdefault("pool", POOL)
        super().__init__(**kwargs)
        self.plan_output = plan_output

    def approved_plan(self, context, nothing: str):
        """(plan, config, decision, approver); AirflowFailException saying ``nothing`` was done otherwise. The plan is
        the one the plan task recorded in the state database under the digest XCom refers to (``plan_reference``):
        whatever else XCom carries is not read."""
        if not isinstance(self.plan_output, dict) or "plan" not in self.plan_output:
            raise AirflowFailException(f"no plan (see the plan task); {nothing}")
        plan, config, findings = load_recorded_plan(self.plan_output, nothing)
        decision, approver = use_approval(context, plan, config, nothing, canary=_truthy(self.plan_output.get("canary")))
        self.recorded_findings = findings
        return plan, config, decision, approver


class ExecutePlanOperator(ClusterChangingOperator):
    """Runs the approved restart plan through the engine, after checking it against fresh state."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import executor as E  # deferred: loaded when the task runs, not when a DAG file is parsed

        plan, config, decision, approver = self.approved_plan(context, "nothing restarted")
        ti = context["ti"]
        store = IncidentStore(config)

        from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed

        changed = L.waiver_refusals(plan, getattr(self, "recorded_findings", []))
        if not changed:
            fresh = fresh_plan(config, plan, canary=_truthy(self.plan_output.get("canary")))
            changed = E.plan_changed(plan, fresh)
        if changed:
            reason = L.Reason("plan_changed", "; ".join(changed))
            L.Ledger(config, plan.roll_id).append(L.REFUSED, ti.run_id, state=L.StepState.REFUSED.value, reason=reason.sentence,
                                                  **reason.to_dict())
            store.audit(plan.roll_id, actor=approver, action="execute_plan", outcome="refused",
                        details={"refusals": changed, "run_id": ti.run_id, "code": reason.code})
            raise AirflowFailException("\n".join(changed) + "; nothing restarted")
        execution = E.Execution(
            config=config, plan=plan, record_id=plan.roll_id, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id,
            try_number=int(ti.try_number), approver=approver, starter=decision.starter,
            canary=bool((decision.binding or {}).get("canary", {}).get("enabled")),
        )
        try:
            return E.run(execution)
        except (E.Refused, E.Halted) as exc:
            raise AirflowFailException(str(exc)) from exc


class CloseRollOperator(BaseOperator):
    """Last task of a rolling restart (runs whatever happened): closes the roll's record when every
    step is done; otherwise leaves it open saying why (rejected, refused, halted: resumable)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("plan_output", "decision", "result")

    def __init__(self, *, plan_output: Any, decision: Any, result: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.plan_output = plan_output
        self.decision = decision
        self.result = result

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.executor import interrupted_step, interruption_report  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.ledger import Ledger  # deferred: loaded when the task runs, not when a DAG file is parsed

        from kafka_runbooks.operators import summary  # deferred: loaded when the task runs, not when a DAG file is parsed

        out = self.plan_output if isinstance(self.plan_output, dict) else {}
        plan = out.get("plan") or {}
        if out.get("dry_run"):
            return {"status": "dry run", "order": [s["broker_id"] for s in plan.get("steps", [])], "refusals": plan.get("refusals", [])}
        refused = summary.refused_plan(context)
        if not plan and refused:
            return summary.close_refused(context, self.log, refused)
        record_id = plan.get("roll_id")
        if not record_id:
            raise AirflowFailException("the plan was never computed (see the plan task)")
        config = _config(plan["cluster"])
        store = IncidentStore(config)
        ledger = Ledger(config, record_id)
        replay_journal(config, ledger, store)  # records the execute task kept locally while the database failed
        entries = ledger.entries()
        progress = L.progress(entries)
        actor = _actor(context)
        if progress.done and isinstance(self.result, dict):
            restarted, cut = across_runs(entries)
            store.close(record_id, actor=actor, resolution=f"restarted {restarted} (in order, across every run of this roll), "
                                                           f"approved by {self.result.get('approved_by')}; every gate passed"
                                                           + (f"; {cut}" if cut else ""))
            metrics.roll_finished(self.result)
            text = summary.finished(context, self.log, config, record_id, plan.get("kind") or ROLLING_RESTART,
                                    {**self.result, "restarted": restarted})
            return {"status": "closed", "record_id": record_id, "restarted": restarted, "summary": text}
        choice = (self.decision or {}).get("chosen_options") if isinstance(self.decision, dict) else None
        refused = list((self.decision or {}).get("refusals") or []) if isinstance(self.decision, dict) else []
        if refused and not progress.completed and not progress.resumable:
            # an answer that did not count (four eyes, a changed plan): nothing ran; the record ends saying why
            who = ((self.decision or {}).get("responded_by_user") or {}).get("name") or "nobody"
            store.close(record_id, actor=actor, resolution=f"approval by {who} refused: {'; '.join(refused)}; nothing was changed")
            metrics.plan_refused(refused)
            raise AirflowFailException(f"roll {record_id} refused: approval by {who} refused: {'; '.join(refused)}; "
                                       "nothing was changed")
        if choice and choice[0] != "Approve":
            store.close(record_id, actor=actor, resolution=f"{choice[0]} by {(self.decision.get('responded_by_user') or {}).get('name') or 'nobody (timed out)'}: nothing was changed")
            return {"status": choice[0].lower(), "record_id": record_id}
        run_id = context["ti"].run_id
        refusal = refused_in(entries, run_id)
        if refusal is not None:
            why = f"refused: {refusal.get('reason')}; nothing stopped"
            if not progress.completed:
                store.close(record_id, actor=actor, resolution=why)
            else:
                store.update(record_id, note=f"{why} by run {run_id}; brokers done before: {list(progress.completed)}; "
                                             "resumable with resume=true")
            raise AirflowFailException(f"roll {record_id} {why}")
        step = interrupted_step(entries)
        if step is not None:
            # the worker died in the middle of a step: say exactly what state the cluster was left in, and make it resumable
            state = cluster_now(config)
            lines = interruption_report(step, state, config.hosts)
            ledger.append(L.HALTED, run_id, broker_id=step.get("broker_id"), phase="interrupted", code="worker_lost",
                          reason=lines[0], state=lines[1:-1], at_step=step.get("broker_id"), cut=True,
                          step_state=L.StepState.CUT.value, down_since=step.get("at"), cut_run=step.get("run_id"))
            store.audit(record_id, actor=actor, action="halt", outcome="failed",
                        details={"broker_id": step.get("broker_id"), "phase": "interrupted", "code": "worker_lost",
                                 "reason": lines[0], "state": lines[1:-1]})
            store.update(record_id, note="halted: " + "; ".join(lines))
            raise AirflowFailException(f"roll {record_id} is not complete:\n" + "\n".join(lines))
        lost = interrupted_execution(entries, run_id)
        if lost and not progress.resumable:  # the executor died with its worker between steps: nothing recorded how it ended
            ledger.append(L.HALTED, run_id, reason=lost, at_step=None, code="worker_lost", cut=True)
            store.audit(record_id, actor=actor, action="halt", outcome="recorded", details={"reason": lost, "run_id": run_id})
            progress = ledger.progress()
        why = (progress.halted or {}).get("reason") or (
            "the run stopped before executing: nothing was changed (see the plan and approve tasks)" if not progress.completed
            else "the run stopped between steps (see the task logs)")
        store.update(record_id, note=f"halted: {why}; resumable with resume=true" if progress.resumable else f"stopped: {why}")
        raise AirflowFailException(f"roll {record_id} is not complete: {why}")


def replay_journal(config, ledger, store) -> int:
    """Writes what an execute task on this worker kept in its journal (``remediate/ledger.Journal``) while the state
    database failed; the rest stays in the file (said in the log)."""
    from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed

    try:
        return L.Journal.of(config, ledger.record_id).replay(L.store_writer(ledger, store))
    except Exception:  # noqa: BLE001 - the journal stays; the close goes on from what the database has
        return 0


def refused_in(entries: Sequence[dict[str, Any]], run_id: str) -> dict[str, Any] | None:
    """The ``refused`` entry of ``run_id`` (its execution ended before any stop), when it is its last word."""
    from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed

    mine = [e for e in entries if e.get("run_id") == run_id and e.get("event") in (L.REFUSED, L.HALTED, L.COMPLETED)]
    return mine[-1] if mine and mine[-1].get("event") == L.REFUSED else None


def across_runs(entries: Sequence[dict[str, Any]]) -> tuple[list[int], str]:
    """(every broker restarted by the roll, in order, across all its runs; what cut a run, or "")."""
    from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed

    restarted = list(L.progress(entries).completed)
    cuts = [e for e in entries if e.get("event") == L.HALTED and e.get("cut")]
    said = []
    for e in cuts:
        where = (f"during broker {e.get('broker_id')}'s step (down from {e.get('down_since')})" if e.get("broker_id") is not None
                 else "between steps")
        said.append(f"run {e.get('cut_run') or e.get('run_id')} was cut {where} and resumed")
    return restarted, "; ".join(said)


def interrupted_execution(entries: Sequence[dict[str, Any]], run_id: str) -> str | None:
    """Why the roll must count as halted when ``run_id``'s execution used its approval and then recorded no end (no
    step failure, refusal, halt or completion): its task died with its worker (SIGKILL, a lost machine) and Airflow
    failed it. None when the execution ended by itself or never started."""
    from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed

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


def cluster_now(config):
    """The cluster's state now (None when ZooKeeper cannot be read): ``runbook.cluster.cluster_now``."""
    from kafka_runbooks.runbook.cluster import cluster_now as now  # keeps DAG parsing fast: ZooKeeper client at run time

    return now(config)


class ClusterRecoveredSensor(BaseSensorOperator):
    """Verifies the whole cluster is back: restarted brokers registered, no under-replicated or offline partition."""

    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", 2)
        kwargs.setdefault("mode", "poke")
        super().__init__(**kwargs)
        self.incident = incident

    def poke(self, context) -> PokeReturnValue:
        from kafka_runbooks.detect.detectors import detect  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.detect.observe import take_snapshot  # keeps DAG parsing fast: the clients load at run time

        config = _config(self.incident["cluster"])
        snapshot = take_snapshot(config, probe_hosts=False)
        missing = sorted(set(self.incident["broker_ids"]) - snapshot.live_broker_ids)
        problems = [f for f in detect(snapshot) if f.kind in ("under_replicated_partitions", "offline_partitions")]
        if missing or problems:
            self.log.info("not yet recovered: unregistered brokers %s; %s", missing, [f.summary for f in problems])
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value={"verified_at": snapshot.taken_at, "brokers": sorted(snapshot.live_broker_ids)})
