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
