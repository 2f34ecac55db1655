"""The services of ``runbook/`` -- the application as plain functions over the hooks and the state store -- called
without Airflow: a ``Task`` stands for the task instance, the state store is the product's real SQLite (the cluster
configured through the clusters file), and each test is about one decision a service takes."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from snapshot_builders import P, snap

SECRET = b"0123456789abcdef0123456789abcdef"


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """Cluster c1 (brokers 1-3, approvers carol and dave) with its state database; ``roll()`` records a rolling
    restart of broker 2 started by alice, as its plan task does (``runbook.restart.record_plan``)."""
    from kafka_runbooks.config import FILE_ENV, load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart
    from kafka_runbooks.runbook import restart
    from kafka_runbooks.runbook.task import Task

    raw = {"c1": {"zk_conn_id": "krb_test_no_such_zk", "hosts": {"1": "ssh_b1", "2": "ssh_b2", "3": "ssh_b3"},
                  "kafka_version": "2.3.0", "incident_base": str(tmp_path / "state"),
                  "approvals": {"approvers": ["carol", "dave"], "timeout_s": 3600},
                  "mitigation": {"approval_wait_s": 120}}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    config = load_cluster("c1")
    store = IncidentStore(config)

    def roll(brokers=(2,), canary=True, refusals=(), findings=()):
        record = store.open(cluster="c1", broker_ids=list(brokers), reason="roll", opened_by="alice",
                            trigger={"kind": restart.ROLLING_RESTART, "requested": list(brokers)})
        s = snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3])], controller=3)
        plan = plan_restart(s, list(brokers), config, roll_id=record["id"])
        if refusals:
            import dataclasses

            plan = dataclasses.replace(plan, refusals=tuple(refusals))
        digest = plan_digest(plan)
        restart.record_plan(task("plan"), config, store, plan, digest, [], list(findings), canary=canary,
                            gates=list(restart.GATES), report=None)
        return plan, digest

    def task(task_id, run_id="run-1", starter="alice"):
        return Task(dag_id="kafka_rolling_restart", run_id=run_id, task_id=task_id, starter=starter,
                    log=logging.getLogger("test"))

    return SimpleNamespace(config=config, store=store, roll=roll, task=task)


# ------------------------------------------------------------------------------------------------- the plan's reference

def test_a_plan_tasks_output_is_a_reference_and_what_it_refers_to_is_the_recorded_plan(cluster):
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.runbook import plans

    seen = Finding("broker_unresponsive", Severity.CRITICAL, "broker 2 does not answer", broker_ids=(2,))
    plan, digest = cluster.roll(canary=False, findings=[seen])
    out = plans.output(plan, digest)
    assert set(out["plan"]) == {"roll_id", "cluster", "kind"} and out["digest"] == digest  # no copy of the plan
    loaded = plans.load(out, "nothing done")
    assert loaded.plan == plan and loaded.canary is False and list(loaded.gates) and loaded.report is None
    assert [f.summary for f in loaded.findings] == ["broker 2 does not answer"]


def _edit_planned_entry(config, record_id, edit):
    """What someone with write access to the state database can do: drop the append-only trigger (SQLite's) and
    rewrite the ``planned`` entry's JSON in place."""
    import sqlalchemy as sa

    from kafka_runbooks.state import schema as S
    from kafka_runbooks.state import state_of

    t = S.ledger
    with state_of(config).write() as c:
        c.execute(sa.text("DROP TRIGGER krb_ledger_no_update"))
        seq, entry = c.execute(sa.select(t.c.seq, t.c.entry).where(t.c.record_id == record_id, t.c.event == "planned")).one()
        c.execute(sa.update(t).where(t.c.seq == seq).values(entry=edit(dict(entry))))


@pytest.mark.parametrize("edit, says", [
    # a not-serving finding naming broker 3 (the waiver is recomputed from these): the SHA-256 no longer matches
    (lambda e: {**e, "findings": [{**e["findings"][0], "kind": "jvm_deadlock", "broker_ids": [3]}]}, "have SHA-256"),
    # the SHA-256 removed: findings recorded without one are refused
    (lambda e: {k: v for k, v in e.items() if k != "findings_sha256"}, "recorded without their SHA-256"),
])
def test_findings_edited_in_the_state_database_after_the_plan_task_are_refused_on_load(cluster, edit, says):
    """Issue 28/29 ("what the engine trusts that it has not proven"): the plan's digest covers the plan, not the
    findings recorded beside it, from which the not-serving waiver is recomputed. The plan task records their SHA-256
    with them; ``plans.load`` checks it and refuses, naming the record, the plan and what differs. Red before: the
    edited findings were loaded as recorded."""
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.runbook import finding_records, plans
    from kafka_runbooks.runbook.errors import Stop

    seen = Finding("broker_unresponsive", Severity.CRITICAL, "broker 2 does not answer", broker_ids=(2,))
    plan, digest = cluster.roll(findings=[seen])
    assert [f.summary for f in plans.load(plans.output(plan, digest), "nothing done").findings] == ["broker 2 does not answer"]
    _edit_planned_entry(cluster.config, plan.roll_id, edit)
    with pytest.raises(Stop) as refused:  # red before: no refusal, the edited findings were loaded
        plans.load(plans.output(plan, digest), "nothing restarted")
    assert isinstance(refused.value, finding_records.PlanFindingsMismatch)
    assert refused.value.record_id == plan.roll_id and refused.value.digest == digest
    assert f"plan {digest[:12]} of {plan.roll_id}" in str(refused.value) and says in str(refused.value)
    assert str(refused.value).endswith("nothing restarted")


@pytest.mark.parametrize("output, says", [
    (None, "names no recorded plan"),
    ({"plan": {"cluster": "c1"}, "digest": "d"}, "names no recorded plan"),
    ({"plan": {"roll_id": "c1-nothing", "cluster": "c1"}, "digest": "0" * 64}, "no plan with digest 000000000000 was recorded"),
])
def test_an_output_that_names_no_recorded_plan_stops_saying_nothing_was_done(cluster, output, says):
    from kafka_runbooks.runbook import plans
    from kafka_runbooks.runbook.errors import Stop

    with pytest.raises(Stop, match=f"{says}.*; nothing restarted"):
        plans.load(output, "nothing restarted")


def test_a_plan_recorded_before_its_canary_switch_was_recorded_runs_with_the_clusters_setting(cluster):
    """A plan task of the release before recorded no canary switch (it travelled in XCom): the cluster's setting."""
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart
    from kafka_runbooks.runbook import plans

    record = cluster.store.open(cluster="c1", broker_ids=[3], reason="roll", opened_by="alice", trigger={"kind": "rolling_restart"})
    plan = plan_restart(snap([P("orders", 0, [1, 2, 3], 1, [1, 2, 3])], controller=2), [3], cluster.config, roll_id=record["id"])
    L.Ledger(cluster.config, plan.roll_id).append(L.PLANNED, "run-0", plan=plan.to_dict(), digest=plan_digest(plan), findings=[])
    loaded = plans.load(plans.output(plan, plan_digest(plan)), "nothing done")
    assert loaded.canary is cluster.config.canary.enabled and loaded.gates == ()


# ---------------------------------------------------------------------------------------------------- the restart

@pytest.mark.parametrize("kind, form, expected", [("rolling_restart", False, False), ("rolling_restart", "true", True),
                                                  ("rolling_restart", None, "config"), ("incident_restart", False, "config")])
def test_the_canary_switch_is_the_forms_for_a_roll_and_the_clusters_otherwise(cluster, kind, form, expected):
    from kafka_runbooks.runbook.restart import Request, canary_of

    got = canary_of(Request(kind=kind, cluster="c1", canary=form), cluster.config)
    assert got is (cluster.config.canary.enabled if expected == "config" else expected)


def test_which_brokers_a_restart_plans(cluster):
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.restart import Request, brokers_of

    task = cluster.task("plan")
    assert brokers_of(Request(kind="rolling_restart", cluster="c1"), cluster.config, cluster.store, task) == (None, [1, 2, 3], [])
    assert brokers_of(Request(kind="rolling_restart", cluster="c1", broker_ids=["3", 1]), cluster.config, cluster.store,
                      task) == (None, [3, 1], [])
    incident = {"incident_id": "c1-inc", "cluster": "c1", "broker_ids": [2]}
    assert brokers_of(Request(kind="incident_restart", incident=incident), cluster.config, cluster.store, task) == ("c1-inc", [2], [])
    with pytest.raises(Stop, match="resume: cluster 'c1' has no halted rolling restart to resume"):
        brokers_of(Request(kind="rolling_restart", cluster="c1", resume=True), cluster.config, cluster.store, task)
    with pytest.raises(Stop, match="resume: roll 'c1-other' is not an open, halted rolling restart"):
        brokers_of(Request(kind="rolling_restart", cluster="c1", resume="c1-other"), cluster.config, cluster.store, task)


def test_a_rejected_roll_is_closed_saying_nothing_was_changed(cluster):
    from kafka_runbooks.runbook import plans, restart

    plan, digest = cluster.roll()
    out = restart.close(restart.Outcome(plans.output(plan, digest), {"chosen_options": ["Reject"],
                                                                      "responded_by_user": {"name": "carol"}}),
                        cluster.task("close"))
    assert out == {"status": "reject", "record_id": plan.roll_id}
    assert cluster.store.get(plan.roll_id)["resolution"] == "Reject by carol: nothing was changed"


def test_an_approval_that_did_not_count_closes_the_roll_and_stops(cluster):
    from kafka_runbooks.runbook import plans, restart
    from kafka_runbooks.runbook.errors import Stop

    plan, digest = cluster.roll()
    with pytest.raises(Stop, match="approval by alice refused: the person who started the run cannot approve it"):
        restart.close(restart.Outcome(plans.output(plan, digest), {
            "chosen_options": ["Approve"], "responded_by_user": {"name": "alice"},
            "refusals": ["the person who started the run cannot approve it"]}), cluster.task("close"))
    assert cluster.store.get(plan.roll_id)["status"] == "closed"


def test_a_dry_runs_close_and_a_refused_plans_close_read_what_their_plan_task_left(cluster):
    from kafka_runbooks.runbook import restart

    dry = restart.close(restart.Outcome({"plan": {"roll_id": None, "cluster": "c1", "kind": "rolling_restart"},
                                         "dry_run": True, "order": [2, 3, 1], "refusals": []}), cluster.task("close"))
    assert dry == {"status": "dry run", "order": [2, 3, 1], "refusals": []}
    refused = restart.close(restart.Outcome(None, refused={"summary": "refused -- broker 2 is the last ISR", "record_id": "x"}),
                            cluster.task("close"))
    assert refused["status"] == "refused" and "broker 2 is the last ISR" in refused["summary"]


# --------------------------------------------------------------------------------------------------- the approval

def test_the_approval_asks_for_the_recorded_plan_and_seals_the_request(cluster):
    from kafka_runbooks.remediate.ledger import Ledger
    from kafka_runbooks.runbook import approval, plans
    from kafka_runbooks.runbook.errors import Skip, Stop

    plan, digest = cluster.roll()
    with pytest.raises(Skip, match="dry run"):
        approval.ask({"dry_run": True}, "c1", cluster.task("approve"), secret_of=lambda c: SECRET)
    request = approval.ask(plans.output(plan, digest), "c1", cluster.task("approve"), secret_of=lambda c: SECRET,
                           max_wait_s=600)
    assert [u["id"] for u in request.assigned] == ["carol", "dave"] and request.timeout_s == 600
    assert "broker 2" in request.body and request.digest in request.body
    (sealed,) = [e for e in Ledger(cluster.config, plan.roll_id).entries() if e["event"] == approval.REQUESTED]
    assert sealed["decision"]["starter"] == "alice" and sealed["assigned"] == ["carol", "dave"]
    with pytest.raises(Stop, match="the plan is for cluster 'c1', not 'c2'"):
        approval.bind(plans.output(plan, digest), "c2", "nothing to approve",
                      lambda name: cluster.config if name == "c1" else SimpleNamespace(name=name))
    refused, refused_digest = cluster.roll(refusals=["broker 2 is the last in-sync replica of orders-0"])
    with pytest.raises(Stop, match="the plan is refused; nothing to approve:\nbroker 2 is the last in-sync replica"):
        approval.ask(plans.output(refused, refused_digest), "c1", cluster.task("approve"), secret_of=lambda c: SECRET)


def test_an_approver_who_started_the_run_is_refused_and_a_timeout_is_a_reject(cluster):
    import datetime as dt

    from kafka_runbooks.runbook import approval, plans
    from kafka_runbooks.runbook.errors import Stop

    plan, digest = cluster.roll()
    out = plans.output(plan, digest)
    starter_is_approver = cluster.task("approve", starter="carol")
    approval.ask(out, "c1", starter_is_approver, secret_of=lambda c: SECRET)
    with pytest.raises(Stop, match="the approval does not count: .*carol"):
        approval.answer(out, "c1", starter_is_approver, {
            "chosen_options": ["Approve"], "responded_by_user": {"id": "carol", "name": "carol"},
            "responded_at": dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=60)}, secret_of=lambda c: SECRET)
    assert starter_is_approver.pushed[approval.DECISION_KEY]["refusals"]  # the close reads why
    timed_out = cluster.task("approve", run_id="run-2")
    approval.ask(out, "c1", timed_out, secret_of=lambda c: SECRET)
    said = approval.answer(out, "c1", timed_out, {"error": "timeout", "timedout": True}, secret_of=lambda c: SECRET)
    assert said["chosen_options"] == ["Reject"] and said["timedout"] is True and said["refusals"] == []


