"""The deferred preferred-replica election's tasks (dags/kafka_preferred_election.py, issue 7):
plan -> approval (``operators/approval.py``, the engine's sealed four-eyes approval) -> wait (deferred: the
triggerer re-checks, no worker is held) -> elect in batches under the maintenance lock -> close.
Decisions in ``remediate/election.py``; I/O in ``remediate/election_run.py``; on-call's page runbooks/preferred-election.md.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

from airflow.sdk import BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks import metrics
from kafka_runbooks.operators.remediate import ClusterChangingOperator, _actor, _config, _truthy
from kafka_runbooks.operators.refusal import refuse

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


class PlanElectionOperator(BaseOperator):
    """Reads the cluster fresh, computes the batches and the conditions, records them (the election's own record in
    the incident store) and shows them. Dry run: shows and stops. A refused plan fails here, asking nobody.

    ``resume``: continues the cluster's latest halted election (``ledger.find_resumable``, as the rolling restart):
    its record and brokers; the partitions its converged batches elected are left out; the rest is planned on fresh
    state and needs a new approval (an approval is bound to the digest of the plan it approved and to its run)."""

    template_fields: Sequence[str] = ("cluster", "broker_ids", "reason", "mode", "resume")

    def __init__(self, *, cluster: str = "{{ params.cluster }}", broker_ids: Any = None, reason: Any = "", mode: Any = "execute",
                 resume: Any = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.broker_ids, self.reason, self.mode, self.resume = cluster, broker_ids, reason, mode, resume

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks import clock  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import election as E  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.digest import plan_digest  # deferred: loaded when the task runs, not when a DAG file is parsed

        config = _config(self.cluster)
        dry_run = str(self.mode).strip().lower() in ("dry-run", "dry_run", "dryrun", "plan")
        starter = getattr(context.get("dag_run"), "triggering_user_name", None)
        brokers = [int(b) for b in (self.broker_ids or [])]
        store = IncidentStore(config)
        record_id, elected = None, []
        if _truthy(self.resume):
            found = L.find_resumable(store, config.name, E.KIND)
            if found is None:
                raise AirflowFailException(f"resume: cluster {config.name!r} has no halted preferred election to resume")
            record, progress = found
            record_id, elected = record["id"], list(progress.partitions_done)
            requested = list(progress.requested or ())
            if brokers and sorted(brokers) != sorted(requested):
                self.log.warning("resume continues the halted election's brokers %s; the form's brokers %s are ignored", requested, brokers)
            brokers = requested
            self.log.warning("resuming election %s: %d partition(s) already elected and converged (not elected again); halted: %s",
                             record_id, len(elected), (progress.halted or {}).get("reason", "")[:500])
        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            snapshot = read_snapshot(zk, config.name)
        # every batch is checked against each broker's own metadata: a cluster where it cannot be read is refused now
        views = KafkaHook(config.kafka_conn_id, listener=config.listener).metadata_views(snapshot.brokers, config.leadership.view_timeout_s)
        deadline_at = clock.iso(E.deadline(clock.now(), config.election))
        if record_id is None and not dry_run:
            record = store.open(cluster=config.name, broker_ids=brokers or sorted(config.hosts),
                                reason=str(self.reason or "preferred-replica election"),
                                trigger={"kind": E.KIND, "requested": brokers, "started_by": starter},
                                opened_by=starter or _actor(context))
            record_id = record["id"]
        from kafka_runbooks.hooks.kafka import KafkaHook  # deferred: loaded when the task runs, not when a DAG file is parsed

        version = KafkaHook(config.kafka_conn_id, listener=config.listener).kafka_version(
            snapshot.brokers, config.health.kafka_probe_timeout_s, config.kafka_version)  # read from the brokers
        plan = E.plan_election(snapshot, config, brokers=brokers, roll_id=record_id, deadline_at=deadline_at, elected=elected,
                               views=views, version=version)
        digest = plan_digest(plan)
        self.log.info("plan (%s), digest %s:\n%s", "dry run" if dry_run else "to be approved", digest[:16],
                      "\n".join([f"  {b.reason}: {', '.join(b.partitions)}" for b in plan.batches]
                                + [f"  refused: {r}" for r in plan.refusals] + [f"  conditions: {dict(plan.conditions)}"]))
        if dry_run:
            from kafka_runbooks.operators.summary import set_run_note  # deferred: loaded when the task runs, not when a DAG file is parsed
            from kafka_runbooks.remediate.progress import election_plan_note  # deferred: loaded when the task runs, not when a DAG file is parsed

            set_run_note(context, self.log, election_plan_note(plan, digest, dry_run=True))  # the plan, readable in the UI
            if plan.refused:  # as loud as a real refusal (issue 32 point 2): this task fails, the close task says why
                from kafka_runbooks.operators.summary import REFUSED_KEY  # deferred: loaded when the task runs, not when a DAG file is parsed
                from kafka_runbooks.remediate.progress import refusal_summary  # deferred: loaded when the task runs, not when a DAG file is parsed

                one_line = refusal_summary(plan)
                self.log.warning("DRY RUN: would be %s", one_line)
                context["ti"].xcom_push(key=REFUSED_KEY, value={"summary": one_line, "record_id": None, "cluster": plan.cluster,
                                                                "kind": plan.kind, "refusals": len(plan.refusals), "dry_run": True})
                refuse(self, f"dry run: election would be {one_line}; nothing was asked and nothing changed")
        if not dry_run:
            L.Ledger(config, record_id).append(L.PLANNED, context["ti"].run_id, plan=plan.to_dict(), digest=digest,
                                                             starter=starter, resumed=bool(elected) or _truthy(self.resume))
            store.update(record_id, plan=plan.to_dict())
            store.audit(record_id, actor=starter or _actor(context), action="plan_election",
                        outcome="refused" if plan.refused else "ok",
                        details={"refusals": list(plan.refusals), "plan": plan.to_dict(), "digest": digest, "run_id": context["ti"].run_id,
                                 "resume": _truthy(self.resume), "already_elected": elected})
            if plan.refused:
                from kafka_runbooks.operators.summary import REFUSED_KEY  # deferred: loaded when the task runs, not when a DAG file is parsed
                from kafka_runbooks.remediate.progress import refusal_summary  # deferred: loaded when the task runs, not when a DAG file is parsed

                one_line = refusal_summary(plan)
                store.close(record_id, actor=starter or _actor(context),
                            resolution="plan refused; nothing (further) was changed: " + "; ".join(plan.refusals)[:1000])
                # the close task says what was refused (it has no plan to read: this task fails)
                context["ti"].xcom_push(key=REFUSED_KEY, value={"summary": one_line, "record_id": record_id, "cluster": plan.cluster,
                                                                "kind": plan.kind, "refusals": len(plan.refusals)})
                refuse(self, f"election {one_line}; nothing changed (every reason is in the plan above)")
        return {"plan": plan.to_dict(), "digest": digest, "dry_run": dry_run, "canary": config.election.canary,
                "findings": [], "gates": [g for g in GATES if (config.election.canary or "canary" not in g) and (config.leadership.jmx or "JmxTool" not in g)]}


class WaitForElectionWindowOperator(BaseOperator):
    """Defers to ``ElectionReadyTrigger`` (the triggerer polls; no worker is held) until the conditions of the
    approved plan hold, or its deadline passes: then fails, saying what it was still waiting for, and audits it."""

    template_fields: Sequence[str] = ("plan_output",)

    def __init__(self, *, plan_output: Any, **kwargs: Any) -> None:
        kwargs["retries"] = 0
        super().__init__(**kwargs)
        self.plan_output = plan_output

    def _plan(self):
        from kafka_runbooks.model import Plan  # deferred: loaded when the task runs, not when a DAG file is parsed

        if not isinstance(self.plan_output, dict) or "plan" not in self.plan_output:
            raise AirflowFailException("no plan (see the plan task); nothing elected")
        return Plan.from_dict(self.plan_output["plan"])

    def execute(self, context) -> Any:
        from kafka_runbooks.triggers.election import ElectionReadyTrigger  # deferred: loaded when the task runs, not when a DAG file is parsed

        plan = self._plan()
        config = _config(plan.cluster)
        self.log.info("waiting (deferred) for: %s", dict(plan.conditions))
        deadline = dt.timedelta(seconds=float(plan.conditions.get("deadline_s") or config.election.deadline_s) + 3600)
        self.defer(trigger=ElectionReadyTrigger(plan.cluster, dict(plan.conditions), config.election.poll_s),
                   method_name="execute_complete", timeout=deadline)

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed

        plan = self._plan()
        config = _config(plan.cluster)
        store = IncidentStore(config)
        status = (event or {}).get("status")
        store.audit(plan.roll_id, actor=_actor(context), action="election_wait", outcome="ok" if status == "ready" else "gave_up",
                    details=dict(event or {}))
        if status != "ready":
            reason = (event or {}).get("reason") or f"unexpected event {event!r}"
            from kafka_runbooks.remediate.ledger import Ledger  # deferred: loaded when the task runs, not when a DAG file is parsed

            Ledger(config, plan.roll_id).append("gave_up", context["ti"].run_id, reason=reason)
            raise AirflowFailException(reason)
        self.log.info("ready after %s check(s); first waited for: %s", event.get("checks"), event.get("waited_for"))
        return dict(event)


class ExecuteElectionOperator(ClusterChangingOperator):
    """Uses the approval (sealed, this plan, this run, once), then runs the batches (``election_run.run``)."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.remediate import election_run as R  # deferred: loaded when the task runs, not when a DAG file is parsed

        plan, config, decision, approver = self.approved_plan(context, "nothing elected")
        ti = context["ti"]
        ex = R.Execution(config=config, plan=plan, record_id=plan.roll_id, dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id,
                         try_number=int(ti.try_number), approver=approver, starter=decision.starter,
                         canary=_truthy(self.plan_output.get("canary")))
        try:
            result = R.run(ex)
        except (R.Refused, R.Halted) as exc:
            raise AirflowFailException(str(exc)) from exc
        self.log.info("elected %d partition(s) in %d batch(es) in %.1f s; canary failures %d (the close task says what is left)",
                      len(result["elected"]), result["batches"], result["wall_s"], result["canary_failures"])
        return result


