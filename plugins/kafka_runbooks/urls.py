"""Where a person reads a record: the kafka-runbooks app's pages in the api-server (``web/``), absolute when
``[api] base_url`` is set. Used by the operators' extra links and by the pages on-call gets (``notify/``)."""

from __future__ import annotations

import urllib.parse

PREFIX = "/kafka-runbooks"


def _base() -> str:
    """The api-server's public URL when configured (``[api] base_url``), else a path on the same server."""
    try:
        from airflow.configuration import conf  # deferred: read when a link is made, not when a DAG file is parsed

        base = conf.get("api", "base_url", fallback="") or ""
    except Exception:  # noqa: BLE001 - a link is never worth failing a task
        base = ""
    base = base.rstrip("/")
    return base if base.startswith(("http://", "https://")) else ""


def incident_url(cluster: str, record_id: str) -> str:
    """The record's page in the kafka-runbooks app (absolute when ``[api] base_url`` is set)."""
    q = lambda v: urllib.parse.quote(str(v), safe="")  # noqa: E731
    return f"{_base()}{PREFIX}/incidents/{q(cluster)}/{q(record_id)}"
