"""``OnCallWebhookNotifier``: a Slack-style JSON POST to on-call's webhook, in Airflow's notifier convention.

Usable as a HITL operator's ``notifiers`` entry (an approval waits) and as a task's
``on_failure_callback`` (a run halted), like Airflow's own Slack/SMTP notifiers. The webhook is an
Airflow connection (conn_type ``http``: schema, host, port; ``extra.path``, optional
``extra.headers``; the password, when set, is sent as a bearer token) named by the cluster's
``approvals.oncall_conn_id`` -- read when the notification is sent, since the cluster is a run
parameter. No webhook configured: the notification is logged and nothing is sent.

The payload: ``{"text": ..., "event": ..., "cluster": ..., "dag_id", "run_id", "task_id", "details"}``;
``text`` is what a chat room shows. A page is tried ``ATTEMPTS`` times (bounded, with a pause between tries),
and its outcome -- delivered, or failed with every error -- is recorded in the audit trail of the run's record
(the roll's, the election's or the incident's), never only logged. It is never raised: telling on-call must not
change what the run does.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Mapping

from airflow.sdk.bases.notifier import BaseNotifier

from kafka_runbooks.notify.http import ATTEMPTS, PAUSES_S, TIMEOUT_S, error_text, post  # noqa: F401 - the names pages use here

log = logging.getLogger(__name__)

APPROVAL_WAITING = "approval_waiting"
HALTED = "halted"
FINDING = "finding"  # a detection that pages on-call by itself (e.g. ZooKeeper unreachable): ``page()``
NEEDS_PERSON = "needs_person"  # an incident that needs a person (``page_needs_person``)
MAX_TEXT = 3500


def webhook_url(conn) -> str:
    extra = dict(conn.extra_dejson or {})
    scheme = conn.schema or "https"
    if scheme not in ("http", "https"):
        raise ValueError(f"webhook connection {conn.conn_id!r}: schema must be http or https, not {scheme!r}")
    if not conn.host:
        raise ValueError(f"webhook connection {conn.conn_id!r} has no host")
    port = f":{int(conn.port)}" if conn.port else ""
    path = str(extra.get("path") or "/")
    return f"{scheme}://{conn.host}{port}{path if path.startswith('/') else '/' + path}"


def target(conn, cluster: str, record_id: str, payload: Mapping[str, Any], details: Mapping[str, Any]
           ) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(url, body, headers) of a page: a Slack message when the connection is a Slack one (``notify/slack.py``), a
    PagerDuty Events v2 ``trigger`` deduplicated on the record when it is a PagerDuty one (``notify/pagerduty.py``), else the chat webhook's ``payload`` with its bearer token."""
    from kafka_runbooks.notify import pagerduty, slack  # deferred: loaded on first use, not when a DAG file is parsed

    if slack.is_slack(conn):  # the webhook URL is the connection's secret: no header, nothing else sent
        return slack.webhook_url(conn), slack.message(payload, cluster, record_id), {}
    if pagerduty.is_pagerduty(conn):
        event = str(payload.get("event"))
        body = pagerduty.event_body(conn, pagerduty.TRIGGER, cluster=cluster, record_id=record_id, summary=str(payload.get("text")),
                                    severity=pagerduty.SEVERITY.get(event, "error"), details={"event": event, **dict(details)},
                                    link=pagerduty.record_link(cluster, record_id))
        return pagerduty.events_url(conn), body, {}
    extra = dict(conn.extra_dejson or {})
    headers = {str(k): str(v) for k, v in (extra.get("headers") or {}).items()}
    if conn.password:
        headers["Authorization"] = f"Bearer {conn.password}"
    return webhook_url(conn), dict(payload), headers


def clock_id() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def _text(event: str, context: Mapping[str, Any], message: str | None) -> str:
    ti = context.get("ti") or context.get("task_instance")
    where = f"{getattr(ti, 'dag_id', '?')} / {getattr(ti, 'run_id', '?')} / {getattr(ti, 'task_id', '?')}"
    if event == APPROVAL_WAITING:
        head = f":hourglass: Approval waiting: {message or ''}".strip()
    else:
        exc = context.get("exception")
        head = f":rotating_light: Run halted: {message or ''}".strip()
        if exc is not None:
            head += f"\n{exc}"
    text = f"{head}\n({where})"
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 20] + "\n... (truncated)"


