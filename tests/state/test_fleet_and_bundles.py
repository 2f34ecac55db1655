"""The fleet overview over the state database, and the evidence bundles' index (SQLite and PostgreSQL)."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect.history import HistoryStore
from kafka_runbooks.incidents.store import IncidentStore
from kafka_runbooks.remediate import approvals as A
from kafka_runbooks.remediate.ledger import APPROVAL, APPROVAL_REQUESTED, Ledger
from kafka_runbooks.state import fleet
from kafka_runbooks.state.bundles import BundleIndex

SECRET = b"0123456789abcdef-secret"


def _ask(ledger: Ledger, run_id: str, try_number: int = 1) -> A.Decision:
    request = A.Decision(dag_id="kafka_rolling_restart", run_id=run_id, task_id="approve", try_number=try_number,
                         plan_digest="e" * 64, chosen=None, user_id=None, user_name=None, responded_at=None, timed_out=False,
                         starter="alice")
    ledger.append(APPROVAL_REQUESTED, run_id, **A.entry_for(request, SECRET), assigned=["carol"])
    return request


def test_the_overview_names_last_check_open_incidents_and_waiting_approvals(state_db):
    import datetime as dt

    from kafka_runbooks import clock

    now = clock.now() + dt.timedelta(seconds=60)
    last = clock.iso(now - dt.timedelta(seconds=30))
    store = IncidentStore(state_db)
    # lab: checked, one open incident, one resolved, a roll waiting for approval, an answered one
    HistoryStore(state_db, "lab", 5).update_state(lambda st: {"last_check": last, "checks": 7,
                                                               "streaks": {"broker_not_serving:3": {"count": 2}}})
    inc = store.open(cluster="lab", broker_ids=[3], reason="broker 3 not serving", opened_by="dag:h",
                     trigger={"kind": "broker_unresponsive", "severity": "critical"})
    gone = store.open(cluster="lab", broker_ids=[2], reason="r", opened_by="dag:h", trigger={"kind": "broker_unresponsive"})
    store.resolve(gone["id"], actor="dag:h", reason="cleared")
    roll = store.open(cluster="lab", broker_ids=[1, 2, 3], reason="maintenance", opened_by="alice", trigger={"kind": "rolling_restart"})
    _ask(Ledger(state_db, roll["id"]), "manual__1")
    answered = Ledger(state_db, roll["id"])
    request = _ask(answered, "manual__2")
    answered.append(APPROVAL, "manual__2", **A.entry_for(
        A.Decision(**{**request.payload(), "refusals": (), "chosen": "Approve", "user_id": "carol", "user_name": "carol"}), SECRET))
    # quiet: never checked, nothing open; old: an approval asked long ago (timed out)
    old = store.open(cluster="old", broker_ids=[1], reason="x", opened_by="t", trigger={"kind": "rolling_restart"})
    Ledger(state_db, old["id"]).append(APPROVAL_REQUESTED, "manual__9", **A.entry_for(A.Decision(
        dag_id="kafka_rolling_restart", run_id="manual__9", task_id="approve", try_number=1, plan_digest="f" * 64, chosen=None,
        user_id=None, user_name=None, responded_at=None, timed_out=False, starter="bob"), SECRET))

    facts = fleet.read_facts(state_db, ["lab", "quiet", "old"])
    got = {e["cluster"]: e for e in fleet.overview(facts, {"lab": 3600, "quiet": 3600, "old": 1}, clock.iso(now))}
    lab = got["lab"]
    assert lab["last_check"] == last and lab["last_check_age_s"] == 30.0 and lab["checks"] == 7
    assert [i["id"] for i in lab["open_incidents"]] == [inc["id"]] and lab["open_incidents"][0]["severity"] == "critical"
    assert [r["id"] for r in lab["open_remediations"]] == [roll["id"]]
    (waiting,) = lab["waiting_for_approval"]
    assert waiting["run_id"] == "manual__1" and waiting["assigned"] == ["carol"] and waiting["started_by"] == "alice"
    assert got["quiet"] == {**got["quiet"], "last_check": None, "open_incidents": [], "waiting_for_approval": []}
    assert got["old"]["waiting_for_approval"] == []  # its request timed out
    json.dumps(got)  # what the endpoint serves


def test_one_unreadable_database_does_not_hide_the_others(tmp_path):
    from kafka_runbooks.state import StateDb

    good = ClusterConfig.from_dict("good", {"zk_conn_id": "z", "hosts": {"1": "h"}, "incident_base": str(tmp_path / "good")})
    IncidentStore(good).open(cluster="good", broker_ids=[1], reason="r", opened_by="t")
    blocked = tmp_path / "blocked"
    blocked.write_text("not a directory")  # its embedded database cannot be created under a file
    bad = ClusterConfig.from_dict("bad", {"zk_conn_id": "z", "hosts": {"1": "h"}, "incident_base": str(blocked)})
    out = fleet.fleet_overview([good, bad], now="2026-11-24T10:00:00.000Z")
    by = {e["cluster"]: e for e in out["clusters"]}
    assert len(by["good"]["open_incidents"]) == 1
    assert "error" in by["bad"] and "blocked" in by["bad"]["error"]
    assert isinstance(StateDb.embedded(tmp_path / "good"), StateDb)


def test_the_not_incident_kinds_are_the_remediations_own(state_db):
    from kafka_runbooks.runbook.restart import ROLLING_RESTART
    from kafka_runbooks.remediate.election import KIND

    assert set(fleet.NOT_INCIDENTS) == {ROLLING_RESTART, KIND, "election_schedule"}


def test_bundles_are_indexed_from_their_manifest_and_analysis(state_db, tmp_path):
    from kafka_runbooks.capture.bundle import EvidenceBundle

    bundle = EvidenceBundle(tmp_path / "bundles", cluster="lab", incident_id="lab-1", capture_id="c1")
    f = bundle.path / "notes.txt"
    f.write_text("evidence\n")
    bundle.add_file(f, kind="note")
    bundle.manifest["status"] = "complete"
    manifest = bundle.write_manifest()
    index = BundleIndex(state_db)
    index.record_capture(str(bundle.path), manifest)
    index.record_analysis(str(bundle.path), report=str(bundle.path / "report.html"), findings=2)
    index.record_analysis(str(tmp_path / "never-indexed"), findings=0)  # nothing to add to: no error
    (row,) = index.of_incident("lab-1")
    assert row["location"] == str(bundle.path) and row["status"] == "complete" and row["files"] == 1 and row["bytes"] == 9
    assert row["summary"]["analysis"] == {"report": str(bundle.path / "report.html"), "findings": 2}
    assert len(row["manifest_sha256"]) == 64 and index.latest("lab")[0]["incident_id"] == "lab-1"
    with pytest.raises(ValueError):
        index.of_incident("../x")
