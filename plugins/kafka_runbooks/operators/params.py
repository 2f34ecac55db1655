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