class OnCallWebhookNotifier(BaseNotifier):
    """``event``: "approval_waiting" or "halted"; ``cluster`` and ``message`` are templated."""

    template_fields = ("cluster", "message")

    def __init__(self, *, event: str, cluster: str = "{{ params.cluster }}", message: str | None = None, conn_id: str | None = None) -> None:
        super().__init__()
        if event not in (APPROVAL_WAITING, HALTED):
            raise ValueError(f"unknown on-call event {event!r}")
        self.event = event
        self.cluster = cluster
        self.message = message
        self.conn_id = conn_id  # overrides the cluster's approvals.oncall_conn_id

    def _conn_id(self) -> str | None:
        if self.conn_id:
            return self.conn_id
        from kafka_runbooks.config import load_cluster  # deferred: loaded on first use, not when a DAG file is parsed

        return load_cluster(str(self.cluster)).approvals.oncall_conn_id

    def payload(self, context: Mapping[str, Any]) -> dict[str, Any]:
        ti = context.get("ti") or context.get("task_instance")
        return {
            "event": self.event,
            "cluster": str(self.cluster),
            "text": _text(self.event, context, self.message),
            "dag_id": getattr(ti, "dag_id", None),
            "run_id": getattr(ti, "run_id", None),
            "task_id": getattr(ti, "task_id", None),
            "details": str(context.get("exception")) if self.event == HALTED and context.get("exception") is not None else None,
        }

    def notify(self, context) -> None:
        if self.event == HALTED and dry_run_refusal(context):
            log.info("a dry run's plan would be refused: on-call is not paged (nothing was asked and nothing changed; "
                     "the run's note and its close task say why)")
            return
        outcome = self.send(context)
        self.record(context, outcome)

    def send(self, context, sleep=time.sleep) -> dict[str, Any]:
        """Deliver the page, retried: {"outcome": "ok"|"failed"|"not_sent", "attempts": n, "errors": [...], ...}."""
        from airflow.sdk import BaseHook

        errors: list[str] = []
        conn_id = None
        try:
            conn_id = self._conn_id()
            payload = self.payload(context)
            if not conn_id:
                log.warning("no on-call webhook configured for cluster %s; not sent: %s", self.cluster, payload["text"])
                return {"outcome": "not_sent", "attempts": 0, "errors": ["no on-call webhook configured (approvals.oncall_conn_id)"],
                        "conn_id": None}
            conn = BaseHook.get_connection(conn_id)
            ti = context.get("ti") or context.get("task_instance")
            record_id = record_of(context) or f"{getattr(ti, 'dag_id', '?')}/{getattr(ti, 'run_id', '?')}"
            url, payload, headers = target(conn, str(self.cluster), record_id, payload,
                                           {k: payload[k] for k in ("dag_id", "run_id", "task_id", "details")})
        except Exception as exc:  # noqa: BLE001 - never fail the run for a page
            log.error("could not notify on-call (%s): %r", self.event, exc)
            return {"outcome": "failed", "attempts": 0, "errors": [f"{type(exc).__name__}: {exc}"], "conn_id": conn_id}
        for attempt in range(1, ATTEMPTS + 1):
            try:
                status = post(url, payload, headers)
                log.info("on-call notified (%s, HTTP %s) through %s, attempt %d", self.event, status, conn_id, attempt)
                return {"outcome": "ok", "attempts": attempt, "errors": errors, "conn_id": conn_id, "http_status": status}
            except Exception as exc:  # noqa: BLE001 - HTTP errors, refused connections, timeouts: tried again
                said = error_text(exc, url)  # the URL may be the secret (Slack): never logged or audited
                errors.append(f"attempt {attempt}: {said}")
                log.error("could not notify on-call (%s), attempt %d of %d: %s", self.event, attempt, ATTEMPTS, said)
                if attempt < ATTEMPTS:
                    sleep(PAUSES_S[min(attempt - 1, len(PAUSES_S) - 1)])
        return {"outcome": "failed", "attempts": ATTEMPTS, "errors": errors, "conn_id": conn_id}

    def record(self, context, outcome: Mapping[str, Any]) -> None:
        """The page's outcome in the audit trail of the run's record (found through the run's XComs and conf)."""
        ti = context.get("ti") or context.get("task_instance")
        try:
            from kafka_runbooks.config import load_cluster  # deferred: loaded on first use, not when a DAG file is parsed
            from kafka_runbooks.incidents.store import IncidentStore  # deferred: loaded on first use, not when a DAG file is parsed

            record_id = record_of(context)
            if record_id is None:
                log.error("on-call page %s (%s): no record of this run to audit it in", outcome.get("outcome"), self.event)
                return
            IncidentStore(load_cluster(str(self.cluster))).audit(
                record_id, actor="on-call notifier", action=f"page_{self.event}", outcome=str(outcome.get("outcome")),
                details={**dict(outcome), "dag_id": getattr(ti, "dag_id", None), "run_id": getattr(ti, "run_id", None),
                         "task_id": getattr(ti, "task_id", None)})
        except Exception as exc:  # noqa: BLE001 - never fail the run for a page
            log.error("could not record the on-call page (%s) in the audit trail: %r", self.event, exc)


