"""Mitigate first (issue 30): the incident response's first change -- move leadership off the broker that does not
serve, its JVM untouched -- as glue over ``remediate/demote.py`` (the plan) and ``remediate/demote_run.py`` (the run).

Plan (on fresh state, for the incident's suspects with direct evidence: a failed direct check now AND a finding of an
open incident saying so) -> the same approval as every change (``RemediationApprovalOperator``: four eyes, sealed,
bound to this plan) -> the move under the maintenance lock. The mitigation has a record of its own (its ledger must
never mark the broker "done" for the restart that follows). Nothing to move, or no evidence: the plan task is skipped,
saying why, and the capture goes on; a refused or halted move fails its task, and the capture goes on too.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_runbooks import clock
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.operators.recorded import _config
from kafka_runbooks.operators.remediate import ClusterChangingOperator

log = logging.getLogger(__name__)

GATES = (
    "every moved partition led by a registered in-sync broker other than the hung one (ZooKeeper), and each serving "
    "broker's own metadata agreeing",
    "the coordinators of moved __consumer_offsets partitions loaded (an OffsetFetch answered)",
    "a canary produce (acks=all) and consume through every serving leader",
)


def _evidence(config, snapshot, suspects: Sequence[int]) -> tuple[dict[int, str], dict[int, Any]]:
    """{broker: evidence} for suspects that fail a direct check now AND that an open incident says are not serving."""
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.executor import check_brokers  # deferred: loaded when the task runs, not when a DAG file is parsed
    from kafka_runbooks.remediate.safety import incident_evidence  # deferred: loaded when the task runs, not when a DAG file is parsed

    said = incident_evidence(IncidentStore(config).records(config.name), snapshot)
    checks = check_brokers(config, snapshot, [b for b in suspects if b in said])
    return ({b: f"direct check failed now ({c.error or c.error_code or 'no answer'}); {said[b]}"
             for b, c in checks.items() if not c.ok}, checks)


class PlanMitigationOperator(BaseOperator):
    """Plans moving leadership off the incident's not-serving broker; records it under a record of its own."""

    operator_extra_links = LINKS
    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.detect.snapshot import read_snapshot  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import demote as D  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import ledger as L  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.demote_run import to_plan  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.digest import plan_digest  # deferred: loaded when the task runs, not when a DAG file is parsed

        incident = self.incident if isinstance(self.incident, dict) else {}
        if not incident.get("broker_ids"):
            raise AirflowSkipException("no suspect broker: nothing to move (a ZooKeeper incident, or none named)")
        config = _config(incident["cluster"])
        if not config.mitigation.enabled:
            raise AirflowSkipException(f"mitigation is off for cluster {config.name!r} (mitigation.enabled): leadership stays "
                                       "where it is; the capture goes on")
        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            snapshot = read_snapshot(zk, config.name)
        evidence, checks = _evidence(config, snapshot, [int(b) for b in incident["broker_ids"]])
        for b, c in sorted(checks.items()):
            self.log.info("direct check of broker %s: %s", b, "ok" if c.ok else c.error)
        if not evidence:
            raise AirflowSkipException(f"no suspect of {sorted(incident['broker_ids'])} fails a direct check now while an open "
                                       "incident says it is not serving: leadership stays where it is; the capture goes on")
        b = sorted(evidence)[0]
        dplan = D.plan_demote(snapshot, b, evidence)
        for line in dplan.blast_radius():
            self.log.info("%s", line)
        if dplan.refused:
            raise AirflowSkipException("moving leadership off broker %s is refused: %s; the capture goes on"
                                       % (b, "; ".join(str(r) for r in dplan.refusals)))
        store = IncidentStore(config)
        starter = getattr(context.get("dag_run"), "triggering_user_name", None)
        record = store.open(cluster=config.name, broker_ids=[b], opened_by=starter or f"dag:{context['ti'].dag_id}",
                            reason=f"move leadership off broker {b}, which does not serve (incident {incident.get('incident_id')})",
                            trigger={"kind": D.KIND, "incident_id": incident.get("incident_id"), "broker_ids": [b]})
        plan = to_plan(dplan, snapshot, record["id"])
        digest = plan_digest(plan)
        L.Ledger(config, record["id"]).append(L.PLANNED, context["ti"].run_id, plan=plan.to_dict(), digest=digest, starter=starter)
        store.update(record["id"], plan=plan.to_dict(), plan_digest=digest)
        store.audit(record["id"], actor=starter or f"dag:{context['ti'].dag_id}", action="plan_demote", outcome="ok",
                    details={"plan": plan.to_dict(), "digest": digest, "run_id": context["ti"].run_id})
        return {"plan": plan.to_dict(), "digest": digest, "canary": config.canary.enabled, "findings": [],
                "gates": list(GATES), "incident_id": incident.get("incident_id"),
                "approval_wait_s": config.mitigation.approval_wait_s}


