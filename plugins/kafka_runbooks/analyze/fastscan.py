"""The Spark side of log analysis. Big log files are read by Spark's text source, split into partitions, and
every line goes through JVM column expressions only (no Python function per line):

1. gate: the logger's simple class name read with ``substring_index`` (layouts.GATE_STEPS) must be one the
   signature table knows, or the line is an exception line, or a marker frame, or an ERROR/FATAL record;
2. number: ``monotonically_increasing_id`` within a split + the survey's line count at the split start;
3. assemble: one window per file (lead 1 and 2) brings each gated record the two lines under it.

Only the gated rows (a few per cent of the lines) leave the JVM: in Arrow batches (``mapInArrow``) they go
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
from .parsers.layouts import BY_NAME, GATE_STEPS, gate_keys

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


def _kept_lines(spark: SparkSession, f: ScanFile, split_bytes: int | None = None) -> DataFrame:
    """The gated lines of one file with their line numbers and what they are (rec / exc / marker).

    Built as SQL text (one expression per column, not hundreds of py4j calls)."""
    layout = BY_NAME[f.layout]
    first = "substring(value, 1, 1)"
    header_like = _in(first, list(layout.first_chars))
    is_cand = f"({header_like} AND {_in(gate_key_sql(f.layout), sorted(gate_keys(f.layout, S.ALL_LOGGERS)))})"
    is_exc = (f"(NOT {_in(first, [' ', chr(9), ''])} AND NOT {header_like} AND "
              f"(instr(value, 'Exception') > 0 OR instr(value, 'Error') > 0 OR instr(value, 'Throwable') > 0) AND "
              f"value RLIKE {sql_str(EXC_JAVA)})")
    markers = " OR ".join(f"instr(value, {sql_str(lit)}) > 0" for _, lit, _ in S.FRAME_MARKERS) or "false"
    is_marker = f"({_in(first, [' ', chr(9)])} AND ({markers}))"
    is_level = (f"({header_like} AND {_in(f'substring(value, {LEVEL_POS[f.layout]}, 5)', ['ERROR', 'FATAL'])})"
                if f.layout in LEVEL_POS else "false")
    numbered = spark.read.text(f.uri).selectExpr(
        "value", "input_file_block_start() AS block_start", "monotonically_increasing_id() AS mono")
    kept = numbered.where(f"{is_cand} OR {is_exc} OR {is_marker} OR {is_level}")
    if f.first_line_of_split:
        pairs = ", ".join(f"{k}L, {l}L" for k, l in sorted(f.first_line_of_split.items()))
        first_line = f"coalesce(element_at(map({pairs}), block_start), 1L)"
    else:
        first_line = "1L"
    key = gate_key_sql(f.layout)
    if f.layout == "kafka":
        key = f"regexp_replace({key}, '\\\\)$', '')"
    rows = kept.selectExpr(
        f"{sql_str(f.path)} AS path", f"CAST({'NULL' if f.broker_id is None else int(f.broker_id)} AS INT) AS broker_id",
        f"{sql_str(f.layout)} AS layout", "block_start AS block", f"mono & {MASK33}L AS row_in_split",
        f"CAST({first_line} + (mono & {MASK33}L) AS BIGINT) AS line",
        f"CASE WHEN {header_like} THEN 'rec' WHEN {_in(first, [' ', chr(9)])} THEN 'marker' ELSE 'exc' END AS kind",
        f"substring(value, 1, {RAW_MAX}) AS value", f"{key} AS key", "false AS dup")
    # records no signature can match leave here, before the shuffle (exception lines and frames stay)
    rows = rows.where(f"kind <> 'rec' OR {_possible_sql(exception_known=False)}")
    if split_bytes:
        # the first two lines of a split also go to the split before (for the record on its last lines)
        head = rows.where(f"row_in_split < 2 AND block > 0").selectExpr(
            "path", "broker_id", "layout", f"block - {int(split_bytes)}L AS block", "row_in_split", "line", "kind",
            "value", "key", "true AS dup")
        rows = rows.unionByName(head)
    else:
        rows = rows.selectExpr("path", "broker_id", "layout", "0L AS block", "row_in_split", "line", "kind", "value",
                               "key", "dup")
    return rows.drop("row_in_split")


def classify_batches(batches):
    """mapInArrow body: gated records (with the line under them and the one after) -> log_events rows, by the
    one pure classifier (parsers/logs.classify), so the JVM-scanned and the pure path agree by construction."""
    import pyarrow as pa

    from .logsummary import event_row
    from .parsers.layouts import BY_NAME, level_kept
    from .parsers.logs import LogRecord, classify

    for batch in batches:
        d = batch.to_pydict()
        out = {c: [] for c in EVENT_COLUMNS}
        for i in range(batch.num_rows):
            raw, layout = d["value"][i], d["layout"][i]
            reader = BY_NAME.get(layout)
            h = reader.header(raw) if reader else None
            if h is None:
                continue
            r = LogRecord(line=int(d["line"][i]), end_line=int(d["line"][i]), ts=h.ts, level=h.level, logger=h.logger,
                          thread=h.thread, message=h.message, zone=h.zone, myid=h.myid, raw=raw)
            nxt, frame = d["exc_value"][i], d["marker"][i]
            classify(r, nxt, frame)
            if nxt is not None and r.exception is None:
                from .parsers.logs import is_exception_line
                if is_exception_line(nxt):
                    r.exception, r.exception_line = nxt.strip()[:2000], int(d["line"][i]) + 1
            if not r.signature and not level_kept(layout, raw):
                continue
            row = event_row(r, layout, d["path"][i], d["broker_id"][i])
            for c in EVENT_COLUMNS:
                out[c].append(row[c])
        out["attrs"] = [list(a.items()) for a in out["attrs"]]
        yield pa.RecordBatch.from_pydict(out, schema=SCHEMAS["log_events"])


def events_frame(spark: SparkSession, files: list[ScanFile], split_bytes: int | None = None) -> DataFrame | None:
    """The log_events rows (EVENT_SCHEMA) of every file, computed on the executors.

    One JVM scan per file gates every line with column expressions (logger key, first character, contains) and
    drops the records no signature can match (first literal absent, not ERROR/FATAL); the rows left, well under
    one per cent of the lines, are put in line order per (file, split) with one window that brings each record
    the two lines under it, and are classified in Arrow batches by the pure classifier. The first two lines of
    a split are also handed to the split before it (flagged ``dup``, never classified there), so a record on
    the last line of a split still sees its exception line; windows per split keep every core busy."""
    if not files:
        return None
    lines = None
    for f in files:
        k = _kept_lines(spark, f, split_bytes)
        lines = k if lines is None else lines.unionByName(k)
    w = Window.partitionBy("path", "block").orderBy("line")
    nxt1 = F.lead(F.struct("line", "kind", "value"), 1).over(w)
    nxt2 = F.lead(F.struct("line", "kind", "value"), 2).over(w)
    j = lines.select("*", nxt1.alias("n1"), nxt2.alias("n2")).where((F.col("kind") == "rec") & ~F.col("dup"))
    exc_ok = (F.col("n1.line") == F.col("line") + 1) & (F.col("n1.kind") == "exc")
    j = j.select("path", "broker_id", "layout", "line", "value", "key",
                 F.when(exc_ok, F.col("n1.value")).alias("exc_value"),
                 F.when(exc_ok & (F.col("n2.line") == F.col("line") + 2) & (F.col("n2.kind") == "marker"),
                        F.col("n2.value")).alias("marker"))
    return j.where(_possible_sql()).mapInArrow(classify_batches, EVENT_SCHEMA)


_TEXT_COL = {"message": "value", "exception": "coalesce(exc_value, '')"}


def _possible_sql(exception_known: bool = True) -> str:
    """A cheap JVM prefilter before the Arrow hand-off: some signature of this logger has its first literal in the
    text, or the record is an ERROR/FATAL one kept for the timeline (no false negatives: the classifier needs both).
    Before the window (``exception_known=False``) the exception line is not there yet: a logger with an
    ``on="exception"`` signature keeps its records."""
    by_logger: dict[str, list[S.Signature]] = {}
    for sig in S.SIGNATURES:
        for lg in sig.loggers:
            by_logger.setdefault(lg, []).append(sig)
    whens = []
    for lg, sigs in sorted(by_logger.items()):
        if not exception_known and any(sig.on == "exception" for sig in sigs):
            whens.append(f"WHEN {sql_str(lg)} THEN true")
            continue
        lits = " OR ".join(f"instr({_TEXT_COL[sig.on]}, {sql_str(sig.literals[0])}) > 0" for sig in sigs)
        whens.append(f"WHEN {sql_str(lg)} THEN ({lits})")
    cond = f"(CASE key {' '.join(whens)} ELSE false END)"
    for lay, pos in LEVEL_POS.items():
        cond += f" OR (layout = {sql_str(lay)} AND substring(value, {pos}, 5) IN ('ERROR', 'FATAL'))"
    return cond
