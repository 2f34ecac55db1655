"""The on-call webhook notifier against a local HTTP receiver: payload, bearer token, and that a
webhook that cannot be reached never fails the run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kafka_runbooks.notify.webhook import APPROVAL_WAITING, HALTED, OnCallWebhookNotifier, webhook_url
from webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.timeout(60)


def _context(exc=None):
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1", task_id="execute")
    return {"ti": ti, "params": {"cluster": "lab"}, "exception": exc}


def test_halted_and_approval_waiting_reach_the_webhook_with_the_token(monkeypatch):
    with WebhookReceiver() as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_TEST", hook.connection(password="s3cret-token"))
        OnCallWebhookNotifier(event=HALTED, cluster="lab", message="rolling restart of {{ params.cluster }}", conn_id="oncall_test")(
            _context(RuntimeError("broker 3: register: not registered with a new ZooKeeper session within 90s"))
        )
        OnCallWebhookNotifier(event=APPROVAL_WAITING, cluster="lab", message="restart of [3]", conn_id="oncall_test")(_context())
        halted = hook.wait_for(lambda m: m["event"] == HALTED)
        waiting = hook.wait_for(lambda m: m["event"] == APPROVAL_WAITING)
    assert halted["cluster"] == "lab" and halted["run_id"] == "manual__1" and halted["task_id"] == "execute"
    assert "Run halted: rolling restart of lab" in halted["text"] and "not registered with a new ZooKeeper session" in halted["text"]
    assert "not registered" in halted["details"]
    assert waiting["text"].startswith(":hourglass: Approval waiting: restart of [3]")
    assert all(h.get("Authorization") == "Bearer s3cret-token" for h in hook.headers)


def test_an_unreachable_webhook_is_logged_not_raised(monkeypatch, caplog):
    with WebhookReceiver() as hook:
        url_conn = hook.connection()
    # the receiver is gone now: connection refused
    monkeypatch.setenv("AIRFLOW_CONN_ONCALL_GONE", url_conn)
    OnCallWebhookNotifier(event=HALTED, cluster="lab", conn_id="oncall_gone")(_context(RuntimeError("x")))
    assert any("could not notify on-call" in r.getMessage() for r in caplog.records)


def test_webhook_url_from_a_connection():
    conn = SimpleNamespace(conn_id="c", schema="https", host="hooks.example", port=None, extra_dejson={"path": "services/T0/B0"})
    assert webhook_url(conn) == "https://hooks.example/services/T0/B0"
    with pytest.raises(ValueError, match="schema must be http or https"):
        webhook_url(SimpleNamespace(conn_id="c", schema="file", host="x", port=None, extra_dejson={}))
    with pytest.raises(ValueError):
        OnCallWebhookNotifier(event="nope")


def _record(tmp_path, monkeypatch):
    """A cluster whose settings come from a file, and a roll record the page is audited in."""
    import json

    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    lab = {"zk_conn_id": "zk", "hosts": {"1": "h1"}, "incident_base": str(tmp_path / "incidents")}
    (tmp_path / "clusters.json").write_text(json.dumps({"lab": lab}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(tmp_path / "clusters.json"))
    store = IncidentStore(ClusterConfig.from_dict("lab", lab))
    record = store.open(cluster="lab", broker_ids=[1], reason="roll", trigger={"kind": "rolling_restart"}, opened_by="test")
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1", task_id="execute",
                         xcom_pull=lambda task_ids: {"plan": {"roll_id": record["id"]}} if task_ids == "plan" else None)
    return store, record["id"], {"ti": ti, "params": {"cluster": "lab"}, "exception": RuntimeError("halted at broker 1")}


def test_a_failed_page_is_retried_and_its_outcome_audited(tmp_path, monkeypatch):
    """Issue 17 §4: the webhook answers 503 twice, then takes the page: delivered on the third try, audited with
    the two errors; a webhook that never answers: three tries, audited as failed with every error."""
    import kafka_runbooks.notify.webhook as W

    monkeypatch.setattr(W.time, "sleep", lambda s: None)
    store, record_id, context = _record(tmp_path, monkeypatch)
    with WebhookReceiver(fail_first=2) as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_FLAKY", hook.connection())
        OnCallWebhookNotifier(event=HALTED, cluster="lab", conn_id="oncall_flaky")(context)
        assert hook.wait_for(lambda m: m["event"] == HALTED) and hook.refused == 2
    with WebhookReceiver(fail_first=100) as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_DOWN", hook.connection())
        OnCallWebhookNotifier(event=HALTED, cluster="lab", conn_id="oncall_down")(context)
        assert hook.refused == 3 and not hook.received
    pages = [e for e in store.audit_trail(record_id) if e["action"] == "page_halted"]
    assert [(e["outcome"], e["details"]["attempts"], len(e["details"]["errors"])) for e in pages] == [("ok", 3, 2), ("failed", 3, 3)]
    assert "503" in pages[1]["details"]["errors"][0] and pages[1]["actor"] == "on-call notifier"
    assert pages[0]["details"]["task_id"] == "execute" and pages[0]["details"]["run_id"] == "manual__1"


def test_a_page_with_no_webhook_configured_is_audited_as_not_sent(tmp_path, monkeypatch):
    store, record_id, context = _record(tmp_path, monkeypatch)
    OnCallWebhookNotifier(event=APPROVAL_WAITING, cluster="lab")(context)
    (page,) = [e for e in store.audit_trail(record_id) if e["action"] == "page_approval_waiting"]
    assert page["outcome"] == "not_sent" and "no on-call webhook configured" in page["details"]["errors"][0]


def test_an_incident_that_needs_a_person_pages_on_call_once_per_run(tmp_path, monkeypatch):
    """Issue 19 §1: a ``needs_person`` incident pages on-call with the reason and the incident's page, audited; a run
    whose failure callback already paged about the record does not page again; no webhook: audited as not sent."""
    from kafka_runbooks.notify.webhook import NEEDS_PERSON, page_needs_person

    store, record_id, _ = _record(tmp_path, monkeypatch)
    with WebhookReceiver() as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_NP", hook.connection())
        assert page_needs_person(store, "oncall_np", "lab", record_id, "explained, nothing restarted: a client to fix",
                                 actor="dag:r/run:manual__2", run_id="manual__2", url="http://airflow/kafka-runbooks/incidents/lab/x")
        got = hook.wait_for(lambda m: m["event"] == NEEDS_PERSON)
        store.audit(record_id, actor="on-call notifier", action="page_halted", outcome="ok", details={"run_id": "manual__3"})
        assert not page_needs_person(store, "oncall_np", "lab", record_id, "run halted", actor="a", run_id="manual__3")
    assert got["cluster"] == "lab" and got["details"]["incident"] == record_id
    assert got["text"] == (f":raising_hand: Incident {record_id} on lab needs a person: explained, nothing restarted: a client to "
                           "fix\nhttp://airflow/kafka-runbooks/incidents/lab/x")
    assert len(hook.received) == 1
    assert not page_needs_person(store, None, "lab", record_id, "why", actor="a", run_id="manual__4")
    pages = [(e["outcome"], e["details"]["run_id"]) for e in store.audit_trail(record_id) if e["action"] == "page_needs_person"]
    assert pages == [("sent", "manual__2"), ("not sent", "manual__4")]
