"""Airflow cluster policy: every task that changes a Kafka cluster runs in THAT cluster's pool.

Why a policy. A pool is chosen per task, at DAG parse time, and ``pool`` is not a templated field, while the
cluster a remediation acts on is a run parameter (the form's ``cluster``, or the conf the health check passes).
One shared pool of one slot made one cluster's two-hour roll queue every other cluster's incident restart.
Airflow's own hook for routing a task instance by its run's configuration is ``task_instance_mutation_hook``
(its hookspec: "route a task to a different queue based on the run's configuration (dag_run.conf)"), run by
the scheduler when it creates the run's task instances, before any is queued. Here it moves the tasks of the
shared pool ``kafka_runbooks_remediation`` (``ClusterChangingOperator``) to ``kafka_runbooks_remediation_<cluster>``.

Install it in ``airflow_local_settings.py`` (``$AIRFLOW_HOME/config/``), where Airflow registers it::

    from kafka_runbooks.policies import task_instance_mutation_hook  # noqa: F401

and create one pool per cluster: ``airflow pools set kafka_runbooks_remediation_<cluster> 1 "changes to <cluster>"``
(a task whose pool does not exist is never scheduled: a missing pool holds the change back, it never runs
unguarded). Without the policy the tasks stay in the shared pool: safe, but clusters wait for each other. The
one-change-at-a-time rule per cluster is the maintenance lock's (remediate/lock.py), not the pool's.
"""

from __future__ import annotations

import re
from typing import Any

POOL = "kafka_runbooks_remediation"  # the shared pool ClusterChangingOperator sets
_CLUSTER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def cluster_pool(cluster: str) -> str:
    return f"{POOL}_{cluster}"


def cluster_of(dag_run: Any) -> str | None:
    """The cluster a run acts on, from its conf (the form's and the health check's ``cluster``); None if unknown."""
    conf = getattr(dag_run, "conf", None) or {}
    cluster = conf.get("cluster") if isinstance(conf, dict) else None
    return cluster if isinstance(cluster, str) and _CLUSTER.fullmatch(cluster) else None


def task_instance_mutation_hook(task_instance: Any, dag_run: Any = None) -> None:
    """A task of the shared remediation pool moves to its run's cluster's pool (unknown cluster: it stays)."""
    if getattr(task_instance, "pool", None) != POOL or dag_run is None:
        return
    cluster = cluster_of(dag_run)
    if cluster is not None:
        task_instance.pool = cluster_pool(cluster)
