"""The approval gate of every remediation: Airflow's HITL ApprovalOperator, made to mean something.

* One approval per plan, showing the whole plan and its blast radius (``remediate/briefing.py``),
  bound to the digest of the plan AND of everything that will run for it (``digest.execution_binding``:
  argv per broker, the host map, the gates, the canary switch, the approvers, the seal key's connection),
  this run and this try (see ``remediate/approvals.py`` for the design).
* Four eyes: the HITL request is assigned to the cluster's configured approvers minus whoever
  started the run (``dag_run.triggering_user_name``, compared by id and by name: ``approvals.approver_names``),
  so Airflow's REST API refuses anybody else; the answer is checked again here against the same rule before it
  counts. A run nobody started (another DAG, a schedule) is recorded as automatic; only an approver counts.
* The decision is the resume event Airflow built from the task's own HITL detail row (written by
  the REST endpoint or the scheduler's timeout sweep), recorded by ``execute_complete`` in the
  remediation ledger sealed with an HMAC whose key is the password of the Airflow connection
  ``approvals.secret_conn_id``. (Reading the row back with the Task SDK's
  ``get_hitl_detail_content_detail`` is not possible here: task-sdk 1.3.2's supervisor does not
  serve ``GetHITLDetailResponse`` -- "Unhandled request" -- in workers or under ``dag.test()``.) It is also pushed to XCom (key ``decision``)
  for the incident's close-out -- nothing that changes a cluster reads it from there.
* On-call is told that an approval waits (``notifiers``: e.g. ``OnCallWebhookNotifier``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Sequence

from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.truth import truthy as _truthy  # the execute task reads the switch the same way

DECISION_KEY = "decision"
REQUESTED = "approval_requested"


def approval_secret(conn_id: str) -> bytes:
    from airflow.sdk import BaseHook

    from kafka_runbooks.remediate.approvals import ApprovalError, check_secret

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:  # noqa: BLE001 - AirflowNotFoundException and friends
        raise ApprovalError(f"no approval key: Airflow connection {conn_id!r} is missing ({exc})") from exc
    return check_secret(conn.password, conn_id)


def _responded_at(value: Any) -> str | None:
    return value.isoformat() if hasattr(value, "isoformat") else (str(value) if value else None)


class RemediationApprovalOperator(ApprovalOperator):
    """``plan_output``: the plan task's return value (templated). A dry run skips the approval and
    everything after it; a refused plan never reaches a person."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = (*ApprovalOperator.template_fields, "plan_output", "cluster")

    def __init__(self, *, plan_output: Any = None, cluster: str = "{{ params.cluster }}", max_wait_s: float | None = None,
                 **kwargs: Any) -> None:
        kwargs.setdefault("defaults", self.REJECT)  # no answer in time is a Reject: nothing changes
        if kwargs["defaults"] not in (self.REJECT, [self.REJECT]):
            raise ValueError("a remediation approval may only default to Reject")
        kwargs.setdefault("subject", "Approve the remediation plan of {{ params.cluster }}?")
        # replaced by the cluster's approvals.timeout_s when the request is made
        kwargs.setdefault("response_timeout", timedelta(hours=1))
        kwargs["retries"] = 0
        super().__init__(**kwargs)
        self.plan_output = plan_output
        self.cluster = cluster
        self.max_wait_s = max_wait_s  # caps approvals.timeout_s (an approval other work waits on)

    # -- helpers ------------------------------------------------------------------------------

    def _setup(self):
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.remediate.digest import approval_digest, execution_binding
        from kafka_runbooks.remediate.ledger import Ledger

        if not isinstance(self.plan_output, dict) or "plan" not in self.plan_output:
            raise AirflowFailException("no plan to approve (see the plan task)")
        config = load_cluster(str(self.cluster))
        from kafka_runbooks.operators.recorded import load_recorded_plan  # the plan as recorded, never XCom's copy

        plan, _, _ = load_recorded_plan(self.plan_output, "nothing to approve")
        if plan.cluster != config.name:
            raise AirflowFailException(f"the plan is for cluster {plan.cluster!r}, not {config.name!r}")
        record_id = plan.roll_id
        if not record_id:
            raise AirflowFailException("the plan has no record to bind the approval to")

        binding = execution_binding(config, plan, _truthy(self.plan_output.get("canary")))
        return config, plan, approval_digest(plan, binding), Ledger(config, record_id), binding

    # -- ask ----------------------------------------------------------------------------------

    def execute(self, context) -> Any:
        from kafka_runbooks.model import Finding
        from kafka_runbooks.operators.links import incident_url
        from kafka_runbooks.remediate import approvals as A
        from kafka_runbooks.remediate import asking, briefing
        from kafka_runbooks.remediate.briefing import approval_body

        if isinstance(self.plan_output, dict) and self.plan_output.get("dry_run"):
            raise AirflowSkipException("dry run: the plan was shown; nothing is asked and nothing is changed")
        config, plan, digest, ledger, binding = self._setup()
        if plan.refused:
            raise AirflowFailException("the plan is refused; nothing to approve:\n" + "\n".join(plan.refusals))
        ti = context["ti"]
        dag_run = context.get("dag_run")
        starter = getattr(dag_run, "triggering_user_name", None) or None
        automatic = None if starter else (f"run type {getattr(getattr(dag_run, 'run_type', None), 'value', getattr(dag_run, 'run_type', '?'))}: "
                                          "started by another DAG or a schedule, no person recorded as its starter")
        assigned = A.assigned_users(config.approvals.approvers, starter, config.approvals.approver_names)
        if not assigned:
            raise AirflowFailException(
                f"cluster {config.name!r} has no approver other than the person who started this run ({starter!r}); "
                "configure approvals.approvers"
            )
        secret = approval_secret(config.approvals.secret_conn_id)
        request = A.Decision(
            dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, try_number=int(ti.try_number), plan_digest=digest,
            chosen=None, user_id=None, user_name=None, responded_at=None, timed_out=False, starter=starter,
            automatic=automatic, binding=binding, plan=plan.to_dict(),
        )
        ledger.append(REQUESTED, ti.run_id, **A.entry_for(request, secret), assigned=[u["id"] for u in assigned])
        self.assigned_users = assigned
        caps = [config.approvals.timeout_s, self.max_wait_s, self.plan_output.get("approval_wait_s")]
        self.response_timeout = timedelta(seconds=min(float(c) for c in caps if c))
        findings = [Finding.from_dict(f) for f in (self.plan_output.get("findings") or [])]
        commands = {
            s.broker_id: {w: config.argv(f"{w}_command", s.broker_id) for w in ("stop", "start", "kill")}
            for s in plan.steps if s.action == "restart_broker"
        }
        page = incident_url(config.name, record_id=plan.roll_id)
        self.subject = f"{self.subject}{asking.subject_suffix(starter, assigned)}"
        self.body = approval_body(
            findings, plan, report_path=page + "/report" if self.plan_output.get("report") else None,
            approval_timeout=str(self.response_timeout), commands=commands, digest=digest,
            gates=self.plan_output.get("gates") or (), binding=binding, started_by=request.started_by,
            header=asking.header(starter=starter, automatic=automatic, why=self._why(config, plan, findings), assigned=assigned,
                                 approvers=config.approvals.approvers, incident_url=page, what=briefing.what(plan),
                                 risk=briefing.risk(plan)),
            footer=asking.footer(starter=starter, assigned=assigned, approvers=config.approvals.approvers),
            incident_url=page,
        )
        self.log.info("asking %s to approve plan %s of run %s (started by %s)", [u["id"] for u in assigned], digest[:12], ti.run_id, starter)
        return super().execute(context)

    @staticmethod
    def _why(config, plan, findings) -> str:
        """The record's reason (the form's, or the health check's finding) and the analysis' first critical finding."""
        from kafka_runbooks.incidents.store import IncidentStore

        try:
            reason = str(IncidentStore(config).get(plan.roll_id).get("reason") or "")
        except Exception as exc:  # noqa: BLE001 - the page says it could not read it; the request still goes out
            reason = f"(the record's reason could not be read: {exc})"
        top = sorted(findings, key=lambda f: (f.severity.value != "critical", f.kind))[:1]
        return reason + (f"; analysis: {top[0].summary}" if top and top[0].summary not in reason else "")

    # -- answer -------------------------------------------------------------------------------

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        from kafka_runbooks.remediate import approvals as A

        from kafka_runbooks.remediate.digest import binding_changes

        config, plan, digest, ledger, binding = self._setup()
        ti = context["ti"]
        secret = approval_secret(config.approvals.secret_conn_id)
        requested = self._requested(ledger, ti, secret)
        timed_out = "error" in event or bool(event.get("timedout"))
        user = None if timed_out else event.get("responded_by_user")
        chosen = self.REJECT if timed_out else (event.get("chosen_options") or [None])[0]
        refusals: list[str] = []
        if requested is None:
            refusals.append("no sealed approval request of this try was found in the ledger")
        elif requested.plan_digest != digest:
            changes = binding_changes(requested.plan or {}, plan.to_dict(), "plan.") + binding_changes(requested.binding or {}, binding)
            refusals.append("what would run changed after the approval was requested: " + ("; ".join(changes[:20]) or "the plan"))
        if not timed_out:
            refusals += A.four_eyes_refusals((user or {}).get("id"), (user or {}).get("name"), config.approvals.approvers,
                                             requested.starter if requested else None, config.approvals.approver_names)
        decision = A.Decision(
            dag_id=ti.dag_id, run_id=ti.run_id, task_id=ti.task_id, try_number=int(ti.try_number),
            plan_digest=requested.plan_digest if requested else digest, chosen=chosen,
            user_id=(user or {}).get("id"), user_name=(user or {}).get("name"),
            responded_at=None if timed_out else _responded_at(event.get("responded_at")), timed_out=timed_out,
            starter=requested.starter if requested else None, refusals=tuple(refusals),
            automatic=requested.automatic if requested else None,
            binding=requested.binding if requested else binding, plan=requested.plan if requested else plan.to_dict(),
        )
        ledger.append("approval", ti.run_id, **A.entry_for(decision, secret))
        self._audit(config, plan, decision)
        if not timed_out and not refusals:  # a person who counts answered: on-call's PagerDuty page is acknowledged
            from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded when the task runs, not when a DAG file is parsed
            from kafka_runbooks.notify.pagerduty import acknowledge  # deferred: loaded when the task runs, not when a DAG file is parsed

            acknowledge(IncidentStore(config), config, plan.roll_id, actor="approval", answered_by=decision.user_name)
        ti.xcom_push(key=DECISION_KEY, value={
            "chosen_options": [chosen] if chosen else [],
            "responded_by_user": user,
            "responded_at": decision.responded_at,
            "timedout": timed_out,
            "refusals": list(refusals),
        })
        if refusals and chosen == self.APPROVE:
            raise AirflowFailException("the approval does not count: " + "; ".join(refusals))
        return super().execute_complete(context=context, event=event)

    def _requested(self, ledger, ti, secret: bytes):
        import hmac

        from kafka_runbooks.remediate import approvals as A

        for e in reversed(ledger.entries()):
            d = e.get("decision") or {}
            if e.get("event") == REQUESTED and d.get("run_id") == ti.run_id and d.get("dag_id") == ti.dag_id \
                    and int(d.get("try_number") or 0) == int(ti.try_number):
                request = A.Decision.from_payload(d)
                if hmac.compare_digest(str(e.get("mac") or ""), A.seal(request, secret)):
                    return request
        return None

    def _audit(self, config, plan, decision) -> None:
        from kafka_runbooks.incidents.store import IncidentStore

        outcome = "timeout" if decision.timed_out else ("refused" if decision.refusals else str(decision.chosen or "none").lower())
        payload = decision.payload()
        payload.pop("binding", None)
        payload.pop("plan", None)
        IncidentStore(config).audit(
            plan.roll_id, actor=decision.user_name or "nobody", action="approval", outcome=outcome,
            details={"decision": payload, "started_by": decision.started_by, "automatic_run": decision.automatic is not None},
        )
