"""The incident store in the state database (SQLite and PostgreSQL): records, notes, transitions, the audit trail."""

import threading

import pytest

from kafka_runbooks.incidents.request import parse_request
from kafka_runbooks.incidents.store import CLOSED, OPEN, IncidentError, IncidentStore


def test_open_update_close_and_audit_trail(state_db):
    store = IncidentStore(state_db)
    rec = store.open(cluster="lab", broker_ids=[3], reason="broker 3 unresponsive", opened_by="dag:x", trigger={"kind": "broker_unresponsive"})
    assert rec["status"] == OPEN and rec["id"].startswith("lab-")
    store.update(rec["id"], bundle_dir="/b", note="captured")
    store.audit(rec["id"], actor="alice", action="restart_broker", outcome="ok", host="kafka_lab_host_3", command=["kafka-restart"])
    closed = store.close(rec["id"], actor="dag:y", resolution="restarted")
    assert closed["status"] == CLOSED and closed["bundle_dir"] == "/b" and closed["notes"][0]["text"] == "captured"
    trail = store.audit_trail(rec["id"])
    assert [e["action"] for e in trail] == ["open_incident", "restart_broker", "close_incident"]
    assert trail[1]["actor"] == "alice" and trail[1]["command"] == ["kafka-restart"] and trail[1]["host"] == "kafka_lab_host_3"


def test_find_open_dedupes_by_cluster_kind_and_broker(state_db):
    store = IncidentStore(state_db)
    rec = store.open(cluster="lab", broker_ids=[3], reason="r", opened_by="t", trigger={"kind": "broker_unresponsive"})
    assert store.find_open("lab", [3], "broker_unresponsive")["id"] == rec["id"]
    assert store.find_open("lab", [2], "broker_unresponsive") is None
    assert store.find_open("lab", [3], "offline_partitions") is None
    assert store.find_open("other", [3], "broker_unresponsive") is None
    store.close(rec["id"], actor="t", resolution="done")
    assert store.find_open("lab", [3], "broker_unresponsive") is None


@pytest.mark.parametrize("bad", ["../etc", "a/b", ".hidden", "x" * 200, "a\nb"])
def test_hostile_ids_are_refused(state_db, bad):
    store = IncidentStore(state_db)
    with pytest.raises(IncidentError):
        store.get(bad)
    with pytest.raises(IncidentError):
        store.open(cluster="lab", broker_ids=[1], reason="r", opened_by="t", incident_id=bad)


def test_concurrent_audit_writers_lose_nothing(state_db):
    store = IncidentStore(state_db)
    rec = store.open(cluster="lab", broker_ids=[1], reason="r", opened_by="t")

    def write(n):
        for i in range(50):
            store.audit(rec["id"], actor=f"w{n}", action="a", outcome=str(i))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    trail = store.audit_trail(rec["id"])
    assert len(trail) == 1 + 200
    for n in range(4):  # each writer's entries in its own order
        assert [int(e["outcome"]) for e in trail if e["actor"] == f"w{n}"] == list(range(50))


def test_request_validation_names_the_bad_field():
    ok = parse_request({"cluster": "lab", "broker_ids": [3, "2", 3], "reason": "x"}, known_brokers={1, 2, 3})
    assert ok.broker_ids == (2, 3) and ok.incident_id is None
    for conf, word in [
        ({"cluster": "", "broker_ids": [1]}, "cluster"),
        ({"cluster": "la b", "broker_ids": [1]}, "cluster"),
        ({"cluster": "lab", "broker_ids": "3"}, "broker_ids"),
        ({"cluster": "lab", "broker_ids": []}, "broker_ids"),
        ({"cluster": "lab", "broker_ids": ["3; reboot"]}, "broker_ids"),
        ({"cluster": "lab", "broker_ids": [True]}, "broker_ids"),
        ({"cluster": "lab", "broker_ids": [7]}, "not configured"),
        ({"cluster": "lab", "broker_ids": [1], "incident_id": "../../x"}, "incident id"),
    ]:
        with pytest.raises(IncidentError, match=word):
            parse_request(conf, known_brokers={1, 2, 3})


def test_transitions_are_audited_and_needs_person_no_longer_counts_as_running(state_db):
    from kafka_runbooks.incidents.store import NEEDS_PERSON, RESOLVED, RESPONDING

    store = IncidentStore(state_db)
    rec = store.open(cluster="lab", broker_ids=[3], reason="r", opened_by="dag:h", trigger={"kind": "broker_unresponsive"})
    store.responding(rec["id"], actor="dag:h", run_id="health__x")
    assert store.get(rec["id"])["status"] == RESPONDING and store.get(rec["id"])["response_run"] == "health__x"
    store.needs_person(rec["id"], actor="dag:r", reason="Reject by alice", decision="Reject")
    r = store.get(rec["id"])
    assert r["status"] == NEEDS_PERSON and r["status_reason"] == "Reject by alice" and r["needs_person_since"]
    store.resolve(rec["id"], actor="dag:h", reason="not seen for 3 checks")
    r = store.get(rec["id"])
    assert r["status"] == RESOLVED and r["closed_at"] and r["resolution"] == "not seen for 3 checks"
    trail = [(e["action"], e["details"].get("from")) for e in store.audit_trail(rec["id"])]
    assert trail == [("open_incident", None), ("status -> responding", "open"), ("status -> needs_person", "responding"),
                     ("status -> resolved", "needs_person")]
    with pytest.raises(IncidentError):
        store.transition(rec["id"], "bogus", actor="x", reason="y")
    assert [x["id"] for x in store.records("lab")] == [rec["id"]] and store.records("other") == []
