"""The FastAPI app the api-server mounts (``plugin.py``). Every route needs an authenticated Airflow user who may
read DAGs (the api-server's auth manager decides: its JWT as a bearer token or the UI's cookie); nothing here
writes anything.

    GET /api/fleet              per cluster: last check, open incidents and remediations, approvals waiting
    GET /api/fleet/{cluster}    the same for one cluster (404: not configured)
    GET /incidents              every cluster's open and recent incidents and remediations (HTML; needs_person first)
    GET /incidents/{cluster}/{id}            one record: status, finding, brokers, who acted, runs, audit timeline,
                                             plan and blast radius, evidence bundles (HTML)
    GET /incidents/{cluster}/{id}/report     its analysis report (served from the bundle, sandboxed)
    GET /incidents/{cluster}/{id}/files/{capture}/{path}   one file of its bundle (as text)
    GET /runs/{dag_id}/{run_id}[/report]     the record(s) a DAG run belongs to (a redirect when there is one)
    GET /api/incidents[/{cluster}/{id}]      the same as JSON

HTML is rendered here (``pages.py``, everything escaped) and sent with a Content-Security-Policy that allows no
script; the report is sent sandboxed.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, HTTPException

from kafka_runbooks.web.common import PAGE_CSP, REPORT_CSP, SECURITY_HEADERS  # noqa: F401 - routes and tests read them here too
from kafka_runbooks.web.common import configs as _configs
from kafka_runbooks.web.fleet import fleet_document

PREFIX = "/kafka-runbooks"


def _reader():
    """The api-server's authentication (JWT bearer or the UI's cookie), then: may this user read DAGs?"""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user

    def reader(user: Any = Depends(get_user)) -> Any:
        if not get_auth_manager().is_authorized_dag(method="GET", user=user):
            raise HTTPException(status_code=403, detail="reading the fleet needs read access to DAGs")
        return user

    return reader


def create_app() -> FastAPI:
    app = FastAPI(title="kafka-runbooks", description="Read-only views of the kafka-runbooks state database.")
    reader = Depends(_reader())

    @app.get("/api/fleet", dependencies=[reader])
    def fleet() -> dict[str, Any]:
        return fleet_document()

    @app.get("/api/fleet/{cluster}", dependencies=[reader])
    def cluster(cluster: str) -> dict[str, Any]:
        return fleet_document(cluster)

    from kafka_runbooks.web import routes

    routes.add(app, reader)
    return app
