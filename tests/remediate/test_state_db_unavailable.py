"""Issue 29 (review, hole 3): the reads of the state database the engine decides on -- the roll's progress between
brokers (``RestartWork.skip``), the ledger a resume proves from, the progress before a stop -- raised at once while the
database was briefly unavailable, and the run ended as an "unexpected error". Now such a read is retried, bounded
(``ledger.read_retrying``); a database back within the bound changes nothing; one that stays away ends the run with
"state database unavailable", the brokers' states known, nothing begun on a guess.

The state database is a real PostgreSQL server (the session's, ``tests/conftest.py``: ``kafka_lab.servers.Postgres``),
stopped (``pg_ctl stop -m fast``) in the middle of a roll and started again, reached through the product's own
``kafka_runbooks_db`` connection. The engine runs for real (``engine.run``, ``RestartWork``, the restart step) on the
simulated broker host of ``test_resumption`` (its ``roll`` fixture says what is a stand-in there). Every pause of the
read's retry is real; where the test brings the database back is the retry's ``sleep`` (no timing assumed).
"""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.model import Plan, Step
from kafka_runbooks.remediate import ledger as L
from test_resumption import roll  # noqa: F401 - the fixture


@pytest.fixture
def pg_roll(postgres, postgres_state_db, monkeypatch, request):
    """``roll`` with its state database on the session's PostgreSQL (the ``kafka_runbooks_db`` connection); the
    server is running again whatever the test did."""
    u = postgres_state_db.url
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_DB", json.dumps({
        "conn_type": "postgres", "host": u.host, "port": u.port, "login": u.username, "password": u.password,
        "schema": u.database}))
    env = request.getfixturevalue("roll")
    from kafka_runbooks.state import state_of

    assert state_of(env.cfg).dialect == "postgresql"
    env.pg = postgres
    try:
        yield env
    finally:
        postgres.up()


def _execute(env, brokers, run_id="run-2"):
    from kafka_runbooks.remediate import executor as E

    plan = Plan(cluster="c1", steps=tuple(Step("restart_broker", b, "r") for b in brokers), roll_id=env.record["id"])
    ex = E.Execution(config=env.cfg, plan=plan, record_id=env.record["id"], dag_id="d", run_id=run_id,
                     task_id="execute", try_number=1, approver="alice", starter="bob", canary=False)
    return E.run(ex)


def _reads_pause_with(monkeypatch, on_pause):
    """The engine's reads (``read_retrying``) call ``on_pause`` at each pause of their retry (then pause for real)."""
    import time

    real = getattr(L, "read_retrying", None)  # (absent on the code before: nothing was retried)

    def read_retrying(read, what, **kw):
        def sleep(s):
            on_pause(what)
            time.sleep(s)

        return real(read, what, **{**kw, "sleep": sleep})

    monkeypatch.setattr(L, "read_retrying", read_retrying, raising=False)


def test_a_state_database_back_within_the_bound_changes_nothing(pg_roll, monkeypatch):
    """PostgreSQL stops once the run holds its lock; the read of the roll's progress before broker 2's step fails,
    is retried, and the server is back during the retry's pause: broker 2 is restarted, every record in the database.
    Red before: the read raised at once -- no command sent, the run ended "unexpected error"."""
    from kafka_runbooks.remediate import lock as LK

    paused = []
    _reads_pause_with(monkeypatch, lambda what: paused.append(what) or (pg_roll.pg.up() if len(paused) == 1 else None))
    acquire = LK.MaintenanceLock.acquire

    def acquire_then_database_down(self, wait_s):
        pg_roll.pg.down()
        return acquire(self, wait_s)

    monkeypatch.setattr(LK.MaintenanceLock, "acquire", acquire_then_database_down)
    try:
        result = _execute(pg_roll, [2])
    finally:
        pg_roll.pg.up()
    assert pg_roll.host.commands == ["stop_command", "start_command"] and result["restarted"] == [2]
    assert paused[0] == "the roll's progress before broker 2's step"
    events = [e["event"] for e in pg_roll.entries()]
    assert events[-1] == L.COMPLETED and L.STEP_STARTED in events and L.STEP_DONE in events


def test_a_state_database_that_stays_away_between_brokers_halts_saying_so_with_the_brokers_known(pg_roll, monkeypatch):
    """Broker 2 restarted; PostgreSQL stops during its gate and stays away: broker 2's end goes to the worker's journal,
    the read before broker 3's step is retried for its bound, then the run halts "state database unavailable", the
    cluster described (broker 2 registered, nobody down), nothing of broker 3 begun. Red before: halted "unexpected
    error: OperationalError", code ``unexpected``, at once."""
    from kafka_runbooks.remediate import gates as G
    from kafka_runbooks.remediate.engine import Halted

    monkeypatch.setattr(L, "READ_WAIT_S", 1.0, raising=False)  # the bound, short for the test (30 s in the product)

    def in_sync_then_database_down(zk, cluster, b, expected, **kw):
        pg_roll.pg.down()
        return G.GateResult("in_sync", 0.0)

    monkeypatch.setattr(G, "in_sync_gate", in_sync_then_database_down)
    with pytest.raises(Halted) as halted:
        _execute(pg_roll, [2, 3])
    text = str(halted.value)
    assert pg_roll.host.commands == ["stop_command", "start_command"] and pg_roll.host.phase == "started"
    assert ("between units: state database unavailable: the roll's progress before broker 3's step could not be read"
            in text)
    assert "registered brokers: [1, 2, 3]; down (configured, not registered): none" in text
    assert "done by this run: broker 2" in text

    pg_roll.pg.up()
    assert L.Journal.of(pg_roll.cfg, pg_roll.record["id"]).replay(L.store_writer(pg_roll.ledger, pg_roll.store)) > 0
    mine = pg_roll.entries()
    (done,) = [e for e in mine if e["event"] == L.STEP_DONE]
    assert done["broker_id"] == 2
    (end,) = [e for e in mine if e["event"] == L.HALTED]
    assert end["code"] == "state_db_unavailable" and end["phase"] == "between units"
    assert not [e for e in mine if e["event"] == L.STEP_STARTED and e["broker_id"] == 3]


def test_a_read_is_retried_for_its_bound_then_said_and_once_only_when_terminating():
    """Pure: the bound, the message, no retry when there is no time (the task being terminated)."""
    clock = [0.0]
    calls = []

    def down():
        calls.append(clock[0])
        raise ConnectionRefusedError("connection refused")

    def sleep(s):
        clock[0] += s

    with pytest.raises(L.StateUnavailable) as gone:
        L.read_retrying(down, "the roll's progress", wait_s=10, pause_s=1, sleep=sleep, monotonic=lambda: clock[0])
    assert calls == [0.0, 1.0, 3.0, 6.0, 10.0]  # pauses 1, 2, 3, then what is left of the 10 s
    assert str(gone.value) == ("state database unavailable: the roll's progress could not be read (5 tries over 10 s; "
                               "ConnectionRefusedError: connection refused)")
    assert gone.value.code == "state_db_unavailable"
    calls.clear()
    with pytest.raises(L.StateUnavailable, match=r"\(1 try; ConnectionRefusedError"):
        L.read_retrying(down, "x", wait_s=10, sleep=sleep, monotonic=lambda: clock[0], urgent=lambda: "terminating")
    assert len(calls) == 1
    back = iter([ConnectionRefusedError("refused"), None])

    def brief():
        exc = next(back)
        if exc:
            raise exc
        return "progress"

    assert L.read_retrying(brief, "x", wait_s=10, sleep=sleep, monotonic=lambda: clock[0]) == "progress"
