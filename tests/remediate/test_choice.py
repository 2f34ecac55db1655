"""What each incident gets (restart through the engine, or explained and handed to a person), and when a restarted
broker's peers get a rolling restart too. Pure."""

from __future__ import annotations

import pytest

from kafka_runbooks.incidents.request import parse_request
from kafka_runbooks.incidents.store import IncidentError
from kafka_runbooks.model import Finding, Severity
from kafka_runbooks.remediate.choice import EXPLAIN, RESTART, peers_needing_restart, remediation_for


def trig(kind, problem=None, brokers=(3,), **details):
    return Finding(kind, Severity.CRITICAL, f"{kind} summary", broker_ids=tuple(brokers),
                   details={**({"problem": problem} if problem else {}), **details})


def test_a_broker_not_serving_is_restarted_and_its_peers_followed_up():
    r = remediation_for(trig("broker_unresponsive", "broker_not_serving", pattern="silently_isolated",
                             runbook="runbooks/broker-silently-isolated.md"))
    assert r.kind == RESTART and r.follow_up_peers is True and r.runbook == "runbooks/broker-silently-isolated.md"


def test_a_dead_log_cleaner_is_a_restart_without_peer_follow_up():
    r = remediation_for(trig("log_cleaner_not_running", "log_cleaner_stopped", brokers=(1, 2, 3)))
    assert r.kind == RESTART and r.follow_up_peers is False and r.runbook == "runbooks/offsets-load-stalled.md"


@pytest.mark.parametrize("kind,problem,runbook", [
    ("unknown_api_requests", "bad_client_requests", "runbooks/unsupported-client-request.md"),
    ("zookeeper_follower_dropped", "zookeeper_member", "runbooks/zookeeper-follower-drop.md"),
])
def test_a_bad_client_and_a_zookeeper_drop_are_explained_never_restarted(kind, problem, runbook):
    analysis = [Finding("unknown_api_requests", Severity.WARNING, "API key 60 (DescribeCluster, added in Kafka 2.8)", details={"no_restart": True}),
                Finding("jvm_deadlock", Severity.CRITICAL, "unrelated")]
    r = remediation_for(trig(kind, problem, advice="pin the client"), analysis)
    assert r.kind == EXPLAIN and r.runbook == runbook and r.follow_up_peers is False
    assert [f.kind for f in r.findings] == ["unknown_api_requests"]
    assert r.to_dict()["kind"] == "explain" and r.to_dict()["findings"] == ["unknown_api_requests"]  # kinds, no finding


def test_a_response_from_the_form_restarts_as_asked_and_tells_no_restart_findings():
    assert remediation_for(None, []).kind == RESTART
    # e.g. an earlier bad client's lines still in the captured logs: told, not a reason to refuse on-call's restart
    said = [Finding("unknown_api_requests", Severity.WARNING, "x", details={"no_restart": True, "advice": "pin it"})]
    r = remediation_for(None, said)
    assert r.kind == RESTART and r.advice == "pin it" and "unknown_api_requests" in r.reason


def peer(kind, b, summary="CLOSE_WAIT rose"):
    return Finding(kind, Severity.WARNING, summary, broker_ids=(b,))


def test_peers_are_restarted_only_when_they_show_the_symptom_in_every_check():
    obs = [[peer("broker_socket_pileup", 1), peer("broker_socket_pileup", 2)],
           [peer("broker_socket_pileup", 1), peer("under_replicated_partitions", 2)]]
    ids, why = peers_needing_restart(obs, restarted=[3], peers=[1, 2, 3])
    assert ids == [1] and "broker_socket_pileup in 2 consecutive checks" in why[1]


def test_healthy_peers_and_the_restarted_broker_itself_are_left_alone():
    assert peers_needing_restart([[], []], [3], [1, 2, 3]) == ([], {})
    assert peers_needing_restart([[peer("broker_unresponsive", 3)]] * 2, [3], [1, 2, 3]) == ([], {})
    assert peers_needing_restart([], [3], [1, 2]) == ([], {})


def test_a_zookeeper_request_names_servers_and_no_broker():
    r = parse_request({"cluster": "lab", "zookeeper_servers": ["1"], "broker_ids": []})
    assert r.broker_ids == () and r.zookeeper_servers == ("1",)
    assert parse_request({"cluster": "lab", "zookeeper_servers": ["10.0.0.1:2181"]}).zookeeper_servers == ("10.0.0.1:2181",)
    for bad in ({"cluster": "lab", "broker_ids": []}, {"cluster": "lab", "zookeeper_servers": ["../x"]},
                {"cluster": "lab", "zookeeper_servers": "1"}, {"cluster": "lab", "zookeeper_servers": ["a b"]}):
        with pytest.raises(IncidentError):
            parse_request(bad)


def test_a_stuck_follower_is_restarted_through_the_engine_no_peer_follow_up():
    r = remediation_for(trig("follower_stuck", "follower_stuck", brokers=(3,)))
    assert r.kind == RESTART and r.follow_up_peers is False and r.runbook == "runbooks/preferred-election.md"
    assert "broker(s) [3] stopped fetching" in r.reason
