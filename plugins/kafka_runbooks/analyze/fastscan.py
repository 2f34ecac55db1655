"""The Spark side of log analysis. Big log files are read by Spark's text source, split into partitions, and
every line goes through JVM column expressions only (no Python function per line):

1. gate: the logger's simple class name read with ``substring_index`` (layouts.GATE_STEPS) must be one the
   signature table knows, or the line is an exception line, or a marker frame, or an ERROR/FATAL record;
2. number: ``monotonically_increasing_id`` within a split + the survey's line count at the split start;
3. prefilter: records whose logger has no signature with its first literal in the message leave before the
   shuffle (a logger with a signature read on the exception line keeps its records);
4. assemble: one window per (file, split) (lead 1 and 2) brings each record the two kept lines after it.

All files of one layout are read by ONE scan (expressions planned and compiled once, whatever the number of
brokers).

Only the rows left (about one per cent of the lines) leave the JVM: in Arrow batches (``mapInArrow``) they go
through the one pure classifier (parsers/logs.classify), so this path and the pure path agree by
construction. The resulting log_events rows are written to Parquet by the executors; the driver only ever
sees aggregates and a bounded sample.

Only imported inside a Spark job (it imports pyspark at module level).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from . import signatures as S
from .tables import SCHEMAS, spark_schema
from .parsers.layouts import BY_NAME, GATE_STEPS, GATE_SUFFIX, gate_keys

MASK33 = (1 << 33) - 1
RAW_MAX = 2000
from .parsers.layouts import LEVEL_POS  # noqa: E402  (where kafka/strimzi print the level: ERROR/FATAL kept)
EXC_JAVA = r"^(?:Caused by: )?[A-Za-z_$][A-Za-z0-9_$.]{0,300}(?:Exception|Error|Throwable)(?::|$|\s)"

EVENT_SCHEMA = spark_schema("log_events")
EVENT_COLUMNS = [f.name for f in EVENT_SCHEMA.fields]


@dataclass(frozen=True)
class ScanFile:
    path: str  # bundle-relative
    uri: str
    broker_id: int | None
    layout: str
    first_line_of_split: dict[int, int]


def configure(spark: SparkSession, split_bytes: int) -> None:
    """One split per partition, splits at multiples of split_bytes (the survey counted lines up to those);
    the few shuffles of the job move small data: as many partitions as cores."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split_bytes))
    spark.conf.set("spark.sql.files.openCostInBytes", str(split_bytes))
    spark.conf.set("spark.sql.shuffle.partitions", str(max(2, spark.sparkContext.defaultParallelism)))
    # the per-line stage (gate + prefilter) generates a processNext over the JVM's 8000-byte JIT limit: above it
    # the JVM interprets it for every line (several times slower). Above 8000 bytes Spark compiles each operator
    # on its own instead (smaller methods, JIT-compiled).
    spark.conf.set("spark.sql.codegen.hugeMethodLimit", "8000")


def sql_str(v: str) -> str:
    """A Spark SQL string literal."""
    return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"


def gate_key_sql(layout: str, col: str = "value") -> str:
    key = col
    for delim, count in GATE_STEPS[layout]:
        key = f"substring_index({key}, {sql_str(delim)}, {count})"
    return key


def gate_key_column(layout: str, v: Column | None = None) -> Column:
    return F.expr(gate_key_sql(layout))


def _in(expr: str, values) -> str:
    return f"{expr} IN ({', '.join(sql_str(x) for x in values)})"


def _gate_sql(layout_name: str) -> tuple[str, str]:
    """(the gate: which lines of a file in this layout are kept, the kind of a kept line: rec / exc / marker).

    Written over the column ``k``: the logger key of a header line (NULL on other lines), computed once per line
    in the projection under the gate (see _kept_lines)."""
    layout = BY_NAME[layout_name]
    first = "substring(value, 1, 1)"
    header_like = "k IS NOT NULL"
    is_cand = f"({_in('k', sorted(gate_keys(layout_name, S.ALL_LOGGERS)))})"
    is_exc = (f"(k IS NULL AND NOT {_in(first, [' ', chr(9), ''])} AND "
              f"(instr(value, 'Exception') > 0 OR instr(value, 'Error') > 0 OR instr(value, 'Throwable') > 0) AND "
              f"value RLIKE {sql_str(EXC_JAVA)})")
    markers = " OR ".join(f"instr(value, {sql_str(lit)}) > 0" for _, lit, _ in S.FRAME_MARKERS) or "false"
    is_marker = f"({_in(first, [' ', chr(9)])} AND ({markers}))"
    is_level = (f"({header_like} AND {_in(f'substring(value, {LEVEL_POS[layout_name]}, 5)', ['ERROR', 'FATAL'])})"
                if layout_name in LEVEL_POS else "false")
    kind = f"CASE WHEN {header_like} THEN 'rec' WHEN {_in(first, [' ', chr(9)])} THEN 'marker' ELSE 'exc' END"
    return f"{is_cand} OR {is_exc} OR {is_marker} OR {is_level}", kind


