"""A response a person started by hand (the trigger form) records that person as who opened the incident -- the
incidents page's "By" then names them, not "incident response (automatic run)". A run nobody started (the health
check's) keeps the run as its opener. The cluster's snapshot, taken after the record is opened, is not this test's
subject: it is stopped there (``take_snapshot`` raises)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest


@pytest.mark.parametrize("starter, opener", [("alice", "alice"), (None, "dag:kafka_incident_response/run:manual__1")])
def test_a_response_started_by_hand_is_opened_by_its_starter(tmp_path, monkeypatch, starter, opener):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.operators.incident import OpenIncidentOperator
    from kafka_runbooks.web.pages import who

    import kafka_runbooks.detect.observe as observe

    def no_snapshot(*args, **kwargs):
        raise RuntimeError("not taken here")

    monkeypatch.setattr(observe, "known_registrations", no_snapshot)
    settings = {"c1": {"zk_conn_id": "krb_nowhere_zk", "hosts": {"1": "ssh_b1"}, "incident_base": str(tmp_path / "incidents"),
                       "capture": {"connect_timeout_s": 1.0}}}
    (tmp_path / "clusters.json").write_text(json.dumps(settings))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(tmp_path / "clusters.json"))
    context = {"dag": SimpleNamespace(dag_id="kafka_incident_response"), "run_id": "manual__1",
               "dag_run": SimpleNamespace(triggering_user_name=starter, run_id="manual__1"),
               "ti": SimpleNamespace(dag_id="kafka_incident_response", run_id="manual__1", task_id="open_incident")}
    op = OpenIncidentOperator(task_id="open_incident", request={"cluster": "c1", "broker_ids": [1], "reason": "by hand"})
    with pytest.raises(RuntimeError, match="not taken here"):
        op.execute(context)
    (record,) = IncidentStore(load_cluster("c1")).records("c1")
    assert record["opened_by"] == opener
    assert who(record["opened_by"]) == (starter or "incident response (automatic run)")
