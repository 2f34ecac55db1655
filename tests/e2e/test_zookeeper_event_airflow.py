"""The event path with Airflow's own components: api-server, dag-processor, scheduler and triggerer
(LocalExecutor, SQLite, this slot's loopback address), the lab's real Kafka and ZooKeeper.

Broker 3 is paused: its ZooKeeper session expires, the ZooKeeperChangeTrigger running in the
triggerer sees /brokers/ids change, the asset it watches starts a health run (run type
``asset_triggered``, the cron being years away), which finds broker 3 alive but unregistered,
re-checks it, opens one incident and queues one response run (paused here: nothing is restarted).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafka_lab.airflow_home import REPO
from kafka_lab.net import service_ip, slot

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.third_lane, pytest.mark.timeout(600)]  # lane 3 (ci20: the lab lane the longest, 2,301 s)

COMPONENTS = {
    "api-server": ["api-server"],
    "dag-processor": ["dag-processor"],
    "scheduler": ["scheduler", "--skip-serve-logs"],  # no log server: it would bind every address
    "triggerer": ["triggerer", "--skip-serve-logs"],
}
BOUND_S = 180.0  # generous: Airflow's processes start slowly on a loaded 2-core machine


def _wait(what: str, fn, bound: float = BOUND_S, interval: float = 1.0, procs=None):
    deadline = time.monotonic() + bound
    while True:
        got = fn()
        if got:
            return got
        for name, p in (procs or {}).items():
            if p.poll() is not None:
                pytest.fail(f"airflow {name} exited with {p.returncode} while waiting for {what}", pytrace=False)
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {bound:.0f}s", pytrace=False)
        time.sleep(interval)


def _rows(db: Path, sql: str, *args):
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as c:
        try:
            return c.execute(sql, args).fetchall()
        except sqlite3.OperationalError:  # the schema is being created
            return []


@pytest.fixture
def airflow_stack(healthy_lab, tmp_path):
    home = tmp_path / "airflow"
    home.mkdir()
    airflow = str(Path(sys.executable).parent / "airflow")
    host, port = service_ip("api_server"), 28080 + slot()
    clusters = healthy_lab.cluster_settings()
    clusters["lab"] = {**clusters["lab"], "incident_base": str(tmp_path / "incidents"), "bundle_base": str(tmp_path / "bundles")}
    env = {
        **os.environ,
        **healthy_lab.airflow_env(),
        "AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS": json.dumps(clusters),  # this test's own incidents and history
        # the ZooKeeper watch's own path: the serving watch (tests/lab/test_serving_watch_lab.py) would see the paused
        # broker stop answering before its session expires
        "KAFKA_RUNBOOKS_WATCH_SERVING": "false",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__API__HOST": host,
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{host}:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "kafka-runbooks-e2e-only",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "KAFKA_RUNBOOKS_DEFAULT_CLUSTER": "lab",
        "KAFKA_RUNBOOKS_HEALTH_SCHEDULE": "0 0 1 1 *",  # the cron is not what starts the run under test
        "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO / "lab"), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run([airflow, "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    procs: dict[str, subprocess.Popen] = {}
    try:
        for name, args in COMPONENTS.items():
            log = open(home / f"{name}.log", "wb")
            procs[name] = subprocess.Popen([airflow, *args], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        yield home, env, airflow, procs, clusters["lab"]
    finally:
        for p in procs.values():
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for p in procs.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
                p.wait(10)
        shutil.rmtree(home, ignore_errors=True)


def test_a_registration_change_starts_a_health_run_that_opens_the_incident(airflow_stack, healthy_lab):
    home, env, airflow, procs, settings = airflow_stack
    db = home / "airflow.db"
    _wait("both DAGs parsed", lambda: {"kafka_health_check_lab", "kafka_incident_response"}
          <= {r[0] for r in _rows(db, "select dag_id from dag where dag_id like 'kafka_%'")}, procs=procs)
    subprocess.run([airflow, "dags", "unpause", "kafka_health_check_lab"], env=env, check=True, capture_output=True, timeout=120)
    trig_log = home / "triggerer.log"
    _wait("the ZooKeeper watch running in the triggerer", lambda: trig_log.exists() and b"watching /brokers/ids" in trig_log.read_bytes(),
          procs=procs)
    # the cron's latest tick (January 1st) runs once on unpause: let it finish first
    _wait("the catch-up run to end", lambda: not _rows(db, "select 1 from dag_run where dag_id='kafka_health_check_lab' and state in ('queued','running')"),
          procs=procs)
    assert not _rows(db, "select 1 from dag_run where run_type='asset_triggered'")  # nothing changed yet: no event

    t_fault = time.time()
    healthy_lab.pause(3)
    runs = _wait("an asset-triggered health run", lambda: _rows(
        db, "select run_id, queued_at from dag_run where dag_id='kafka_health_check_lab' and run_type='asset_triggered'"), procs=procs)
    assert b"ZooKeeper change on lab" in trig_log.read_bytes()
    (run_id, _), = runs
    _wait("the health run to end", lambda: _rows(db, "select state from dag_run where run_id=? and state in ('success','failed')", run_id),
          procs=procs)
    assert _rows(db, "select state from dag_run where run_id=?", run_id) == [("success",)]

    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    incidents = IncidentStore(ClusterConfig.from_dict("lab", settings)).records("lab")
    assert len(incidents) == 1, incidents
    (incident,) = incidents
    assert incident["opened_at"] >= time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_fault - 1))
    assert incident["broker_ids"] == [3] and incident["status"] == "responding"
    assert incident["trigger"]["kind"] in ("broker_unregistered_alive", "broker_unresponsive")
    assert incident["trigger"]["details"]["process_state"] == "stopped"
    assert _rows(db, "select run_type, state from dag_run where dag_id='kafka_incident_response' and run_id=?",
                 incident["response_run"]) == [("operator_triggered", "queued")]  # the response DAG is paused
