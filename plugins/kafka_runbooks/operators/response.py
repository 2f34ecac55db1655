"""The incident response's choices after the analysis -- restart through the engine, or explain and hand over to a
person; after a restart, whether the peers need a rolling restart too -- as glue over ``runbook/response.py``."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import BaseBranchOperator, BaseOperator

from kafka_runbooks.operators.glue import said, service, task_of
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.runbook.response import FOLLOW_UP_KEY, ROLLING_RESTART_DAG

__all__ = ["FOLLOW_UP_KEY", "ROLLING_RESTART_DAG", "ChooseRemediationOperator", "ExplainIncidentOperator",
           "FollowUpPeersOperator"]


class ChooseRemediationOperator(BaseBranchOperator):
    """Branches to ``restart_task`` (the engine's plan) or ``explain_task`` (no restart): ``runbook.response.choose``."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "report")

    def __init__(self, *, incident: Any, report: Any, restart_task: str = "plan", explain_task: str = "explain", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.report = report
        self.restart_task = restart_task
        self.explain_task = explain_task

    def choose_branch(self, context) -> str:
        from kafka_runbooks.runbook import response  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            choice = response.choose(self.incident, self.report, task)
        return self.restart_task if choice.kind == response.RESTART else self.explain_task


class ExplainIncidentOperator(BaseOperator):
    """No restart applies: records on the incident what was found, why nothing is restarted, what to do (the
    runbook), and returns it for the close-out (``runbook.response.explain``)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "report", "remediation")

    def __init__(self, *, incident: Any, report: Any, remediation: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.report = report
        self.remediation = remediation

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import response  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            return response.explain(self.incident, self.report, self.remediation, task)


class FollowUpPeersOperator(TriggerDagRunOperator):
    """After the restarted broker(s) came back: peers that show a symptom in every one of ``health.consecutive_checks``
    checks get a rolling restart -- ``kafka_rolling_restart`` is started for them, and asks for its own approval
    (``runbook.response.follow_up``). Peers that look fine: nothing."""

    template_fields: Sequence[str] = (*TriggerDagRunOperator.template_fields, "incident", "restart", "remediation")

    def __init__(self, *, incident: Any, restart: Any, remediation: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_dag_id", ROLLING_RESTART_DAG)
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.incident = incident
        self.restart = restart
        self.remediation = remediation

    def execute(self, context) -> Any:
        from kafka_runbooks.runbook import response  # keeps DAG parsing fast: the clients load when the task runs

        task = task_of(context, self.log)
        result, start = response.follow_up(self.incident, self.restart, self.remediation, task)
        said(context, self.log, task)  # the result is pushed also when the trigger below ends this task
        if start is not None:
            self.conf, self.trigger_run_id = start["conf"], start["run_id"]
            super().execute(context)
        return result
