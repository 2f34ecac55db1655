"""The product's state, in one database (issue 18): the one place where anything the runbooks remember is kept.

    db.py          StateDb: the engine, transactions, the schema at head (Alembic, ``migrations/``)
    schema.py      the tables (prefix ``krb_``), append-only and one-way rules enforced by triggers
    incidents.py   incident records and their notes, the audit trail            (incidents/store.py: IncidentStore)
    ledger.py      remediation ledgers and approval markers                     (remediate/ledger.py: Ledger)
    history.py     health series and state (the detections' streaks, leadership) (detect/history.py: HistoryStore)
    bundles.py     the evidence bundles' index (the bundles stay files or s3a:// / hdfs:// objects)
    fleet.py       the fleet overview (per cluster: last check, open incidents, approvals waiting)

Which database: the Airflow connection ``kafka_runbooks_db`` (PostgreSQL) when it exists, else SQLite under the
cluster's ``incident_base`` (``hooks/db.py``). Every store is built from a :class:`StateDb` or a cluster's
``ClusterConfig`` (:func:`state_of`); a bare directory is refused, so no caller can split the state by accident.
"""

from __future__ import annotations

import os
from typing import Any

from kafka_runbooks.state.db import StateDb, StateError

__all__ = ["StateDb", "StateError", "state_of"]


def state_of(source: Any) -> StateDb:
    """The state database of ``source``: a :class:`StateDb`, or a ``ClusterConfig`` (its connection or embedded DB)."""
    if isinstance(source, StateDb):
        return source
    if isinstance(source, (str, bytes, os.PathLike)):
        raise TypeError(f"state lives in the state database, not under a directory ({source!r}): build the store from the "
                        "cluster's ClusterConfig (or a kafka_runbooks.state.StateDb)")
    if hasattr(source, "incident_base") and hasattr(source, "name"):
        from kafka_runbooks.hooks.db import state_db_for

        return state_db_for(source)
    raise TypeError(f"not a state database or a cluster's settings: {source!r}")
