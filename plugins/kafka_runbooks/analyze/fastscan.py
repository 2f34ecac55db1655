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


def gate_key_column(layout: str, v: Column) -> Column:
    key = v
    for delim, count in GATE_STEPS[layout]:
        key = F.substring_index(key, delim, count)
    return key


def _kept_lines(spark: SparkSession, f: ScanFile) -> DataFrame:
    """The gated lines of one file with their line numbers and what they are (sig / exc / marker / level)."""
    layout = BY_NAME[f.layout]
    df = spark.read.text(f.uri)
    v = F.col("value")
    numbered = df.select(
        v.alias("value"),
        F.expr("input_file_block_start()").alias("block_start"),
        F.monotonically_increasing_id().alias("mono"),
    )
    first = F.substring(v, 1, 1)
    header_like = first.isin(*list(layout.first_chars))
    key = gate_key_column(f.layout, v)
    is_cand = header_like & key.isin(*sorted(gate_keys(f.layout, S.ALL_LOGGERS)))
    is_exc = (~first.isin(" ", "\t", "") & ~header_like
              & (v.contains("Exception") | v.contains("Error") | v.contains("Throwable"))
              & v.rlike(EXC_JAVA))
    markers = [lit for _, lit, _ in S.FRAME_MARKERS]
    is_marker = first.isin(" ", "\t")
    mk = F.lit(False)
    for lit in markers:
        mk = mk | v.contains(lit)
    is_marker = is_marker & mk
    if f.layout in LEVEL_POS:
        is_level = header_like & F.substring(v, LEVEL_POS[f.layout], 5).isin("ERROR", "FATAL")
    else:
        is_level = F.lit(False)
    kept = numbered.where(is_cand | is_exc | is_marker | is_level)
    split_map = F.create_map(*[x for k, l in sorted(f.first_line_of_split.items()) for x in (F.lit(k), F.lit(l))]) \
        if f.first_line_of_split else None
    first_line = F.coalesce(F.element_at(split_map, F.col("block_start")), F.lit(1)) if split_map is not None else F.lit(1)
    line = first_line + F.col("mono").bitwiseAND(F.lit(MASK33))
    vv = F.col("value")
    fv = F.substring(vv, 1, 1)
    hl = fv.isin(*list(layout.first_chars))
    kind = (F.when(hl, F.lit("rec"))
            .when(fv.isin(" ", "\t"), F.lit("marker"))
            .otherwise(F.lit("exc")))
    return kept.select(
        F.lit(f.path).alias("path"), F.lit(f.broker_id).cast("int").alias("broker_id"), F.lit(f.layout).alias("layout"),
        line.cast("long").alias("line"), kind.alias("kind"), F.substring(vv, 1, RAW_MAX).alias("value"),
        (F.regexp_replace(gate_key_column(f.layout, vv), r"\)$", "") if f.layout == "kafka"
         else gate_key_column(f.layout, vv)).alias("key"),
    )


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


def events_frame(spark: SparkSession, files: list[ScanFile]) -> DataFrame | None:
    """The log_events rows (EVENT_SCHEMA) of every file, computed on the executors.

    One JVM scan per file gates every line with column expressions (logger key, first character, contains);
    the gated rows, a few per cent of the lines, are put in line order per file with one window that brings
    each record the two lines under it, and are classified in Arrow batches by the pure classifier."""
    if not files:
        return None
    lines = None
    for f in files:
        k = _kept_lines(spark, f)
        lines = k if lines is None else lines.unionByName(k)
    w = Window.partitionBy("path").orderBy("line")
    nxt1 = F.lead(F.struct("line", "kind", "value"), 1).over(w)
    nxt2 = F.lead(F.struct("line", "kind", "value"), 2).over(w)
    j = lines.select("*", nxt1.alias("n1"), nxt2.alias("n2")).where(F.col("kind") == "rec")
    exc_ok = (F.col("n1.line") == F.col("line") + 1) & (F.col("n1.kind") == "exc")
    j = j.select("path", "broker_id", "layout", "line", "value", "key",
                 F.when(exc_ok, F.col("n1.value")).alias("exc_value"),
                 F.when(exc_ok & (F.col("n2.line") == F.col("line") + 2) & (F.col("n2.kind") == "marker"),
                        F.col("n2.value")).alias("marker"))
    return j.where(_possible(F.col("key"), F.col("value"), F.col("exc_value"), F.col("layout"))).mapInArrow(
        classify_batches, EVENT_SCHEMA)


def _possible(key: Column, v: Column, exc: Column, layout: Column) -> Column:
    """A cheap JVM prefilter before the Arrow hand-off: some signature of this logger has its first literal in the
    text, or the record is an ERROR/FATAL one kept for the timeline (no false negatives: the classifier needs both)."""
    by_logger: dict[str, list[S.Signature]] = {}
    for sig in S.SIGNATURES:
        for lg in sig.loggers:
            by_logger.setdefault(lg, []).append(sig)
    cond = F.lit(False)
    for lg, sigs in sorted(by_logger.items()):
        lits = F.lit(False)
        for sig in sigs:
            lits = lits | (v if sig.on == "message" else exc).contains(sig.literals[0])
        cond = cond | ((key == lg) & lits)
    for lay, pos in LEVEL_POS.items():
        cond = cond | ((layout == lay) & F.substring(v, pos, 5).isin("ERROR", "FATAL"))
    return cond
