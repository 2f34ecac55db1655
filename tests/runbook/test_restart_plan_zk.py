"""``runbook.restart.plan`` -- the plan task's whole service -- without Airflow, against a REAL ZooKeeper (the cluster's
registrations and partitions written into a fresh chroot) and the product's real SQLite state store. Nothing listens
at the brokers' addresses and no SSH connection is configured for their hosts: what the plan cannot read it must
refuse, record and say -- here, as on a cluster whose hosts cannot be reached."""

from __future__ import annotations

import json
import logging

import pytest

pytestmark = pytest.mark.timeout(180)


def j(obj) -> bytes:
    return json.dumps(obj).encode()


def _cluster(zk):
    for b in (1, 2, 3):
        zk.create(f"/brokers/ids/{b}", j({"endpoints": [f"PLAINTEXT://127.0.0.1:{9 + b}"], "host": "127.0.0.1", "port": 9 + b,
                                          "jmx_port": -1, "timestamp": "1700000000000", "version": 4}), makepath=True)
    zk.create("/controller", j({"version": 1, "brokerid": 1, "timestamp": "1"}))
    zk.create("/brokers/topics/orders", j({"version": 1, "partitions": {"0": [1, 2, 3]}}), makepath=True)
    zk.create("/brokers/topics/orders/partitions/0/state", j({"controller_epoch": 1, "leader": 1, "version": 1,
                                                             "leader_epoch": 1, "isr": [1, 2, 3]}), makepath=True)


@pytest.fixture
def settings(zk, zookeeper, tmp_path, monkeypatch):
    from kafka_runbooks.config import FILE_ENV

    _cluster(zk)
    monkeypatch.setenv("AIRFLOW_CONN_KRB_SVC_ZK", json.dumps({"conn_type": "generic", "host": zookeeper.hosts,
                                                             "extra": {"chroot": zk.chroot_path}}))
    raw = {"c1": {"zk_conn_id": "krb_svc_zk", "hosts": {"1": "krb_svc_no_ssh_1", "2": "krb_svc_no_ssh_2", "3": "krb_svc_no_ssh_3"},
                  "kafka_version": "2.3.0", "incident_base": str(tmp_path / "state"),
                  "health": {"kafka_probe_timeout_s": 1.0}, "capture": {"connect_timeout_s": 5.0}}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    return raw


def test_a_roll_whose_hosts_cannot_be_read_is_refused_recorded_and_closed(settings):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.ledger import Ledger
    from kafka_runbooks.runbook import restart
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.summary import REFUSED_KEY
    from kafka_runbooks.runbook.task import Task

    task = Task(dag_id="kafka_rolling_restart", run_id="manual__1", task_id="plan", starter="alice",
                log=logging.getLogger("test"))
    with pytest.raises(Stop, match="nothing changed"):
        restart.plan(restart.Request(kind=restart.ROLLING_RESTART, cluster="c1", broker_ids=[2], reason="patch",
                                     canary=False), task)
    refused = task.pushed[REFUSED_KEY]
    assert refused["cluster"] == "c1" and refused["refusals"] >= 1 and task.notes  # the close task and the run's note
    store = IncidentStore(load_cluster("c1"))
    record = store.get(refused["record_id"])
    assert record["status"] == "closed" and record["resolution"] == "plan refused; nothing was changed"
    (planned,) = [e for e in Ledger(store.db, record["id"]).entries() if e["event"] == "planned"]
    assert planned["canary"] is False and planned["plan"]["requested"] == [2] and planned["plan"]["refusals"]


def test_a_dry_run_records_nothing_and_says_what_it_would_do(settings):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook import restart
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.task import Task

    task = Task(dag_id="kafka_rolling_restart", run_id="manual__2", task_id="plan", starter="alice",
                log=logging.getLogger("test"))
    with pytest.raises(Stop, match="^dry run: would be refused"):
        restart.plan(restart.Request(kind=restart.ROLLING_RESTART, cluster="c1", mode="dry-run"), task)
    assert IncidentStore(load_cluster("c1")).records("c1") == [] and task.pushed["refused"]["dry_run"] is True


def test_an_incident_restart_is_planned_from_the_findings_recorded_on_the_incident(settings, tmp_path):
    """Issue 28: the plan of an incident's restart is computed from -- and records with it -- the analysis's findings
    the report task recorded on the incident, never the findings an (edited) report output would carry."""
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.remediate.ledger import Ledger
    from kafka_runbooks.runbook import analyze, capture, restart
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.task import Task

    store = IncidentStore(load_cluster("c1"))
    trigger = Finding("broker_unresponsive", Severity.CRITICAL, "broker 2 answers nothing", broker_ids=(2,),
                      details={"problem": "broker_not_serving"})
    record = store.open(cluster="c1", broker_ids=[2], reason=trigger.summary, opened_by="health", trigger=trigger.to_dict())
    incident = {"incident_id": record["id"], "cluster": "c1", "broker_ids": [2]}
    bundle = tmp_path / "bundle"
    bundle.mkdir()  # findings.json as the Spark job writes it (analyze/bundle.py), from findings built with the model
    deadlock = Finding("jvm_deadlock", Severity.CRITICAL, "a Java-level deadlock on broker 2", broker_ids=(2,))
    (bundle / "findings.json").write_text(json.dumps({"findings": [deadlock.to_dict()]}))
    # the bundle recorded on the incident as the capture task records it
    capture.record_bundle(load_cluster("c1"), record["id"], str(bundle), {"cluster": "c1", "incident_id": record["id"],
                                                                         "capture_id": "c-1", "status": "complete"})
    task = Task(dag_id="kafka_incident_response", run_id="health__1", task_id="plan", log=logging.getLogger("test"))
    report = analyze.publish(incident, str(bundle), task)
    forged = Finding("request_handler_stalled", Severity.CRITICAL, "forged", broker_ids=(3,)).to_dict()
    with pytest.raises(Stop, match="nothing changed"):  # no host can be read: refused, and recorded
        restart.plan(restart.Request(kind=restart.INCIDENT_RESTART, incident=incident,
                                     report={**report, "findings": [forged]}), task)
    (planned,) = [e for e in Ledger(store.db, record["id"]).entries() if e["event"] == "planned"]
    assert [(f["kind"], f["summary"]) for f in planned["findings"]] == [("jvm_deadlock", "a Java-level deadlock on broker 2")]
