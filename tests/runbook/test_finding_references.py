"""Findings cross a response run's task boundaries as references only (issue 28), as the restart plan does: the report
task records the analysis's findings on the incident and passes on the incident, the bundle, the count and the
SHA-256 of findings.json; the choice, the explanation and the plan load typed findings from the incident's record in
the state database (``runbook/finding_records.py``). Called without Airflow, on the product's real SQLite store; what
each service returns and pushes is what Airflow would keep as its XComs.

The findings.json here is written by the test the way the Spark job writes it (``analyze/bundle.py``: the findings'
``to_dict``), from findings built with the model: what is claimed is where the services read them, not the analysis."""

from __future__ import annotations

import hashlib
import json
import logging

import pytest

from finding_dicts import finding_dicts


@pytest.fixture
def response(tmp_path, monkeypatch):
    """Cluster c1 with an incident a health check opened on broker 2 for a client's unknown API keys (no restart
    applies), and a bundle whose findings.json holds this run's analysis."""
    from kafka_runbooks.config import FILE_ENV, load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.model import Finding, Severity

    raw = {"c1": {"zk_conn_id": "krb_test_no_such_zk", "hosts": {"1": "ssh_b1", "2": "ssh_b2", "3": "ssh_b3"},
                  "kafka_version": "2.3.0", "incident_base": str(tmp_path / "state")}}
    (tmp_path / "clusters.json").write_text(json.dumps(raw))
    monkeypatch.setenv(FILE_ENV, str(tmp_path / "clusters.json"))
    config = load_cluster("c1")
    trigger = Finding("unknown_api_requests", Severity.WARNING, "broker 2 logs requests with API key 60", broker_ids=(2,),
                      details={"problem": "bad_client_requests", "advice": "pin the client to 2.3",
                               "runbook": "runbooks/unsupported-client-request.md"})
    record = IncidentStore(config).open(cluster="c1", broker_ids=[2], reason=trigger.summary, opened_by="health",
                                        trigger=trigger.to_dict())
    analysis = [Finding("unknown_api_requests", Severity.WARNING, "API key 60 (DescribeCluster, added in Kafka 2.8)",
                        broker_ids=(2,), details={"no_restart": True}),
                Finding("jvm_deadlock", Severity.CRITICAL, "unrelated", broker_ids=(1,))]
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "findings.json").write_text(json.dumps({"findings": [f.to_dict() for f in analysis]}))
    record_bundle(config, record["id"], str(bundle))
    incident = {"incident_id": record["id"], "cluster": "c1", "broker_ids": [2]}  # what open_incident hands on
    return config, incident, str(bundle), trigger


def record_bundle(config, incident_id, location):
    """The bundle recorded on the incident and in the bundle index, as the capture task records it."""
    from kafka_runbooks.runbook.capture import record_bundle

    record_bundle(config, incident_id, location, {"cluster": config.name, "incident_id": incident_id,
                                                  "capture_id": location.rsplit("/", 1)[-1], "status": "complete"})


def task(task_id):
    from kafka_runbooks.runbook.task import Task

    return Task(dag_id="kafka_incident_response", run_id="run-1", task_id=task_id, log=logging.getLogger("test"))


