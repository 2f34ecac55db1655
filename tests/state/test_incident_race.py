"""Two health checks of one cluster racing (two processes, the real DetectFindingsOperator, the state database on
SQLite and on PostgreSQL through the ``kafka_runbooks_db`` connection): the problem opens ONE incident and starts
ONE response."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "detect"))
from detect_builders import at, check, fetch_error, probe, snapshot  # noqa: E402


class TI:
    def get_dagrun_state(self, dag_id, run_id):
        return "running"


def hung(n: int):
    return dataclasses.replace(snapshot(checks=[check(1), check(2), check(3, ok=False)],
                                        probes=[probe(1, errors=[fetch_error(1, 3, 30 * n - 5)]), probe(2), probe(3)]),
                               taken_at=at(30 * n))


def run_check(n: int, run_id: str) -> list:
    from kafka_runbooks.operators.detect import DetectFindingsOperator

    op = DetectFindingsOperator(task_id="detect", cluster="lab", snapshot=hung(n).to_dict())
    return op.execute({"dag": SimpleNamespace(dag_id="kafka_health_check"), "run_id": run_id, "ti": TI()})


def _racer(barrier, n: int, run_id: str) -> list:
    """A health check that, once it decided to open the incident, waits for the other one to decide too."""
    from kafka_runbooks.incidents.store import IncidentStore

    real_open = IncidentStore.open

    def open_after_the_other_decided(self, **kw):
        barrier.wait(60)
        return real_open(self, **kw)

    IncidentStore.open = open_after_the_other_decided
    return run_check(n, run_id)


@pytest.fixture(params=["sqlite", "postgresql"])
def cluster(request, tmp_path, monkeypatch):
    path = tmp_path / "clusters.json"
    path.write_text(json.dumps({"lab": {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                        "incident_base": str(tmp_path / "incidents"),
                                        "health": {"consecutive_checks": 2, "clear_checks": 2, "recheck_s": 0}}}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(path))
    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_DB", raising=False)
    if request.param == "postgresql":
        u = request.getfixturevalue("postgres_state_db").url
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_DB", json.dumps({
            "conn_type": "postgres", "host": u.host, "port": u.port, "login": u.username, "password": u.password,
            "schema": u.database}))
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.state import state_of

    config = load_cluster("lab")
    assert state_of(config).dialect == request.param  # the connection decides, the embedded database otherwise
    return config


def test_two_racing_health_checks_open_one_incident(cluster):
    from kafka_runbooks.incidents.store import IncidentStore

    assert run_check(0, "scheduled__0") == []  # held once: not yet
    ctx = multiprocessing.get_context("fork")
    with ctx.Manager() as manager, ctx.Pool(2) as pool:
        barrier = manager.Barrier(2)
        results = [pool.apply_async(_racer, (barrier, 1, run_id)) for run_id in ("scheduled__1", "asset_triggered__1")]
        starts = [r.get(120) for r in results]
    records = IncidentStore(cluster).records("lab")
    assert len(records) == 1, records
    (record,) = records
    assert sorted(len(s) for s in starts) == [0, 1]  # one response started, by the check that opened it
    (start,) = [s for s in starts if s][0]
    assert start["conf"]["incident_id"] == record["id"] and record["status"] == "responding"
    assert record["open_key"].startswith("lab/")
    # the next check notes the same incident: nothing new opens
    assert run_check(2, "scheduled__2") == []
    assert [r["id"] for r in IncidentStore(cluster).records("lab")] == [record["id"]]
