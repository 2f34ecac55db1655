"""Capture: diagnostics from every broker host over SSH into an evidence bundle, before anything is touched -- glue
over ``runbook/capture.py``."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator

from kafka_runbooks.operators.glue import service
from kafka_runbooks.operators.links import LINKS


class CaptureEvidenceOperator(BaseOperator):
    """Captures the suspect broker(s) and their peers (``runbook.capture.capture``): in parallel, each host within its
    deadline, without stopping or pausing any JVM; the intrusive tools only where a direct check proves a suspect is
    not serving, under the maintenance lock. The task fails only when nothing at all could be captured."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident (its evidence bundles) and its report

    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import capture  # keeps DAG parsing fast: paramiko loads when the task runs

        with service(context, self.log) as task:
            return capture.capture(self.incident, task)
