"""The plans' detail (table ``krb_plan_detail``): every blast radius line and refusal a plan computed
(``model.PlanDetail``), which is too big to travel in XCom or the approval at scale (a 100-broker roll of 100,000
partitions: ~300,000 lines). Keyed by the plan's record and digest; the plan that travels carries the fingerprint of
the whole blast radius (``Plan.blast_sha256``), checked again when the detail is read back. Written once per plan
(the same plan computed again writes nothing new).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

import sqlalchemy as sa

from kafka_runbooks import clock
from kafka_runbooks.model import Plan, PlanDetail
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.db import insert_ignoring_conflict
from kafka_runbooks.state.incidents import validate_id


class PlanDetails:
    """``PlanDetails(config or state_db)``."""

    def __init__(self, source: Any) -> None:
        from kafka_runbooks.state import state_of

        self.db = state_of(source)

    def put(self, record_id: str, plan_digest: str, plan: Plan) -> bool:
        """Keeps ``plan.detail`` under (record, digest); False when it was already kept. A plan without a detail (read
        back from XCom) or whose detail does not match its fingerprint is refused."""
        from kafka_runbooks.remediate.blast import plan_blast_sha256

        if plan.detail is None or not plan.blast_sha256:
            raise ValueError("only a plan as computed (with its detail and fingerprint) can be kept")
        if plan_blast_sha256(plan.detail.effects) != plan.blast_sha256:
            raise ValueError("the plan's detail does not match its blast radius fingerprint")
        doc = json.dumps(plan.detail.to_dict(), separators=(",", ":")).encode()
        lines = sum(len(v) for v in plan.detail.effects.values()) + sum(len(v) for v in plan.detail.refusals.values())
        row = {"record_id": validate_id(record_id), "plan_digest": str(plan_digest), "cluster": plan.cluster,
               "created_at": clock.now_iso(), "blast_sha256": plan.blast_sha256, "lines": lines,
               "detail": zlib.compress(doc, 6)}
        with self.db.write() as c:
            return insert_ignoring_conflict(c, S.plan_detail, row, index_elements=["record_id", "plan_digest"])

    def get(self, record_id: str, plan_digest: str | None = None) -> tuple[PlanDetail, str] | None:
        """(the detail, its blast_sha256) of the record's plan with that digest (None: the latest kept); None when none
        is kept."""
        t = S.plan_detail
        q = sa.select(t.c.detail, t.c.blast_sha256).where(t.c.record_id == validate_id(record_id))
        q = q.where(t.c.plan_digest == plan_digest) if plan_digest else q.order_by(t.c.created_at.desc()).limit(1)
        with self.db.read() as c:
            row = c.execute(q).first()
        if row is None:
            return None
        return PlanDetail.from_dict(json.loads(zlib.decompress(row.detail))), row.blast_sha256

    def with_detail(self, plan: Plan, record_id: str, plan_digest: str | None = None) -> Plan:
        """``plan`` with its kept detail, when one is kept and matches the plan's fingerprint; ``plan`` otherwise."""
        import dataclasses

        from kafka_runbooks.remediate.blast import plan_blast_sha256

        found = self.get(record_id, plan_digest)
        if found is None or not plan.blast_sha256:
            return plan
        detail, _ = found
        if plan_blast_sha256(detail.effects) != plan.blast_sha256:
            return plan
        return dataclasses.replace(plan, detail=detail)
