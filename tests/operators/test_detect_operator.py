"""DetectFindingsOperator over several checks: history kept, consecutive checks, one response per
episode, needs_person and self-resolution -- against the real stores (the embedded state database)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "detect"))
from detect_builders import at, check, fetch_error, partitions, probe, snapshot  # noqa: E402

from kafka_runbooks.incidents.store import IncidentStore  # noqa: E402
from kafka_runbooks.operators.detect import DetectFindingsOperator  # noqa: E402


@pytest.fixture
def incident_base(tmp_path, monkeypatch):
    path = tmp_path / "clusters.json"
    path.write_text(json.dumps({"lab": {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                        "incident_base": str(tmp_path / "incidents"),
                                        "health": {"consecutive_checks": 2, "clear_checks": 2, "recheck_s": 0}}}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(path))
    return tmp_path / "incidents"


def lab_config():
    from kafka_runbooks.config import load_cluster

    return load_cluster("lab")


class TI:
    """The task instance's Task-SDK call the operator makes: the state of a response run."""

    def __init__(self, states):
        self.states = states

    def get_dagrun_state(self, dag_id, run_id):
        assert dag_id == "kafka_incident_response"
        return self.states.get(run_id, "running")


def check_at(s, n, run_states=None):
    from kafka_runbooks.state.snapshots import Snapshots

    s = dataclasses.replace(s, taken_at=at(30 * n))
    ref = Snapshots(lab_config()).put(s)  # as the snapshot task keeps it: the detect task is handed its ref
    op = DetectFindingsOperator(task_id="detect", cluster="lab", snapshot=ref.to_dict())
    return op.execute({"dag": SimpleNamespace(dag_id="kafka_health_check"), "run_id": f"scheduled__{n}", "ti": TI(run_states or {})})


def hung(n=0):
    """Broker 3 stuck at check n: its check fails, broker 1 logged a failed fetch from it 5 s before."""
    return snapshot(checks=[check(1), check(2), check(3, ok=False)],
                    probes=[probe(1, errors=[fetch_error(1, 3, 30 * n - 5)]), probe(2), probe(3)])


def test_one_response_per_episode_and_its_end(incident_base):
    store = IncidentStore(lab_config())
    assert check_at(hung(0), 0) == []  # first check: held once, not yet
    (start,) = check_at(hung(1), 1)
    iid = start["conf"]["incident_id"]
    assert start["trigger_run_id"] == f"health__{iid}" and start["conf"]["broker_ids"] == [3]
    # the conf is a reference (issue 28): the cluster, the incident and its brokers; the finding is on the record
    assert start["conf"] == {"cluster": "lab", "incident_id": iid, "broker_ids": [3]}
    assert store.get(iid)["trigger"]["kind"] == "broker_unresponsive"
    rec = store.get(iid)
    assert rec["status"] == "responding" and rec["response_run"] == f"health__{iid}"
    assert check_at(hung(2), 2) == []  # its response runs: noted, not repeated
    assert store.get(iid)["last_seen_at"] == at(60)
    # the response run failed without recording an outcome: a person owns it now
    assert check_at(hung(3), 3, {f"health__{iid}": "failed"}) == []
    assert store.get(iid)["status"] == "needs_person"
    assert check_at(hung(4), 4) == []  # the same episode goes on: no pile-up
    # the broker recovers: after clear_checks checks the incident resolves by itself
    check_at(snapshot(), 5)
    check_at(snapshot(), 6)
    rec = store.get(iid)
    assert rec["status"] == "resolved" and "not seen for 2 consecutive checks" in rec["resolution"]
    actions = [e["action"] for e in store.audit_trail(iid)]
    # needing a person pages on-call (issue 19 §1): no webhook is configured here, so it is audited as not sent
    assert actions == ["open_incident", "detected", "status -> responding", "status -> needs_person", "page_needs_person",
                       "status -> resolved"]
    (page,) = [e for e in store.audit_trail(iid) if e["action"] == "page_needs_person"]
    assert page["outcome"] == "not sent" and "no on-call webhook configured" in page["details"]["result"]
    # a new episode: a new incident, not blocked by the old one
    check_at(hung(7), 7)
    (again,) = check_at(hung(8), 8)
    assert again["conf"]["incident_id"] != iid
    # the history holds every check's samples
    from kafka_runbooks.detect.history import HistoryStore

    series = HistoryStore(lab_config()).read("broker-3")
    assert len(series) == 9 and series[-1].get("check_ok") is False


def test_leaderless_partitions_open_an_incident_for_a_person_and_start_nothing(incident_base):
    parts = partitions()
    parts[0] = dataclasses.replace(parts[0], leader=-1, isr=())
    check_at(snapshot(parts=parts), 0)
    assert check_at(snapshot(parts=parts), 1) == []
    (record,) = IncidentStore(lab_config()).records("lab")
    assert record["trigger"]["kind"] == "offline_partitions" and record["status"] == "needs_person"
    assert "nothing to capture or restart" in record["status_reason"]


def test_healthy_cluster_opens_nothing(incident_base):
    for n in range(3):
        assert check_at(snapshot(), n) == []
    assert IncidentStore(lab_config()).records() == []


