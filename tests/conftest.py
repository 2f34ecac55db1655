"""Shared fixtures. Airflow's environment is set here, before anything imports Airflow."""

from __future__ import annotations

import os
from pathlib import Path

from kafka_lab.airflow_home import REPO, airflow_environment

TEST_VAR = Path(os.environ.get("KAFKA_RUNBOOKS_TEST_VAR", REPO / "var" / "test"))
AIRFLOW_TEST_HOME = TEST_VAR / "airflow"
os.environ.update(airflow_environment(AIRFLOW_TEST_HOME, {}))


import subprocess
import sys

import pytest


PART = os.environ.get("KAFKA_RUNBOOKS_TEST_PART")  # ./run test's lanes (see _part); unset: every test


def _part(item) -> str:
    """Which lane of ``./run test`` runs the test: "lab" (the Kafka 2.3.0 lab), "deployed" (tests/deployed: a
    deployment and a lab of their own), "lab-c" (tests marked ``third_lane``, on a 2.3.0 lab of a third slot after the
    tests without a lab), "lab-d" (the tests marked ``fourth_lane``, on a 2.3.0 lab of a fourth slot, from the start),
    "lab-b" (the lab's own tests in tests/lab, after lab-d in that lane, in a pytest process of their own: their
    ``down``/``up`` moves the lab's state directory, state database included, away from under a process that used it --
    ci14's resume test wrote to the moved file), "rest" (no lab), or "rest-b" (no lab, marked ``second_lane``: Spark
    tests and two Airflow DAG modules, after the deployed suite in its lane). Lanes are balanced by the fresh-clone runs'
    durations (docs/FIGURES.md)."""
    if "deployment" in item.fixturenames:
        return "deployed"
    if _uses_lab(item):
        if item.get_closest_marker("third_lane"):
            return "lab-c"
        if item.path.parent.name == "lab":
            return "lab-b"
        return "lab-d" if item.get_closest_marker("fourth_lane") else "lab"
    return "rest-b" if item.get_closest_marker("second_lane") else "rest"


# fixtures that start a lab (one lab per slot)
LAB_FIXTURES = ("lab",)


def _uses_lab(item) -> bool:
    return any(f in item.fixturenames for f in LAB_FIXTURES)


def pytest_collection_modifyitems(config, items):
    """With KAFKA_RUNBOOKS_TEST_PART, only that lane's tests (``_part``)."""
    if PART in ("lab", "rest", "rest-b", "deployed", "lab-b", "lab-c", "lab-d"):
        keep = [i for i in items if _part(i) == PART]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata DB (SQLite) for this test run, migrated once."""
    AIRFLOW_TEST_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
    return AIRFLOW_TEST_HOME


@pytest.fixture(scope="session")
def _session_lab():
    """The slot's one lab, started the first time a test asks for it and stopped at the session's end."""
    from kafka_lab import Lab

    started: list = []

    def get():
        if not started:
            started.append(Lab(TEST_VAR / "lab"))  # before up(): a lab that failed half-way up is still taken down
            started[0].up()
        return started[0]

    try:
        yield get
    finally:
        if started:
            started[0].down()


@pytest.fixture
def lab(_session_lab):
    """The practice cluster (3 ZooKeeper nodes, 3 sshd hosts, 3 real Kafka 2.3.0 brokers, load), one per session.

    Not under pytest's tmp dir: that is mode 700 and the broker hosts' users must reach the state dir.
    Tests that inject faults use ``healthy_lab``, which heals whatever the previous test left.
    """
    return _session_lab()


@pytest.fixture
def healthy_lab(lab):
    """The session's lab, reset to the healthy baseline (every fault healed, full ISRs, preferred leaders, load)."""
    lab.reset()
    return lab


@pytest.fixture(scope="session")
def postgres():
    """A private PostgreSQL server (Debian ``postgresql``, ``kafka_lab.servers.Postgres``) on this slot's postgres
    address and a free port, for the session; stopped at its end. Missing PostgreSQL fails the tests that use it."""
    from airflow_runs import free_port
    from kafka_lab.net import service_ip
    from kafka_lab.servers import Postgres

    pg = Postgres(TEST_VAR / "postgres", port=free_port(service_ip("postgres")))
    pg.down()  # a server an interrupted session left on this data directory
    pg.up()
    try:
        yield pg
    finally:
        pg.down()


@pytest.fixture(scope="session")
def postgres_state_url(postgres):
    """The URL of a PostgreSQL database for the state tests (created once; emptied by ``state_db`` before each)."""
    return postgres.create_database("krb_store_tests")


@pytest.fixture
def postgres_state_db(postgres_state_url):
    """The session's PostgreSQL state database, at head and emptied for this test."""
    from kafka_runbooks.state.db import StateDb
    from kafka_runbooks.state.schema import metadata

    db = StateDb(postgres_state_url)
    db.upgrade()
    with db.engine.begin() as c:
        c.exec_driver_sql("TRUNCATE " + ", ".join(t.name for t in metadata.sorted_tables) + " RESTART IDENTITY CASCADE")
    return db


@pytest.fixture(params=["sqlite", "postgresql"])
def state_db(request, tmp_path):
    """The product's state database, empty and at head: the embedded SQLite, then the session's PostgreSQL."""
    from kafka_runbooks.state.db import StateDb

    if request.param == "sqlite":
        return StateDb.embedded(tmp_path / "state")
    return request.getfixturevalue("postgres_state_db")

