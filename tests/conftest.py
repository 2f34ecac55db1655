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


PART = os.environ.get("KAFKA_RUNBOOKS_TEST_PART")  # ./run test: "lab" and "rest" run side by side; unset: every test


# fixtures that start a lab (one lab per slot runs at a time: _LabPool switches between versions)
LAB_FIXTURES = ("lab", "lab010")


def _uses_lab(item) -> bool:
    return any(f in item.fixturenames for f in LAB_FIXTURES)


def pytest_collection_modifyitems(config, items):
    """With KAFKA_RUNBOOKS_TEST_PART, only the tests that use the lab ("lab") or only the others ("rest"). The tests on
    the Kafka 0.10.2.1 lab run after every test on the 2.3.0 lab (the slot's addresses hold one lab: one switch)."""
    if PART in ("lab", "rest"):
        keep = [i for i in items if _uses_lab(i) == (PART == "lab")]
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep
    items.sort(key=lambda i: "lab010" in i.fixturenames)  # stable: the order within each group is kept


@pytest.fixture(scope="session")
def airflow_db():
    """Airflow's metadata DB (SQLite) for this test run, migrated once."""
    AIRFLOW_TEST_HOME.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], check=True, stdout=subprocess.DEVNULL)
    return AIRFLOW_TEST_HOME


class _LabPool:
    """At most one lab runs (a slot's loopback addresses hold one): asking for the other version stops the running one."""

    def __init__(self) -> None:
        self.current = None

    def get(self, kafka: str):
        from kafka_lab import Lab

        if self.current is not None and self.current.kafka == kafka:
            return self.current
        self.close()
        lab = Lab(TEST_VAR / ("lab" if kafka == "2.3.0" else f"lab-{kafka}"), kafka=kafka)
        self.current = lab
        lab.up()
        return lab

    def close(self) -> None:
        if self.current is not None:
            lab, self.current = self.current, None
            lab.down()


@pytest.fixture(scope="session")
def _lab_pool():
    pool = _LabPool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def lab(_lab_pool):
    """The practice cluster (3 ZooKeeper nodes, 3 sshd hosts, 3 real Kafka 2.3.0 brokers, load), one per session.

    Not under pytest's tmp dir: that is mode 700 and the broker hosts' users must reach the state dir.
    Tests that inject faults use ``healthy_lab``, which heals whatever the previous test left.
    """
    return _lab_pool.get("2.3.0")


@pytest.fixture
def healthy_lab(lab):
    """The session's lab, reset to the healthy baseline (every fault healed, full ISRs, preferred leaders, load)."""
    lab.reset()
    return lab


@pytest.fixture
def lab010(_lab_pool):
    """The same practice cluster with real Kafka 0.10.2.1 brokers (the seed incidents' era); started after every 2.3.0
    test has run (pytest_collection_modifyitems orders them)."""
    return _lab_pool.get("0.10.2.1")


@pytest.fixture
def healthy_lab010(lab010):
    lab010.reset()
    return lab010
