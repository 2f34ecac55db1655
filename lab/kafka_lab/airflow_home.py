"""A private Airflow home for drills and tests: SQLite metadata DB, the repo's DAGs, the lab's connections.

Everything Airflow reads is set in the environment before Airflow is imported; credentials reach
the DAGs only as Airflow connections (AIRFLOW_CONN_*), exactly as in a real deployment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Mapping

REPO = Path(__file__).resolve().parents[2]


SPARK_CONF_DIR = REPO / "lab" / "spark-conf"


def airflow_environment(home: Path, lab_env: Mapping[str, str]) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        # DAG files are parsed in this process (dag.test()); Airflow's import timeout arms SIGALRM and
        # disarms it after each file, which also cancels a caller's own alarm (pytest-timeout's). A task's
        # execution_timeout would do the same under dag.test(): none of the DAGs sets one
        "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "0",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO"),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        # the lab's spark-defaults.conf: short analysis jobs on C1 only (half the CPU of a small job here)
        "SPARK_CONF_DIR": os.environ.get("SPARK_CONF_DIR", str(SPARK_CONF_DIR)),
        # spark-submit must come from the same venv as the worker
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
    }
    env.update(lab_env)
    return env


def prepare(home: Path, lab_env: Mapping[str, str]) -> dict[str, str]:
    """Sets the environment of this process and migrates the metadata DB (idempotent, ~4 s first time)."""
    home.mkdir(parents=True, exist_ok=True)
    env = airflow_environment(home, lab_env)
    if "airflow.configuration" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(home):
        raise RuntimeError("Airflow was imported before its environment was set; import it after prepare()")
    os.environ.update(env)
    subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
        check=True,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
    )
    # the pool of the tasks that change a cluster (operators/remediate.py POOL); a scheduler never runs
    # a task whose pool does not exist
    subprocess.run(
        [str(Path(sys.executable).parent / "airflow"), "pools", "set", "kafka_runbooks_remediation", "1", "tasks that change a Kafka cluster"],
        check=True,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
    )
    return env


def load_dags():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(str(REPO / "dags"))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    return bag


def incident_of(conf: dict) -> dict:
    """The incident a response conf names, as the state database records it: the health check's conf is a reference
    (the cluster, the incident, its brokers), never a copy of the finding -- the finding that opened it is the record's
    ``trigger`` (issue 28)."""
    from kafka_runbooks.config import load_cluster  # after the environment is set: it may read Airflow's Variable
    from kafka_runbooks.incidents.store import IncidentStore  # after the environment is set, as everything Airflow reads

    return IncidentStore(load_cluster(conf["cluster"])).get(conf["incident_id"])


def take_triggered_confs(dag_id: str) -> list[dict]:
    """Confs of runs queued by a TriggerDagRunOperator, removed from the queue.

    Under dag.test() no scheduler picks queued runs up; the caller runs each conf through
    dag.test() instead, which is what replaces them (as dag.test() itself replaces a colliding run).
    """
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState

    with create_session() as session:
        runs = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id, DagRun.state == DagRunState.QUEUED).order_by(DagRun.id)
        ).all()
        confs = [dict(r.conf or {}) for r in runs]
        for r in runs:
            session.delete(r)
        return confs
