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

from kafka_runbooks.operators.glue import service
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.runbook.approval import DECISION_KEY, REQUESTED  # noqa: F401 - the keys pages and DAGs read
from kafka_runbooks.runbook.approval import secret_of_connection as approval_secret

__all__ = ["DECISION_KEY", "REQUESTED", "RemediationApprovalOperator", "approval_secret"]


def _secret(conn_id: str) -> bytes:
    return approval_secret(conn_id)  # looked up when called: a test may replace approval_secret


class RemediationApprovalOperator(ApprovalOperator):
    """``plan_output``: the plan task's return value (templated): the reference to the plan it recorded
    (``runbook/plans.py``). A dry run skips the approval and everything after it; a refused plan never reaches a
    person. The request and the answer are ``runbook/approval.py``'s."""

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

    def execute(self, context) -> Any:
        from kafka_runbooks.runbook import approval  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            request = approval.ask(self.plan_output, str(self.cluster), task, secret_of=_secret,
                                   max_wait_s=self.max_wait_s)
        self.assigned_users = request.assigned
        self.response_timeout = timedelta(seconds=request.timeout_s)
        self.subject = f"{self.subject}{request.subject_suffix}"
        self.body = request.body
        return super().execute(context)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        from kafka_runbooks.runbook import approval  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            approval.answer(self.plan_output, str(self.cluster), task, event, secret_of=_secret)
        return super().execute_complete(context=context, event=event)
