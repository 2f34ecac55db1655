"""The fleet overview's document (``/api/fleet``, the fleet page): every configured cluster's state, a cluster whose
settings are wrong listed with the error."""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException

from kafka_runbooks.web.common import configs as _configs


def fleet_document(only: str | None = None) -> dict[str, Any]:
    from kafka_runbooks.state.fleet import fleet_overview  # deferred: the state database's tables load on first use

    configs, errors = _configs()
    if only is not None:
        configs = [c for c in configs if c.name == only]
        errors = {k: v for k, v in errors.items() if k == only}
        if not configs and not errors:
            raise HTTPException(status_code=404, detail=f"no cluster {only!r} in the Variable kafka_runbooks_clusters")
    doc = fleet_overview(configs)
    doc["clusters"] = sorted(doc["clusters"] + [{"cluster": n, "error": f"settings: {why}"} for n, why in errors.items()],
                             key=lambda e: e["cluster"])
    return doc
