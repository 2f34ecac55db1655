"""The Parquet tables of one analysed bundle (``<out>/parquet/<table>/``), their schemas in one place, and the
executor-side writer for the small ones (no Spark job per table: each Python task writes its own part file).

log_events is partitioned by ``source`` (``spark`` = written by the JVM scan's job, ``rg`` = by the native scan's
tasks, ``python`` = by the Python tasks); readers see one table.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pyarrow as pa

from . import uri as U

S, I, L, B, D = pa.string(), pa.int32(), pa.int64(), pa.bool_(), pa.float64()


def _schema(*cols) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=True) for n, t in cols])


SCHEMAS: dict[str, pa.Schema] = {
    "log_events": _schema(("path", S), ("broker_id", I), ("layout", S), ("line", L), ("ts", S), ("zone", S),
                          ("level", S), ("logger", S), ("signature", S), ("wording", S),
                          ("attrs", pa.map_(pa.string(), pa.string())), ("raw", S), ("exception", S),
                          ("exception_line", L)),
    "threads": _schema(("path", S), ("broker_id", I), ("dump", I), ("name", S), ("key", S), ("line", I), ("source", S),
                       ("state", S), ("state_detail", S), ("tid", S), ("nid", S), ("top_frame", S), ("frames", I),
                       ("awaited_address", S), ("awaited_class", S), ("awaited_kind", S), ("locks_held", I),
                       ("serves_requests", B)),
    "lock_edges": _schema(("path", S), ("broker_id", I), ("dump", I), ("waiter", S), ("holder", S), ("waiter_key", S),
                          ("holder_key", S), ("address", S), ("class", S), ("kind", S), ("waiter_line", I),
                          ("holder_line", I), ("source", S), ("in_cycle", B)),
    "connections": _schema(("path", S), ("broker_id", I), ("line", I), ("proto", S), ("state", S), ("recv_q", L),
                           ("send_q", L), ("local_host", S), ("local_port", I), ("peer_host", S), ("peer_port", I),
                           ("pid", I), ("program", S), ("captured", S)),
    "gc_pauses": _schema(("path", S), ("broker_id", I), ("line", I), ("at", S), ("uptime_s", D), ("seconds", D),
                         ("kind", S), ("cause", S)),
    "zk_stats": _schema(("path", S), ("broker_id", I), ("server", S), ("word", S), ("captured", S), ("mode", S),
                        ("version", S), ("zxid", L), ("connections", L), ("outstanding", L), ("packets_received", L),
                        ("packets_sent", L), ("latency_min", D), ("latency_avg", D), ("latency_max", D),
                        ("node_count", L), ("synced_followers", L), ("learners", L), ("peer_state", S), ("epoch", L)),
    "log_dirs": _schema(("path", S), ("broker_id", I), ("partition", S), ("topic", S), ("bytes", L), ("segments", I),
                        ("log_bytes", L), ("line", I)),
    "files": _schema(("path", S), ("kind", S), ("broker_id", I), ("bytes", L), ("read_by", S), ("layout", S),
                     ("parsed_share", D), ("problems", S), ("parse_s", D)),
}
TABLES = tuple(SCHEMAS)


def table_dir(out_uri: str, table: str, source: str = "python") -> str:
    d = U.join(U.join(out_uri, "parquet"), table)
    return U.join(d, f"source={source}") if table == "log_events" else d


def _conform(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = SCHEMAS[table]
    cols = {}
    for f in schema:
        vals = [r.get(f.name) for r in rows]
        if pa.types.is_map(f.type):
            vals = [list((v or {}).items()) for v in vals]
        cols[f.name] = vals
    return pa.Table.from_pydict(cols, schema=schema)


def write_part(out_uri: str, table: str, rows: list[dict[str, Any]], key: str) -> str | None:
    """Write one part file of a table from an executor (None when there are no rows)."""
    if not rows:
        return None
    import pyarrow.parquet as pq

    name = f"part-{hashlib.sha256(key.encode()).hexdigest()[:20]}.parquet"
    d = table_dir(out_uri, table)
    t = _conform(table, rows)
    if U.is_local(d):
        import os

        os.makedirs(U.local_path(d), exist_ok=True)
        pq.write_table(t, os.path.join(U.local_path(d), name))
    else:
        fs, path = U._arrow_fs(d)
        fs.create_dir(path, recursive=True)
        pq.write_table(t, f"{path}/{name}", filesystem=fs)
    return name


def ensure_tables(out_uri: str) -> None:
    """Every table readable even when nothing produced rows: an empty part file with the schema."""
    import pyarrow.parquet as pq

    for table, schema in SCHEMAS.items():
        d = table_dir(out_uri, table)
        if U.is_local(d):
            import os

            p = U.local_path(d)
            os.makedirs(p, exist_ok=True)
            if not any(n.endswith(".parquet") for n in os.listdir(p)):
                pq.write_table(schema.empty_table(), os.path.join(p, "part-empty.parquet"))
        else:
            fs, path = U._arrow_fs(d)
            fs.create_dir(path, recursive=True)
            import pyarrow.fs as pafs

            infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
            if not any(i.path.endswith(".parquet") for i in infos):
                pq.write_table(schema.empty_table(), f"{path}/part-empty.parquet", filesystem=fs)


def clear(out_uri: str) -> None:
    """Remove a previous run's tables (re-analysing a bundle replaces them)."""
    d = U.join(out_uri, "parquet")
    if U.is_local(d):
        import shutil

        shutil.rmtree(U.local_path(d), ignore_errors=True)
    else:
        fs, path = U._arrow_fs(d)
        try:
            fs.delete_dir(path)
        except (FileNotFoundError, OSError):
            pass


def spark_schema(table: str):
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(SCHEMAS[table])
