"""Issue 29 §2, clocks: the election's "session stable for N s" is measured on ZooKeeper's clock (``lock.zk_now``: a
scratch znode written, its mtime read), the approval's expiry on the state database's (``StateDb.now``). The worker's
clock -- the product's ``clock`` module -- is skewed by 11 minutes here (incident 003's hazard); ZooKeeper is the real
server of tests/detect/zkserver.py, the database the real SQLite."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from snapshot_builders import P, snap

SKEW = dt.timedelta(minutes=11)


def _skew(monkeypatch, delta):
    from kafka_runbooks import clock

    real = clock.now
    monkeypatch.setattr(clock, "now", lambda: real() + delta)
    monkeypatch.setattr(clock, "now_iso", lambda: clock.iso(real() + delta))


def test_a_session_registered_just_now_is_not_stable_on_a_worker_11_minutes_fast(zk, monkeypatch):
    """Broker 1 registers now (its ephemeral ``/brokers/ids/1``, ctime on ZooKeeper's clock); the worker's clock runs 11
    minutes fast: its session is 0 s old on ZooKeeper's clock, 660 s on the worker's. ``stable_s`` = 300: the batch is
    refused on ZooKeeper's clock (it would pass on the worker's)."""
    from kafka_runbooks import clock
    from kafka_runbooks.model import Broker
    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate.lock import zk_now

    zk.create("/brokers/ids/1", b"{}", ephemeral=True, makepath=True)
    ctime = clock.from_millis(zk.exists("/brokers/ids/1").ctime)
    _skew(monkeypatch, SKEW)
    now = zk_now(zk, "lab")
    assert abs((now - ctime).total_seconds()) < 60 and (clock.now() - ctime) > dt.timedelta(minutes=10)
    s = snap([P("orders", 0, [1, 2, 3], 2, [1, 2, 3])], controller=2)
    s = dataclasses.replace(s, brokers=tuple(dataclasses.replace(b, registered_at=clock.iso(ctime), session_id=0x77)
                                             if b.id == 1 else b for b in s.brokers))
    conditions = {"stable_s": 300}
    assert any("newer than 300 s" in w for w in E.batch_refusals(s, conditions, now, 1, ["orders-0"]))
    assert E.batch_refusals(s, conditions, clock.now(), 1, ["orders-0"]) == []  # the hazard: the worker's clock says stable


def test_an_expired_approval_is_expired_on_the_databases_clock_whatever_the_workers(tmp_path, monkeypatch):
    """Approved 15 minutes ago (``approvals.max_age_s`` = 600); the worker's clock runs 11 minutes slow, so on it the
    approval looks 4 minutes old. ``use_approval`` measures on the database's clock: expired, refused."""
    from kafka_runbooks import clock
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.restart import use_approval
    from kafka_runbooks.runbook.task import Task

    from test_approval_binding import SECRET, _approve, _config, _plan

    given = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=15)  # the real time (SQLite's clock is this machine's)
    _skew(monkeypatch, -SKEW)
    config = dataclasses.replace(_config(), incident_base=str(tmp_path / "incidents"))
    plan = _plan(config)
    _approve(tmp_path, config, plan, canary=False, responded_at=clock.iso(given))
    task = Task(dag_id="kafka_rolling_restart", run_id="run-1", task_id="execute", try_number=1)
    with pytest.raises(Stop, match=r"expired \(approvals.max_age_s = 600"):
        use_approval(task, plan, config, "nothing restarted", canary=False, secret_of=lambda conn_id: SECRET)


def test_the_database_clock_is_read_from_the_database(state_db, monkeypatch):
    """``StateDb.now`` on SQLite and PostgreSQL: the server's time, whatever the product's clock says."""
    from kafka_runbooks import clock

    _skew(monkeypatch, SKEW)
    real = dt.datetime.now(dt.timezone.utc)
    assert abs((clock.parse(state_db.now()) - real).total_seconds()) < 60
