"""The Airflow plugin that mounts the kafka-runbooks app (``app.py``) in the api-server at ``/kafka-runbooks`` and
puts its incidents page in Airflow's navigation (an external view, opened as a page of its own) and on every DAG run's page (a tab: the records that run belongs to).

Every Airflow process loads plugins (workers and triggerers too); only the api-server asks for ``fastapi_apps``,
so the app -- and the api-server's security modules it uses -- is built then, once.
"""

from __future__ import annotations

import functools
from typing import Any

from airflow.plugins_manager import AirflowPlugin

PREFIX = "/kafka-runbooks"  # web/app.py's, without importing FastAPI in every process

EXTERNAL_VIEWS = [
    # no url_route: Airflow 3.3 opens it as a page of its own (a new tab), not in its sandboxed frame, where a link to
    # Airflow's pages could only nest a second Airflow UI (the frame allows no top navigation)
    {"name": "Kafka incidents", "href": f"{PREFIX}/incidents", "destination": "nav", "category": "browse"},
    # Airflow fills {DAG_ID} and {RUN_ID} in for a dag_run tab
    {"name": "Incident", "href": f"{PREFIX}/runs/{{DAG_ID}}/{{RUN_ID}}", "destination": "dag_run",
     "url_route": "kafka-run-incident"},
]


@functools.cache
def _app():
    from kafka_runbooks.web.app import create_app

    return create_app()


class KafkaRunbooksPlugin(AirflowPlugin):
    name = "kafka_runbooks"
    external_views = EXTERNAL_VIEWS

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [{"app": _app(), "url_prefix": PREFIX, "name": "kafka-runbooks"}]