class CloseElectionOperator(BaseOperator):
    """Last task (runs whatever happened): closes the election's record with what was done, or says why not."""

    template_fields: Sequence[str] = ("plan_output", "decision", "wait", "result")

    def __init__(self, *, plan_output: Any, decision: Any, wait: Any, result: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.plan_output, self.decision, self.wait, self.result = plan_output, decision, wait, result

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.ledger import Ledger  # deferred: loaded when the task runs, not when a DAG file is parsed

        from kafka_runbooks.operators import summary  # deferred: loaded when the task runs, not when a DAG file is parsed

        out = self.plan_output if isinstance(self.plan_output, dict) else {}
        plan = out.get("plan") or {}
        if out.get("dry_run"):
            return {"status": "dry run", "batches": [b.get("partitions") for b in plan.get("batches", [])], "refusals": plan.get("refusals", [])}
        refused = summary.refused_plan(context)
        if not plan and refused:
            return summary.close_refused(context, self.log, refused)
        record_id = plan.get("roll_id")
        if not record_id:
            raise AirflowFailException("the plan was never computed (see the plan task)")
        config = _config(plan["cluster"])
        store = IncidentStore(config)
        actor = _actor(context)
        if isinstance(self.result, dict) and self.result.get("elected") is not None:
            store.close(record_id, actor=actor, resolution=f"preferred leadership restored for {len(self.result['elected'])} partition(s) "
                                                           f"in {self.result.get('batches')} batch(es), approved by {self.result.get('approved_by')}; "
                                                           f"canary failures {self.result.get('canary_failures')}")
            metrics.election_finished(self.result)
            text = summary.election_finished(context, self.log, config, record_id, self.result, plan.get("requested") or ())
            return {"status": "closed", "record_id": record_id, "elected": self.result["elected"], "summary": text}
        choice = (self.decision or {}).get("chosen_options") if isinstance(self.decision, dict) else None
        if choice and choice[0] != "Approve":
            store.close(record_id, actor=actor, resolution=f"{choice[0]}: nothing was changed")
            return {"status": choice[0].lower(), "record_id": record_id}
        entries = Ledger(config, record_id).entries()
        cleared = clear_pending_election(config, entries)
        if cleared:
            self.log.warning("%s", cleared)
            store.audit(record_id, actor=actor, action="election_znode", outcome="checked", details={"what": cleared})
        last = next((e for e in reversed(entries) if e.get("event") in ("gave_up", "halted", "refused")), None)
        why = (last or {}).get("reason") or "the run stopped before electing (see the task logs)"
        if last is not None and last.get("event") == "gave_up":
            store.close(record_id, actor=actor, resolution=f"gave up: {why}")
        else:
            resumable = Ledger(config, record_id).progress().resumable
            store.update(record_id, note=f"halted: {why}; resumable with resume=true" if resumable else f"stopped: {why}")
        raise AirflowFailException(f"election {record_id} did not complete: {why}")


class ScheduledElectionsOperator(BaseOperator):
    """The scheduled path (``dags/kafka_preferred_election_schedule.py``): every cluster whose ``election.schedule``
    fires in this run's data interval is checked on its state now; skipped with the reason (nothing to move, or the
    imbalance within Kafka's own rule), or returned as the ``kafka_preferred_election`` run to start -- which then plans,
    asks for approval, waits and elects exactly as a run from the form. Each decision is audited in the cluster's
    ``<cluster>-election-schedule`` record of the incident store. A cluster that cannot be read is audited as failed
    and does not stop the others (``ScheduleErrorsOperator``, last, fails the run naming it)."""

    def execute(self, context) -> list[dict[str, Any]]:
        from kafka_runbooks.config import ConfigError, raw_clusters, load_cluster  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.schedules import due_at  # deferred: loaded when the task runs, not when a DAG file is parsed

        start, end = context["data_interval_start"], context["data_interval_end"]
        raw = raw_clusters()
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
            if fire is None:
                continue
            try:
                started = self._decide(config, fire, context)
            except Exception as exc:  # noqa: BLE001 - one unreadable cluster does not stop the others
                self._audit(config, context, "failed", {"fire_at": fire.isoformat(), "error": f"{type(exc).__name__}: {exc}"})
                errors.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            if started:
                starts.append(started)
        self.log.info("data interval %s .. %s: starting %s", start, end, [x["conf"]["cluster"] for x in starts] or "nothing")
        if errors:
            context["ti"].xcom_push(key="errors", value=errors)
            self.log.error("not checked: %s", errors)
        return starts

    def _decide(self, config, fire, context) -> dict[str, Any] | None:
        import dataclasses

        from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.election_schedule import imbalance_summary, skip_reason  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.host import read_static_configs  # deferred: loaded when the task runs, not when a DAG file is parsed

        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            snapshot = read_snapshot(zk, config.name)
        if any(p.replicas and p.leader != p.replicas[0] for p in snapshot.partitions):
            # something to move: Kafka's threshold is in the controller's server.properties (read over SSH)
            static, _ = read_static_configs(config)
            snapshot = dataclasses.replace(snapshot, static_configs={str(b): dict(p) for b, p in static.items()})
        why = skip_reason(snapshot)
        s = config.election
        seen = {"fire_at": fire.isoformat(), "schedule": s.schedule, "timezone": s.schedule_timezone, "state_at": snapshot.taken_at}
        if why is not None:
            self._audit(config, context, "skipped", {**seen, "reason": why})
            self.log.info("cluster %s: skipped: %s", config.name, why)
            return None
        reason = f"scheduled (election.schedule {s.schedule!r} {s.schedule_timezone}, due {fire.isoformat()}): {imbalance_summary(snapshot)}"
        run_id = f"scheduled__{config.name}__{fire.strftime('%Y%m%dT%H%M')}"
        conf = {"cluster": config.name, "brokers": [], "mode": "execute", "reason": reason[:2000], "resume": False}
        self._audit(config, context, "started", {**seen, "election_run_id": run_id, "conf": conf})
        return {"trigger_run_id": run_id, "conf": conf}

    def _audit(self, config, context, outcome: str, details: dict[str, Any]) -> None:
        from kafka_runbooks.incidents.store import IncidentExists, IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.election_schedule import AUDIT_SUFFIX  # deferred: loaded when the task runs, not when a DAG file is parsed

        store = IncidentStore(config)
        record_id = f"{config.name}-{AUDIT_SUFFIX}"
        try:  # created once, by whichever dispatcher run comes first
            store.open(cluster=config.name, broker_ids=[], reason="decisions of election.schedule (not an incident)",
                       trigger={"kind": "election_schedule"}, opened_by=_actor(context), incident_id=record_id)
        except IncidentExists:
            pass
        else:
            store.close(record_id, actor=_actor(context), resolution="the audit trail of the scheduled elections' decisions")
        store.audit(record_id, actor=_actor(context), action="scheduled_election", outcome=outcome,
                    details={**details, "run_id": context["ti"].run_id})


class ScheduleErrorsOperator(BaseOperator):
    """Last task of the scheduled path (runs whatever happened): fails naming every cluster that could not be checked."""

    template_fields: Sequence[str] = ("errors",)

    def __init__(self, *, errors: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.errors = errors

    def execute(self, context) -> None:
        if self.errors:
            raise AirflowFailException("clusters not checked (audited in <cluster>-election-schedule):\n"
                                       + "\n".join(f"- {e}" for e in self.errors))


def clear_pending_election(config, entries) -> str | None:
    """The close of an election whose worker died mid-batch removes the batch's own pending
    /admin/preferred_replica_election (``election_run.clear_interrupted_batch``); what it did, or None."""
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.election_run import clear_interrupted_batch, open_batch  # deferred: loaded when the task runs, not when a DAG file is parsed

    if open_batch(entries) is None:
        return None
    try:
        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            return clear_interrupted_batch(zk, entries)
    except Exception as exc:  # noqa: BLE001 - said on the record: on-call must look at the znode
        return (f"a batch's worker died and ZooKeeper could not be read to check /admin/preferred_replica_election "
                f"({type(exc).__name__}: {exc}); check it by hand")