def _key_sql(layout_name: str) -> str:
    """``k``: the logger key of a line that may be a record header (its first character is one a header starts
    with), NULL on any other line."""
    layout = BY_NAME[layout_name]
    return f"CASE WHEN {_in('substring(value, 1, 1)', list(layout.first_chars))} THEN {gate_key_sql(layout_name)} END"


def _kept_lines(spark: SparkSession, layout: str, uris: list[str], split_bytes: int | None) -> DataFrame:
    """The kept lines of every file in one layout, in ONE scan (the expressions are planned and compiled once
    whatever the number of files): file (as Spark names it), block (split start), row (within the split), kind,
    value; records no signature can match already dropped. With ``split_bytes`` the first two lines of a split
    are also handed to the split before (``dup``) so a record on the last line of a split sees the lines under it.

    Built as SQL text (one expression per column, not hundreds of py4j calls). Every expression has generated
    code (no higher-order function: one of those would turn whole-stage code generation off for the per-line
    filter), and the logger key is computed once per line, in the projection that numbers the rows (its
    nondeterministic row id keeps the optimizer from inlining the key into each use)."""
    gate, kind = _gate_sql(layout)
    possible = _possible_sql(layout, "k")
    rows = (spark.read.text(uris)
            .selectExpr("value", "input_file_name() AS file", "input_file_block_start() AS block",
                        f"monotonically_increasing_id() & {MASK33}L AS row", f"{_key_sql(layout)} AS k")
            .where(gate)
            .where(f"k IS NULL OR {possible}")
            .selectExpr("file", "block", "row", f"{kind} AS kind", f"substring(value, 1, {RAW_MAX}) AS value"))
    if split_bytes:
        return rows.selectExpr(
            "file", "row", "kind", "value", "block AS own",
            f"explode(CASE WHEN row < 2 AND block > 0 THEN array(block, block - {int(split_bytes)}L) "
            "ELSE array(block) END) AS block").selectExpr("file", "block", "row", "kind", "value", "block <> own AS dup")
    return rows.selectExpr("file", "0L AS block", "row", "kind", "value", "false AS dup")


def spark_file_key(name: str) -> str:
    """A file as ``input_file_name()`` names it (URL-encoded URI) or as the bundle names it (plain URI) -> one key:
    the scheme-less, decoded path."""
    from urllib.parse import unquote, urlsplit

    p = urlsplit(name)
    return (p.netloc + "/" + unquote(p.path).lstrip("/")) if p.scheme else unquote(name).lstrip("/")


def _our_key(u: str) -> str:
    from urllib.parse import urlsplit

    p = urlsplit(u)
    return (p.netloc + "/" + p.path.lstrip("/")) if p.scheme else u.lstrip("/")


def make_classifier(files: list[ScanFile], split_bytes: int | None):
    """The mapInArrow body for one layout's files: records (with the two kept lines after each in the same
    window) -> log_events rows, by the one pure classifier (parsers/logs.classify), so the JVM-scanned and the
    pure path agree by construction. Line numbers are the survey's line at the split start + the row."""
    meta = {_our_key(f.uri): (f.path, f.broker_id, f.layout, {int(k): int(v) for k, v in f.first_line_of_split.items()})
            for f in files}
    split = int(split_bytes or 0)

    def classify_batches(batches):
        import pyarrow as pa

        from .nativescan import record_event

        cache: dict[str, tuple] = {}

        def lookup(name: str):
            m = cache.get(name)
            if m is None:
                k = spark_file_key(name)
                m = meta.get(k)
                if m is None:  # an encoding we did not foresee: the longest matching path suffix
                    best = max(meta, key=lambda ours: len(_common_suffix(ours, k)))
                    m = meta[best]
                cache[name] = m
            return m

        for batch in batches:
            d = batch.to_pydict()
            out = {c: [] for c in EVENT_COLUMNS}
            for i in range(batch.num_rows):
                path, broker_id, layout, firsts = lookup(d["file"][i])
                block = int(d["block"][i])
                line = firsts.get(block, 1) + int(d["row"][i])
                nxt = frame = None
                n1, n2 = d["n1"][i], d["n2"][i]

                def line_of(n):
                    b = block + split if n["dup"] else block
                    return firsts.get(b, 1) + int(n["row"])
                if n1 is not None and n1["kind"] == "exc" and line_of(n1) == line + 1:
                    nxt = n1["value"]
                    if n2 is not None and n2["kind"] == "marker" and line_of(n2) == line + 2:
                        frame = n2["value"]
                row = record_event(layout, path, broker_id, line, d["value"][i], nxt, frame)
                if row is None:
                    continue
                for c in EVENT_COLUMNS:
                    out[c].append(row[c])
            out["attrs"] = [list(a.items()) for a in out["attrs"]]
            yield pa.RecordBatch.from_pydict(out, schema=SCHEMAS["log_events"])

    return classify_batches


