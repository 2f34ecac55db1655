"""The scheduled election's dispatcher (``kafka_preferred_election_schedule``) with clusters it cannot read: a due
cluster whose ZooKeeper connection does not exist is audited as failed, the others are not affected, nothing is
started, and the run fails naming it. A cluster without ``election.schedule`` is never looked at. A run triggered in
the second before a cron time (its data interval, Airflow's, ends then, with microseconds) still finds the cron time
inside it."""

import datetime as dt
import json

import pytest

from kafka_lab.airflow_home import load_dags

pytestmark = pytest.mark.usefixtures("airflow_db")


@pytest.mark.parametrize("when", ["now", "2026-11-29T14:29:59.500+00:00"], ids=["now", "just-before-a-cron-time"])
def test_unreadable_due_cluster_is_audited_and_fails_the_run_naming_it(tmp_path, monkeypatch, when):
    """``just-before-a-cron-time``: the lab's resume test once ran the dispatcher at 14:29:59.x (data interval
    14:24:59.x..14:29:59.x, 14:25 inside it); the old ``due_at`` found the cluster not due: nothing audited, run green."""
    from kafka_runbooks import clock
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.state import StateDb

    base = str(tmp_path / "incidents")
    clusters = {
        "nozk": {"zk_conn_id": "kafka_runbooks_test_no_such_connection", "hosts": {"1": "ssh_nowhere"}, "incident_base": base,
                 "election": {"schedule": "*/5 * * * *"}},
        "unscheduled": {"zk_conn_id": "kafka_runbooks_test_no_such_connection", "hosts": {"1": "ssh_nowhere"},
                        "incident_base": base},
    }
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    at = clock.now() if when == "now" else dt.datetime.fromisoformat(when)
    run = load_dags().get_dag("kafka_preferred_election_schedule").test(logical_date=at)
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["due_clusters"] == "success" and states["report"] == "failed", states
    assert states["start_election"] in ("skipped", "removed", "None"), states  # nothing to start
    trail = IncidentStore(StateDb.embedded(base)).audit_trail("nozk-election-schedule")
    failed = [e for e in trail if e["action"] == "scheduled_election"]
    assert [e["outcome"] for e in failed] == ["failed"] and "kafka_runbooks_test_no_such_connection" in failed[0]["details"]["error"]
    assert IncidentStore(StateDb.embedded(base)).records("unscheduled") == []
