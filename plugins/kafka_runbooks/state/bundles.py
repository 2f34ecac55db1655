"""The evidence bundles' index (table ``krb_bundle``): where each incident's bundles are, what they hold, how
their capture ended and whether they were analysed. The bundles themselves stay files (a directory with its
``manifest.json``, docs/CONTRACTS.md) or ``s3a://`` / ``hdfs://`` objects where Spark reads them; the index
only points at them, so any worker can find an incident's evidence without listing a shared disk.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import sqlalchemy as sa

from kafka_runbooks import clock
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.db import for_update, insert_ignoring_conflict
from kafka_runbooks.state.incidents import validate_id


def manifest_digest(manifest: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True, default=str).encode()).hexdigest()


class BundleIndex:
    """``BundleIndex(config or state_db)``."""

    def __init__(self, source: Any) -> None:
        from kafka_runbooks.state import state_of

        self.db = state_of(source)

    def record_capture(self, location: str, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """Indexes a captured bundle from its manifest (again after a re-capture into the same location: updated)."""
        files = list(manifest.get("files") or [])
        now = clock.now_iso()
        row = {
            "location": str(location),
            "cluster": validate_id(str(manifest.get("cluster")), "cluster name"),
            "incident_id": validate_id(str(manifest.get("incident_id"))),
            "capture_id": manifest.get("capture_id"),
            "status": manifest.get("status"),
            "created_at": str(manifest.get("created_at") or now),
            "updated_at": now,
            "files": len(files),
            "bytes": sum(int(f.get("bytes") or 0) for f in files),
            "manifest_sha256": manifest_digest(manifest),
            "summary": {"finished_at": manifest.get("finished_at"), "duration_s": manifest.get("duration_s"),
                        "hosts": sorted(str(h) for h in (manifest.get("hosts") or {})),
                        "status_reasons": list(manifest.get("status_reasons") or [])[:20]},
        }
        t = S.bundle
        with self.db.write() as c:
            if not insert_ignoring_conflict(c, t, row, index_elements=["location"]):
                c.execute(sa.update(t).where(t.c.location == row["location"])
                          .values(**{k: v for k, v in row.items() if k not in ("location", "created_at")}))
        return row

    def record_analysis(self, location: str, **facts: Any) -> None:
        """Adds what the analysis made of a bundle (report, findings count...) to its entry's summary."""
        t = S.bundle
        with self.db.write() as c:
            row = c.execute(for_update(c, sa.select(t.c.summary).where(t.c.location == str(location)))).first()
            if row is None:
                return  # a bundle captured before the index existed: nothing to add to
            c.execute(sa.update(t).where(t.c.location == str(location))
                      .values(summary={**(row.summary or {}), "analysis": facts}, updated_at=clock.now_iso()))

    def of_incident(self, incident_id: str) -> list[dict[str, Any]]:
        t = S.bundle
        with self.db.read() as c:
            rows = c.execute(sa.select(t).where(t.c.incident_id == validate_id(incident_id)).order_by(t.c.created_at)).all()
        return [dict(r._mapping) for r in rows]

    def latest(self, cluster: str, limit: int = 20) -> list[dict[str, Any]]:
        t = S.bundle
        with self.db.read() as c:
            rows = c.execute(sa.select(t).where(t.c.cluster == cluster).order_by(t.c.created_at.desc()).limit(limit)).all()
        return [dict(r._mapping) for r in rows]