def test_a_mitigations_approval_waits_at_most_what_its_plan_recorded(cluster):
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.runbook import approval, plans

    plan, _ = cluster.roll()
    import dataclasses

    from kafka_runbooks.remediate.digest import plan_digest

    mitigation = dataclasses.replace(plan, kind="demote", roll_id=plan.roll_id)
    digest = plan_digest(mitigation)
    plans.record(cluster.config, mitigation, digest, "run-1", canary=True, approval_wait_s=120.0)
    assert L.Ledger(cluster.config, plan.roll_id).entries()[-1]["approval_wait_s"] == 120.0
    request = approval.ask(plans.output(mitigation, digest), "c1", cluster.task("approve_mitigation"),
                           secret_of=lambda c: SECRET, max_wait_s=600)
    assert request.timeout_s == 120.0


# ------------------------------------------------------------------------------------------ what an incident gets

@pytest.mark.parametrize("brokers, details, kind, says", [
    ((), {}, "person", "no broker or ZooKeeper server named"),
    ((3,), {"problem": "leadership", "runbook": "runbooks/preferred-election.md", "remediation": "the deferred election"},
     "person", "no automatic restart; see runbooks/preferred-election.md"),
    ((), {"problem": "zookeeper_member", "server": True, "subject": "zk2:2181"}, "respond", ""),
    ((3,), {"problem": "broker_not_serving"}, "respond", ""),
])
def test_what_a_new_incident_gets(brokers, details, kind, says):
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.remediate.choice import first_response

    got = first_response(Finding("broker_unresponsive", Severity.CRITICAL, "x", broker_ids=brokers, details=details))
    assert got.kind == kind and says in got.reason
    assert got.zookeeper_servers == (("zk2:2181",) if details.get("server") else ())


