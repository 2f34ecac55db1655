"""Issue 19 problem 2: from a run's response, analysis, approval and execution tasks, one click to the incident (or the
remediation record) and its report, served by the kafka-runbooks app in the api-server -- not a file path on a
worker's disk. The links are the tasks' own operator extra links (operators/links.py)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("airflow_db")

LINKED = {
    "kafka_incident_response": ("open_incident", "capture", "analyze", "report", "plan", "approve", "restart", "close_incident"),
    "kafka_rolling_restart": ("plan", "approve", "execute", "close"),
}


@pytest.mark.parametrize("dag_id", sorted(LINKED))
def test_the_response_analysis_approval_and_execution_tasks_link_to_the_incident_and_its_report(bag, dag_id):
    from airflow.models.taskinstancekey import TaskInstanceKey

    dag = bag.get_dag(dag_id)
    run_id = "manual__2026-01-01T00:00:00+00:00"
    for task_id in LINKED[dag_id]:
        task = dag.get_task(task_id)
        links = {link.name: link for link in task.operator_extra_links}
        assert set(links) >= {"Incident", "Incident report"}, (dag_id, task_id, sorted(links))
        key = TaskInstanceKey(dag_id=dag_id, task_id=task_id, run_id=run_id, try_number=1)
        page = links["Incident"].get_link(task, ti_key=key)
        assert page.endswith(f"/kafka-runbooks/runs/{dag_id}/manual__2026-01-01T00%3A00%3A00%2B00%3A00"), page
        assert links["Incident report"].get_link(task, ti_key=key) == page + "/report"
