"""Open an incident from a request, and close it (or leave it to a person, saying why) at the end of a run: glue over
``runbook/incident.py``."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator, TriggerRule

from kafka_runbooks.operators.glue import service
from kafka_runbooks.operators.links import LINKS


class OpenIncidentOperator(BaseOperator):
    """Validates the request, opens (or resumes) the incident and records the cluster state at start
    (``runbook.incident.open_incident``)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("request",)

    def __init__(self, *, request: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request = request

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import incident  # keeps DAG parsing fast: the clients load when the task runs

        with service(context, self.log) as task:
            return incident.open_incident(self.request, task)


class CloseIncidentOperator(BaseOperator):
    """Last task of a response run (runs whatever happened upstream), and the incident's outcome
    (``runbook.incident.close_incident``): closed when approved, restarted and verified; otherwise ``needs_person``
    saying why -- and failed unless a person rejected the plan or the incident was explained."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "approval", "restart", "verify", "report", "explanation", "follow_up")

    def __init__(self, *, incident: Any, approval: Any, restart: Any, verify: Any, report: Any, explanation: Any = None,
                 follow_up: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.incident, self.approval, self.restart, self.verify = incident, approval, restart, verify
        self.report, self.explanation, self.follow_up = report, explanation, follow_up

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.operators.summary import refused_plan  # keeps DAG parsing fast: loaded when the task runs
        from kafka_runbooks.runbook import incident  # keeps DAG parsing fast: loaded when the task runs

        run = incident.Run(self.incident, self.approval, self.restart, self.verify, self.report, self.explanation,
                           self.follow_up, refused_plan(context))
        with service(context, self.log) as task:
            return incident.close_incident(run, task)
