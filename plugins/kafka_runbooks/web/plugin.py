"""The Airflow plugin that mounts the kafka-runbooks app (``app.py``) in the api-server at ``/kafka-runbooks``.

Every Airflow process loads plugins (workers and triggerers too); only the api-server asks for ``fastapi_apps``,
so the app -- and the api-server's security modules it uses -- is built then, once.
"""

from __future__ import annotations

import functools
from typing import Any

from airflow.plugins_manager import AirflowPlugin


@functools.cache
def _app():
    from kafka_runbooks.web.app import create_app

    return create_app()


class KafkaRunbooksPlugin(AirflowPlugin):
    name = "kafka_runbooks"

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        from kafka_runbooks.web.app import PREFIX

        return [{"app": _app(), "url_prefix": PREFIX, "name": "kafka-runbooks"}]
