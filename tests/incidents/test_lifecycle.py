"""The incident lifecycle rules (pure): consecutive checks, dedupe only while a response runs,
needs_person never holds back a new episode, resolution after clear checks."""

from __future__ import annotations

from kafka_runbooks.config import HealthSettings
from kafka_runbooks.incidents.lifecycle import stale_responses, step, streak_key
from kafka_runbooks.model import Finding, Severity

S = HealthSettings(consecutive_checks=2, clear_checks=3)


def finding(kind="broker_unresponsive", brokers=(3,)):
    sev = Severity.WARNING if kind == "broker_check_failed" else Severity.CRITICAL
    return Finding(kind, sev, f"{kind} {brokers}", broker_ids=tuple(brokers), details={"problem": "broker_not_serving"})


def run(checks, incidents=None, running=(), settings=S, state=None):
    """Feed checks (lists of findings) through step(); return (state, [actions per check])."""
    state = state or {}
    incidents = incidents if incidents is not None else {}
    out = []
    for i, findings in enumerate(checks):
        state, actions = step(state, findings, incidents, running, settings, f"2026-11-22T14:00:{i:02d}.000Z")
        out.append(actions)
    return state, out


def test_a_finding_opens_an_incident_only_after_the_consecutive_checks():
    state, acts = run([[finding()], [finding()]])
    assert acts[0] == []
    assert [a.kind for a in acts[1]] == ["open"] and "2 consecutive checks" in acts[1][0].reason
    # one check missing in between restarts the count
    state, acts = run([[finding()], [], [finding()]])
    assert all(a.kind != "open" for check in acts for a in check)


def test_kinds_of_one_problem_share_the_streak_but_only_incident_kinds_open():
    # pause: check failed (uncorroborated) -> unresponsive -> unregistered-alive, all one problem
    _, acts = run([[finding("broker_check_failed")], [finding("broker_check_failed")]])
    assert acts[1] == []  # a warning alone never opens
    _, acts = run([[finding("broker_check_failed")], [finding("broker_unresponsive")]])
    assert [a.kind for a in acts[1]] == ["open"] and acts[1][0].finding.kind == "broker_unresponsive"
    state, acts = run([[finding("broker_unresponsive")], [finding("broker_unregistered_alive")]])
    assert [a.kind for a in acts[1]] == ["open"] and streak_key(finding()) in state["streaks"]


def linked(state, key, iid):
    state["streaks"][key]["incident_id"] = iid
    return state


def test_dedupe_only_while_a_response_runs():
    key = streak_key(finding())
    running_incident = {"id": "lab-1", "status": "responding", "broker_ids": [3], "response_run": "health__lab-1",
                        "trigger": finding().to_dict()}
    # an unrelated streak reaching the threshold while lab-1's response runs: noted on it, no second incident
    _, acts = run([[finding()], [finding()]], incidents={"lab-1": running_incident}, running={"lab-1"})
    assert [(a.kind, a.incident_id) for a in acts[1]] == [("note", "lab-1")]
    # the same incident, its response no longer running and a person owns it: a new episode opens a new incident
    rejected = {**running_incident, "status": "needs_person"}
    _, acts = run([[finding()], [finding()]], incidents={"lab-1": rejected}, running=set())
    assert [a.kind for a in acts[1]] == ["open"]
    # but the episode it belongs to (its own streak) does not pile up incidents
    state, _ = run([[finding()]])
    state = linked(state, key, "lab-1")
    _, acts = run([[finding()], [finding()]], incidents={"lab-1": rejected}, state=state)
    assert [a.kind for check in acts for a in check] == ["note", "note"]


def test_still_seen_after_a_close_as_fixed_counts_again():
    key = streak_key(finding())
    state, _ = run([[finding()], [finding()]])
    state = linked(state, key, "lab-1")
    closed = {"id": "lab-1", "status": "closed", "closed_at": "2026-11-22T13:59:00.000Z", "broker_ids": [3]}
    state, acts = run([[finding()], [finding()]], incidents={"lab-1": closed}, state=state)
    assert [a.kind for a in acts[0]] == ["restart_streak"]
    assert [a.kind for a in acts[1]] == ["open"]


def test_cleared_findings_resolve_their_incident_after_the_clear_checks():
    key = streak_key(finding())
    state, _ = run([[finding()], [finding()]])
    state = linked(state, key, "lab-1")
    rec = {"id": "lab-1", "status": "needs_person", "broker_ids": [3]}
    state, acts = run([[], [], []], incidents={"lab-1": rec}, state=state)
    assert acts[0] == [] and acts[1] == []
    assert [(a.kind, a.incident_id) for a in acts[2]] == [("resolve", "lab-1")]
    assert "3 consecutive checks" in acts[2][0].reason and key not in state["streaks"]
    # a running response is left to finish its own work
    state, _ = run([[finding()]])
    state = linked(state, key, "lab-2")
    rec = {"id": "lab-2", "status": "responding", "broker_ids": [3]}
    state, acts = run([[], [], [], []], incidents={"lab-2": rec}, running={"lab-2"}, state=state)
    assert not [a for check in acts for a in check] and key in state["streaks"]


def test_responses_that_ended_without_an_outcome_need_a_person():
    incidents = {"a": {"status": "responding", "response_run": "r1"}, "b": {"status": "responding", "response_run": "r2"},
                 "c": {"status": "needs_person"}}
    out = dict(stale_responses(incidents, {"a": "running", "b": "failed"}))
    assert list(out) == ["b"] and "r2 is failed" in out["b"]


def test_a_streak_nobody_checked_for_a_long_time_is_a_new_episode():
    key = streak_key(finding())
    state, _ = run([[finding()], [finding()]])
    state["streaks"][key]["incident_id"] = "lab-1"
    rec = {"id": "lab-1", "status": "needs_person", "broker_ids": [3]}
    # the next check comes an hour later (the checks had stopped): counted afresh, then a new incident
    later = HealthSettings(consecutive_checks=2, clear_checks=3, episode_gap_s=900)
    state, acts = step(state, [finding()], {"lab-1": rec}, (), later, "2026-11-22T15:00:00.000Z")
    assert [a.kind for a in acts] == ["restart_streak"] and state["streaks"][key]["incident_id"] is None
    state, acts = step(state, [finding()], {"lab-1": rec}, (), later, "2026-11-22T15:00:30.000Z")
    assert [a.kind for a in acts] == ["open"]
