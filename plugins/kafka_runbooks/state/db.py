"""The product's state database: one SQLAlchemy engine per URL and process, transactions, schema at head.

PostgreSQL in production (the Airflow connection ``kafka_runbooks_db``, resolved by ``hooks/db.py``); SQLite for the
demo and a single machine (``StateDb.embedded(directory)``: ``<directory>/kafka_runbooks.sqlite``). Same tables,
same migrations, same code. This is the product's own database, never Airflow's metadata database (Airflow 3
tasks may not open that one); it may live on the same server: every table is prefixed ``krb_`` and the migration
version is kept in ``krb_alembic_version``.

Concurrency is the database's: every change runs in one transaction (:meth:`StateDb.write`). On PostgreSQL a
read-modify-write locks its row (``SELECT ... FOR UPDATE``, :func:`for_update`); on SQLite a writing transaction
takes the database's write lock when it begins (``BEGIN IMMEDIATE``), so two writers never interleave and a
reader never blocks (WAL). Uniqueness and one-time use are constraints and conditional updates, not checks in
Python.

The schema is created and migrated by the product (Alembic, ``state/migrations``) the first time a process
opens the database (under a PostgreSQL advisory lock, or SQLite's write lock, so two workers starting together
migrate once); a database whose schema is newer than this code is refused.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, URL

EMBEDDED_FILE = "kafka_runbooks.sqlite"
VERSION_TABLE = "krb_alembic_version"
MIGRATIONS = Path(__file__).with_name("migrations")
_ADVISORY_KEY = 0x6B72625F6D6967  # "krb_mig": serializes migrations of one PostgreSQL database
SQLITE_BUSY_TIMEOUT_S = 60.0

_engines: dict[str, Engine] = {}
_at_head: set[str] = set()
_sqlite_files: dict[str, tuple[int, int]] = {}  # database path -> (device, inode) of the file this process opened
_lock = threading.Lock()


class StateError(RuntimeError):
    """The state database cannot be used; the message says which and why."""


def _forget_engines_after_fork() -> None:
    # a forked task process must not share its parent's pooled connections
    for engine in list(_engines.values()):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_engines_after_fork)


def _enable_wal(cur, timeout_s: float = SQLITE_BUSY_TIMEOUT_S) -> None:
    """``PRAGMA journal_mode=WAL``, retried while the database is locked. Switching a new database's journal mode
    takes its exclusive lock, and when two processes open it together SQLite answers one of them "database is locked"
    at once, without waiting out the busy timeout (it would deadlock; measured here: 141 of 300 two-process races).
    The mode is kept in the file: once one process has switched it, the other's pragma only reads it."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


FILE_MODE = 0o600  # the embedded database holds the audit trail, plans and approvals: its owner's only


def _is_file(database: str | None) -> bool:
    return bool(database) and database != ":memory:" and not database.startswith("file:")


def _private_sqlite_file(database: str | None) -> None:
    """Creates the database file 0600 before SQLite does (SQLite makes it 0644 less the umask, and gives its -wal and
    -shm files the database file's mode), and makes an existing one and its -wal/-shm 0600."""
    if not _is_file(database):
        return
    fd = os.open(database, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    for suffix in ("-wal", "-shm", "-journal"):
        try:
            os.chmod(database + suffix, FILE_MODE)
        except FileNotFoundError:
            pass


def _file_identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def _check_same_sqlite_file(url: URL) -> None:
    """SQLite keeps writing to the file it opened, by inode: a database file moved, replaced or deleted under a running
    process (a restore, a cleanup, a directory renamed) would take this process's records where nobody reads them,
    without an error. Refused instead, naming the file; a process started afterwards opens the file now at the path."""
    path = url.database
    if not _is_file(path) or path not in _sqlite_files:
        return
    opened, now = _sqlite_files[path], _file_identity(path)
    if now != opened:
        what = "moved away or deleted" if now is None else f"replaced (device/inode {opened} -> {now})"
        raise StateError(f"state database {path}: the file this process opened was {what} while in use; refusing to "
                         "read or write the old one (restart the process to use the file now at that path)")


def _sqlite_engine(url: URL) -> Engine:
    _private_sqlite_file(url.database)
    if _is_file(url.database):
        _sqlite_files[url.database] = _file_identity(url.database)
    engine = sa.create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False})

    @sa.event.listens_for(engine, "connect")
    def _connect(dbapi_conn, _record) -> None:
        dbapi_conn.isolation_level = None  # pysqlite must not BEGIN by itself: "begin" below does, IMMEDIATE when writing
        cur = dbapi_conn.cursor()
        _enable_wal(cur)
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @sa.event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("krb_read_only") else "BEGIN IMMEDIATE")

    return engine


def engine_for(url: str | URL) -> Engine:
    """The process's engine for ``url`` (created once)."""
    url = sa.make_url(url)
    key = url.render_as_string(hide_password=False)
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            if url.get_backend_name() == "sqlite":
                engine = _sqlite_engine(url)
            else:
                # bounded: a server that does not answer (a failover's unreachable address) must not hold a record
                # write -- and the signal handlers that run only between bytecodes (Airflow's SIGTERM) -- for the TCP
                # timeout; the URL's own connect_timeout wins
                args = {} if "connect_timeout" in url.query else {"connect_timeout": 5}
                engine = sa.create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=4, pool_recycle=1800,
                                          connect_args=args)
            _engines[key] = engine
        return engine


