"""Slack: the pages of ``notify/webhook.py`` as Slack incoming-webhook messages, when on-call uses Slack.

The on-call connection (the cluster's ``approvals.oncall_conn_id``) is a Slack one when its ``conn_type`` is
``slackwebhook`` -- the connection type of Airflow's Slack provider (``SlackWebhookHook``), so a team's existing
connection works as it is -- or its extra says ``{"kind": "slack"}``. As the provider reads it: the password is the
webhook, either its whole URL or the part after the host (``T000/B000/XXXX``); the host (a URL or a host name, with
``schema``, default ``https://hooks.slack.com/services``) is where that part is posted. The webhook URL is a secret:
it comes only from the connection, and is never logged or written to the audit trail (the page's outcome names the
connection, not the URL).

The message: ``{"text": <the page>, "blocks": [a section with the page in mrkdwn, a context line naming the cluster
and the run>]}``, the shape Slack's incoming webhooks take; Slack's mrkdwn needs ``&``, ``<`` and ``>`` escaped.
``notify/webhook.py``'s ``OnCallSlackNotifier`` is its on-call notifier tied to one Slack connection (like the
provider's ``SlackWebhookNotifier``), for a team that pages a Slack channel whatever a cluster's settings say;
every page keeps the webhook notifier's tries, bounds and audit.
"""

from __future__ import annotations

from typing import Any, Mapping

CONN_TYPE = "slackwebhook"
DEFAULT_BASE = "https://hooks.slack.com/services"
MAX_TEXT = 3000  # a section block's text is at most 3000 characters


def is_slack(conn) -> bool:
    extra = dict(getattr(conn, "extra_dejson", None) or {})
    return getattr(conn, "conn_type", None) == CONN_TYPE or str(extra.get("kind", "")).lower() == "slack"


def webhook_url(conn) -> str:
    """The incoming webhook's URL, read as Airflow's Slack provider reads its connection."""
    token = (conn.password or "").strip()
    if not token:
        raise ValueError(f"Slack connection {conn.conn_id!r} has no webhook (its password)")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in token):  # said without the token: it is the secret
        raise ValueError(f"Slack connection {conn.conn_id!r}: its webhook (the password) holds a blank or control character")
    if "://" in token:
        url = token
    else:
        host = (conn.host or "").strip()
        base = host if "://" in host else (f"{conn.schema or 'https'}://{host}" if host else DEFAULT_BASE)
        if conn.port and "://" not in host and host:
            base = f"{base}:{int(conn.port)}"
        url = base.rstrip("/") + "/" + token.lstrip("/")
    scheme = url.split("://", 1)[0]
    if scheme not in ("http", "https"):
        raise ValueError(f"Slack connection {conn.conn_id!r}: the webhook must be http or https, not {scheme!r}")
    return url


def escape(text: str) -> str:
    """Slack's mrkdwn control characters, escaped as Slack documents (so a value cannot become a link or mention)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def message(payload: Mapping[str, Any], cluster: str, record_id: str) -> dict[str, Any]:
    text = escape(str(payload.get("text") or ""))
    if len(text) > MAX_TEXT:
        text = text[: MAX_TEXT - 16] + "\n... (truncated)"
    where = f"cluster {escape(cluster)} · {escape(record_id)}"
    run = " / ".join(escape(str(payload[k])) for k in ("dag_id", "run_id", "task_id") if payload.get(k))
    return {"text": text,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                       {"type": "context", "elements": [{"type": "mrkdwn", "text": where + (f" · {run}" if run else "")}]}]}

