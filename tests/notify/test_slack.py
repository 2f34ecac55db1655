"""Slack pages against the project's local HTTP receiver standing where hooks.slack.com would be (the slot's "webhook"
address): a connection of the Slack provider's type (``slackwebhook``: the webhook's path as its password, or its
whole URL), the incoming-webhook message shape, mrkdwn escaped, tries and audit as every page -- and the webhook URL,
a secret, in no log line and no audit entry."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import pytest

from kafka_lab.net import service_ip
from webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.timeout(60)

TOKEN = "T0AAAAAAA/B0BBBBBBB/s3cr3tXXXXXXXXXXXXXXXXXX"


def _slack_connection(hook: WebhookReceiver, *, whole_url: bool = False) -> str:
    """As a team has it for Airflow's Slack provider: host + the webhook's path, or the whole URL as the password."""
    base = f"http://{service_ip('webhook')}:{hook.port}"
    if whole_url:
        return json.dumps({"conn_type": "slackwebhook", "password": f"{base}/{TOKEN}"})
    return json.dumps({"conn_type": "slackwebhook", "host": base, "password": TOKEN})


def _record(tmp_path, monkeypatch, oncall: str | None = None):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    lab = {"zk_conn_id": "zk", "hosts": {"1": "h1"}, "incident_base": str(tmp_path / "incidents")}
    if oncall:
        lab["approvals"] = {"oncall_conn_id": oncall}
    (tmp_path / "clusters.json").write_text(json.dumps({"lab": lab}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(tmp_path / "clusters.json"))
    store = IncidentStore(ClusterConfig.from_dict("lab", lab))
    record = store.open(cluster="lab", broker_ids=[1], reason="roll", trigger={"kind": "rolling_restart"}, opened_by="test")
    ti = SimpleNamespace(dag_id="kafka_rolling_restart", run_id="manual__1", task_id="execute",
                         xcom_pull=lambda task_ids: {"plan": {"roll_id": record["id"]}} if task_ids == "plan" else None)
    return store, record["id"], {"ti": ti, "params": {"cluster": "lab"}, "exception": RuntimeError("broker 1: <!here> & co")}


def test_a_halt_reaches_slack_through_the_providers_connection_type_and_is_audited(tmp_path, monkeypatch, caplog):
    from kafka_runbooks.notify.webhook import HALTED, OnCallSlackNotifier

    caplog.set_level(logging.DEBUG)
    store, rid, context = _record(tmp_path, monkeypatch)
    with WebhookReceiver(path=f"/{TOKEN}", fail_first=1) as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_SLACK", _slack_connection(hook))
        monkeypatch.setattr("kafka_runbooks.notify.webhook.time.sleep", lambda s: None)
        OnCallSlackNotifier(event=HALTED, slack_webhook_conn_id="oncall_slack", cluster="lab",
                            message="rolling restart of {{ params.cluster }}")(context)
        (msg,) = hook.received
    assert sorted(msg) == ["blocks", "text"]  # Slack's incoming-webhook shape, nothing else
    assert msg["text"].startswith(":rotating_light: Run halted: rolling restart of lab")
    assert "broker 1: &lt;!here&gt; &amp; co" in msg["text"] and "<!here>" not in json.dumps(msg)  # no mention, no link
    section, ctx = msg["blocks"]
    assert section == {"type": "section", "text": {"type": "mrkdwn", "text": msg["text"]}}
    assert ctx["type"] == "context" and f"cluster lab · {rid} · kafka_rolling_restart / manual__1 / execute" == ctx["elements"][0]["text"]
    assert hook.headers[0].get("Authorization") is None
    (page,) = [e for e in store.audit_trail(rid) if e["action"] == "page_halted"]
    assert (page["outcome"], page["details"]["attempts"], page["details"]["conn_id"]) == ("ok", 2, "oncall_slack")
    # the webhook URL is the connection's secret: neither the audit trail nor the log has it
    assert "s3cr3t" not in json.dumps(store.audit_trail(rid)) and "s3cr3t" not in caplog.text


def test_a_finding_page_goes_to_the_clusters_slack_connection_given_as_a_whole_url(tmp_path, monkeypatch):
    from kafka_runbooks.notify.webhook import page

    _record(tmp_path, monkeypatch, oncall="oncall_slack_url")
    with WebhookReceiver(path=f"/{TOKEN}") as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_SLACK_URL", _slack_connection(hook, whole_url=True))
        sent, what = page("oncall_slack_url", "lab", ":rotating_light: ZooKeeper unreachable", {"incident": "lab-1"})
        (msg,) = hook.received
    assert sent and what == "HTTP 200 through oncall_slack_url" and "s3cr3t" not in what
    assert msg["text"] == ":rotating_light: ZooKeeper unreachable"


def test_a_slack_connection_is_read_as_the_provider_reads_it():
    from kafka_runbooks.notify import slack

    conn = lambda **kw: SimpleNamespace(**{"conn_id": "s", "conn_type": "slackwebhook", "host": None, "schema": None,  # noqa: E731
                                           "port": None, "password": None, "extra_dejson": {}, **kw})
    assert slack.webhook_url(conn(password="T0/B0/x")) == "https://hooks.slack.com/services/T0/B0/x"
    assert slack.webhook_url(conn(password="https://hooks.example/services/T0/B0/x")) == "https://hooks.example/services/T0/B0/x"
    assert slack.webhook_url(conn(host="hooks.example", password="/T0/B0/x")) == "https://hooks.example/T0/B0/x"
    assert slack.is_slack(conn()) and slack.is_slack(conn(conn_type="http", extra_dejson={"kind": "slack"}))
    assert not slack.is_slack(conn(conn_type="http"))
    with pytest.raises(ValueError, match="'s' has no webhook"):
        slack.webhook_url(conn())
    with pytest.raises(ValueError, match="must be http or https"):
        slack.webhook_url(conn(password="file:///etc/passwd"))


def test_a_refused_webhook_url_is_never_logged_or_audited_whole():
    """An error that quotes the URL it refused (http.client's InvalidURL for a control character) would put the
    webhook -- the Slack secret -- into the log and the audit trail; a token with a blank is refused saying so, and
    an error's text has the URL taken out."""
    import http.client
    from types import SimpleNamespace

    from kafka_runbooks.notify.http import error_text
    from kafka_runbooks.notify.slack import webhook_url

    conn = SimpleNamespace(conn_id="oncall", password="/services/T000/B000/SECRETTOKEN x", host="hooks.slack.com",
                           schema="https", port=None)
    with pytest.raises(ValueError) as refused:
        webhook_url(conn)
    assert "SECRETTOKEN" not in str(refused.value) and "blank or control character" in str(refused.value)
    url = "https://hooks.slack.com/services/T000/B000/SECRETTOKEN"
    exc = http.client.InvalidURL(f"URL can't contain control characters. '{url[26:]}\\n' (found at least '\\n')")
    said = error_text(exc, url)
    assert "SECRETTOKEN" not in said and said.startswith("InvalidURL: ")
