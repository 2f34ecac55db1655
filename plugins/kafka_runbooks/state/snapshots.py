"""The health checks' snapshots (table ``krb_snapshot``). At scale a ``ClusterSnapshot`` is far too big for XCom (a
100-broker, 100,000-partition cluster: ~17 MB of JSON, issue 18 §4): the snapshot task keeps it here and passes the
detect task a :class:`SnapshotRef` (an id and a few counts); the detect task, on whichever worker, reads it back.
Kept per cluster for the last ``KEEP`` checks (older ones are deleted when a new one is kept).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import asdict, dataclass
from typing import Any, Mapping

import sqlalchemy as sa

from kafka_runbooks.model import ClusterSnapshot
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.db import insert_ignoring_conflict
from kafka_runbooks.state.incidents import validate_id

KEEP = 20  # snapshots kept per cluster: the last checks, for a detect task that runs late or is retried


@dataclass(frozen=True)
class SnapshotRef:
    """What travels in XCom instead of the snapshot."""

    snapshot_id: str
    cluster: str
    taken_at: str
    brokers: int
    partitions: int
    compressed_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SnapshotRef":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})

    @staticmethod
    def is_ref(d: Any) -> bool:
        return isinstance(d, Mapping) and "snapshot_id" in d


class SnapshotNotKept(LookupError):
    pass


class Snapshots:
    """``Snapshots(config or state_db)``."""

    def __init__(self, source: Any) -> None:
        from kafka_runbooks.state import state_of

        self.db = state_of(source)

    def put(self, snapshot: ClusterSnapshot) -> SnapshotRef:
        """Keeps the snapshot (the same one twice is kept once) and deletes the cluster's older ones beyond ``KEEP``."""
        doc = json.dumps(snapshot.to_dict(), separators=(",", ":"), sort_keys=True).encode()
        body = zlib.compress(doc, 6)
        ref = SnapshotRef(snapshot_id=hashlib.sha256(doc).hexdigest(), cluster=validate_id(snapshot.cluster),
                          taken_at=snapshot.taken_at, brokers=len(snapshot.brokers), partitions=len(snapshot.partitions),
                          compressed_bytes=len(body))
        t = S.snapshot
        with self.db.write() as c:
            insert_ignoring_conflict(c, t, {"id": ref.snapshot_id, "cluster": ref.cluster, "taken_at": ref.taken_at,
                                            "partitions": ref.partitions, "body": body}, index_elements=["id"])
            kept = [r.id for r in c.execute(sa.select(t.c.id).where(t.c.cluster == ref.cluster)
                                            .order_by(t.c.taken_at.desc(), t.c.id).offset(KEEP))]
            if kept:
                c.execute(sa.delete(t).where(t.c.id.in_(kept)))
        return ref

    def get(self, ref: SnapshotRef | Mapping[str, Any]) -> ClusterSnapshot:
        """The snapshot a ref names; :class:`SnapshotNotKept` when it is no longer (or never was) kept, or its bytes do not
        hash to its id."""
        ref = ref if isinstance(ref, SnapshotRef) else SnapshotRef.from_dict(ref)
        t = S.snapshot
        with self.db.read() as c:
            row = c.execute(sa.select(t.c.body).where(t.c.id == ref.snapshot_id, t.c.cluster == ref.cluster)).first()
        if row is None:
            raise SnapshotNotKept(f"snapshot {ref.snapshot_id[:16]} of {ref.cluster} taken at {ref.taken_at} is not in the "
                                  f"state database (only the last {KEEP} checks' snapshots are kept)")
        doc = zlib.decompress(row.body)
        if hashlib.sha256(doc).hexdigest() != ref.snapshot_id:
            raise SnapshotNotKept(f"snapshot {ref.snapshot_id[:16]} of {ref.cluster}: its stored bytes do not match its id")
        return ClusterSnapshot.from_dict(json.loads(doc))