def test_the_close_of_an_incident_whose_plan_a_person_rejected_leaves_it_to_a_person_without_paging(cluster, monkeypatch):
    import kafka_runbooks.runbook.incident as incident

    paged = []
    monkeypatch.setattr("kafka_runbooks.notify.webhook.page_needs_person", lambda *a, **k: paged.append(a))
    record = cluster.store.open(cluster="c1", broker_ids=[2], reason="001", opened_by="health")
    run = incident.Run({"incident_id": record["id"], "cluster": "c1", "broker_ids": [2]},
                       approval={"chosen_options": ["Reject"], "responded_by_user": {"name": "carol"}},
                       report={"bundle_dir": "/b/1"})
    out = incident.close_incident(run, cluster.task("close_incident"))
    assert out["status"] == "needs_person" and out["decision"] == "Reject" and paged == []
    assert incident.approval_decision({"chosen_options": ["Reject"], "timedout": True}) == ("Reject", "nobody (approval timed out)")


# ------------------------------------------------------------------------------------------------- the election's close

@pytest.mark.parametrize("converged_before, says, status", [
    (False, "refused: batch 1: broker 2 does not serve now; nothing elected", "closed"),
    (True, "refused: batch 2: broker 2 does not serve now; nothing elected in that batch; resumable with resume=true", None),
])
def test_an_election_refused_on_fresh_state_is_closed_or_noted_as_refused(cluster, converged_before, says, status):
    """Issue 29 §3: a refusal is a refusal in the close too -- the election's close said "stopped: ..." (or "halted:
    ...; resumable") for a batch refused on fresh state. Refused with nothing elected: closed as refused; refused after
    converged batches: noted as refused and resumable (the engine's progress rule)."""
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.runbook import election
    from kafka_runbooks.runbook.errors import Stop

    record = cluster.store.open(cluster="c1", broker_ids=[2], reason="election", opened_by="scheduler",
                                trigger={"kind": "preferred_election"})
    ledger = L.Ledger(cluster.config, record["id"])
    ledger.append(L.PLANNED, "run-1", plan={"requested": [2]})
    batch = 1
    if converged_before:
        ledger.append(L.STEP_DONE, "run-1", broker_id=2, partitions=["orders-0"])
        batch = 2
    ledger.append(L.REFUSED, "run-1", reason=f"batch {batch}: broker 2 does not serve now", code="refused_on_fresh_state")
    stop = election._not_done(cluster.task("close"), cluster.config, cluster.store, record["id"])
    assert isinstance(stop, Stop) and str(stop).startswith(f"election {record['id']} refused: batch {batch}")
    now = cluster.store.get(record["id"])
    if status == "closed":
        assert now["status"] == "closed" and now["resolution"] == says, now
    else:
        assert now["status"] != "closed" and [n["text"] for n in now["notes"]][-1] == says, now


