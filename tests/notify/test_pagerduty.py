"""PagerDuty Events API v2 pages against a local HTTP receiver standing where events.pagerduty.com would be (the
slot's "webhook" address; the receiver answers 200 where PagerDuty answers 202): the body's shape, one dedup key per
record for trigger / acknowledge / resolve, and every page audited on the record."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from kafka_lab.net import service_ip
from webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.timeout(60)

ROUTING_KEY = "R0UT1NGKEY0123456789abcdef012345"


def _pd_connection(hook: WebhookReceiver, *, by_extra: bool = False) -> str:
    """A PagerDuty connection pointed at the receiver: conn_type pagerduty_events, or an http one marked by its extra."""
    conn = {"conn_type": "http" if by_extra else "pagerduty_events", "host": service_ip("webhook"), "port": hook.port,
            "schema": "http", "password": ROUTING_KEY}
    if by_extra:
        conn["extra"] = {"kind": "pagerduty"}
    return json.dumps(conn)


def _setup(tmp_path, monkeypatch, conn_id: str | None):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    lab = {"zk_conn_id": "zk", "hosts": {"1": "h1"}, "incident_base": str(tmp_path / "incidents")}
    if conn_id:
        lab["approvals"] = {"oncall_conn_id": conn_id}
    (tmp_path / "clusters.json").write_text(json.dumps({"lab": lab}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(tmp_path / "clusters.json"))
    config = ClusterConfig.from_dict("lab", lab)
    store = IncidentStore(config)
    record = store.open(cluster="lab", broker_ids=[1], reason="broker 1 unresponsive", trigger={"kind": "broker_unresponsive"},
                        opened_by="test")
    return config, store, record["id"]


def test_a_page_a_halt_an_acknowledge_and_a_resolve_are_events_v2_on_one_dedup_key(tmp_path, monkeypatch):
    from kafka_runbooks.notify import pagerduty
    from kafka_runbooks.notify.webhook import FINDING, HALTED, OnCallWebhookNotifier, page

    config, store, rid = _setup(tmp_path, monkeypatch, "oncall_pd")
    long_text = ":rotating_light: broker 1 unresponsive " + "x" * 2000
    with WebhookReceiver(path="/v2/enqueue") as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_PD", _pd_connection(hook))
        sent, what = page("oncall_pd", "lab", long_text, {"incident": rid, "kind": "broker_unresponsive"})
        assert sent, what
        store.audit(rid, actor="health", action="page_oncall", outcome="sent", details={"result": what})  # as detect does
        ti = SimpleNamespace(dag_id="kafka_incident_response", run_id="manual__1", task_id="restart",
                             xcom_pull=lambda task_ids: {"incident_id": rid} if task_ids == "open_incident" else None)
        OnCallWebhookNotifier(event=HALTED, cluster="lab", message="incident response")(
            {"ti": ti, "params": {"cluster": "lab"}, "exception": RuntimeError("broker 1 did not register")})
        ack = pagerduty.acknowledge(store, config, rid, actor="approval", answered_by="alice")
        res = pagerduty.resolve(store, config, rid, actor="close")
        trigger, halted, acked, resolved = hook.received  # each POST was answered before the next was sent
    assert hook.headers[0].get("Authorization") is None  # the routing key is in the body, not a bearer token
    assert {tuple(sorted(m)) for m in (trigger, halted)} == {("dedup_key", "event_action", "links", "payload", "routing_key")}
    assert trigger["routing_key"] == ROUTING_KEY and trigger["event_action"] == "trigger" and trigger["dedup_key"] == f"lab/{rid}"
    p = trigger["payload"]
    assert sorted(p) == ["component", "custom_details", "group", "severity", "source", "summary"]
    assert len(p["summary"]) == 1024 and p["summary"].startswith(":rotating_light: broker 1 unresponsive x")
    assert (p["severity"], p["component"], p["group"], p["source"]) == ("critical", "kafka", "lab", "kafka-runbooks/lab")
    assert p["custom_details"] == {"record": rid, "event": FINDING, "incident": rid, "kind": "broker_unresponsive"}
    assert trigger["links"][0]["href"].endswith(f"/incidents/lab/{rid}")
    assert halted["dedup_key"] == f"lab/{rid}" and halted["payload"]["severity"] == "critical"
    assert "did not register" in halted["payload"]["summary"] and halted["payload"]["custom_details"]["run_id"] == "manual__1"
    assert acked == {"routing_key": ROUTING_KEY, "event_action": "acknowledge", "dedup_key": f"lab/{rid}"}
    assert resolved == {"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": f"lab/{rid}"}
    assert ack["outcome"] == res["outcome"] == "ok"
    audit = {e["action"]: e for e in store.audit_trail(rid)}
    assert audit["page_halted"]["outcome"] == "ok" and audit["page_halted"]["details"]["conn_id"] == "oncall_pd"
    assert audit["page_acknowledge"]["outcome"] == "ok" and audit["page_acknowledge"]["details"]["answered_by"] == "alice"
    assert audit["page_resolve"]["outcome"] == "ok" and audit["page_resolve"]["details"]["dedup_key"] == f"lab/{rid}"


def test_resolve_only_what_was_paged_and_only_on_pagerduty(tmp_path, monkeypatch):
    """A record nobody was paged about is not resolved on PagerDuty; a chat webhook gets no acknowledge/resolve; a
    PagerDuty that cannot be reached: tried, audited as failed, never raised."""
    import kafka_runbooks.notify.pagerduty as PD

    monkeypatch.setattr(PD.time, "sleep", lambda s: None)
    config, store, rid = _setup(tmp_path, monkeypatch, "oncall_pd2")
    with WebhookReceiver(path="/v2/enqueue") as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_PD2", _pd_connection(hook, by_extra=True))
        assert PD.resolve(store, config, rid, actor="close") is None  # never paged
        store.audit(rid, actor="on-call notifier", action="page_needs_person", outcome="sent", details={})
        assert PD.resolve(store, config, rid, actor="close")["outcome"] == "ok"
        assert [m["event_action"] for m in hook.received] == ["resolve"]
    # the receiver is gone: connection refused, three tries
    failed = PD.resolve(store, config, rid, actor="close")
    assert failed["outcome"] == "failed" and failed["attempts"] == 3 and len(failed["errors"]) == 3
    assert [e["outcome"] for e in store.audit_trail(rid) if e["action"] == "page_resolve"] == ["ok", "failed"]
    with WebhookReceiver() as chat:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_PD2", chat.connection())
        assert PD.resolve(store, config, rid, actor="close") is None and PD.acknowledge(store, config, rid, actor="a") is None
        assert not chat.received


def test_a_pagerduty_connection_without_a_routing_key_is_refused_by_name():
    from kafka_runbooks.notify import pagerduty

    conn = SimpleNamespace(conn_id="pd", conn_type="pagerduty_events", password=None, schema=None, host=None, port=None,
                           extra_dejson={})
    assert pagerduty.is_pagerduty(conn) and pagerduty.events_url(conn) == "https://events.pagerduty.com/v2/enqueue"
    with pytest.raises(ValueError, match="no routing key"):
        pagerduty.event_body(conn, "trigger", cluster="lab", record_id="x", summary="s")


def test_the_incident_response_closing_the_incident_resolves_its_page(tmp_path, monkeypatch):
    """CloseIncidentOperator, approved + restarted + verified: the incident closes and its PagerDuty page is resolved
    on the incident's dedup key, audited."""
    from kafka_runbooks.operators.incident import CloseIncidentOperator

    config, store, rid = _setup(tmp_path, monkeypatch, "oncall_pd3")
    store.audit(rid, actor="on-call notifier", action="page_approval_waiting", outcome="ok", details={})
    ti = SimpleNamespace(dag_id="kafka_incident_response", run_id="manual__7", task_id="close_incident",
                         xcom_pull=lambda task_ids=None, key=None: None)
    context = {"ti": ti, "run_id": "manual__7", "dag": SimpleNamespace(dag_id="kafka_incident_response"),
               "params": {"cluster": "lab"}}
    op = CloseIncidentOperator(task_id="close_incident", incident={"cluster": "lab", "incident_id": rid},
                               approval={"chosen_options": ["Approve"], "responded_by_user": {"name": "alice"}},
                               restart={"restarted": [1]}, verify={"ok": True}, report={})
    with WebhookReceiver(path="/v2/enqueue") as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_PD3", _pd_connection(hook))
        out = op.execute(context)
    assert out["status"] == "closed"
    assert hook.received == [{"routing_key": ROUTING_KEY, "event_action": "resolve", "dedup_key": f"lab/{rid}"}]
    assert [e["outcome"] for e in store.audit_trail(rid) if e["action"] == "page_resolve"] == ["ok"]


