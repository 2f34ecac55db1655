"""``KafkaRunbooksDbHook``: the product's state database (``state/``) from the Airflow connection ``kafka_runbooks_db``.

The connection: conn_type ``postgres`` (host, port, login, password, schema = the database; extra: libpq options
such as ``{"sslmode": "verify-full", "sslrootcert": "..."}``), or conn_type ``sqlite`` (host = the file's path:
one machine only). Without that connection every cluster keeps its state in the embedded SQLite database under
its ``incident_base`` (:func:`state_db_for`), which is right for the demo and a single machine, never for workers
on several machines. The password is never logged: the URL is rendered with it hidden everywhere.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from kafka_runbooks.state.db import StateDb, StateError

DEFAULT_CONN_ID = "kafka_runbooks_db"
CONNECT_TIMEOUT_S = 10
_POSTGRES = ("postgres", "postgresql")
_LIBPQ_OPTIONS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "options",
                  "target_session_attrs", "keepalives", "keepalives_idle")


class KafkaRunbooksDbHook(BaseHook):
    """The state database named by an Airflow connection."""

    conn_name_attr = "db_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "postgres"
    hook_name = "kafka-runbooks state database"

    def __init__(self, db_conn_id: str = DEFAULT_CONN_ID) -> None:
        super().__init__()
        self.db_conn_id = db_conn_id

    def get_url(self):
        from sqlalchemy.engine import URL

        conn = self.get_connection(self.db_conn_id)
        kind = (conn.conn_type or "").lower()
        extra = dict(conn.extra_dejson or {})
        if kind in _POSTGRES:
            unknown = sorted(set(extra) - set(_LIBPQ_OPTIONS))
            if unknown:
                raise StateError(f"connection {self.db_conn_id!r}: unknown extra keys {unknown} (libpq options: {list(_LIBPQ_OPTIONS)})")
            if not conn.host or not conn.schema:
                raise StateError(f"connection {self.db_conn_id!r}: a PostgreSQL connection needs a host and a schema (the database)")
            query = {k: str(v) for k, v in extra.items()}
            query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))  # an unreachable server fails a task, never hangs it
            return URL.create("postgresql+psycopg2", username=conn.login or None, password=conn.password or None,
                              host=conn.host, port=int(conn.port) if conn.port else None, database=conn.schema, query=query)
        if kind == "sqlite":
            if not conn.host:
                raise StateError(f"connection {self.db_conn_id!r}: a sqlite connection needs the file's path as its host")
            return URL.create("sqlite", database=conn.host)
        raise StateError(f"connection {self.db_conn_id!r} has conn_type {conn.conn_type!r}: use postgres (or sqlite on one machine)")

    def get_conn(self) -> StateDb:
        return StateDb(self.get_url())


def configured(conn_id: str = DEFAULT_CONN_ID) -> bool:
    """Whether the Airflow connection exists (any other failure to look it up is raised, never taken as "no")."""
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return False
    return True


def state_db_for(config: Any) -> StateDb:
    """A cluster's state database: ``kafka_runbooks_db`` when that connection exists, else the embedded SQLite
    under the cluster's ``incident_base``."""
    if configured(DEFAULT_CONN_ID):
        return KafkaRunbooksDbHook(DEFAULT_CONN_ID).get_conn()
    return StateDb.embedded(config.incident_base)
