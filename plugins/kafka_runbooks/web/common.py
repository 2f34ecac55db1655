"""What the web app's routes share with it (``app.py`` builds the app and mounts ``routes.py``): the security headers
and every configured cluster's settings."""

from __future__ import annotations

from typing import Any

PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'"
REPORT_CSP = "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'"
SECURITY_HEADERS = {"X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}


def configs() -> tuple[list[Any], dict[str, str]]:
    """Every configured cluster's settings; clusters whose settings cannot be read, with why."""
    from kafka_runbooks.config import ConfigError, load_cluster, raw_clusters

    raw = raw_clusters(missing_ok=True)
    configs, errors = [], {}
    for name in sorted(raw):
        try:
            configs.append(load_cluster(name, raw))
        except ConfigError as exc:
            errors[name] = str(exc)
    return configs, errors