def test_a_health_check_pages_an_incident_that_needs_a_person_and_resolves_it_when_the_problem_clears(tmp_path, monkeypatch):
    """The health check (DetectFindingsOperator on recorded-shape snapshots, tests/detect/detect_builders.py): broker 3
    hangs, its response run fails -> the incident needs a person -> PagerDuty trigger; the broker recovers for
    ``clear_checks`` checks -> the incident resolves -> PagerDuty resolve, on the same dedup key."""
    import dataclasses
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "detect"))
    from detect_builders import at, check, fetch_error, probe, snapshot

    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.operators.detect import DetectFindingsOperator
    from kafka_runbooks.state.snapshots import Snapshots

    lab = {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}, "incident_base": str(tmp_path / "incidents"),
           "health": {"consecutive_checks": 2, "clear_checks": 2, "recheck_s": 0}, "approvals": {"oncall_conn_id": "oncall_pd4"}}
    (tmp_path / "clusters.json").write_text(json.dumps({"lab": lab}))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(tmp_path / "clusters.json"))
    states: dict[str, str] = {}
    ti = SimpleNamespace(get_dagrun_state=lambda dag_id, run_id: states.get(run_id, "running"))

    def check_at(s, n):
        ref = Snapshots(load_cluster("lab")).put(dataclasses.replace(s, taken_at=at(30 * n)))
        return DetectFindingsOperator(task_id="detect", cluster="lab", snapshot=ref.to_dict()).execute(
            {"dag": SimpleNamespace(dag_id="kafka_health_check"), "run_id": f"scheduled__{n}", "ti": ti})

    def hung(n):
        return snapshot(checks=[check(1), check(2), check(3, ok=False)],
                        probes=[probe(1, errors=[fetch_error(1, 3, 30 * n - 5)]), probe(2), probe(3)])

    with WebhookReceiver(path="/v2/enqueue") as hook:
        monkeypatch.setenv("AIRFLOW_CONN_ONCALL_PD4", _pd_connection(hook))
        check_at(hung(0), 0)
        (start,) = check_at(hung(1), 1)
        iid = start["conf"]["incident_id"]
        states[f"health__{iid}"] = "failed"  # the response run failed without an outcome: a person owns it
        check_at(hung(2), 2)
        check_at(snapshot(), 3)
        check_at(snapshot(), 4)
    assert IncidentStore(load_cluster("lab")).get(iid)["status"] == "resolved"
    assert [(m["event_action"], m["dedup_key"]) for m in hook.received] == [("trigger", f"lab/{iid}"), ("resolve", f"lab/{iid}")]
    assert hook.received[0]["payload"]["severity"] == "error" and "needs a person" in hook.received[0]["payload"]["summary"]
    actions = [(e["action"], e["outcome"]) for e in IncidentStore(load_cluster("lab")).audit_trail(iid) if e["action"].startswith("page_")]
    assert actions == [("page_needs_person", "sent"), ("page_resolve", "ok")]
