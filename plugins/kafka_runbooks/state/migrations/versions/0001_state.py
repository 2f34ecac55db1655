"""The state database: incidents and notes, audit trail, remediation ledger, approval markers, health history,
evidence bundles' index; the triggers that keep the trail append-only and the approval markers one-way.

Revision ID: 0001_state
Revises:
Create Date: 2026-11-24
"""

from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op


revision: str = "0001_state"
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

ID = sa.String(128)
AT = sa.String(40)
Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

APPEND_ONLY = ("krb_audit", "krb_ledger", "krb_incident_note")
NO_DELETE = ("krb_incident",)


def upgrade() -> None:
    op.create_table(
        "krb_incident",
        sa.Column("id", ID, nullable=False),
        sa.Column("cluster", ID, nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(128), nullable=True),
        sa.Column("open_key", sa.String(512), nullable=True),
        sa.Column("opened_at", AT, nullable=False),
        sa.Column("closed_at", AT, nullable=True),
        sa.Column("updated_at", AT, nullable=False),
        sa.Column("record", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_krb_incident"),
        sa.UniqueConstraint("open_key", name="uq_krb_incident_open_key"),
    )
    op.create_index("ix_krb_incident_cluster_status", "krb_incident", ["cluster", "status"])
    op.create_index("ix_krb_incident_cluster_opened_at", "krb_incident", ["cluster", "opened_at"])

    op.create_table(
        "krb_incident_note",
        sa.Column("seq", Seq, autoincrement=True, nullable=False),
        sa.Column("incident_id", ID, nullable=False),
        sa.Column("at", AT, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["incident_id"], ["krb_incident.id"], name="fk_krb_incident_note_incident_id_krb_incident"),
        sa.PrimaryKeyConstraint("seq", name="pk_krb_incident_note"),
    )
    op.create_index("ix_krb_incident_note_incident_id", "krb_incident_note", ["incident_id"])

    op.create_table(
        "krb_audit",
        sa.Column("seq", Seq, autoincrement=True, nullable=False),
        sa.Column("incident_id", ID, nullable=False),
        sa.Column("at", AT, nullable=False),
        sa.Column("actor", sa.String(512), nullable=False),
        sa.Column("action", sa.String(256), nullable=False),
        sa.Column("outcome", sa.String(256), nullable=False),
        sa.Column("host", sa.String(512), nullable=True),
        sa.Column("command", sa.Text(), nullable=True),
        sa.Column("details", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_krb_audit"),
    )
    op.create_index("ix_krb_audit_incident_id", "krb_audit", ["incident_id"])

    op.create_table(
        "krb_ledger",
        sa.Column("seq", Seq, autoincrement=True, nullable=False),
        sa.Column("record_id", ID, nullable=False),
        sa.Column("at", AT, nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(512), nullable=False),
        sa.Column("entry", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_krb_ledger"),
    )
    op.create_index("ix_krb_ledger_record_id", "krb_ledger", ["record_id"])

    op.create_table(
        "krb_approval",
        sa.Column("id", Seq, autoincrement=True, nullable=False),
        sa.Column("record_id", ID, nullable=False),
        sa.Column("dag_id", sa.String(250), nullable=False),
        sa.Column("run_id", sa.String(512), nullable=False),
        sa.Column("task_id", sa.String(250), nullable=True),
        sa.Column("try_number", sa.Integer(), nullable=False),
        sa.Column("requested_at", AT, nullable=True),
        sa.Column("request", sa.Text(), nullable=True),
        sa.Column("decided_at", AT, nullable=True),
        sa.Column("decision", sa.Text(), nullable=True),
        sa.Column("used_at", AT, nullable=True),
        sa.Column("used_by", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_krb_approval"),
        sa.UniqueConstraint("record_id", "dag_id", "run_id", "try_number", name="uq_krb_approval_record_id_dag_id_run_id_try_number"),
    )
    op.create_index("ix_krb_approval_record_id", "krb_approval", ["record_id"])
    op.create_index("ix_krb_approval_decided_at", "krb_approval", ["decided_at"])

    op.create_table(
        "krb_health_sample",
        sa.Column("id", Seq, autoincrement=True, nullable=False),
        sa.Column("cluster", ID, nullable=False),
        sa.Column("series", sa.String(128), nullable=False),
        sa.Column("at", AT, nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_krb_health_sample"),
        sa.UniqueConstraint("cluster", "series", "at", name="uq_krb_health_sample_cluster_series_at"),
    )

    op.create_table(
        "krb_health_state",
        sa.Column("cluster", ID, nullable=False),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("updated_at", AT, nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("cluster", "name", name="pk_krb_health_state"),
    )

    op.create_table(
        "krb_bundle",
        sa.Column("location", sa.String(2048), nullable=False),
        sa.Column("cluster", ID, nullable=False),
        sa.Column("incident_id", ID, nullable=False),
        sa.Column("capture_id", sa.String(64), nullable=True),
        sa.Column("status", sa.String(32), nullable=True),
        sa.Column("created_at", AT, nullable=False),
        sa.Column("updated_at", AT, nullable=False),
        sa.Column("files", sa.Integer(), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=True),
        sa.Column("manifest_sha256", sa.String(64), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("location", name="pk_krb_bundle"),
    )
    op.create_index("ix_krb_bundle_incident_id", "krb_bundle", ["incident_id"])
    op.create_index("ix_krb_bundle_cluster_created_at", "krb_bundle", ["cluster", "created_at"])

    _guards(op.get_bind().dialect.name)


def _guards(dialect: str) -> None:
    """Triggers: the trail is append-only; an approval's request and decision, once written, never change; a used
    approval never changes again; approval markers and incident records are never deleted."""
    if dialect == "postgresql":
        op.execute("""
            CREATE FUNCTION krb_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              RAISE EXCEPTION 'kafka-runbooks: % refused on %: it is append-only', TG_OP, TG_TABLE_NAME;
            END $$""")
        for table in APPEND_ONLY:
            op.execute(f"CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION krb_refuse_change()")
        for table in NO_DELETE:
            op.execute(f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                       "FOR EACH ROW EXECUTE FUNCTION krb_refuse_change()")
        op.execute("""
            CREATE FUNCTION krb_approval_guard() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
              IF TG_OP = 'DELETE' THEN
                RAISE EXCEPTION 'kafka-runbooks: approval markers are never deleted (approval %)', OLD.id;
              END IF;
              IF OLD.used_at IS NOT NULL THEN
                RAISE EXCEPTION 'kafka-runbooks: approval % was used at %: it never changes again', OLD.id, OLD.used_at;
              END IF;
              IF (OLD.request IS NOT NULL AND NEW.request IS DISTINCT FROM OLD.request)
                 OR (OLD.decision IS NOT NULL AND NEW.decision IS DISTINCT FROM OLD.decision)
                 OR NEW.record_id <> OLD.record_id OR NEW.dag_id <> OLD.dag_id OR NEW.run_id <> OLD.run_id
                 OR NEW.try_number <> OLD.try_number THEN
                RAISE EXCEPTION 'kafka-runbooks: approval %: a recorded request or decision is final', OLD.id;
              END IF;
              RETURN NEW;
            END $$""")
        op.execute("CREATE TRIGGER krb_approval_guard BEFORE UPDATE OR DELETE ON krb_approval "
                   "FOR EACH ROW EXECUTE FUNCTION krb_approval_guard()")
        return
    for table in APPEND_ONLY:
        for what in ("UPDATE", "DELETE"):
            op.execute(f"CREATE TRIGGER {table}_no_{what.lower()} BEFORE {what} ON {table} "
                       f"BEGIN SELECT RAISE(ABORT, 'kafka-runbooks: {what} refused on {table}: it is append-only'); END")
    for table in NO_DELETE:
        op.execute(f"CREATE TRIGGER {table}_no_delete BEFORE DELETE ON {table} "
                   f"BEGIN SELECT RAISE(ABORT, 'kafka-runbooks: DELETE refused on {table}'); END")
    op.execute("CREATE TRIGGER krb_approval_no_delete BEFORE DELETE ON krb_approval "
               "BEGIN SELECT RAISE(ABORT, 'kafka-runbooks: approval markers are never deleted'); END")
    op.execute("CREATE TRIGGER krb_approval_used_is_final BEFORE UPDATE ON krb_approval WHEN OLD.used_at IS NOT NULL "
               "BEGIN SELECT RAISE(ABORT, 'kafka-runbooks: a used approval never changes again'); END")
    op.execute("CREATE TRIGGER krb_approval_recorded_is_final BEFORE UPDATE ON krb_approval WHEN "
               "(OLD.request IS NOT NULL AND NEW.request IS NOT OLD.request) "
               "OR (OLD.decision IS NOT NULL AND NEW.decision IS NOT OLD.decision) "
               "OR NEW.record_id IS NOT OLD.record_id OR NEW.dag_id IS NOT OLD.dag_id OR NEW.run_id IS NOT OLD.run_id "
               "OR NEW.try_number IS NOT OLD.try_number "
               "BEGIN SELECT RAISE(ABORT, 'kafka-runbooks: a recorded approval request or decision is final'); END")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS krb_approval_guard ON krb_approval")
        op.execute("DROP FUNCTION IF EXISTS krb_approval_guard()")
        for table in (*APPEND_ONLY, *NO_DELETE):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete ON {table}")
        op.execute("DROP FUNCTION IF EXISTS krb_refuse_change()")
    for table in ("krb_bundle", "krb_health_state", "krb_health_sample", "krb_approval", "krb_ledger", "krb_audit",
                  "krb_incident_note", "krb_incident"):
        op.drop_table(table)