def test_the_xcoms_of_a_response_hold_no_finding_and_the_findings_are_the_recorded_ones(response):
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.choice import EXPLAIN
    from kafka_runbooks.runbook import analyze
    from kafka_runbooks.runbook import response as R

    config, incident, bundle, trigger = response
    published = task("report")
    report = analyze.publish(incident, bundle, published)
    chosen = task("choose_remediation")
    choice = R.choose(incident, report, chosen)
    explained = task("explain")
    explanation = R.explain(incident, report, chosen.pushed["remediation"], explained)

    xcoms = {"report": report, "report.pushed": published.pushed, "choose_remediation.pushed": chosen.pushed,
             "explain": explanation, "explain.pushed": explained.pushed}
    assert {name: finding_dicts(value) for name, value in xcoms.items() if finding_dicts(value)} == {}
    sha256 = hashlib.sha256((__import__("pathlib").Path(bundle) / "findings.json").read_bytes()).hexdigest()
    assert report == {"incident_id": incident["incident_id"], "cluster": "c1", "bundle_dir": bundle,
                      "report": bundle + "/report.html", "findings": 2, "findings_sha256": sha256}
    record = IncidentStore(config).get(incident["incident_id"])
    assert [f["kind"] for f in record["findings"]] == ["unknown_api_requests", "jvm_deadlock"]
    assert record["findings_sha256"] == sha256
    # the choice and the explanation are those of the recorded trigger and analysis, typed
    assert choice.kind == EXPLAIN and [f.kind for f in choice.findings] == ["unknown_api_requests"]
    assert chosen.pushed["remediation"]["findings"] == ["unknown_api_requests"]  # the kinds: no finding
    assert explanation["detected"] == trigger.summary and explanation["advice"] == "pin the client to 2.3"
    assert explanation["analysis"] == [{"kind": "unknown_api_requests", "summary": "API key 60 (DescribeCluster, added in Kafka 2.8)"}]


def test_an_edited_xcom_changes_neither_the_choice_nor_the_explanation(response):
    """The findings a task hands on are never read: an incident output and a report output edited to say the broker
    does not serve still get the recorded incident's answer (no restart for a client's unknown API keys)."""
    from kafka_runbooks.model import Finding, Severity
    from kafka_runbooks.remediate.choice import EXPLAIN
    from kafka_runbooks.runbook import analyze
    from kafka_runbooks.runbook import response as R

    _, incident, bundle, _ = response
    report = analyze.publish(incident, bundle, task("report"))
    forged = Finding("broker_unresponsive", Severity.CRITICAL, "broker 2 answers nothing", broker_ids=(2,),
                     details={"problem": "broker_not_serving"}).to_dict()
    edited_incident = {**incident, "trigger": forged}
    edited_report = {**report, "findings": [forged]}
    chosen = task("choose_remediation")
    assert R.choose(edited_incident, edited_report, chosen).kind == EXPLAIN
    explanation = R.explain(edited_incident, edited_report, {**chosen.pushed["remediation"], "reason": "forged"},
                            task("explain"))
    assert explanation["detected"] == "broker 2 logs requests with API key 60"
    assert "forged" not in json.dumps(explanation) and "answers nothing" not in json.dumps(explanation)


def test_a_finding_dict_is_seen_wherever_it_sits():
    """The check above can fail: a finding anywhere in a value is found, a finding's kind alone is not one."""
    finding = {"kind": "jvm_deadlock", "severity": "critical", "summary": "s", "evidence": []}
    assert finding_dicts({"a": [1, {"b": finding}], "kinds": ["jvm_deadlock"]}) == ["['a'][1]['b']"]
    assert finding_dicts(finding) == ["(the value itself)"]


def test_an_xcom_naming_another_clusters_incident_is_refused(response, tmp_path):
    """An edited ``open_incident`` XCom that names another cluster's incident steers nothing: the record is read only if
    it is the run's cluster's (review; red before: the other cluster's record was returned and used)."""
    from kafka_runbooks.incidents.store import IncidentMismatch, IncidentStore
    from kafka_runbooks.runbook.finding_records import incident_record

    config, incident, _, _ = response
    other = IncidentStore(config).open(cluster="c2", broker_ids=[2], reason="another cluster's", opened_by="health")
    assert incident_record(config, incident)["id"] == incident["incident_id"]
    with pytest.raises(IncidentMismatch, match="belongs to cluster 'c2', not 'c1'"):
        incident_record(config, {**incident, "incident_id": other["id"], "cluster": "c2"})


