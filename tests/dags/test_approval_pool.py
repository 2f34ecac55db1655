"""Issue 17 §3: the remediation pool is per cluster. Pools are not templated and the cluster is a run parameter, so
the cluster policy ``kafka_runbooks.policies.task_instance_mutation_hook`` (installed through airflow_local_settings.py,
as a deployment installs it) moves every cluster-changing task to ``kafka_runbooks_remediation_<cluster>`` when
Airflow creates the run's task instances: one cluster's roll never queues another cluster's incident restart.
Run in a child process: Airflow reads airflow_local_settings once, at import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(600)]

SCRIPT = r"""
import json, sys, uuid
from kafka_lab.airflow_home import load_dags
from airflow.settings import task_instance_mutation_hook
dags = load_dags()
out = {"policy_active": not getattr(task_instance_mutation_hook, "is_noop", True)}
for dag_id, conf in json.loads(sys.argv[1]):
    run = dags.get_dag(dag_id).test(run_conf=conf)
    out[f"{dag_id}:{conf['cluster']}"] = {ti.task_id: ti.pool for ti in run.get_task_instances()}
print("POOLS " + json.dumps(out))
"""


def test_cluster_changing_tasks_run_in_their_own_clusters_pool(airflow_db, tmp_path):
    settings_dir = tmp_path / "airflow-config"
    settings_dir.mkdir()
    (settings_dir / "airflow_local_settings.py").write_text("from kafka_runbooks.policies import task_instance_mutation_hook  # noqa: F401\n")
    # clusters nobody configured: the plan tasks fail at once, after Airflow made every task instance
    runs = [("kafka_rolling_restart", {"cluster": "east", "brokers": [1], "reason": f"pool {uuid.uuid4().hex[:6]}", "mode": "execute"}),
            ("kafka_incident_response", {"cluster": "west", "broker_ids": [2], "reason": "pool test"}),
            ("kafka_preferred_election", {"cluster": "east", "reason": "pool test"})]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(settings_dir), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(runs)], env=env, capture_output=True, text=True, timeout=500)
    line = next((l for l in res.stdout.splitlines() if l.startswith("POOLS ")), None)
    assert line, res.stdout[-3000:] + res.stderr[-3000:]
    pools = json.loads(line[len("POOLS "):])
    assert pools["policy_active"] is True
    roll, response, election = pools["kafka_rolling_restart:east"], pools["kafka_incident_response:west"], pools["kafka_preferred_election:east"]
    assert roll["execute"] == "kafka_runbooks_remediation_east" and response["restart"] == "kafka_runbooks_remediation_west"
    assert election["elect"] == "kafka_runbooks_remediation_east"
    # only the tasks that change a cluster: planning, asking and capturing share Airflow's default pool
    assert roll["plan"] == roll["approve"] == response["capture"] == "default_pool"


def test_the_policy_leaves_other_tasks_and_unknown_clusters_alone():
    from types import SimpleNamespace

    from kafka_runbooks.policies import POOL, task_instance_mutation_hook

    ti = SimpleNamespace(pool=POOL)
    task_instance_mutation_hook(ti, SimpleNamespace(conf={"cluster": "prod-eu.1"}))
    assert ti.pool == "kafka_runbooks_remediation_prod-eu.1"
    for conf in ({}, None, {"cluster": "../etc"}, {"cluster": 7}):
        ti = SimpleNamespace(pool=POOL)
        task_instance_mutation_hook(ti, SimpleNamespace(conf=conf))
        assert ti.pool == POOL  # unknown: it stays in the shared pool (waits for the others; never unguarded)
    other = SimpleNamespace(pool="default_pool")
    task_instance_mutation_hook(other, SimpleNamespace(conf={"cluster": "east"}))
    assert other.pool == "default_pool"
