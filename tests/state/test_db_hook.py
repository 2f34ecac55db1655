"""Which database: the Airflow connection ``kafka_runbooks_db`` (through KafkaRunbooksDbHook) when it exists, else
the cluster's embedded SQLite; a bad connection is an error naming it, never a silent fallback; no password leaks."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.hooks.db import KafkaRunbooksDbHook, state_db_for
from kafka_runbooks.incidents.store import IncidentStore
from kafka_runbooks.state import StateDb, StateError, state_of

CONN = "AIRFLOW_CONN_KAFKA_RUNBOOKS_DB"


@pytest.fixture
def config(tmp_path):
    return ClusterConfig.from_dict("prod", {"zk_conn_id": "z", "hosts": {"1": "h"}, "incident_base": str(tmp_path / "incidents")})


def test_without_the_connection_the_cluster_keeps_an_embedded_database(config, monkeypatch, tmp_path):
    monkeypatch.delenv(CONN, raising=False)
    db = state_db_for(config)
    assert db.dialect == "sqlite" and db.url.database == str(tmp_path / "incidents" / "kafka_runbooks.sqlite")
    assert state_of(config) == db and IncidentStore(config).db == db


def test_the_connection_names_the_postgresql_database_and_hides_its_password(config, monkeypatch):
    monkeypatch.setenv(CONN, json.dumps({"conn_type": "postgres", "host": "db.example", "port": 5433, "login": "krb",
                                         "password": "s3cret/with@chars", "schema": "kafka_runbooks",
                                         "extra": {"sslmode": "verify-full"}}))
    db = state_db_for(config)
    assert db.dialect == "postgresql" and db.url.host == "db.example" and db.url.port == 5433
    assert db.url.database == "kafka_runbooks" and db.url.query == {"sslmode": "verify-full", "connect_timeout": "10"}
    assert db.url.password == "s3cret/with@chars"
    assert "s3cret" not in repr(db) and "s3cret" not in db.safe_url


@pytest.mark.parametrize("conn, message", [
    ({"conn_type": "mysql", "host": "h", "schema": "d"}, "use postgres"),
    ({"conn_type": "postgres", "host": "h"}, "needs a host and a schema"),
    ({"conn_type": "postgres", "host": "h", "schema": "d", "extra": {"sslmode": "require", "bogus": 1}}, "unknown extra keys"),
    ({"conn_type": "sqlite"}, "file's path"),
])
def test_a_wrong_connection_is_an_error_naming_it(config, monkeypatch, conn, message):
    monkeypatch.setenv(CONN, json.dumps(conn))
    with pytest.raises(StateError, match=message):
        state_db_for(config)


def test_a_sqlite_connection_is_one_file_for_every_cluster(config, monkeypatch, tmp_path):
    monkeypatch.setenv(CONN, json.dumps({"conn_type": "sqlite", "host": str(tmp_path / "shared.sqlite")}))
    other = ClusterConfig.from_dict("other", {"zk_conn_id": "z", "hosts": {"1": "h"}, "incident_base": str(tmp_path / "x")})
    assert state_db_for(config) == state_db_for(other) == KafkaRunbooksDbHook().get_conn()
    IncidentStore(config).open(cluster="prod", broker_ids=[1], reason="r", opened_by="t")
    assert [r["cluster"] for r in IncidentStore(other).records()] == ["prod"]


def test_an_unreachable_database_fails_with_its_name_and_no_password(monkeypatch):
    from kafka_lab.net import service_ip

    db = StateDb(f"postgresql+psycopg2://krb:topsecret@{service_ip('capture_ssh_down')}:1/kafka_runbooks?connect_timeout=2")
    with pytest.raises(Exception) as err:
        IncidentStore(db).records()
    assert "topsecret" not in str(err.value)
