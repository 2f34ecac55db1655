"""The embedded state database's file moved, replaced or deleted under a running process (issue 29: the engine's own
control plane). SQLite goes on writing to the inode it opened, so without a check the process's records (audit, plans,
approvals) would land in a file nobody reads, without an error -- seen when a lab's state directory was renamed away
under a test process that kept its pooled connection. Real SQLite files in a temporary directory."""

from __future__ import annotations

import shutil
import sqlite3

import pytest

from kafka_runbooks.state.db import StateDb, StateError


def _write(db: StateDb, n: int) -> None:
    with db.write() as c:
        c.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (n INTEGER)")
        c.exec_driver_sql(f"INSERT INTO t VALUES ({int(n)})")


def test_a_state_directory_renamed_away_is_refused_not_written_where_nobody_reads(tmp_path):
    db = StateDb.embedded(tmp_path / "state", migrate=False)
    _write(db, 1)
    (tmp_path / "state").rename(tmp_path / "state.prev")
    with pytest.raises(StateError, match=r"kafka_runbooks\.sqlite: the file this process opened was moved away or deleted"):
        _write(db, 2)
    # a fresh database at the same path (a lab brought up again, another process creating it) is a different file:
    # still refused in this process
    again = StateDb.embedded(tmp_path / "state", migrate=False)
    sqlite3.connect(tmp_path / "state" / "kafka_runbooks.sqlite").close()
    with pytest.raises(StateError, match=r"was replaced \(device/inode"):
        _write(again, 3)
    with pytest.raises(StateError, match="restart the process"):
        with again.read():
            pass


def test_a_file_copied_back_over_it_is_refused_too(tmp_path):
    db = StateDb.embedded(tmp_path / "state", migrate=False)
    _write(db, 1)
    path = tmp_path / "state" / "kafka_runbooks.sqlite"
    shutil.copy(path, tmp_path / "copy.sqlite")
    (tmp_path / "copy.sqlite").replace(path)  # a restore: same path, same bytes, another file
    with pytest.raises(StateError, match="replaced"):
        _write(db, 2)


def test_the_same_file_goes_on_being_used(tmp_path):
    db = StateDb.embedded(tmp_path / "state", migrate=False)
    for n in range(3):
        _write(db, n)
    with StateDb.embedded(tmp_path / "state", migrate=False).read() as c:
        assert [r[0] for r in c.exec_driver_sql("SELECT n FROM t ORDER BY n")] == [0, 1, 2]


def test_a_process_that_moves_the_file_itself_says_so_and_then_opens_the_new_one(tmp_path):
    """A lab brought up afresh renames its state directory away on purpose (``Lab.up``): ``forget`` drops this process's
    engine for that file, and the next use opens the database now at the path (empty), not the moved one."""
    from kafka_runbooks.state.db import forget

    db = StateDb.embedded(tmp_path / "state", migrate=False)
    _write(db, 1)
    (tmp_path / "state").rename(tmp_path / "state.prev")
    forget(tmp_path / "state" / "kafka_runbooks.sqlite")
    fresh = StateDb.embedded(tmp_path / "state", migrate=False)
    _write(fresh, 2)
    with fresh.read() as c:
        assert [r[0] for r in c.exec_driver_sql("SELECT n FROM t")] == [2]
