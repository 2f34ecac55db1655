"""The state database's tables (SQLAlchemy Core). ``state/migrations`` creates them; a test holds the two equal.

Timestamps are the product's clock strings (``clock.now_iso()``: ISO-8601 UTC, milliseconds, ``Z``), which sort as
text; ``seq`` columns give the order of appends within one millisecond. JSON documents are stored as text
(:class:`JsonText`: the same bytes on PostgreSQL and SQLite, anything ``str()`` can render).

Append-only tables (``krb_audit``, ``krb_ledger``, ``krb_incident_note``) and the one-way approval markers
(``krb_approval``: a decision is final, a used approval stays used, nothing is deleted) are enforced by triggers
created with the tables (the migration), on both databases.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator

PREFIX = "krb_"

metadata = sa.MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
})


class JsonText(TypeDecorator):
    """A JSON document kept as text (sorted keys; values ``json`` cannot render are stored as their ``str()``)."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect) -> str | None:
        return None if value is None else json.dumps(value, sort_keys=True, default=str)

    def process_result_value(self, value: str | None, dialect) -> Any:
        return None if value is None else json.loads(value)


ID = sa.String(128)  # incident / record ids and cluster names (incidents.validate_id)
AT = sa.String(40)  # clock.now_iso()
Seq = sa.BigInteger().with_variant(sa.Integer(), "sqlite")  # SQLite autoincrements INTEGER PRIMARY KEY only

incident = sa.Table(
    "krb_incident", metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("cluster", ID, nullable=False),
    sa.Column("status", sa.String(32), nullable=False),
    sa.Column("kind", sa.String(128)),  # the trigger's kind: a finding kind, rolling_restart, preferred_election, ...
    # one incident per detected problem episode: a second health check racing to open the same one hits this
    sa.Column("open_key", sa.String(512), unique=True),
    sa.Column("opened_at", AT, nullable=False),
    sa.Column("closed_at", AT),
    sa.Column("updated_at", AT, nullable=False),
    sa.Column("record", JsonText, nullable=False),  # the whole record but its notes
    sa.Index(None, "cluster", "status"),
    sa.Index(None, "cluster", "opened_at"),
)

incident_note = sa.Table(
    "krb_incident_note", metadata,
    sa.Column("seq", Seq, primary_key=True, autoincrement=True),
    sa.Column("incident_id", ID, sa.ForeignKey("krb_incident.id"), nullable=False, index=True),
    sa.Column("at", AT, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
)

audit = sa.Table(
    "krb_audit", metadata,
    sa.Column("seq", Seq, primary_key=True, autoincrement=True),
    sa.Column("incident_id", ID, nullable=False, index=True),  # any record id: incident, roll, election, schedule
    sa.Column("at", AT, nullable=False),
    sa.Column("actor", sa.String(512), nullable=False),
    sa.Column("action", sa.String(256), nullable=False),
    sa.Column("outcome", sa.String(256), nullable=False),
    sa.Column("host", sa.String(512)),
    sa.Column("command", JsonText),
    sa.Column("details", JsonText, nullable=False),
)

ledger = sa.Table(
    "krb_ledger", metadata,
    sa.Column("seq", Seq, primary_key=True, autoincrement=True),
    sa.Column("record_id", ID, nullable=False, index=True),
    sa.Column("at", AT, nullable=False),
    sa.Column("event", sa.String(64), nullable=False),
    sa.Column("run_id", sa.String(512), nullable=False),
    sa.Column("entry", JsonText, nullable=False),  # the whole entry as appended
)

approval = sa.Table(
    "krb_approval", metadata,
    sa.Column("id", Seq, primary_key=True, autoincrement=True),
    sa.Column("record_id", ID, nullable=False, index=True),
    sa.Column("dag_id", sa.String(250), nullable=False),
    sa.Column("run_id", sa.String(512), nullable=False),
    sa.Column("task_id", sa.String(250)),
    sa.Column("try_number", sa.Integer, nullable=False),
    sa.Column("requested_at", AT),
    sa.Column("request", JsonText),  # the sealed request entry (decision payload + mac + assigned)
    sa.Column("decided_at", AT),
    sa.Column("decision", JsonText),  # the sealed decision entry
    sa.Column("used_at", AT),
    sa.Column("used_by", JsonText),  # task, try, digest of the use
    sa.UniqueConstraint("record_id", "dag_id", "run_id", "try_number"),
    sa.Index(None, "decided_at"),
)

health_sample = sa.Table(
    "krb_health_sample", metadata,
    sa.Column("id", Seq, primary_key=True, autoincrement=True),
    sa.Column("cluster", ID, nullable=False),
    sa.Column("series", sa.String(128), nullable=False),
    sa.Column("at", AT, nullable=False),
    sa.Column("data", JsonText, nullable=False),  # the sample's figures
    sa.UniqueConstraint("cluster", "series", "at"),
)

health_state = sa.Table(
    "krb_health_state", metadata,
    sa.Column("cluster", ID, primary_key=True),
    sa.Column("name", sa.String(128), primary_key=True),  # "detections" (the streaks), "leadership", ...
    sa.Column("updated_at", AT, nullable=False),
    sa.Column("state", JsonText, nullable=False),
)

bundle = sa.Table(
    "krb_bundle", metadata,
    sa.Column("location", sa.String(2048), primary_key=True),  # a path, file://, s3a:// or hdfs:// URI
    sa.Column("cluster", ID, nullable=False),
    sa.Column("incident_id", ID, nullable=False, index=True),
    sa.Column("capture_id", sa.String(64)),
    sa.Column("status", sa.String(32)),
    sa.Column("created_at", AT, nullable=False),
    sa.Column("updated_at", AT, nullable=False),
    sa.Column("files", sa.Integer),
    sa.Column("bytes", sa.BigInteger),
    sa.Column("manifest_sha256", sa.String(64)),
    sa.Column("summary", JsonText),
    sa.Index(None, "cluster", "created_at"),
)

plan_detail = sa.Table(
    "krb_plan_detail", metadata,
    sa.Column("record_id", ID, primary_key=True),
    sa.Column("plan_digest", sa.String(64), primary_key=True),
    sa.Column("cluster", ID, nullable=False),
    sa.Column("created_at", AT, nullable=False),
    sa.Column("blast_sha256", sa.String(64), nullable=False),  # the plan's, over the detail's blast radius
    sa.Column("lines", sa.Integer, nullable=False),  # blast radius lines and refusals in all
    sa.Column("detail", sa.LargeBinary, nullable=False),  # model.PlanDetail as zlib-compressed JSON
)

# a health check's snapshot, too big to travel in XCom at scale (100,000 partitions: ~17 MB of JSON); the snapshot task
# keeps it here and hands the detect task its id (state/snapshots.py)
snapshot = sa.Table(
    "krb_snapshot", metadata,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("cluster", ID, nullable=False),
    sa.Column("taken_at", AT, nullable=False),
    sa.Column("partitions", sa.Integer, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),  # model.ClusterSnapshot as zlib-compressed JSON
    sa.Index(None, "cluster", "taken_at"),
)


def include_name(name: str | None, type_: str, parent_names) -> bool:
    """Alembic's filter: the product's tables only (the database may be shared, e.g. with Airflow's metadata tables)."""
    return type_ != "table" or bool(name) and name.startswith(PREFIX)
