"""The health check starts a response with a reference, never a copy of the finding (issue 28): the conf names the
cluster, the incident and its brokers, and the response's ``open_incident`` reads the rest -- the reason, the ZooKeeper
members a ZooKeeper incident captures -- from the incident's record. Called without Airflow (``runbook.detect.open_for``
as the detect task opens the incident, ``runbook.incident.open_incident`` as the response's first task runs), against a
REAL ZooKeeper (the cluster's registrations in a fresh chroot, for the snapshot the open task takes) and the product's
real SQLite state store.

The finding is built with the model as the ZooKeeper detector builds a member's (``details``: ``problem``
``zookeeper_member``, ``subject`` and ``server`` the member's id, as ``detect/zookeeper.py`` writes them): what is claimed here is where the
response reads it, not the detection."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from finding_dicts import finding_dicts

pytestmark = pytest.mark.timeout(180)


def j(obj) -> bytes:
    return json.dumps(obj).encode()


@pytest.fixture
def cluster(zk, zookeeper, tmp_path, monkeypatch):
    from kafka_runbooks.config import FILE_ENV, load_cluster

    for b in (1, 2, 3):
        zk.create(f"/brokers/ids/{b}", j({"endpoints": [f"PLAINTEXT://127.0.0.1:{9 + b}"], "host": "127.0.0.1", "port": 9 + b,
                                          "jmx_port": -1, "timestamp": "1700000000000", "version": 4}), makepath=True)
    zk.create("/controller", j({"version": 1, "brokerid": 1, "timestamp": "1"}))
    monkeypatch.setenv("AIRFLOW_CONN_KRB_CONF_ZK", json.dumps({"conn_type": "generic", "host": zookeeper.hosts,
                                                               "extra": {"chroot": zk.chroot_path}}))
    raw = {"c1": {"zk_conn_id": "krb_conf_zk", "hosts": {"1": "krb_conf_no_ssh_1", "2": "krb_conf_no_ssh_2", "3": "krb_conf_no_ssh_3"},
                  "kafka_version": "2.3.0", "incident_base": str(tmp_path / "state"),
                  "zookeeper": {"servers": {"1": "127.0.0.1:1", "2": "127.0.0.1:2", "3": "127.0.0.1:3"}},
                  "health": {"kafka_probe_timeout_s": 1.0}, "capture": {"connect_timeout_s": 5.0}}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    return load_cluster("c1")


def task(dag_id, run_id, task_id):
    from kafka_runbooks.runbook.task import Task

    return Task(dag_id=dag_id, run_id=run_id, task_id=task_id, log=logging.getLogger("test"))


def detected(config, finding):
    """The incident a health check opens for ``finding``, and the response run it starts (its run id and conf)."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook.detect import open_for

    action = SimpleNamespace(finding=finding, reason="held for 2 consecutive checks", key="k", incident_id=None)
    return open_for(IncidentStore(config), config, action, task("kafka_health_check", "scheduled__1", "detect"), key="c1/k@1")


def zk_member_down():
    from kafka_runbooks.model import Finding, Severity

    return Finding("zookeeper_follower_dropped", Severity.WARNING, "ZooKeeper member 2 is not in the quorum",
                   details={"problem": "zookeeper_member", "subject": "2", "server": "2", "address": "127.0.0.1:2",
                            "runbook": "runbooks/zookeeper-follower-drop.md"})


def test_the_health_checks_conf_is_a_reference_and_the_response_reads_the_recorded_finding(cluster):
    """Red before: the conf carried the finding (and its summary, and the ZooKeeper members), and the response's open
    task refused a conf that named the incident without them ('broker_ids' must be a non-empty list)."""
    from kafka_runbooks.runbook.incident import open_incident

    start = detected(cluster, zk_member_down())
    conf = start["conf"]
    assert conf == {"cluster": "c1", "incident_id": start["incident_id"], "broker_ids": []}
    assert finding_dicts(conf) == []
    opened = open_incident(conf, task("kafka_incident_response", start["run_id"], "open_incident"))
    # what the capture is told to take: the recorded finding's ZooKeeper member, no broker as a suspect
    assert opened["incident_id"] == start["incident_id"] and opened["zookeeper_servers"] == ["2"]
    assert opened["broker_ids"] == [] and opened["capture_broker_ids"] == [1, 2, 3]


@pytest.mark.parametrize("forged", [
    {"finding": {"kind": "broker_unresponsive", "severity": "critical", "summary": "broker 3 answers nothing",
                 "broker_ids": [3], "evidence": [], "details": {"problem": "broker_not_serving"}}},
    {"reason": "broker 3 answers nothing", "finding": {"kind": "jvm_deadlock", "severity": "critical", "summary": "x",
                                                       "broker_ids": [3], "evidence": [], "details": {}}},
])
def test_a_forged_finding_copy_in_the_conf_changes_nothing(cluster, forged):
    """A conf edited to carry another finding (and its summary) gets the same response as the health check's own."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook.incident import open_incident

    start = detected(cluster, zk_member_down())
    honest = open_incident(start["conf"], task("kafka_incident_response", start["run_id"], "open_incident"))
    edited = open_incident({**start["conf"], **forged}, task("kafka_incident_response", start["run_id"], "open_incident"))
    assert {k: v for k, v in edited.items() if k != "snapshot"} == {k: v for k, v in honest.items() if k != "snapshot"}
    record = IncidentStore(cluster).get(start["incident_id"])
    assert record["trigger"]["kind"] == "zookeeper_follower_dropped" and record["reason"] == "ZooKeeper member 2 is not in the quorum"


def test_zookeeper_members_a_conf_names_that_are_not_the_incidents_are_refused(cluster):
    """Red before: the conf's ZooKeeper members were captured as given (any configured member, not the incident's)."""
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.incident import open_incident

    start = detected(cluster, zk_member_down())
    with pytest.raises(Stop, match=r"names ZooKeeper members \['3'\], incident .* was opened for \['2'\]"):
        open_incident({**start["conf"], "zookeeper_servers": ["3"]},
                      task("kafka_incident_response", start["run_id"], "open_incident"))
