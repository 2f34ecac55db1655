"""The JVM per-line prefilter (fastscan._kept_lines) after its rewrite for whole-stage code generation (the
logger key computed once per line, literal maps instead of a higher-order ``exists``) keeps exactly the lines
the previous expression kept, on every real log fixture, in every layout they use; and it keeps every record the
pure classifier reports (no false negatives)."""

from __future__ import annotations

import pytest

from analyze_helpers import HERE, fixture_bytes

from kafka_runbooks.analyze import signatures as S
from kafka_runbooks.analyze.parsers.base import decode_evidence, split_lines
from kafka_runbooks.analyze.parsers.layouts import BY_NAME, GATE_SUFFIX, LEVEL_POS, detect, gate_keys, level_kept
from kafka_runbooks.analyze.parsers.logs import parse_lines

LOGS = ["real23/broker1.server.log.start", "real23/broker1.server.log.pause", "real23/broker1.server.log.badrequest",
        "real23/broker1.server.log.restart", "real23/broker2.server.log.shutdown", "real23/broker3.server.log",
        "real23/broker1.controller.log", "real23/broker1.kafkaServer.out", "real23/zk1.zookeeper.log",
        "real23/zk2.zookeeper.log", "real23/zk3.zookeeper.log", "seed000_broker0_server.log",
        "seed000_broker1_server.log", "seed000_broker2_server.log", "seed001_217_server.log", "seed001_218_server.log",
        "seed001_219_server.log", "seed002_processor.log", "seed004_zk13_follower.log", "seed004_zk37_leader.log",
        "real23/drill003.broker3.server.log", "real0102/broker2.state-change.log.fence"]


def _previous_kept_lines(spark, layout_name: str, uris: list[str]):
    """The prefilter as it was before the rewrite (kept here as the reference): gate key recomputed in each use,
    the per-logger literals tested with ``exists`` over a map literal."""
    from kafka_runbooks.analyze.fastscan import EXC_JAVA, MASK33, RAW_MAX, _in, gate_key_sql, sql_str

    layout = BY_NAME[layout_name]
    first = "substring(value, 1, 1)"
    header_like = _in(first, list(layout.first_chars))
    is_cand = f"({header_like} AND {_in(gate_key_sql(layout_name), sorted(gate_keys(layout_name, S.ALL_LOGGERS)))})"
    is_exc = (f"(NOT {_in(first, [' ', chr(9), ''])} AND NOT {header_like} AND "
              f"(instr(value, 'Exception') > 0 OR instr(value, 'Error') > 0 OR instr(value, 'Throwable') > 0) AND "
              f"value RLIKE {sql_str(EXC_JAVA)})")
    markers = " OR ".join(f"instr(value, {sql_str(lit)}) > 0" for _, lit, _ in S.FRAME_MARKERS) or "false"
    is_marker = f"({_in(first, [' ', chr(9)])} AND ({markers}))"
    is_level = (f"({header_like} AND {_in(f'substring(value, {LEVEL_POS[layout_name]}, 5)', ['ERROR', 'FATAL'])})"
                if layout_name in LEVEL_POS else "false")
    kind = f"CASE WHEN {header_like} THEN 'rec' WHEN {_in(first, [' ', chr(9)])} THEN 'marker' ELSE 'exc' END"
    suffix = GATE_SUFFIX.get(layout_name, "")
    by_logger: dict[str, set[str]] = {}
    for sig in S.SIGNATURES:
        for lg in sig.loggers:
            by_logger.setdefault(lg, set()).add("" if sig.on == "exception" else sig.literals[0])
    pairs = ", ".join(f"{sql_str(lg + suffix)}, array({', '.join(sql_str(x) for x in sorted({''} if '' in lits else lits))})"
                      for lg, lits in sorted(by_logger.items()))
    possible = f"exists(coalesce(element_at(map({pairs}), {gate_key_sql(layout_name)}), array()), x -> instr(value, x) > 0)"
    if layout_name in LEVEL_POS:
        possible += f" OR substring(value, {LEVEL_POS[layout_name]}, 5) IN ('ERROR', 'FATAL')"
    return (spark.read.text(uris)
            .selectExpr("value", "input_file_name() AS file", f"monotonically_increasing_id() & {MASK33}L AS row")
            .where(f"{is_cand} OR {is_exc} OR {is_marker} OR {is_level}")
            .selectExpr("file", "row", f"{kind} AS kind", f"substring(value, 1, {RAW_MAX}) AS value")
            .where(f"kind <> 'rec' OR {possible}"))


