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


def maintenance_params(*, brokers: str, execute: str) -> dict[str, Param]:
    """The form every maintenance DAG starts with: cluster, brokers, reason (required), dry-run or execute."""
    return {
        "cluster": cluster_param(),
        "brokers": Param([], type="array", items={"type": "integer", "minimum": 0}, description=brokers),
        "reason": Param("", type="string", minLength=1, maxLength=2000, description="Why (recorded with every action)."),
        "mode": Param("dry-run", type="string", enum=["dry-run", "execute"],
                      description=f"dry-run shows the plan and changes nothing; execute {execute}."),
    }
