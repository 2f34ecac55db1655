"""Operator extra links from a run's tasks to its incident (or remediation record) and its report, served by the
kafka-runbooks app in the api-server (``web/``).

Airflow 3 evaluates a link on the worker when the task ends (also when it fails) and keeps the URL in XCom. The
URL names the run, not the record -- ``/kafka-runbooks/runs/<dag>/<run>`` finds the record(s) the run belongs to
in the state database when it is opened, so the link is right even for a task that ended before a record existed.
"""

from __future__ import annotations

import urllib.parse

from airflow.sdk import BaseOperatorLink

from kafka_runbooks.urls import PREFIX, _base, incident_url  # noqa: F401 - the links' own names, and their home before


def run_path(dag_id: str, run_id: str, suffix: str = "") -> str:
    q = lambda v: urllib.parse.quote(str(v), safe="")  # noqa: E731
    return f"{_base()}{PREFIX}/runs/{q(dag_id)}/{q(run_id)}{suffix}"


class IncidentLink(BaseOperatorLink):
    name = "Incident"

    def get_link(self, operator, *, ti_key) -> str:
        return run_path(ti_key.dag_id, ti_key.run_id)


class ReportLink(BaseOperatorLink):
    name = "Incident report"

    def get_link(self, operator, *, ti_key) -> str:
        return run_path(ti_key.dag_id, ti_key.run_id, "/report")


LINKS = (IncidentLink(), ReportLink())
