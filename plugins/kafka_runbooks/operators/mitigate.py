"""Mitigate first (issue 30): the incident response's first change -- move leadership off the broker that does not
serve, its JVM untouched -- as glue over ``runbook/mitigate.py``. Nothing to move, or no evidence: the plan task is
skipped, saying why, and the capture goes on; a refused or halted move fails its task, and the capture goes on too.
"""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from kafka_runbooks.operators.glue import service
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.operators.remediate import ClusterChangingOperator, secret_of


class PlanMitigationOperator(BaseOperator):
    """Plans moving leadership off the incident's not-serving broker; records it under a record of its own
    (``runbook.mitigate.plan``)."""

    operator_extra_links = LINKS
    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import mitigate  # keeps DAG parsing fast: the clients load when the task runs

        with service(context, self.log) as task:
            return mitigate.plan(self.incident, task)


class MitigateOperator(ClusterChangingOperator):
    """Moves leadership as approved (``runbook.mitigate.execute``); never retries."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import mitigate  # keeps DAG parsing fast: the engine loads when the task runs

        with service(context, self.log) as task:
            return mitigate.execute(self.plan_output, task, secret_of)


class RestoreOrderOperator(ClusterChangingOperator):
    """After the restart passed its gates and the cluster recovered: the original replica order the recorded
    mitigation (``plan_output``: the mitigation's plan reference) wrote in its intent, written back, so the deferred
    preferred election returns leadership to the broker. Nothing of it is read from XCom."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import mitigate  # keeps DAG parsing fast: kazoo loads when the task runs

        with service(context, self.log) as task:
            return mitigate.restore(self.plan_output, context["params"]["cluster"], task)
