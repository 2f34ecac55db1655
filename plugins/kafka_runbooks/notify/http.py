"""One HTTP POST of a page (the chat webhook's, PagerDuty's), bounded, and how often a page is tried."""

from __future__ import annotations

import json
import urllib.request
from typing import Any, Mapping

TIMEOUT_S = 10.0
ATTEMPTS = 3
PAUSES_S = (1.0, 3.0)  # between tries


def post(url: str, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None, timeout_s: float = TIMEOUT_S) -> int:
    body = json.dumps(payload, default=str).encode("utf-8")
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json", **dict(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - URL from an Airflow connection
        return resp.status


def error_text(exc: BaseException, url: str | None) -> str:
    """``Type: message`` of a failed POST with the URL (a Slack webhook's path is its secret) and every part of its
    path taken out: some errors quote the URL they refused (``InvalidURL``)."""
    from urllib.parse import urlsplit  # the only user of it

    text = f"{type(exc).__name__}: {exc}"
    if url:
        parts = urlsplit(url)
        for secret in sorted({url, parts.path, *[p for p in parts.path.split("/") if len(p) >= 6]}, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "<the webhook URL>" if secret == url else "<redacted>")
    return text

