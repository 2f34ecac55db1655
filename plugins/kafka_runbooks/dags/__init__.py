"""The DAG factory: every kafka-runbooks DAG, built from the package, so a team's DAG folder needs one short file
(``example_dags/kafka_runbooks_dags.py``)::

    from kafka_runbooks.dags import create_dags

    create_dags(globals())

It creates the deployment-wide DAGs (incident response, rolling restart, preferred election and its schedule, fleet
analytics: the cluster is a run parameter) and one health check per configured cluster (the Airflow Variable
``kafka_runbooks_clusters``, or the file named by ``KAFKA_RUNBOOKS_CLUSTERS_FILE``). Each DAG's module here says what
it does; the repository's ``dags/`` has one file per DAG built the same way.
"""

from __future__ import annotations

from typing import Any, Mapping, MutableMapping

DEPLOYMENT_DAGS = ("incident_response", "rolling_restart", "preferred_election", "preferred_election_schedule",
                   "fleet_analytics")


def create_dags(namespace: MutableMapping[str, Any] | None = None, *, clusters: Mapping[str, Any] | None = None,
                include: tuple[str, ...] = DEPLOYMENT_DAGS, health_checks: bool = True) -> dict[str, Any]:
    """``{dag_id: DAG}`` of every DAG, also put into ``namespace`` (a DAG file's ``globals()``) so Airflow finds them.
    ``clusters``: the settings to build the health checks from (default: the Variable / file, read at parse time)."""
    import importlib

    dags: dict[str, Any] = {}
    for name in include:
        if name not in DEPLOYMENT_DAGS:
            raise ValueError(f"no DAG {name!r}: one of {list(DEPLOYMENT_DAGS)}")
        dag = importlib.import_module(f"kafka_runbooks.dags.{name}").build()
        dags[dag.dag_id] = dag
    if health_checks:
        from kafka_runbooks.dags.health_check import health_check_dags  # deferred: the factory loads a DAG's module only when it builds it

        dags.update(health_check_dags(clusters))
    if namespace is not None:
        namespace.update(dags)
    return dags
