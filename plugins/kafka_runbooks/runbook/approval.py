"""The approval of every change, as the application asks and hears it (the operator, ``operators/approval.py``, is
Airflow's HITL ApprovalOperator around these): ``ask`` builds the request -- the recorded plan (never the plan task's
XCom), its findings, gates and report as recorded with it, bound to the digest of the plan AND of everything that will
run for it (``digest.execution_binding``), sealed in the ledger, assigned to the approvers minus the starter -- and
``answer`` turns the HITL event into a sealed decision, refusing an answer that does not count (four eyes, a plan that
changed after it was asked). Design: ``remediate/approvals.py``."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from kafka_runbooks.runbook import plans
from kafka_runbooks.runbook.errors import Skip, Stop
from kafka_runbooks.runbook.task import Task

DECISION_KEY = "decision"
REQUESTED = "approval_requested"
APPROVE, REJECT = "Approve", "Reject"


@dataclass(frozen=True)
class Bound:
    """The recorded plan an approval is about, and the digest of what would run for it."""

    recorded: plans.RecordedPlan
    digest: str
    binding: Mapping[str, Any]

    @property
    def config(self):
        return self.recorded.config

    @property
    def plan(self):
        return self.recorded.plan


@dataclass(frozen=True)
class Request:
    """What the HITL request shows and to whom."""

    assigned: list[dict[str, Any]]
    timeout_s: float
    subject_suffix: str
    body: str
    digest: str


def secret_of_connection(conn_id: str) -> bytes:
    """The seal key: the password of the Airflow connection ``conn_id`` (``remediate.approvals.check_secret``)."""
    from airflow.sdk import BaseHook  # keeps DAG parsing fast; the one Airflow call of the services: a connection's password

    from kafka_runbooks.remediate.approvals import ApprovalError, check_secret  # keeps DAG parsing fast: loaded when a task runs

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - AirflowNotFoundException and friends
        raise ApprovalError(f"no approval key: Airflow connection {conn_id!r} is missing ({exc})") from exc
    return check_secret(conn.password, conn_id)


def bind(plan_output: Any, cluster: str, nothing: str, config_of: Callable[[str], Any] = plans.load_config) -> Bound:
    """The recorded plan the plan task's output refers to, of ``cluster``, with the digest of what would run for it."""
    from kafka_runbooks.remediate.digest import approval_digest, execution_binding  # keeps DAG parsing fast

    recorded = plans.load(plan_output, nothing, config_of)
    config = config_of(cluster)
    if recorded.plan.cluster != config.name:
        raise Stop(f"the plan is for cluster {recorded.plan.cluster!r}, not {config.name!r}")
    if not recorded.plan.roll_id:
        raise Stop("the plan has no record to bind the approval to")
    binding = execution_binding(recorded.config, recorded.plan, recorded.canary)
    return Bound(recorded, approval_digest(recorded.plan, binding), binding)


def automatic_run(task: Task) -> str | None:
    """Why nobody is recorded as the run's starter (another DAG, a schedule), None when a person started it."""
    if task.starter:
        return None
    return (f"run type {task.run_type or '?'}: started by another DAG or a schedule, no person recorded as its starter")