def _common_suffix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return a[len(a) - n:]


def events_frame(spark: SparkSession, files: list[ScanFile], split_bytes: int | None = None) -> DataFrame | None:
    """The log_events rows (EVENT_SCHEMA) of every file, computed on the executors.

    One JVM scan per layout gates every line with column expressions (logger key, first character, contains) and
    drops the records no signature can match (first literal absent, not ERROR/FATAL); the rows left, about one
    per cent of the lines, are put in order per (file, split) with one window that brings each record the two
    kept lines after it, and are classified in Arrow batches by the pure classifier. Windows per split keep
    every core busy; the first two lines of a split are handed back to the split before (see _kept_lines)."""
    if not files:
        return None
    out = None
    by_layout: dict[str, list[ScanFile]] = {}
    for f in files:
        by_layout.setdefault(f.layout, []).append(f)
    for layout, group in sorted(by_layout.items()):
        lines = _kept_lines(spark, layout, [f.uri for f in group], split_bytes)
        w = Window.partitionBy("file", "block").orderBy("dup", "row")
        nxt = F.struct("dup", "row", "kind", "value")
        j = (lines.select("*", F.lead(nxt, 1).over(w).alias("n1"), F.lead(nxt, 2).over(w).alias("n2"))
             .where((F.col("kind") == "rec") & ~F.col("dup"))
             .select("file", "block", "row", "value", "n1", "n2")
             .mapInArrow(make_classifier(group, split_bytes), EVENT_SCHEMA))
        out = j if out is None else out.unionByName(j)
    return out


def warm_up(spark: SparkSession, uris: list[str], split_bytes: int | None, layout: str = "kafka") -> None:
    """Plan (never run) the scan of ``uris`` in the common layout while the survey's Python tasks run: a fresh
    JVM then loads and JIT-compiles the SQL parser, analyzer, optimizer and planner beside the survey instead of
    after it. Nothing is read; any error is left to the real scan."""
    try:
        df = events_frame(spark, [ScanFile(u, u, None, layout, {}) for u in uris], split_bytes)
        if df is not None:
            df._jdf.queryExecution().executedPlan()  # optimizer and physical planning too (still nothing runs)
    except Exception:  # noqa: BLE001 - a warm-up only
        pass


def _possible_sql(layout: str, key_sql: str) -> str:
    """A cheap JVM prefilter before the shuffle: some signature of this logger has its first literal in the
    message, or the logger has a signature read on the exception line under the record (not known yet), or the
    record is an ERROR/FATAL one kept for the timeline (no false negatives: the classifier needs all of these).
    ``key_sql`` is the layout's gate key (e.g. 'ReplicaFetcherThread)' in the Kafka layout), a column.

    Literal maps only (logger -> its i-th literal, one map per i), so every part has generated code: a higher-order
    function (``exists``) here would be interpreted and would turn whole-stage code generation off for the
    per-line filter this is combined into."""
    from .nativescan import prefilter_table

    always, lists = prefilter_table(layout)
    parts = [_in(key_sql, always)] if always else []
    for i in range(max((len(v) for v in lists.values()), default=0)):
        pairs = ", ".join(f"{sql_str(lg)}, {sql_str(lits[i])}" for lg, lits in sorted(lists.items()) if len(lits) > i)
        parts.append(f"coalesce(instr(value, element_at(map({pairs}), {key_sql})) > 0, false)")
    cond = " OR ".join(parts) or "false"
    if layout in LEVEL_POS:
        cond += f" OR substring(value, {LEVEL_POS[layout]}, 5) IN ('ERROR', 'FATAL')"
    return f"({cond})"
