"""The embedded state database (SQLite) is its owner's only: the file, its -wal and its -shm are 0600 (issue 29 §3).
It holds the audit trail, the plans and the approvals. Real SQLite, under the usual umask 022."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat

from kafka_runbooks.incidents.store import IncidentStore
from kafka_runbooks.state.db import EMBEDDED_FILE, StateDb


@contextlib.contextmanager
def umask(mask):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _modes(d):
    return {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in d.iterdir() if p.name.startswith(EMBEDDED_FILE)}


def test_a_new_embedded_database_and_its_wal_and_shm_are_the_owners_only(tmp_path):
    with umask(0o022):
        db = StateDb.embedded(tmp_path / "state")
        IncidentStore(db).open(cluster="lab", broker_ids=[1], reason="r", opened_by="t")
        with db.read() as c:  # the -wal and -shm files exist while a connection is open (WAL mode)
            c.exec_driver_sql("SELECT 1")
            modes = _modes(tmp_path / "state")
    assert {EMBEDDED_FILE, EMBEDDED_FILE + "-wal", EMBEDDED_FILE + "-shm"} <= set(modes), modes
    assert set(modes.values()) == {"0o600"}, modes


def test_an_existing_world_readable_database_is_made_the_owners_only_when_opened(tmp_path):
    d = tmp_path / "old"
    d.mkdir()
    with umask(0o022):
        con = sqlite3.connect(d / EMBEDDED_FILE)  # as an earlier version left it: 0644
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("CREATE TABLE x (a)")
        con.commit()
        assert _modes(d)[EMBEDDED_FILE] == "0o644"
        db = StateDb.embedded(d)
        with db.read() as c:
            c.exec_driver_sql("SELECT 1")
            modes = _modes(d)
        con.close()
    assert set(modes.values()) == {"0o600"}, modes