class MitigateOperator(ClusterChangingOperator):
    """Moves leadership as approved (``remediate/demote_run.py``); never retries."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.remediate import demote_run as R  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.executor import Execution, Halted, Refused  # deferred: loaded when the task runs, not when a DAG file is parsed

        plan, config, decision, approver = self.approved_plan(context, "leadership was not moved")
        ti = context["ti"]
        ex = Execution(config=config, plan=plan, record_id=plan.roll_id, dag_id=ti.dag_id, run_id=ti.run_id,
                       task_id=ti.task_id, try_number=int(ti.try_number), approver=approver, starter=decision.starter,
                       canary=bool((decision.binding or {}).get("canary", {}).get("enabled")))
        started = clock.now_iso()
        try:
            result = R.run(ex)
        except (Refused, Halted) as exc:
            _on_incident(config, self.plan_output, approver, started, exc)
            raise AirflowFailException(str(exc)) from exc
        self.log.info("moved %d partition(s) off broker %s; staying down until its restart: %s",
                      len(result["moved"]), result["broker_id"], sorted(result["stays_offline"]) or "none")
        _on_incident(config, self.plan_output, approver, started, result=result)
        return result


def mitigation_summary(started: str, result: Mapping[str, Any] | None = None, error: BaseException | None = None) -> dict[str, Any]:
    """What the mitigation did and when, as the incident keeps it (its page and its audit trail show it)."""
    from kafka_runbooks.remediate.executor import Refused  # deferred: loaded when the task runs, not when a DAG file is parsed

    if result is None:
        return {"outcome": "refused" if isinstance(error, Refused) else "halted", "started_at": started,
                "ended_at": clock.now_iso(), "reason": str(error).splitlines()[:12], "jvm_touched": False}
    return {"outcome": "moved", "started_at": started, "ended_at": result.get("at"), "broker_id": result["broker_id"],
            "moved": list(result["moved"]), "new_leaders": dict(result.get("new_leaders") or {}),
            "stays_offline": dict(result.get("stays_offline") or {}), "timing": dict(result.get("timing") or {}),
            "approved_by": result.get("approved_by"), "record_id": result.get("record_id"), "jvm_touched": False}


def _on_incident(config, plan_output: Mapping[str, Any], approver: str, started: str, error: BaseException | None = None,
                 result: Mapping[str, Any] | None = None) -> None:
    """The incident the mitigation served records what it did and when (``mitigation`` on the record, and its audit
    trail); a record that cannot be written is logged, never hides the move's own outcome (its own record has it all)."""
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed

    incident_id = plan_output.get("incident_id")
    if not incident_id:
        return
    summary = mitigation_summary(started, result, error)
    summary["record_id"] = summary.get("record_id") or (plan_output.get("plan") or {}).get("roll_id")
    try:
        store = IncidentStore(config)
        store.update(incident_id, mitigation=summary)
        store.audit(incident_id, actor=approver, action="mitigation", outcome=summary["outcome"], details=summary)
    except Exception as exc:  # noqa: BLE001 - the mitigation's own record and ledger are complete
        log.warning("could not record the mitigation on incident %s: %s", incident_id, exc)


class RestoreOrderOperator(BaseOperator):
    """After the restart passed its gates and the cluster recovered: the mitigation's original replica order written
    back (bound by the mitigation's approval), so the deferred preferred election returns leadership to the broker."""

    template_fields: Sequence[str] = ("mitigation",)

    def __init__(self, *, mitigation: Any, **kwargs: Any) -> None:
        kwargs["retries"] = 0
        super().__init__(**kwargs)
        self.mitigation = mitigation

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate import demote as D  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.demote_run import restore_order  # deferred: loaded when the task runs, not when a DAG file is parsed
        from kafka_runbooks.remediate.lock import MaintenanceLock  # deferred: loaded when the task runs, not when a DAG file is parsed

        m = self.mitigation if isinstance(self.mitigation, dict) else {}
        if not m.get("restore"):
            raise AirflowSkipException("no mitigation ran in this response: no replica order to write back")
        config = _config(context["params"]["cluster"])
        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            lock = MaintenanceLock(zk, config.name, run=context["ti"].run_id, dag=context["ti"].dag_id, user=None, purpose=D.KIND)
            lock.acquire(config.gates.lock_wait_s)
            try:
                out = restore_order(zk, config, m["restore"], guard=lock.check)
            finally:
                lock.release()
        IncidentStore(config).audit(m["record_id"], actor=f"dag:{context['ti'].dag_id}", action="restore_order",
                                    outcome="ok" if not out["left"] else "partial", details=out)
        for line in out["left"]:
            self.log.warning("not written back: %s", line)
        return out