def forget(database: str | os.PathLike[str]) -> None:
    """This process moves or removes the SQLite database at ``database`` on purpose (a lab brought up afresh renames its
    state directory away): its engine is disposed, and the next use opens the file then at that path, without the
    moved-file refusal of :func:`_check_same_sqlite_file`."""
    path = str(Path(database).resolve())
    with _lock:
        for key, engine in list(_engines.items()):
            if engine.url.get_backend_name() == "sqlite" and engine.url.database == path:
                engine.dispose()
                del _engines[key]
                _at_head.discard(key)
        _sqlite_files.pop(path, None)


class StateDb:
    """One state database. ``migrate``: bring the schema to head on first use (the default)."""

    def __init__(self, url: str | URL, *, migrate: bool = True) -> None:
        self.url = sa.make_url(url)
        self.migrate = migrate
        if self.url.get_backend_name() not in ("sqlite", "postgresql"):
            raise StateError(f"state database {self.safe_url}: only PostgreSQL and SQLite are supported")

    @classmethod
    def embedded(cls, directory: str | os.PathLike[str], **kw: Any) -> "StateDb":
        """The embedded default: SQLite in ``directory`` (created if missing)."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        return cls(URL.create("sqlite", database=str((d / EMBEDDED_FILE).resolve())), **kw)

    @property
    def safe_url(self) -> str:
        return self.url.render_as_string(hide_password=True)

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    @property
    def engine(self) -> Engine:
        engine = engine_for(self.url)
        if self.dialect == "sqlite":
            _check_same_sqlite_file(self.url)
        if self.migrate:
            self._ensure_head(engine)
        return engine

    def __repr__(self) -> str:
        return f"StateDb({self.safe_url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateDb) and self.url == other.url

    def __hash__(self) -> int:
        return hash(self.url.render_as_string(hide_password=False))

    # ------------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """One writing transaction (committed at the end, rolled back on an exception)."""
        with self.engine.connect() as conn:
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """One reading transaction: a consistent view, no write lock."""
        with self.engine.connect() as conn:
            conn = conn.execution_options(krb_read_only=True)
            with conn.begin():
                yield conn

    def now(self) -> str:
        """The database server's clock now (``SELECT CURRENT_TIMESTAMP``), ISO-8601 UTC: what an approval's age is
        measured on, never a worker's clock."""
        import datetime as dt

        from kafka_runbooks import clock  # deferred: loaded on first use, not when a DAG file is parsed

        with self.read() as c:
            if c.dialect.name == "sqlite":
                value = c.exec_driver_sql("SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')").scalar()
                return clock.iso(clock.parse(value))
            value = c.execute(sa.text("SELECT CURRENT_TIMESTAMP")).scalar()
        return clock.iso(value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc))

    # ------------------------------------------------------------------ schema

    def _ensure_head(self, engine: Engine) -> None:
        key = engine.url.render_as_string(hide_password=False)
        if key in _at_head:
            return
        self.upgrade(engine)
        _at_head.add(key)

    def upgrade(self, engine: Engine | None = None) -> str:
        """Migrate the schema to head (idempotent; serialized across processes). Returns the revision."""
        from alembic import command

        engine = engine or engine_for(self.url)
        with engine.connect() as conn:
            with conn.begin():
                if self.dialect == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _ADVISORY_KEY})
                current = _current(conn)
                head = head_revision()
                if current == head:
                    return head
                if current is not None and current not in _known_revisions():
                    raise StateError(f"state database {self.safe_url} is at revision {current!r}, which this code does not "
                                     f"know (head {head!r}): it was migrated by a newer kafka-runbooks; refusing to use it")
                cfg = alembic_config()
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
        return head_revision()

    def current(self) -> str | None:
        with engine_for(self.url).connect() as conn:
            return _current(conn)


def _current(conn: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def alembic_config():
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("version_table", VERSION_TABLE)
    return cfg


def _script():
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config())


def head_revision() -> str:
    return _script().get_current_head()


def _known_revisions() -> set[str]:
    return {r.revision for r in _script().walk_revisions()}


# ---------------------------------------------------------------------- dialect helpers


def for_update(db_or_conn: Any, stmt):
    """``SELECT ... FOR UPDATE`` where it means something (PostgreSQL); SQLite's writer already holds the lock."""
    dialect = db_or_conn.dialect if isinstance(db_or_conn, StateDb) else db_or_conn.dialect.name
    return stmt.with_for_update() if dialect == "postgresql" else stmt


def _insert(conn: Connection):
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert


def upsert(conn: Connection, table: sa.Table, values: dict[str, Any], index_elements: list[str], update: list[str]) -> None:
    """INSERT ... ON CONFLICT (index_elements) DO UPDATE SET the ``update`` columns: one statement, no race between a
    delete and an insert of two writers."""
    stmt = _insert(conn)(table).values(**values)
    conn.execute(stmt.on_conflict_do_update(index_elements=index_elements, set_={k: stmt.excluded[k] for k in update}))


def insert_ignoring_conflict(conn: Connection, table: sa.Table, values: dict[str, Any], index_elements: list[str]) -> bool:
    """INSERT ... ON CONFLICT (index_elements) DO NOTHING; True when the row was inserted."""
    result = conn.execute(_insert(conn)(table).values(**values).on_conflict_do_nothing(index_elements=index_elements))
    return bool(result.rowcount)