def ask(plan_output: Any, cluster: str, task: Task, *, secret_of: Callable[[str], bytes],
        max_wait_s: float | None = None, config_of: Callable[[str], Any] = plans.load_config) -> Request:
    """Seals the request in the ledger and returns what to show and to whom. Skip for a dry run; Stop for a refused
    plan, or a cluster with no approver but the starter."""
    from kafka_runbooks.remediate import approvals as A  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs

    if isinstance(plan_output, dict) and plan_output.get("dry_run"):
        raise Skip("dry run: the plan was shown; nothing is asked and nothing is changed")
    bound = bind(plan_output, cluster, "nothing to approve", config_of)
    config, plan = bound.config, bound.plan
    if plan.refused:
        raise Stop("the plan is refused; nothing to approve:\n" + "\n".join(plan.refusals))
    automatic = automatic_run(task)
    assigned = A.assigned_users(config.approvals.approvers, task.starter, config.approvals.approver_names)
    if not assigned:
        raise Stop(f"cluster {config.name!r} has no approver other than the person who started this run ({task.starter!r}); "
                   "configure approvals.approvers")
    request = A.Decision(
        dag_id=task.dag_id, run_id=task.run_id, task_id=task.task_id, try_number=task.try_number, plan_digest=bound.digest,
        chosen=None, user_id=None, user_name=None, responded_at=None, timed_out=False, starter=task.starter,
        automatic=automatic, binding=bound.binding, plan=plan.to_dict(),
    )
    Ledger(config, plan.roll_id).append(REQUESTED, task.run_id, **A.entry_for(request, secret_of(config.approvals.secret_conn_id)),
                                        assigned=[u["id"] for u in assigned])
    timeout_s = min(float(c) for c in (config.approvals.timeout_s, max_wait_s, bound.recorded.approval_wait_s) if c)
    body = _body(bound, task, request, assigned, automatic, timeout_s)
    task.log.info("asking %s to approve plan %s of run %s (started by %s)", [u["id"] for u in assigned], bound.digest[:12],
                  task.run_id, task.starter)
    from kafka_runbooks.remediate import asking  # keeps DAG parsing fast: loaded when a task runs

    return Request(assigned=assigned, timeout_s=timeout_s, subject_suffix=asking.subject_suffix(task.starter, assigned),
                   body=body, digest=bound.digest)


def _body(bound: Bound, task: Task, request, assigned, automatic, timeout_s: float) -> str:
    """The page a person approves: the recorded plan, the findings and gates recorded with it, the argv per broker."""
    import datetime as dt

    from kafka_runbooks.remediate import asking, briefing  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.urls import incident_url  # keeps DAG parsing fast: loaded when a task runs

    config, plan, recorded = bound.config, bound.plan, bound.recorded
    findings = list(recorded.findings)
    commands = {s.broker_id: {w: config.argv(f"{w}_command", s.broker_id) for w in ("stop", "start", "kill")}
                for s in plan.steps if s.action == "restart_broker"}
    page = incident_url(config.name, plan.roll_id)
    return briefing.approval_body(
        findings, plan, report_path=page + "/report" if recorded.report else None,
        approval_timeout=str(dt.timedelta(seconds=timeout_s)), commands=commands, digest=bound.digest,
        gates=recorded.gates, binding=bound.binding, started_by=request.started_by,
        header=asking.header(starter=task.starter, automatic=automatic, why=why(config, plan, findings), assigned=assigned,
                             approvers=config.approvals.approvers, incident_url=page, what=briefing.what(plan),
                             risk=briefing.risk(plan)),
        footer=asking.footer(starter=task.starter, assigned=assigned, approvers=config.approvals.approvers),
        incident_url=page,
    )