# ------------------------------------------------------------------------------------------------- the mitigation's restore

def test_the_order_written_back_is_the_recorded_mitigations_never_the_xcoms(cluster):
    """The restore after the restart writes back what the recorded mitigation's intent kept (committed before it moved
    anything), bound by the reference's digest -- a map handed over in XCom (the mitigate task's output, which it read
    before) is never read: an edited one could reorder any partition's preferred leader."""
    from kafka_runbooks.model import Plan
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.runbook import mitigate, plans
    from kafka_runbooks.runbook.errors import Skip, Stop

    record = cluster.store.open(cluster="c1", broker_ids=[3], reason="move leadership off broker 3", opened_by="alice",
                                trigger={"kind": "demote", "broker_ids": [3]})
    plan = Plan(cluster="c1", kind="demote", steps=(), roll_id=record["id"])
    digest = plan_digest(plan)
    plans.record(cluster.config, plan, digest, "run-1", canary=False)
    out = plans.output(plan, digest, incident_id="i-1")
    with pytest.raises(Skip, match="moved nothing"):  # not approved, or refused before its intent
        mitigate.recorded_restore(out, "c1")
    L.Ledger(cluster.config, record["id"]).append(L.STEP_STARTED, "run-1", broker_id=3, phase="reassigning",
                                                  partitions=["orders-5"], restore={"orders-5": [3, 1, 2]})
    forged = {**out, "restore": {"__consumer_offsets-7": [2, 1, 3]}, "record_id": "c1-someone-else"}
    assert mitigate.recorded_restore(forged, "c1") == {"record_id": record["id"], "broker_id": 3,
                                                       "restore": {"orders-5": [3, 1, 2]}}
    with pytest.raises(Stop, match="no plan with digest"):
        mitigate.recorded_restore({**out, "digest": "0" * 64}, "c1")
    roll, roll_digest = cluster.roll()
    with pytest.raises(Stop, match="not a mitigation"):
        mitigate.recorded_restore(plans.output(roll, roll_digest), "c1")
    with pytest.raises(Skip, match="no mitigation was planned"):
        mitigate.recorded_restore(None, "c1")
