"""Detectors and lifecycle replayed on health checks recorded from the lab's real Kafka 2.3.0 brokers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_runbooks.config import HealthSettings
from kafka_runbooks.detect.detectors import detect
from kafka_runbooks.detect.history import Sample
from kafka_runbooks.incidents.lifecycle import link, step
from kafka_runbooks.model import ClusterSnapshot, Severity

FIXTURES = Path(__file__).parent / "fixtures"
NOT_SERVING = ("broker_unresponsive", "broker_unregistered_alive", "broker_absent", "broker_check_failed")


def replay(name):
    """[(snapshot, findings)] as each recorded check saw them, with the history up to that check."""
    rec = json.loads((FIXTURES / f"recorded_{name}.json").read_text())
    history = {k: [Sample.from_dict(x) for x in v] for k, v in rec["history"].items()}
    out = []
    for raw in rec["snapshots"]:
        snap = ClusterSnapshot.from_dict(raw)
        upto = {k: [s for s in v if s.at <= snap.taken_at] for k, v in history.items()}
        out.append((snap, detect(snap, HealthSettings(), upto)))
    return out


@pytest.mark.parametrize("name", ["hang", "pause"])
def test_only_broker_3_is_accused_and_the_healthy_check_is_quiet(name):
    checks = replay(name)
    assert checks[0][1] == []  # before the fault
    for snap, findings in checks[1:]:
        accused = {f.broker_ids for f in findings if f.kind in NOT_SERVING or f.severity is Severity.CRITICAL}
        assert accused == {(3,)}, [(f.kind, f.broker_ids) for f in findings]


def test_recorded_hang_is_unresponsive_with_its_real_evidence():
    for snap, findings in replay("hang")[1:]:
        (f,) = [f for f in findings if f.kind == "broker_unresponsive"]
        assert f.details["check"]["error_code"] == "_TIMED_OUT" and f.details["check"]["endpoint"].endswith(":9093")
        assert f.details["process_state"] in ("sleeping", "running")
        assert 3 in snap.live_broker_ids


def test_recorded_pause_moves_from_unresponsive_to_unregistered_and_stays_one_problem():
    checks = replay("pause")
    kinds = [[f.kind for f in fs if f.broker_ids == (3,) and f.kind in NOT_SERVING] for _, fs in checks[1:]]
    assert kinds[0] == ["broker_unresponsive"] and kinds[-1] == ["broker_unregistered_alive"]
    last = [f for f in checks[-1][1] if f.kind == "broker_unregistered_alive"][0]
    assert last.details["process_state"] == "stopped" and last.details["listening"] is True
    assert set(last.details["ports"]) == {9092, 9093}
    # one streak, one incident, opened at the second observation
    state, opened, incidents = {}, [], {}
    for snap, findings in checks:
        state, actions = step(state, findings, incidents, set(incidents), HealthSettings(), snap.taken_at)
        for a in actions:
            if a.kind == "open":  # as the health operator does: the incident opens, its response runs
                iid = f"lab-{len(opened)}"
                incidents[iid] = {"id": iid, "status": "responding", "broker_ids": list(a.finding.broker_ids), "trigger": a.finding.to_dict()}
                state = link(state, a.key, iid)
                opened.append((snap.taken_at, a.finding.kind))
    assert len(opened) == 1 and opened[0][0] == checks[2][0].taken_at
