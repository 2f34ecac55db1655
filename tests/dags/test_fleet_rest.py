"""The fleet overview through the REAL api-server: the kafka-runbooks plugin's FastAPI app mounted at
/kafka-runbooks, behind Airflow's authentication; the clusters come from the Variable in Airflow's metadata
database (set through REST), the state from the product's database -- the embedded SQLite first, then the
PostgreSQL named by the connection ``kafka_runbooks_db`` (created through REST)."""

from __future__ import annotations

import json

import pytest
import requests

from airflow_runs import ApiServer

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

USERS = {"vera": "viewer", "root": "admin"}


@pytest.fixture(scope="module")
def api_server(airflow_db, tmp_path_factory):
    server = ApiServer(tmp_path_factory.mktemp("fleet-api"), USERS).start()
    try:
        yield server
    finally:
        server.stop()


def _put(api: ApiServer, kind: str, key: str, body: dict) -> None:
    path = f"/api/v2/{kind}"
    r = api.call("root", "PATCH", f"{path}/{key}", json=body)
    if r.status_code == 404:
        r = api.call("root", "POST", path, json=body)
    assert r.status_code in (200, 201), r.text


def _delete(api: ApiServer, kind: str, key: str) -> None:
    api.call("root", "DELETE", f"/api/v2/{kind}/{key}")


def _cluster(base) -> dict:
    return {"zk_conn_id": "nowhere_zk", "hosts": {"1": "h1", "2": "h2"}, "incident_base": str(base),
            "approvals": {"approvers": ["carol"], "timeout_s": 3600}}


def _open_incident(config, broker: int, reason: str) -> str:
    from kafka_runbooks.detect.history import HistoryStore
    from kafka_runbooks.incidents.store import IncidentStore

    HistoryStore(config).update_state(lambda st: {**st, "last_check": "2026-11-24T10:00:00.000Z", "checks": 3})
    return IncidentStore(config).open(cluster=config.name, broker_ids=[broker], reason=reason, opened_by="dag:test",
                                      trigger={"kind": "broker_unresponsive", "severity": "critical"})["id"]


def test_the_fleet_overview_is_served_behind_airflows_authentication(api_server, tmp_path, postgres_state_db, monkeypatch):
    from kafka_runbooks.config import ClusterConfig

    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_DB", raising=False)
    clusters = {"east": _cluster(tmp_path / "east"), "west": _cluster(tmp_path / "west"),
                "broken": {"zk_conn_id": "z", "hosts": {"1": "h"}, "bogus_setting": 1}}
    _delete(api_server, "connections", "kafka_runbooks_db")
    _put(api_server, "variables", "kafka_runbooks_clusters", {"key": "kafka_runbooks_clusters", "value": json.dumps(clusters)})
    east = ClusterConfig.from_dict("east", clusters["east"])
    incident = _open_incident(east, 2, "broker 2 stopped answering")

    url = f"{api_server.url}/kafka-runbooks/api/fleet"
    assert requests.get(url, timeout=30).status_code == 401  # no credentials
    assert requests.get(url, headers={"Authorization": "Bearer not-a-token"}, timeout=30).status_code in (401, 403)
    r = api_server.call("vera", "GET", "/kafka-runbooks/api/fleet")
    assert r.status_code == 200, r.text
    by = {c["cluster"]: c for c in r.json()["clusters"]}
    assert sorted(by) == ["broken", "east", "west"]
    assert [i["id"] for i in by["east"]["open_incidents"]] == [incident]
    assert by["east"]["last_check"] == "2026-11-24T10:00:00.000Z" and by["east"]["checks"] == 3
    assert by["west"]["open_incidents"] == [] and by["west"]["last_check"] is None
    assert "bogus_setting" in by["broken"]["error"]
    one = api_server.call("vera", "GET", "/kafka-runbooks/api/fleet/east").json()
    assert [c["cluster"] for c in one["clusters"]] == ["east"]
    assert api_server.call("vera", "GET", "/kafka-runbooks/api/fleet/nosuch").status_code == 404

    # the state moves to PostgreSQL: the connection kafka_runbooks_db, created through REST, is what the server reads now
    u = postgres_state_db.url
    _put(api_server, "connections", "kafka_runbooks_db", {
        "connection_id": "kafka_runbooks_db", "conn_type": "postgres", "host": u.host, "port": u.port, "login": u.username,
        "password": u.password, "schema": u.database})
    try:
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_DB", json.dumps({
            "conn_type": "postgres", "host": u.host, "port": u.port, "login": u.username, "password": u.password,
            "schema": u.database}))
        west = ClusterConfig.from_dict("west", clusters["west"])
        moved = _open_incident(west, 1, "broker 1 isolated")
        by = {c["cluster"]: c for c in api_server.call("vera", "GET", "/kafka-runbooks/api/fleet").json()["clusters"]}
        assert [i["id"] for i in by["west"]["open_incidents"]] == [moved]
        assert by["east"]["open_incidents"] == []  # east's embedded database is no longer where its state is read
        assert u.password not in json.dumps(by)
    finally:
        _delete(api_server, "connections", "kafka_runbooks_db")
        _delete(api_server, "variables", "kafka_runbooks_clusters")
