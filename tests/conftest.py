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


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata DB (SQLite) for this test run, migrated once."""
    AIRFLOW_TEST_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
    return AIRFLOW_TEST_HOME


@pytest.fixture(scope="module")
def lab():
    """The practice cluster (3 ZooKeeper nodes, 3 sshd hosts, 3 broker JVMs), fresh per module.

    Not under pytest's tmp dir: that is mode 700 and the broker hosts' users must reach the state dir.
    """
    from kafka_lab import Lab

    lab = Lab(TEST_VAR / "lab")
    try:
        lab.up()
        yield lab
    finally:
        lab.down()
