"""DAG params shared by the DAGs' trigger forms."""

from __future__ import annotations

import os

from airflow.sdk import Param


def cluster_param() -> Param:
    return Param(
        os.environ.get("KAFKA_RUNBOOKS_DEFAULT_CLUSTER", "lab"),
        type="string",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        description="Cluster name, a key of the kafka_runbooks_clusters Variable.",
    )


def broker_ids_param(description: str) -> Param:
    """A list of broker ids, checked in the trigger form itself: Airflow's form checks the items of a JSON array
    only when they are declared ``number`` (not ``integer``), so the ids are numbers that are whole and >= 0 --
    ``["1"]`` or ``[1.5]`` is refused in the form, never by a "Bad Request" after the click."""
    return Param([], type="array", items={"type": "number", "multipleOf": 1, "minimum": 0}, uniqueItems=True,
                 description=description + ' A JSON list of broker ids, e.g. [1, 2].')


def maintenance_params(*, brokers: str, execute: str) -> dict[str, Param]:
    """The form every maintenance DAG starts with: cluster, brokers, reason (required), dry-run or execute."""
    return {
        "cluster": cluster_param(),
        "brokers": broker_ids_param(brokers),
        "reason": Param("", type="string", minLength=1, maxLength=2000, description="Why (recorded with every action)."),
        "mode": Param("dry-run", type="string", enum=["dry-run", "execute"],
                      description=f"dry-run shows the plan and changes nothing; execute {execute}."),
    }
