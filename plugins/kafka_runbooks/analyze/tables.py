"""The Parquet tables of one analysed bundle (``<out>/parquet/<table>/``), their schemas in one place, and the
executor-side writer for the small ones (no Spark job per table: each Python task writes its own part file).

log_events is partitioned by ``source`` (``spark`` = written by the JVM scan's job, ``rg`` = by the native scan's
tasks, ``python`` = by the Python tasks); readers see one table.
"""

from __future__ import annotations

import hashlib
import operator
from itertools import chain, compress, repeat
from typing import Any

import numpy as np
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
                       ("serves_requests", B), ("virtual", B), ("carrying", L), ("carrier", S)),
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


# Arrow columns are built from their buffers, not with pa.array(): that call (and pa.scalar) imports pandas on
# first use to ask whether its argument is a pandas object, ~0.25 s in every fresh Python worker.
_NUMPY = {I: "int32", L: "int64", D: "float64"}
_TYPES = {I: {int}, L: {int}, D: {float, int}, B: {bool}, S: {str}}


def _checked(vals: list, typ: pa.DataType, name: str) -> int:
    """-> the number of nulls; a value of another type is an error (as pa.array would raise), not a conversion."""
    kinds = set(map(type, vals))
    nulls = vals.count(None) if type(None) in kinds else 0
    kinds.discard(type(None))
    if not kinds <= _TYPES[typ]:
        raise TypeError(f"column {name} ({typ}): values of type {sorted(k.__name__ for k in kinds - _TYPES[typ])}")
    if typ == D and int in kinds and any(abs(v) > 1 << 53 for v in vals if type(v) is int):
        raise ValueError(f"column {name} ({typ}): an integer a double cannot hold exactly")
    return nulls


def _valid(vals: list, nulls: int) -> tuple[bytes, Any]:
    """-> (a byte per value, 1 where not null; the validity bitmap), or (b"", None) without nulls."""
    if not nulls:
        return b"", None
    flags = bytes(map(operator.is_not, vals, repeat(None)))
    return flags, pa.py_buffer(np.packbits(np.frombuffer(flags, np.bool_), bitorder="little"))


def _offsets(lengths) -> pa.Buffer:
    offsets = np.zeros(len(lengths) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.py_buffer(offsets)


def _strings(vals: list, nulls: int, name: str) -> pa.Array:
    flags, validity = _valid(vals, nulls)
    present = list(compress(vals, flags)) if nulls else vals
    try:
        text = "".join(present)
    except TypeError as exc:
        raise TypeError(f"column {name} ({S}): {exc}") from None
    data = text.encode("utf-8")
    if len(data) >= 1 << 31:
        raise ValueError(f"column {name}: {len(data)} bytes of text, over a string column's 2 GiB")
    lengths = list(map(len, present)) if len(data) == len(text) else [len(v.encode("utf-8")) for v in present]
    if nulls:
        full = np.zeros(len(vals), np.int64)
        full[np.frombuffer(flags, np.bool_)] = lengths
        lengths = full
    return pa.StringArray.from_buffers(len(vals), _offsets(lengths), pa.py_buffer(data), validity, nulls)


def _column(vals: list, typ: pa.DataType, name: str) -> pa.Array:
    if pa.types.is_map(typ):  # None is an empty map
        maps = [v or {} for v in vals] if None in vals else vals
        return pa.MapArray.from_arrays(pa.Array.from_buffers(pa.int32(), len(maps) + 1, [None, _offsets(list(map(len, maps)))]),
                                       _column(list(chain.from_iterable(maps)), typ.key_type, f"{name}.key"),
                                       _column(list(chain.from_iterable(map(dict.values, maps))), typ.item_type, f"{name}.value"))
    if typ == S:  # "".join checks the values are text
        nulls = vals.count(None)
        return pa.nulls(len(vals), typ) if nulls == len(vals) else _strings(vals, nulls, name)
    nulls = _checked(vals, typ, name)
    if nulls == len(vals):
        return pa.nulls(len(vals), typ)
    _, validity = _valid(vals, nulls)
    filled = [(False if typ == B else 0) if v is None else v for v in vals] if nulls else vals
    if typ == B:
        data = np.packbits(np.array(filled, np.bool_), bitorder="little")
    else:
        try:
            data = np.array(filled, _NUMPY[typ])
        except OverflowError as exc:  # a Python int out of the type's range
            raise OverflowError(f"column {name} ({typ}): {exc}") from None
    return pa.Array.from_buffers(typ, len(vals), [validity, pa.py_buffer(data)], nulls)


def arrow_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """Rows (dicts; a missing key is null) -> an Arrow table of ``schema``, without importing pandas."""
    return pa.Table.from_arrays([_column(list(map(dict.get, rows, repeat(f.name))), f.type, f.name) for f in schema],
                                schema=schema)


def write_part(out_uri: str, table: str, rows: list[dict[str, Any]], key: str) -> str | None:
    """Write one part file of a table from an executor (None when there are no rows)."""
    if not rows:
        return None
    import pyarrow.parquet as pq

    name = f"part-{hashlib.sha256(key.encode()).hexdigest()[:20]}.parquet"
    d = table_dir(out_uri, table)
    t = arrow_table(rows, SCHEMAS[table])
    if U.is_local(d):
        import os

        os.makedirs(U.local_path(d), mode=U.DIR_MODE, exist_ok=True)
        U.private_file(os.path.join(U.local_path(d), name))
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
            os.makedirs(p, mode=U.DIR_MODE, exist_ok=True)
            if not any(n.endswith(".parquet") for n in os.listdir(p)):
                U.private_file(os.path.join(p, "part-empty.parquet"))
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
