"""DAG params shared by the DAGs' trigger forms."""

from __future__ import annotations

import os

from airflow.sdk import Param


def cluster_param() -> Param:
    return Param(
        os.environ.get("KAFKA_RUNBOOKS_DEFAULT_CLUSTER", "lab"),
        type="string",
        # "(?!\n)": jsonschema searches with Python's re, whose "$" also matches before a trailing newline
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$(?!\n)",
        description="Cluster name, a key of the kafka_runbooks_clusters Variable.",
    )


def broker_ids_param(description: str) -> Param:
    """A list of broker ids. Airflow's trigger form checks a JSON array's items only when they are declared ``number``
    (not ``integer``): what is not JSON (``1, 2``) or not a list of numbers (``["1"]``) is refused by the form itself,
    under the field, and Trigger stays disabled. What the form cannot check (``[1.5]``, ``[-1]``, ``[1, 1]``: whole,
    >= 0, unique) the api-server refuses against this schema, and the form shows its reason ("Invalid input for param
    brokers: 1.5 is not a multiple of 1"); no run starts. tests/deployed/test_browser.py tries each in Chromium."""
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