class OnCallSlackNotifier(OnCallWebhookNotifier):
    """The on-call notifier tied to one Slack connection (``slack_webhook_conn_id``, conn_type ``slackwebhook`` as
    Airflow's Slack provider has it; ``notify/slack.py``), like the provider's ``SlackWebhookNotifier``: the same
    pages, tries and audit as :class:`OnCallWebhookNotifier`, whatever the cluster's ``approvals.oncall_conn_id``."""

    def __init__(self, *, event: str, slack_webhook_conn_id: str, cluster: str = "{{ params.cluster }}",
                 message: str | None = None) -> None:
        super().__init__(event=event, cluster=cluster, message=message, conn_id=slack_webhook_conn_id)


def dry_run_refusal(context) -> bool:
    """The failed task is a dry run's plan task that failed because its plan would be refused (``runbook/summary.py``
    pushes that as the task's ``refused`` XCom, through ``operators/glue``, before failing): nothing to page about."""
    ti = context.get("ti") or context.get("task_instance")
    try:
        refused = ti.xcom_pull(task_ids=ti.task_id, key="refused") if hasattr(ti, "xcom_pull") else None
    except Exception:  # noqa: BLE001 - no XCom: not a dry run's refusal, paged as usual
        return False
    return isinstance(refused, dict) and refused.get("dry_run") is True


def record_of(context) -> str | None:
    """The record a run works on: its plan's (roll, election, incident restart), else the incident it opened, else
    the incident its conf names."""
    ti = context.get("ti") or context.get("task_instance")
    for task_id, key in (("plan", "plan"), ("open_incident", None)):
        try:
            value = ti.xcom_pull(task_ids=task_id) if hasattr(ti, "xcom_pull") else None
        except Exception:  # noqa: BLE001 - no such task in this DAG, no XCom yet
            value = None
        if isinstance(value, dict):
            found = (value.get("plan") or {}).get("roll_id") if key == "plan" else value.get("incident_id")
            if found:
                return str(found)
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    return str(conf["incident_id"]) if isinstance(conf, dict) and conf.get("incident_id") else None


def page(conn_id: str | None, cluster: str, text: str, details: Mapping[str, Any] | None = None,
         event: str = FINDING) -> tuple[bool, str]:
    """Pages on-call outside a task callback (a finding or an incident that needs a person now): (sent, what
    happened). Never raises."""
    from airflow.sdk import BaseHook

    payload = {"event": event, "cluster": cluster, "text": text[:MAX_TEXT], "details": dict(details or {})}
    if not conn_id:
        log.warning("no on-call webhook configured for cluster %s; not sent: %s", cluster, payload["text"])
        return False, "no on-call webhook configured (approvals.oncall_conn_id)"
    url = None
    try:
        conn = BaseHook.get_connection(conn_id)
        record_id = str((details or {}).get("incident") or f"{event}/{clock_id()}")
        url, payload, headers = target(conn, cluster, record_id, payload, payload["details"])
        status = post(url, payload, headers)
        return True, f"HTTP {status} through {conn_id}"
    except Exception as exc:  # noqa: BLE001 - never fail the health check for a page
        said = error_text(exc, url)  # the URL may be the secret (Slack): never logged or audited
        log.error("could not page on-call (%s): %s", FINDING, said)
        return False, said


def page_needs_person(store, conn_id: str | None, cluster: str, record_id: str, reason: str, *, actor: str,
                      run_id: str | None = None, url: str | None = None) -> bool:
    """Pages on-call that an incident needs a person now, audited on the record as ``page_needs_person``: a
    ``needs_person`` incident must never be visible only on a page nobody looks at (issue 19). Not sent again when this
    run already paged on-call about the record (its failure callback's page_halted): one page per run. Never raises."""
    try:
        if run_id and any(str(e.get("action", "")).startswith("page_") and (e.get("details") or {}).get("run_id") == run_id
                          and e.get("outcome") == "ok" for e in store.audit_trail(record_id)):
            return False
        text = f":raising_hand: Incident {record_id} on {cluster} needs a person: {reason}" + (f"\n{url}" if url else "")
        sent, what = page(conn_id, cluster, text, {"incident": record_id, "run_id": run_id}, event=NEEDS_PERSON)
        store.audit(record_id, actor=actor, action="page_needs_person", outcome="sent" if sent else "not sent",
                    details={"result": what, "run_id": run_id})
        return sent
    except Exception as exc:  # noqa: BLE001 - never fail the run for a page
        log.error("could not page on-call that incident %s needs a person: %r", record_id, exc)
        return False
