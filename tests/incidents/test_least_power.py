"""Least power of the incident response (issue 29 §4), on the state database (SQLite and PostgreSQL):

* an incident id is taken only by a response of its own cluster and brokers (``store.get`` filtered);
* one response per cluster at a time (``claim_response``), also when two runs race for it;
* at most ``capture.max_per_hour`` captures of a cluster in any hour (``start_capture``), the refusal naming the cap,
  also when two runs race for the last one."""

from __future__ import annotations

import threading

import pytest

from kafka_runbooks.config import CaptureSettings, ConfigError
from kafka_runbooks.incidents.store import (CAPTURE_STARTED, RESPONDING, IncidentMismatch, IncidentStore, ResponseRefused)


def _open(store, cluster="lab", brokers=(3,)):
    return store.open(cluster=cluster, broker_ids=list(brokers), reason="r", opened_by="t")


def test_an_incident_of_another_cluster_or_other_brokers_is_refused(state_db):
    store = IncidentStore(state_db)
    east = _open(store, "east", (3,))
    with pytest.raises(IncidentMismatch, match="belongs to cluster 'east', not 'west'"):
        store.get(east["id"], cluster="west", broker_ids=[3])
    with pytest.raises(IncidentMismatch, match=r"about brokers \[3\], not \[1\]"):
        store.get(east["id"], cluster="east", broker_ids=[1, 3])
    assert store.get(east["id"], cluster="east", broker_ids=[3])["id"] == east["id"]
    assert store.get(east["id"])["cluster"] == "east"  # unfiltered reads (the web pages) are unchanged


def test_one_response_per_cluster_at_a_time(state_db):
    store = IncidentStore(state_db)
    first, second, other = _open(store, brokers=(1,)), _open(store, brokers=(2,)), _open(store, "east", (2,))
    runs = {"run-1"}  # what Airflow says is queued or running
    active = lambda rec: rec.get("response_run") in runs  # noqa: E731
    assert store.claim_response(first["id"], cluster="lab", actor="a", run_id="run-1", active=active)["status"] == RESPONDING
    with pytest.raises(ResponseRefused, match=r"response run-1 is working on cluster 'lab' \(incident " + first["id"]):
        store.claim_response(second["id"], cluster="lab", actor="a", run_id="run-2", active=active)
    assert store.get(second["id"])["status"] == "open"
    # another cluster is not held back; the same run claiming again is a no-op
    assert store.claim_response(other["id"], cluster="east", actor="a", run_id="run-3", active=active)["status"] == RESPONDING
    before = len(store.audit_trail(first["id"]))
    store.claim_response(first["id"], cluster="lab", actor="a", run_id="run-1", active=active)
    assert len(store.audit_trail(first["id"])) == before
    runs.clear()  # run-1 ended (without recording an outcome): the next response may start
    assert store.claim_response(second["id"], cluster="lab", actor="a", run_id="run-2", active=active)["response_run"] == "run-2"


def test_two_incidents_one_health_check_queued_responses_for_do_not_refuse_each_other(state_db):
    """One check opened two incidents of the cluster and marked both responding for their queued runs: the first run
    to start claims the cluster, the second is refused (not both)."""
    store = IncidentStore(state_db)
    a, b = _open(store, brokers=(1,)), _open(store, brokers=(2,))
    store.responding(a["id"], actor="health", run_id="run-a")
    store.responding(b["id"], actor="health", run_id="run-b")
    active = lambda rec: True  # noqa: E731 - both runs queued or running
    before = len(store.audit_trail(a["id"]))
    assert store.claim_response(a["id"], cluster="lab", actor="run-a", run_id="run-a", active=active)["response_claimed"] == "run-a"
    assert len(store.audit_trail(a["id"])) == before  # already responding for this run: no second status move
    with pytest.raises(ResponseRefused, match="response run-a is working on cluster 'lab'"):
        store.claim_response(b["id"], cluster="lab", actor="run-b", run_id="run-b", active=active)


def test_two_runs_racing_for_a_cluster_get_it_once(state_db):
    store = IncidentStore(state_db)
    incidents = [_open(store, brokers=(b,)) for b in (1, 2, 3, 4)]
    barrier = threading.Barrier(len(incidents))
    won, refused = [], []

    def claim(i, rec):
        barrier.wait()
        try:
            store.claim_response(rec["id"], cluster="lab", actor="a", run_id=f"run-{i}", active=lambda r: True)
            won.append(i)
        except ResponseRefused:
            refused.append(i)

    threads = [threading.Thread(target=claim, args=(i, r)) for i, r in enumerate(incidents)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(won) == 1 and len(refused) == 3, (won, refused)


def test_captures_per_cluster_per_hour_are_capped_naming_the_cap(state_db):
    store = IncidentStore(state_db)
    rec, east = _open(store), _open(store, "east")
    for n in range(3):
        entry = store.start_capture(rec["id"], cluster="lab", actor="a", per_hour=3)
        assert entry["action"] == CAPTURE_STARTED and entry["details"]["this_hour"] == n + 1
    with pytest.raises(ResponseRefused, match=r"3 captures of cluster 'lab' started in the last hour .* capture.max_per_hour = 3"):
        store.start_capture(_open(store)["id"], cluster="lab", actor="a", per_hour=3)
    store.start_capture(east["id"], cluster="east", actor="a", per_hour=3)  # counted per cluster
    trail = [e["action"] for e in store.audit_trail(rec["id"])]
    assert trail.count(CAPTURE_STARTED) == 3


def test_two_runs_racing_for_the_last_capture_get_it_once(state_db):
    store = IncidentStore(state_db)
    rec = _open(store)
    store.start_capture(rec["id"], cluster="lab", actor="a", per_hour=2)
    barrier = threading.Barrier(4)
    won, refused = [], []

    def take(i):
        barrier.wait()
        try:
            store.start_capture(rec["id"], cluster="lab", actor=f"run-{i}", per_hour=2)
            won.append(i)
        except ResponseRefused:
            refused.append(i)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(won) == 1 and len(refused) == 3, (won, refused)


def test_the_cap_is_a_setting_with_a_sane_default():
    assert CaptureSettings().max_per_hour == 6
    assert CaptureSettings.from_dict({"max_per_hour": 2}).max_per_hour == 2
    with pytest.raises(ConfigError):
        CaptureSettings.from_dict({"max_per_hour": 0})