@pytest.fixture(scope="module")
def layouts(spark):
    """layout -> the fixtures written in it; one split per file, as the analysis reads them (fastscan.configure)."""
    from analyze_helpers import SESSION_CONFS
    from kafka_runbooks.analyze.fastscan import configure

    saved = {k: spark.conf.get(k, None) for k in SESSION_CONFS}
    configure(spark, 32 << 20)
    out: dict[str, list[str]] = {}
    for src in LOGS:
        layout, _, _ = detect(split_lines(decode_evidence(fixture_bytes(src)).text))
        assert layout is not None, src
        out.setdefault(layout.name, []).append(src)
    assert {"kafka", "zookeeper_myid"} <= set(out)
    yield out
    for k, v in saved.items():
        spark.conf.unset(k) if v is None else spark.conf.set(k, v)


def _uri(src: str) -> str:
    return (HERE / "fixtures" / src).as_uri()


def test_prefilter_keeps_the_lines_the_previous_one_kept(spark, layouts):
    """One scan per layout over all its fixtures, as the analysis does: (file, row, kind, value) identical."""
    from kafka_runbooks.analyze.fastscan import _kept_lines

    total = 0
    for layout, srcs in layouts.items():
        uris = [_uri(s) for s in srcs]
        now = sorted(tuple(r) for r in _kept_lines(spark, layout, uris, None).select("file", "row", "kind", "value").collect())
        before = sorted(tuple(r) for r in _previous_kept_lines(spark, layout, uris).collect())
        assert now == before, layout
        total += len(now)
    assert total > 100  # the fixtures hold real signature lines: the comparison is not over empty sets


def test_prefilter_keeps_every_record_the_classifier_reports(spark, layouts):
    from kafka_runbooks.analyze.fastscan import _kept_lines, spark_file_key

    for layout, srcs in layouts.items():
        kept: dict[str, set[int]] = {}
        for r in _kept_lines(spark, layout, [_uri(s) for s in srcs], None).where("kind = 'rec'").select("file", "row").collect():
            kept.setdefault(spark_file_key(r["file"]), set()).add(r["row"] + 1)  # one file per partition: row = line - 1
        for src in srcs:
            lines = split_lines(decode_evidence(fixture_bytes(src)).text)
            p = parse_lines(lines, layout)
            want = {r.line for r in p.records if r.signature or level_kept(layout, lines[r.line - 1])}
            got = kept.get(spark_file_key(_uri(src)), set())
            assert want <= got, (src, sorted(want - got)[:5])
        assert any(kept.values()), layout


def test_native_scan_gate_passes_the_records_the_jvm_scan_passes(spark, layouts):
    """nativescan.record_gate (the JVM gate and prefilter in Python, used by the native scan) passes exactly the
    record lines the JVM scan hands to its classifier, on every real log fixture and every layout."""
    from kafka_runbooks.analyze.fastscan import _kept_lines, spark_file_key
    from kafka_runbooks.analyze.nativescan import record_gate

    total = 0
    for layout, srcs in layouts.items():
        jvm: dict[str, set[int]] = {}
        for r in _kept_lines(spark, layout, [_uri(s) for s in srcs], None).where("kind = 'rec'").select("file", "row").collect():
            jvm.setdefault(spark_file_key(r["file"]), set()).add(r["row"] + 1)
        keep = record_gate(layout)
        for src in srcs:
            lines = fixture_bytes(src).decode("utf-8").split("\n")
            native = {i for i, ln in enumerate(lines, start=1) if keep(ln.removesuffix("\r"))}
            assert native == jvm.get(spark_file_key(_uri(src)), set()), (src, sorted(native ^ jvm.get(spark_file_key(_uri(src)), set()))[:5])
            total += len(native)
    assert total > 100
