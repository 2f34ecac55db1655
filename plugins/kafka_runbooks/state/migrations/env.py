"""Alembic environment of the state database (run by ``StateDb.upgrade``, which hands over its connection)."""

from __future__ import annotations

from alembic import context

from kafka_runbooks.state.db import VERSION_TABLE
from kafka_runbooks.state.schema import include_name, metadata


def run() -> None:
    conn = context.config.attributes.get("connection")
    if conn is None:
        raise RuntimeError("the state database's migrations run through kafka_runbooks.state.db.StateDb.upgrade()")
    context.configure(connection=conn, target_metadata=metadata, version_table=VERSION_TABLE, include_name=include_name,
                      render_as_batch=conn.dialect.name == "sqlite", compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


run()