def test_metadata_divergence_opens_an_incident_for_a_person_and_restarts_nothing(incident_base):
    """A leadership incident (issue 7) is never answered with a restart: that would move leadership again."""
    from kafka_runbooks.model import MetadataView

    parts = partitions()
    agree = {p.name: (p.leader, 0) for p in parts}
    stale = {**agree, parts[0].name: (2, 0)}
    views = tuple(MetadataView(b, f"kafka-lab-b{b}:9093", True, leaders=stale if b == 3 else agree) for b in (1, 2, 3))
    s = dataclasses.replace(snapshot(), metadata_views=views)
    check_at(s, 0)
    assert check_at(s, 1) == []
    (record,) = IncidentStore(lab_config()).records("lab")
    assert record["trigger"]["kind"] == "metadata_divergence" and record["status"] == "needs_person"
    assert "no automatic restart" in record["status_reason"] and "runbooks/preferred-election.md" in record["status_reason"]


def test_findings_about_a_running_plans_brokers_open_no_competing_incident(incident_base, monkeypatch):
    """Issue 17 §5: during the product's own roll of broker 3, its failed direct checks are the roll's doing: annotated,
    no incident, no response; once the roll has ended, the same symptom on snapshots taken after it (past the slack for
    its effects) is an incident again -- on snapshots taken while it ran, not (the next test)."""
    from kafka_runbooks.detect.activity import Activity

    roll = Activity("lab-roll-1", "rolling_restart", (3,), started=at(-60), ended=None, run="manual__1", holds_lock=True)
    import kafka_runbooks.runbook.detect as detect_service

    monkeypatch.setattr(detect_service, "product_activity", lambda config, task: [roll])
    assert check_at(hung(0), 0) == [] and check_at(hung(1), 1) == [] and check_at(hung(2), 2) == []
    assert IncidentStore(lab_config()).records("lab") == []
    monkeypatch.setattr(detect_service, "product_activity",
                        lambda config, task: [dataclasses.replace(roll, ended=at(58), holds_lock=False)])
    check_at(hung(3), 3)  # taken at 90 s: 32 s after the roll's end
    (start,) = check_at(hung(4), 4)
    assert IncidentStore(lab_config()).get(start["conf"]["incident_id"])["trigger"]["kind"] == "broker_unresponsive"


def test_snapshots_taken_while_the_roll_ran_are_its_own_even_when_judged_after_it_ended(incident_base, monkeypatch):
    """Seen in CI (the deployed lane): the serving watch's run took its snapshot while the roll had broker 2 down, the
    roll ended before that run's detect task, and an incident opened about the product's own restart. A snapshot is
    judged against what ran when it was taken: no incident while the snapshots are the roll's."""
    from kafka_runbooks.detect.activity import Activity

    import kafka_runbooks.runbook.detect as detect_service

    ended = Activity("lab-roll-1", "rolling_restart", (3,), started=at(-60), ended=at(200), run="manual__1")
    monkeypatch.setattr(detect_service, "product_activity", lambda config, task: [ended])
    assert [check_at(hung(n), n) for n in range(5)] == [[]] * 5  # taken at 0 .. 120 s, the roll ran until 200 s
    assert IncidentStore(lab_config()).records("lab") == []


def test_a_run_started_by_the_serving_watch_opens_on_its_first_check(incident_base):
    """Issue 30: the serving watch's rounds (broker 3 did not answer them) count as one check of broker 3, so the run it
    started opens the incident on its own first, corroborated, check -- no re-check wait, no second snapshot. A cron run
    with the same snapshot does not."""
    from kafka_runbooks import clock
    from kafka_runbooks.state.snapshots import Snapshots

    class Event:
        extra = {"from_trigger": True, "payload": {"cluster": "lab", "changed": ["serving"], "at": clock.now_iso(),
                                                    "not_answering": {"3": {"failures": 2}}}}

    def run(n, events):
        s = dataclasses.replace(hung(0), taken_at=clock.now_iso())
        ref = Snapshots(lab_config()).put(s)
        op = DetectFindingsOperator(task_id="detect", cluster="lab", snapshot=ref.to_dict())
        return op.execute({"dag": SimpleNamespace(dag_id="kafka_health_check"), "run_id": f"asset_triggered__{n}", "ti": TI({}),
                           "triggering_asset_events": events})

    (start,) = run(0, {"kafka-runbooks://zookeeper/lab": [Event()]})
    assert start["conf"]["broker_ids"] == [3]
    assert IncidentStore(lab_config()).get(start["conf"]["incident_id"])["trigger"]["kind"] == "broker_unresponsive"
    assert "held for 2 consecutive checks" in IncidentStore(lab_config()).audit_trail(start["conf"]["incident_id"])[1]["details"]["why"]


def test_a_cron_run_with_the_same_snapshot_waits_for_a_second_check(incident_base):
    from kafka_runbooks import clock
    from kafka_runbooks.state.snapshots import Snapshots

    s = dataclasses.replace(hung(0), taken_at=clock.now_iso())
    ref = Snapshots(lab_config()).put(s)
    op = DetectFindingsOperator(task_id="detect", cluster="lab", snapshot=ref.to_dict())
    assert op.execute({"dag": SimpleNamespace(dag_id="kafka_health_check"), "run_id": "scheduled__0", "ti": TI({}),
                       "triggering_asset_events": {}}) == []