def why(config, plan, findings) -> str:
    """The record's reason (the form's, or the health check's finding) and the analysis' first critical finding."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    try:
        reason = str(IncidentStore(config).get(plan.roll_id).get("reason") or "")
    except Exception as exc:  # noqa: BLE001 - the page says it could not read it; the request still goes out
        reason = f"(the record's reason could not be read: {exc})"
    top = sorted(findings, key=lambda f: (f.severity.value != "critical", f.kind))[:1]
    return reason + (f"; analysis: {top[0].summary}" if top and top[0].summary not in reason else "")


def requested_of(ledger, task: Task, secret: bytes):
    """The sealed request of this try, None when there is none (or its seal does not hold)."""
    from kafka_runbooks.remediate import approvals as A  # keeps DAG parsing fast: loaded when a task runs

    for e in reversed(ledger.entries()):
        d = e.get("decision") or {}
        if e.get("event") == REQUESTED and d.get("run_id") == task.run_id and d.get("dag_id") == task.dag_id \
                and int(d.get("try_number") or 0) == task.try_number:
            request = A.Decision.from_payload(d)
            if hmac.compare_digest(str(e.get("mac") or ""), A.seal(request, secret)):
                return request
    return None


def _responded_at(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else (str(value) if value else None)


def answer(plan_output: Any, cluster: str, task: Task, event: Mapping[str, Any], *, secret_of: Callable[[str], bytes],
           config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Records the answer (the HITL event) as a sealed decision in the ledger and the audit, pushes it for the close
    (``DECISION_KEY``: nothing that changes a cluster reads it from there) and returns it. Stop when an Approve does
    not count: no sealed request of this try, a plan changed after it was asked, four eyes."""
    from kafka_runbooks.remediate import approvals as A  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.digest import binding_changes  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.ledger import Ledger  # keeps DAG parsing fast: loaded when a task runs

    bound = bind(plan_output, cluster, "nothing to approve", config_of)
    config, plan = bound.config, bound.plan
    secret = secret_of(config.approvals.secret_conn_id)
    ledger = Ledger(config, plan.roll_id)
    requested = requested_of(ledger, task, secret)
    timed_out = "error" in event or bool(event.get("timedout"))
    user = None if timed_out else event.get("responded_by_user")
    chosen = REJECT if timed_out else (event.get("chosen_options") or [None])[0]
    refusals: list[str] = []
    if requested is None:
        refusals.append("no sealed approval request of this try was found in the ledger")
    elif requested.plan_digest != bound.digest:
        changes = (binding_changes(requested.plan or {}, plan.to_dict(), "plan.")
                   + binding_changes(requested.binding or {}, bound.binding))
        refusals.append("what would run changed after the approval was requested: " + ("; ".join(changes[:20]) or "the plan"))
    if not timed_out:
        refusals += A.four_eyes_refusals((user or {}).get("id"), (user or {}).get("name"), config.approvals.approvers,
                                         requested.starter if requested else None, config.approvals.approver_names)
    decision = A.Decision(
        dag_id=task.dag_id, run_id=task.run_id, task_id=task.task_id, try_number=task.try_number,
        plan_digest=requested.plan_digest if requested else bound.digest, chosen=chosen,
        user_id=(user or {}).get("id"), user_name=(user or {}).get("name"),
        responded_at=None if timed_out else _responded_at(event.get("responded_at")), timed_out=timed_out,
        starter=requested.starter if requested else None, refusals=tuple(refusals),
        automatic=requested.automatic if requested else None,
        binding=requested.binding if requested else bound.binding, plan=requested.plan if requested else plan.to_dict(),
    )
    ledger.append("approval", task.run_id, **A.entry_for(decision, secret))
    _audit(config, plan, decision)
    if not timed_out and not refusals:  # a person who counts answered: on-call's PagerDuty page is acknowledged
        _acknowledge(config, plan, decision)
    if plan.kind == "demote" and chosen != APPROVE:  # a mitigation not approved ends here: no later task closes it
        _close_unapproved_move(config, plan, decision)
    said = {"chosen_options": [chosen] if chosen else [], "responded_by_user": user, "responded_at": decision.responded_at,
            "timedout": timed_out, "refusals": list(refusals)}
    task.push(DECISION_KEY, said)
    if refusals and chosen == APPROVE:
        raise Stop("the approval does not count: " + "; ".join(refusals))
    return said


def _close_unapproved_move(config, plan, decision) -> None:
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    why = "no answer in time" if decision.timed_out else f"rejected by {decision.user_name or 'nobody'}"
    IncidentStore(config).close(plan.roll_id, actor=decision.user_name or "approval",
                                resolution=f"{why}: leadership was not moved (the capture and the restart go on)")


def _acknowledge(config, plan, decision) -> None:
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.notify.pagerduty import acknowledge  # keeps DAG parsing fast: loaded when a task runs

    acknowledge(IncidentStore(config), config, plan.roll_id, actor="approval", answered_by=decision.user_name)


def _audit(config, plan, decision) -> None:
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    outcome = "timeout" if decision.timed_out else ("refused" if decision.refusals else str(decision.chosen or "none").lower())
    payload = decision.payload()
    payload.pop("binding", None)
    payload.pop("plan", None)
    IncidentStore(config).audit(
        plan.roll_id, actor=decision.user_name or "nobody", action="approval", outcome=outcome,
        details={"decision": payload, "started_by": decision.started_by, "automatic_run": decision.automatic is not None},
    )