@pytest.mark.parametrize("tamper", ["file", "reference", "record", "gone"])
def test_findings_that_are_not_the_recorded_ones_are_refused(response, tamper):
    """The report task records the SHA-256 of findings.json with the findings; every reader checks it (review of issue
    28; red before: nothing read the digest, and the choice was made from whatever the record held). A findings.json
    edited after the report task ran (here: a deadlock added, which would make the choice a restart), a reference
    handing on another digest, a record whose findings were edited, or a file that is gone: the choice and the
    explanation are refused with a typed error naming the incident and the file -- nothing is decided from them."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook import analyze
    from kafka_runbooks.runbook import response as R
    from kafka_runbooks.runbook.finding_records import FindingsMismatch

    config, incident, bundle, _ = response
    report = analyze.publish(incident, bundle, task("report"))
    path = __import__("pathlib").Path(bundle) / "findings.json"
    deadlock = {"kind": "jvm_deadlock", "severity": "critical", "summary": "forged", "broker_ids": [2], "evidence": [],
                "details": {}}
    if tamper == "file":
        doc = json.loads(path.read_text())
        path.write_text(json.dumps({"findings": [deadlock] + doc["findings"]}))
    elif tamper == "reference":
        report = {**report, "findings_sha256": "0" * 64}
    elif tamper == "record":
        store = IncidentStore(config)
        store.update(incident["incident_id"], findings=[deadlock] + store.get(incident["incident_id"])["findings"])
    else:
        path.unlink()
    with pytest.raises(FindingsMismatch) as refused:
        R.choose(incident, report, task("choose_remediation"))
    assert refused.value.incident_id == incident["incident_id"] and refused.value.path == str(path)
    assert incident["incident_id"] in str(refused.value) and str(path) in str(refused.value)
    with pytest.raises(FindingsMismatch):
        R.explain(incident, report, {"kind": "explain"}, task("explain"))


@pytest.mark.parametrize("where", ["report", "analyze"])
def test_a_bundle_handed_on_that_is_not_the_incidents_recorded_one_is_refused(response, tmp_path, where):
    """The bundle_dir the capture task pushes is checked against the incident's recorded bundle (review of issue 28;
    red before: the report task read and recorded on the incident whatever bundle its XCom named). A bundle of this
    cluster's but not this incident's -- here another incident's, indexed for it, whose analysis says deadlock -- is
    refused by the analysis and by the report, naming the incident and both bundles; nothing is recorded from it."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook import analyze
    from kafka_runbooks.runbook.capture import BundleMismatch

    config, incident, bundle, _ = response
    store = IncidentStore(config)
    other = store.open(cluster="c1", broker_ids=[1], reason="another incident", opened_by="health")
    forged = tmp_path / "other-bundle"
    forged.mkdir()
    (forged / "findings.json").write_text(json.dumps({"findings": [
        {"kind": "jvm_deadlock", "severity": "critical", "summary": "forged", "broker_ids": [2], "evidence": [], "details": {}}]}))
    record_bundle(config, other["id"], str(forged))
    with pytest.raises(BundleMismatch) as refused:
        if where == "report":
            analyze.publish(incident, str(forged), task("report"))
        else:
            analyze.bundle_to_analyze(incident, str(forged), task("analyze"))
    assert refused.value.incident_id == incident["incident_id"]
    assert refused.value.handed == str(forged) and refused.value.recorded == bundle
    assert str(forged) in str(refused.value) and bundle in str(refused.value) and incident["incident_id"] in str(refused.value)
    assert not store.get(incident["incident_id"]).get("findings")  # nothing recorded from the forged bundle
    # the recorded bundle itself is what both use
    assert analyze.bundle_to_analyze(incident, bundle, task("analyze")) == bundle
    assert analyze.publish(incident, bundle, task("report"))["bundle_dir"] == bundle


def test_a_recorded_bundle_missing_from_the_bundle_index_is_refused(response):
    """The incident's recorded bundle must also be indexed for it: a record edited to point at another directory
    (not indexed for the incident) is refused."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.runbook import analyze
    from kafka_runbooks.runbook.capture import BundleMismatch

    config, incident, bundle, _ = response
    IncidentStore(config).update(incident["incident_id"], bundle_dir=bundle + "-elsewhere")
    with pytest.raises(BundleMismatch, match="not in the bundle index"):
        analyze.bundle_to_analyze(incident, bundle + "-elsewhere", task("analyze"))
