"""PagerDuty Events API v2: the pages of ``notify/webhook.py`` as PagerDuty events, when on-call uses PagerDuty.

The on-call connection (the cluster's ``approvals.oncall_conn_id``) is a PagerDuty one when its ``conn_type`` is
``pagerduty_events`` or its extra says ``{"kind": "pagerduty"}``. Its password is the integration's routing key; its
host defaults to ``events.pagerduty.com`` (https), and schema/host/port may point elsewhere (a proxy, a test receiver).
Every event is a ``POST /v2/enqueue`` of::

    {"routing_key", "event_action": "trigger"|"acknowledge"|"resolve", "dedup_key": "<cluster>/<record id>",
     "payload": {"summary" (<= 1024 chars), "source", "severity", "component": "kafka", "group": <cluster>,
                 "custom_details": {...}},
     "links": [{"href": <the record's page>, "text": ...}]}

One dedup key per record (incident, roll, election): every page about it (approval waiting, halted, a finding, needs
a person) triggers -- or re-triggers -- the same PagerDuty incident; ``acknowledge`` when its approval is answered,
``resolve`` when it closes. ``acknowledge``/``resolve`` are sent only to PagerDuty (a chat webhook has no such thing)
and audited on the record (``page_acknowledge``/``page_resolve``) like every page. Never raised.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping

from kafka_runbooks.notify.http import ATTEMPTS, PAUSES_S, post

log = logging.getLogger(__name__)

CONN_TYPE = "pagerduty_events"
DEFAULT_HOST = "events.pagerduty.com"
ENQUEUE_PATH = "/v2/enqueue"
MAX_SUMMARY = 1024  # Events API v2: payload.summary is at most 1024 characters
SEVERITIES = ("critical", "error", "warning", "info")
TRIGGER, ACKNOWLEDGE, RESOLVE = "trigger", "acknowledge", "resolve"
# the severity of each page kind (notify/webhook.py's events)
SEVERITY = {"halted": "critical", "finding": "critical", "needs_person": "error", "approval_waiting": "warning"}


def is_pagerduty(conn) -> bool:
    extra = dict(getattr(conn, "extra_dejson", None) or {})
    return getattr(conn, "conn_type", None) == CONN_TYPE or str(extra.get("kind", "")).lower() == "pagerduty"


def events_url(conn) -> str:
    scheme = conn.schema or "https"
    if scheme not in ("http", "https"):
        raise ValueError(f"PagerDuty connection {conn.conn_id!r}: schema must be http or https, not {scheme!r}")
    port = f":{int(conn.port)}" if conn.port else ""
    return f"{scheme}://{conn.host or DEFAULT_HOST}{port}{ENQUEUE_PATH}"


def dedup_key(cluster: str, record_id: str) -> str:
    return f"{cluster}/{record_id}"


def event_body(conn, action: str, *, cluster: str, record_id: str, summary: str = "", severity: str = "error",
               details: Mapping[str, Any] | None = None, link: str | None = None) -> dict[str, Any]:
    """The Events v2 body; ``trigger`` carries the payload, ``acknowledge``/``resolve`` only the key."""
    if action not in (TRIGGER, ACKNOWLEDGE, RESOLVE):
        raise ValueError(f"unknown PagerDuty event action {action!r}")
    if not conn.password:
        raise ValueError(f"PagerDuty connection {conn.conn_id!r} has no routing key (its password)")
    body: dict[str, Any] = {"routing_key": conn.password, "event_action": action, "dedup_key": dedup_key(cluster, record_id)}
    if action == TRIGGER:
        cut = " ... (truncated)"
        text = summary if len(summary) <= MAX_SUMMARY else summary[: MAX_SUMMARY - len(cut)] + cut
        body["payload"] = {"summary": text, "source": f"kafka-runbooks/{cluster}",
                           "severity": severity if severity in SEVERITIES else "error", "component": "kafka",
                           "group": cluster, "custom_details": {"record": record_id, **dict(details or {})}}
    if link:
        body["links"] = [{"href": link, "text": f"{record_id} ({cluster})"}]
    return body


def record_link(cluster: str, record_id: str) -> str | None:
    try:
        from kafka_runbooks.urls import incident_url  # deferred: reads Airflow's configuration

        return incident_url(cluster, record_id)
    except Exception:  # noqa: BLE001 - a page without its link is still a page
        return None


def deliver(url: str, body: Mapping[str, Any], attempts: int, pauses_s: tuple[float, ...],
            sleep: Callable[[float], None] | None = None) -> dict[str, Any]:
    """POSTs the event, retried like a webhook page: {"outcome": "ok"|"failed", "attempts", "errors", ...}."""

    errors: list[str] = []
    for attempt in range(1, attempts + 1):
        try:
            status = post(url, body)
            return {"outcome": "ok", "attempts": attempt, "errors": errors, "http_status": status,
                    "dedup_key": body.get("dedup_key"), "event_action": body.get("event_action")}
        except Exception as exc:  # noqa: BLE001 - HTTP errors, refused connections, timeouts: tried again
            errors.append(f"attempt {attempt}: {type(exc).__name__}: {exc}")
            log.error("could not send the PagerDuty event (%s), attempt %d of %d: %r", body.get("event_action"), attempt, attempts, exc)
            if attempt < attempts:
                (sleep or time.sleep)(pauses_s[min(attempt - 1, len(pauses_s) - 1)])
    return {"outcome": "failed", "attempts": attempts, "errors": errors, "dedup_key": body.get("dedup_key"),
            "event_action": body.get("event_action")}


def paged(store, record_id: str) -> bool:
    """Whether on-call was paged about the record (a page delivered): only such a record is acknowledged/resolved."""
    return any(str(e.get("action", "")).startswith("page_") and e.get("action") not in ("page_acknowledge", "page_resolve")
               and e.get("outcome") in ("ok", "sent") for e in store.audit_trail(record_id))


def _follow_up(action: str, store, conn_id: str | None, cluster: str, record_id: str, *, actor: str,
               details: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """Acknowledges or resolves the record's PagerDuty incident, audited; None when on-call is not on PagerDuty."""
    from airflow.sdk import BaseHook


    if not conn_id:
        return None
    try:
        conn = BaseHook.get_connection(conn_id)
        if not is_pagerduty(conn) or not paged(store, record_id):
            return None
        outcome = deliver(events_url(conn), event_body(conn, action, cluster=cluster, record_id=record_id), ATTEMPTS, PAUSES_S)
    except Exception as exc:  # noqa: BLE001 - never fail the run for a page
        log.error("could not %s the PagerDuty incident of %s: %r", action, record_id, exc)
        outcome = {"outcome": "failed", "attempts": 0, "errors": [f"{type(exc).__name__}: {exc}"], "event_action": action}
    try:
        store.audit(record_id, actor=actor, action=f"page_{action}", outcome=str(outcome["outcome"]),
                    details={**outcome, "conn_id": conn_id, **dict(details or {})})
    except Exception as exc:  # noqa: BLE001
        log.error("could not record the PagerDuty %s of %s in the audit trail: %r", action, record_id, exc)
    return outcome


def acknowledge(store, config, record_id: str, *, actor: str, answered_by: str | None = None) -> dict[str, Any] | None:
    """An approval about the record was answered: its PagerDuty incident is acknowledged (a person has it)."""
    return _follow_up(ACKNOWLEDGE, store, config.approvals.oncall_conn_id, config.name, record_id, actor=actor,
                      details={"answered_by": answered_by} if answered_by else None)


def resolve(store, config, record_id: str, *, actor: str) -> dict[str, Any] | None:
    """The record closed: its PagerDuty incident is resolved."""
    return _follow_up(RESOLVE, store, config.approvals.oncall_conn_id, config.name, record_id, actor=actor)
