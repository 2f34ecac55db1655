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


PART = os.environ.get("KAFKA_RUNBOOKS_TEST_PART")  # ./run test: "lab" and "rest" side by side, then "deployed"; unset: every test


def _part(item) -> str:
    if "deployment" in item.fixturenames:  # tests/deployed: a deployment and a lab of their own
        return "deployed"
    return "lab" if "lab" in item.fixturenames else "rest"


def pytest_collection_modifyitems(config, items):
    """With KAFKA_RUNBOOKS_TEST_PART, only the tests that use the lab ("lab"), the deployed suite ("deployed"), or
    the others ("rest")."""
    if PART not in ("lab", "rest", "deployed"):
        return
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
def lab():
    """The practice cluster (3 ZooKeeper nodes, 3 sshd hosts, 3 real Kafka 2.3.0 brokers, load), one per session.

    Not under pytest's tmp dir: that is mode 700 and the broker hosts' users must reach the state dir.
    Tests that inject faults use ``healthy_lab``, which heals whatever the previous test left.
    """
    from kafka_lab import Lab

    lab = Lab(TEST_VAR / "lab")
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


@pytest.fixture
def healthy_lab(lab):
    """The session's lab, reset to the healthy baseline (every fault healed, full ISRs, preferred leaders, load)."""
    lab.reset()
    return lab
