"""The schema is the product's: an empty database is migrated to head (Alembic, its own version table), the
models equal the migrations (autogenerate finds nothing), a newer schema is refused -- on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from kafka_runbooks.state.db import VERSION_TABLE, StateDb, StateError, head_revision
from kafka_runbooks.state.schema import include_name, metadata
from racing import race


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request, tmp_path):
    """A database with nothing in it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'empty.sqlite'}"
    pg = request.getfixturevalue("postgres")
    name = f"krb_empty_{tmp_path.name[-12:].lower().replace('-', '_')}"
    pg.psql(f"DROP DATABASE IF EXISTS {name}")
    return pg.create_database(name, user="krb_store_tests")


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_an_empty_database_is_upgraded_to_head_with_its_own_version_table(empty_url):
    assert _tables(empty_url) == set()
    db = StateDb(empty_url, migrate=False)
    assert db.current() is None
    assert db.upgrade() == head_revision() == db.current()
    tables = _tables(empty_url)
    assert tables == {t.name for t in metadata.sorted_tables} | {VERSION_TABLE}
    assert all(t.startswith("krb_") for t in tables)  # beside Airflow's tables on a shared server: nothing collides
    assert db.upgrade() == head_revision()  # idempotent


def test_the_models_match_the_migrations(empty_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    db = StateDb(empty_url)
    with db.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE, "include_name": include_name,
                                                     "compare_type": True, "compare_server_default": True})
        assert compare_metadata(ctx, metadata) == []


def _upgrade(barrier, url: str) -> str:
    barrier.wait(120)
    return StateDb(url, migrate=False).upgrade()


def test_two_workers_starting_together_migrate_once(empty_url):
    assert race(_upgrade, [(empty_url,), (empty_url,)]) == [head_revision()] * 2
    engine = sa.create_engine(empty_url)
    with engine.connect() as c:
        assert c.execute(sa.text(f"SELECT count(*) FROM {VERSION_TABLE}")).scalar_one() == 1
    engine.dispose()


def _open(barrier, url: str) -> str:
    from kafka_runbooks.state.db import engine_for

    barrier.wait(120)
    with engine_for(url).connect() as conn:
        return conn.exec_driver_sql("PRAGMA journal_mode").scalar_one()


def test_two_processes_opening_a_new_sqlite_file_together_both_get_it_in_wal_mode(tmp_path):
    # SQLite answers one of them "database is locked" at once, busy timeout or not (half of such races, measured)
    urls = [f"sqlite:///{tmp_path / f'new{i}.sqlite'}" for i in range(20)]
    for url in urls:
        assert race(_open, [(url,), (url,)]) == ["wal", "wal"]


def test_a_database_migrated_by_newer_code_is_refused(empty_url):
    db = StateDb(empty_url, migrate=False)
    db.upgrade()
    engine = sa.create_engine(empty_url)
    with engine.begin() as c:
        c.execute(sa.text(f"UPDATE {VERSION_TABLE} SET version_num = '9999_from_the_future'"))
    engine.dispose()
    with pytest.raises(StateError, match="9999_from_the_future.*newer kafka-runbooks"):
        db.upgrade()


def test_the_command_line_migrates_and_says_where(tmp_path, capsys):
    from kafka_runbooks.state.__main__ import main

    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    assert main(["current", "--url", url]) == 0 and "at None" in capsys.readouterr().out
    assert main(["upgrade", "--url", url]) == 0 and f"at {head_revision()}" in capsys.readouterr().out
