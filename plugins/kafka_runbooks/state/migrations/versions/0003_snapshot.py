"""The health checks' snapshots, kept for the detect task that reads them (issue 18 §4: no XCom over 1 MB; a
100,000-partition snapshot is ~17 MB of JSON).

Revision ID: 0003_snapshot
Revises: 0002_plan_detail
Create Date: 2026-11-25
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

revision: str = "0003_snapshot"
down_revision: Union[str, Sequence[str], None] = "0002_plan_detail"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    op.create_table(
        "krb_snapshot",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("cluster", sa.String(128), nullable=False),
        sa.Column("taken_at", sa.String(40), nullable=False),
        sa.Column("partitions", sa.Integer(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_krb_snapshot"),
    )
    op.create_index("ix_krb_snapshot_cluster_taken_at", "krb_snapshot", ["cluster", "taken_at"])


def downgrade() -> None:
    op.drop_index("ix_krb_snapshot_cluster_taken_at", table_name="krb_snapshot")
    op.drop_table("krb_snapshot")
