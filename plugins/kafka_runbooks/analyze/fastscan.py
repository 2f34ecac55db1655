"""The Spark side of log analysis: big log files are read by Spark's text source, split into partitions,
and every line goes through JVM column expressions only (no Python function per line):

1. gate: the logger's simple class name read with ``substring_index`` (layouts.GATE_STEPS) must be one the
   signature table knows, or the line is an exception line under a record, or a marker frame;
2. classify (on the few gated rows): literals with ``contains``, then the signature's Java regex;
3. number: ``monotonically_increasing_id`` within a split + the survey's line count at the split start;
4. assemble: a signature row joined to its exception line (line + 1) and marker frame (line + 2);
5. attributes: ``regexp_extract`` per signature and per exception-line rule (signatures.EXCEPTION_ATTRS).

The rows that survive (signature events, and ERROR/FATAL records in the kafka/strimzi layouts) are written to
Parquet by the executors; the driver only ever sees aggregates and a bounded sample.

Only imported inside a Spark job (it imports pyspark at module level).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from . import signatures as S
from .parsers.layouts import BY_NAME, GATE_STEPS, gate_keys

MASK33 = (1 << 33) - 1
RAW_MAX = 2000
# layouts whose ERROR/FATAL records without a signature are kept too, and where their level is printed (1-based)
from .parsers.layouts import LEVEL_POS  # noqa: E402
LEVEL_LAYOUTS = tuple(LEVEL_POS)
EXC_JAVA = r"^(?:Caused by: )?[A-Za-z_$][A-Za-z0-9_$.]{0,300}(?:Exception|Error|Throwable)(?::|$|\s)"
LEVEL_JAVA = r"\b(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|SEVERE)\b"
TS_JAVA = (r"^\[?([0-9]{4}-[0-9]{2}-[0-9]{2})[ T]([0-9]{2}:[0-9]{2}:[0-9]{2})(?:[,.]([0-9]{1,9}))?"
           r"(Z|[+-][0-9]{2}:?[0-9]{2})?")
TS_YY_JAVA = r"^([0-9]{2})/([0-9]{2})/([0-9]{2}) ([0-9]{2}:[0-9]{2}:[0-9]{2})"

EVENT_SCHEMA = T.StructType([
    T.StructField("path", T.StringType()), T.StructField("broker_id", T.IntegerType()),
    T.StructField("layout", T.StringType()), T.StructField("line", T.LongType()),
    T.StructField("ts", T.StringType()), T.StructField("zone", T.StringType()),
    T.StructField("level", T.StringType()), T.StructField("logger", T.StringType()),
    T.StructField("signature", T.StringType()), T.StructField("wording", T.StringType()),
    T.StructField("attrs", T.MapType(T.StringType(), T.StringType())),
    T.StructField("raw", T.StringType()), T.StructField("exception", T.StringType()),
    T.StructField("exception_line", T.LongType()),
])
EVENT_COLUMNS = [f.name for f in EVENT_SCHEMA.fields]


@dataclass(frozen=True)
class ScanFile:
    path: str  # bundle-relative
    uri: str
    broker_id: int | None
    layout: str
    first_line_of_split: dict[int, int]


def configure(spark: SparkSession, split_bytes: int) -> None:
    """One split per partition, splits at multiples of split_bytes (the survey counted lines up to those)."""
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split_bytes))
    spark.conf.set("spark.sql.files.openCostInBytes", str(split_bytes))


def gate_key_column(layout: str, v: Column) -> Column:
    key = v
    for delim, count in GATE_STEPS[layout]:
        key = F.substring_index(key, delim, count)
    return key


def _sig_literals(sig: S.Signature, v: Column) -> Column:
    cond = F.lit(True)
    for lit in sig.literals:
        cond = cond & v.contains(lit)
    return cond


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
        gate_key_column(f.layout, vv).alias("key"),
    )


def _classify_column(layout: str, v: Column, key: Column, exc: Column) -> Column:
    """The index (into SIGNATURES) of the first row matching: logger key, literals, pattern."""
    suffix = ")" if layout == "kafka" else ""
    expr = None
    for i, sig in enumerate(S.SIGNATURES):
        jpat, _ = S.java_pattern(sig.pattern)
        text = v if sig.on == "message" else exc
        cond = key.isin(*[lg + suffix for lg in sig.loggers]) & _sig_literals(sig, text) & text.rlike(jpat)
        expr = F.when(cond, F.lit(i)) if expr is None else expr.when(cond, F.lit(i))
    return expr


def _by_index(idx: Column, values: list[str]) -> Column:
    """values[idx], null when idx is null (element_at on a null index is not safe in generated code)."""
    return F.when(idx.isNotNull(), F.element_at(F.array(*[F.lit(v) for v in values]), F.coalesce(idx, F.lit(0)) + 1))


def _attr_names() -> list[str]:
    names: list[str] = []
    for sig in S.SIGNATURES:
        for n in S.java_pattern(sig.pattern)[1]:
            if n not in names:
                names.append(n)
    for _, _, pat in S.EXCEPTION_ATTRS:
        for n in S._compiled(pat).groupindex:
            if n not in names:
                names.append(n)
    for _, _, attr in S.FRAME_MARKERS:
        if attr not in names:
            names.append(attr)
    return names


def _attrs_column(idx: Column, v: Column, src: Column, marker: Column) -> Column:
    entries = []
    sig_name = _by_index(idx, [s.name for s in S.SIGNATURES])
    for name in _attr_names():
        cands = []
        for i, sig in enumerate(S.SIGNATURES):
            jpat, groups = S.java_pattern(sig.pattern)
            if name in groups:
                text = v if sig.on == "message" else src
                cands.append(F.when(idx == i, F.nullif(F.regexp_extract(text, jpat, groups[name]), F.lit(""))))
        for names_, lit, pat in S.EXCEPTION_ATTRS:
            jpat, groups = S.java_pattern(pat)
            if name in groups:
                cands.append(F.when(sig_name.isin(*names_) & src.contains(lit),
                                    F.nullif(F.regexp_extract(src, jpat, groups[name]), F.lit(""))))
        for sname, lit, attr in S.FRAME_MARKERS:
            if attr == name:
                cands.append(F.when((sig_name == sname) & marker.isNotNull() & marker.contains(lit), F.lit("1")))
        if cands:
            entries.append(F.struct(F.lit(name).alias("k"), F.coalesce(*cands).alias("v")))
    arr = F.filter(F.array(*entries), lambda e: e["v"].isNotNull())
    return F.map_from_entries(F.transform(arr, lambda e: F.struct(e["k"], e["v"])))


def _ts_columns(v: Column) -> tuple[Column, Column]:
    d, t, frac, zone = (F.regexp_extract(v, TS_JAVA, i) for i in (1, 2, 3, 4))
    frac3 = F.substring(F.concat(frac, F.lit("000")), 1, 3)
    iso = F.when(d != "", F.concat(d, F.lit("T"), t, F.lit("."), frac3))
    yy, mm, dd, tt = (F.regexp_extract(v, TS_YY_JAVA, i) for i in (1, 2, 3, 4))
    iso_yy = F.when(yy != "", F.concat(F.lit("20"), yy, F.lit("-"), mm, F.lit("-"), dd, F.lit("T"), tt, F.lit(".000")))
    return F.coalesce(iso, iso_yy, F.lit("")), F.nullif(zone, F.lit(""))


def events_frame(spark: SparkSession, files: list[ScanFile]) -> DataFrame | None:
    """The log_events rows (EVENT_SCHEMA) of every file, computed on the executors."""
    if not files:
        return None
    lines = None
    for f in files:
        k = _kept_lines(spark, f)
        lines = k if lines is None else lines.unionByName(k)
    by_layout = []
    for layout in sorted({f.layout for f in files}):
        L = lines.where(F.col("layout") == layout)
        rec = L.where(F.col("kind") == "rec").alias("r")
        exc = L.where(F.col("kind") == "exc").select("path", (F.col("line") - 1).alias("eline"),
                                                    F.col("value").alias("exc_value"), F.col("line").alias("exc_no")).alias("e")
        mk = L.where(F.col("kind") == "marker").select("path", (F.col("line") - 2).alias("mline"),
                                                      F.col("value").alias("marker")).alias("m")
        j = (rec.join(exc, (F.col("r.path") == F.col("e.path")) & (F.col("r.line") == F.col("e.eline")), "left")
             .join(mk, (F.col("r.path") == F.col("m.path")) & (F.col("r.line") == F.col("m.mline")), "left")
             .select("r.path", "r.broker_id", "r.layout", "r.line", "r.value", "r.key", "exc_value", "exc_no", "marker"))
        v, key, excv = F.col("value"), F.col("key"), F.col("exc_value")
        idx = _classify_column(layout, v, key, excv)
        j = j.withColumn("sig_idx", idx)
        lvl = F.regexp_extract(F.substring(v, 1, 80), LEVEL_JAVA, 1)
        lvl = F.when(lvl == "WARNING", "WARN").when(lvl == "SEVERE", "ERROR").otherwise(lvl)
        keep = F.col("sig_idx").isNotNull()
        if layout in LEVEL_POS:
            keep = keep | F.substring(v, LEVEL_POS[layout], 5).isin("ERROR", "FATAL")
        j = j.where(keep)
        src = F.coalesce(excv, v)
        ts, zone = _ts_columns(v)
        suffix_strip = F.regexp_replace(key, r"\)$", "") if layout == "kafka" else key
        out = j.select(
            "path", "broker_id", "layout", "line", ts.alias("ts"), zone.alias("zone"), lvl.alias("level"),
            suffix_strip.alias("logger"),
            _by_index(F.col("sig_idx"), [s.name for s in S.SIGNATURES]).alias("signature"),
            _by_index(F.col("sig_idx"), [s.versions for s in S.SIGNATURES]).alias("wording"),
            F.when(F.col("sig_idx").isNotNull(), _attrs_column(F.col("sig_idx"), v, src, F.col("marker")))
             .otherwise(F.create_map().cast("map<string,string>")).alias("attrs"),
            v.alias("raw"), excv.alias("exception"), F.col("exc_no").alias("exception_line"),
        )
        by_layout.append(out)
    df = by_layout[0]
    for o in by_layout[1:]:
        df = df.unionByName(o)
    return df
