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


MAX_BROKER_ID = 2**31 - 1


def configured_brokers(raw=None) -> dict[int, list[str]]:
    """Every broker id of the configured clusters (the Variable ``kafka_runbooks_clusters``, read at parse time as the
    health-check DAG file does) -> the clusters that have it. Empty when nothing is configured or it cannot be read."""
    if raw is None:
        try:
            from kafka_runbooks.config import raw_clusters  # deferred: loaded when the task runs, not when a DAG file is parsed

            raw = raw_clusters(missing_ok=True)
        except Exception:  # noqa: BLE001 - no Variable, no metadata DB: the form falls back to a JSON list of numbers
            return {}
    out: dict[int, list[str]] = {}
    for name, settings in sorted((raw or {}).items()):
        for b in ((settings or {}).get("hosts") or {}) if isinstance(settings, dict) else ():
            if str(b).strip().isdigit() and 0 <= int(b) <= MAX_BROKER_ID:
                out.setdefault(int(b), []).append(str(name))
    return dict(sorted(out.items()))


def broker_ids_param(description: str, brokers: dict[int, list[str]] | None = None) -> Param:
    """A list of broker ids.

    When clusters are configured (``brokers``: :func:`configured_brokers`), the form offers exactly their broker ids to
    choose from (Airflow's multi-select: an array param with ``examples``; ``values_display`` names each as "broker 2"
    with its clusters when there are several): a broker that does not exist cannot be entered, a fraction neither.
    Airflow's multi-select sends the chosen ids as strings (``["2"]``), the REST API numbers (``[2]``): the schema
    takes both, only for configured ids, each once -- anything else is refused by the api-server (no run starts), and
    the plan refuses a broker the chosen cluster does not have.

    Without configured clusters: a JSON list of whole numbers >= 0 (Airflow's form checks that its items are numbers).
    tests/deployed/test_browser.py tries both in Chromium."""
    brokers = configured_brokers() if brokers is None else brokers
    if not brokers:
        return Param([], type="array", items={"type": "number", "multipleOf": 1, "minimum": 0}, uniqueItems=True,
                     description=description + ' A JSON list of broker ids, e.g. [1, 2].')
    several = len({c for cs in brokers.values() for c in cs}) > 1
    shown = {str(b): f"broker {b}" + (f" ({', '.join(cs)})" if several else "") for b, cs in brokers.items()}
    return Param([], type="array", examples=list(brokers), values_display=shown,
                 items={"type": ["integer", "string"], "enum": list(brokers) + [str(b) for b in brokers]}, uniqueItems=True,
                 description=description + " Choose from the configured brokers"
                 + (" (each with its cluster)." if several else "."))


def maintenance_params(*, brokers: str, execute: str) -> dict[str, Param]:
    """The form every maintenance DAG starts with: cluster, brokers, reason (required), dry-run or execute."""
    return {
        "cluster": cluster_param(),
        "brokers": broker_ids_param(brokers),
        "reason": Param("", type="string", minLength=1, maxLength=2000, description="Why (recorded with every action)."),
        "mode": Param("dry-run", type="string", enum=["dry-run", "execute"],
                      description=f"dry-run shows the plan and changes nothing; execute {execute}."),
    }
