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
