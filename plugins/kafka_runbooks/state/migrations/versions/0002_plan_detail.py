"""The plans' detail: every blast radius line and refusal a plan computed, too big to travel in XCom or the approval
(issue 18 §4), keyed by the plan's record and digest.

Revision ID: 0002_plan_detail
Revises: 0001_state
Create Date: 2026-11-27
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0002_plan_detail"
down_revision: Union[str, Sequence[str], None] = "0001_state"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "krb_plan_detail",
        sa.Column("record_id", sa.String(128), nullable=False),
        sa.Column("plan_digest", sa.String(64), nullable=False),
        sa.Column("cluster", sa.String(128), nullable=False),
        sa.Column("created_at", sa.String(40), nullable=False),
        sa.Column("blast_sha256", sa.String(64), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("detail", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("record_id", "plan_digest", name="pk_krb_plan_detail"),
    )


def downgrade() -> None:
    op.drop_table("krb_plan_detail")
