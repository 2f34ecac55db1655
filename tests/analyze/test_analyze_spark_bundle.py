"""The Spark job on a bundle of real evidence (Kafka 2.3.0 + ZooKeeper 3.8 run here, a real JVM lock stall,
damaged and UTF-16 files): findings, the per-file read report, and the rows of both log scans (ripgrep inside the
tasks, and the JVM scan it falls back to when the executor has no rg) equal the pure parser's rows line for line,
the JVM scan across 64 KiB splits; both scans give the same findings. The job runs in the tests' shared
SparkSession (run_in_session); the spark-submit path is covered by test_analyze_spark.py and
test_analyze_standalone.py."""

import json
import stat

import pytest

from kafka_runbooks.analyze.logsummary import event_rows
from kafka_runbooks.analyze.parsers import parse_log

from analyze_helpers import fixture_bytes, make_bundle, run_in_session

LOGS = [("hosts/1/server.log", "server_log", 1, "real23/broker1.server.log.pause"),
        ("hosts/3/server.log", "server_log", 3, "real23/broker3.server.log"),
        ("hosts/2/server.log", "server_log", 2, "real23/broker2.server.log.shutdown"),
        ("hosts/1/controller.log", "controller_log", 1, "real23/broker1.controller.log")]


@pytest.fixture(scope="module")
def real_bundle(tmp_path_factory, lab_stall, spark):
    root = tmp_path_factory.mktemp("bundles")
    out = fixture_bytes("real23/broker1.kafkaServer.out")
    damaged = out[:5000] + b"\x00" * 4096 + out[5000:]
    probe = json.dumps({"schema": "kafka-runbooks/kafka-probe/v1", "broker_id": 1, "endpoint": "127.102.1.1:9092", "results": [
        {"at": "2026-11-22T14:00:00Z", "check": "metadata", "ok": False, "latency_ms": 5000.0, "error": "Request timed out"}]}).encode()
    ss1 = b"State Recv-Q Send-Q Local Address:Port Peer Address:Port\nESTAB 5 0 127.102.1.1:9092 127.0.0.1:1000\n"
    ss2 = b"State Recv-Q Send-Q Local Address:Port Peer Address:Port\nCLOSE-WAIT 700 0 127.102.1.1:9092 127.0.0.1:1000\n"
    files = [(rel, kind, bid, fixture_bytes(src)) for rel, kind, bid, src in LOGS]
    files += [
        ("hosts/1/kafkaServer.out", "kafka_stdout", 1, damaged),
        ("hosts/1/jstack-1.out", "jstack", 1, lab_stall["jstack_l"][0].encode()),
        ("hosts/1/jstack-2.out", "jstack", 1, lab_stall["jstack_l"][1].encode("utf-16")),
        ("hosts/1/gc.log", "gc_log", 1, fixture_bytes("real23/broker1.kafkaServer-gc.log")),
        ("hosts/1/probe.json", "kafka_probe", 1, probe),
        ("hosts/1/ss-1.out", "sockets_ss", 1, ss1), ("hosts/1/ss-2.out", "sockets_ss", 1, ss2),
        ("hosts/1/du.out", "log_dir_listing", 1, fixture_bytes("real23/du-sb.txt")),
        ("hosts/1/dump-log.out", "dump_log", 1, fixture_bytes("real23/segment/dump.log.txt")),
    ]
    for z in (1, 2, 3):
        files.append((f"zk/{z}/zookeeper.log", "zk_log", None, fixture_bytes(f"real23/zk{z}.zookeeper.log"), str(z)))
        files.append((f"zk/{z}/srvr.out", "zk_srvr", None, fixture_bytes(f"real23/zk{z}.srvr.txt"), str(z)))
        files.append((f"zk/{z}/mntr.out", "zk_mntr", None, fixture_bytes(f"real23/zk{z}.mntr.txt"), str(z)))
    files.append(("zk/1/zoo.cfg", "zk_config", None, fixture_bytes("real23/zk1.zoo.cfg"), "1"))
    b = make_bundle(root, files)
    native = run_in_session(spark, b, split_mb=0.0625)  # 64 KiB splits; rg is on this machine: the native scan
    # the fallback: the executor finds no rg -> the same job reads the big logs with the JVM scan
    jvm_out = root / "jvm-out"
    jvm = run_in_session(spark, b, jvm_out, split_mb=0.0625, rg="/nonexistent/rg")
    assert native["timings"]["log_scan"] == {"rg": 8, "jvm": 0}, native["timings"]
    assert jvm["timings"]["log_scan"] == {"rg": 0, "jvm": 8}, jvm["timings"]
    return b, json.loads((b / "findings.json").read_text()), jvm_out, json.loads((jvm_out / "findings.json").read_text())


def _modes(out):
    paths = [out / "findings.json", out / "report.html", out / "parquet", *(out / "parquet").rglob("*")]
    return {str(p.relative_to(out)): (p.is_dir(), stat.S_IMODE(p.stat().st_mode)) for p in paths}


def test_both_scans_outputs_are_the_owners_only(real_bundle):
    """Issue 29 §3: findings.json, report.html and the parquet/ tree -- part files from the executors' Python workers
    (native scan) and from the JVM (the JVM scan: Hadoop's part, .crc and _SUCCESS files) -- are 0600 / 0700 like the
    bundle, though this session's Spark JVM and its Python workers run under the tests' umask."""
    b, _, jvm_out, _ = real_bundle
    for out in (b, jvm_out):
        modes = _modes(out)
        assert any(k.endswith(".parquet") for k in modes), sorted(modes)
        wrong = {k: oct(m) for k, (d, m) in modes.items() if m != (0o700 if d else 0o600)}
        assert not wrong, (out, wrong)
    assert any(k.endswith(".crc") for k in _modes(jvm_out)) and any(k.endswith("_SUCCESS") for k in _modes(jvm_out))


@pytest.mark.parametrize("scan", ["rg", "jvm"])
def test_findings_of_the_real_bundle(real_bundle, scan):
    doc = real_bundle[1] if scan == "rg" else real_bundle[3]
    by = {}
    for f in doc["findings"]:
        by.setdefault(f["kind"], []).append(f)
    dl = by["jvm_deadlock"][0]
    assert set(dl["details"]["cycle_threads"]) == {"lab-fault-1", "lab-fault-2"} and dl["details"]["dumps"] == 2
    assert dl["details"]["progress"] == "stuck" and len(dl["details"]["request_handlers_stalled"]) == 4
    assert {"deadlock", "probes_and_recv_q"} == {f["details"]["cause"] for f in by["request_handling_stalled"]}
    assert "peer_fetch_failures" not in by  # a pause and a shutdown: the reporters' own doing
    assert {tuple(f["broker_ids"]) for f in by["fetch_failures_own_doing"]} == {(1,), (2,), (3,)}
    assert "follower(s) 1, 2 dropped out" in by["zookeeper_follower_dropped"][0]["summary"]
    assert "= 2000 ms" in by["zookeeper_follower_dropped"][0]["summary"]
    assert by["zk_session_expired"][0]["broker_ids"] == [3]
    assert "own_controlled_shutdown" in by and "preferred_elections" in by
    dmg = {f["details"]["path"]: f for f in by["damaged_evidence"]}
    assert "NUL" in dmg["hosts/1/kafkaServer.out"]["summary"] and "UTF-16" in dmg["hosts/1/jstack-2.out"]["summary"]
    assert "unparsable" not in by, [f["summary"] for f in by.get("unparsable", [])]
    # every finding cites a file (and lines where there are lines)
    for f in doc["findings"]:
        assert f["evidence"] and all(e["source"] for e in f["evidence"]), f["kind"]


def test_both_scans_give_the_same_findings_and_files(real_bundle):
    _, native, _, jvm = real_bundle
    assert native["findings"] == jvm["findings"] and native["findings"]
    assert native["files"] == jvm["files"]


def test_files_report_layout_and_share(real_bundle):
    _, doc = real_bundle[:2]
    files = {f["path"]: f for f in doc["files"]}
    for rel, *_ in LOGS:
        assert files[rel]["layout"] == "kafka" and files[rel]["read_by"] == "spark" and files[rel]["parsed_share"] == 1.0
    assert files["zk/2/zookeeper.log"]["layout"] == "zookeeper_myid" and files["zk/1/zookeeper.log"]["layout"] == "zookeeper"
    out = files["hosts/1/kafkaServer.out"]
    assert out["read_by"] == "spark" and "damaged range" in out["notes"]  # the scan reads around the NUL run
    assert "window" in doc and doc["timings"]["total_s"] > 0


@pytest.mark.parametrize("scan", ["rg", "spark"])
def test_spark_rows_equal_the_pure_parser_rows_across_splits(real_bundle, spark, scan):
    out = real_bundle[0] if scan == "rg" else real_bundle[2]
    ev = spark.read.parquet(str(out / "parquet" / "log_events"))
    sources = {r["source"] for r in ev.select("source").distinct().collect()}
    assert scan in sources and sources <= {scan, "python"}, sources  # one scan read the big logs
    for rel, kind, bid, src in LOGS + [("zk/1/zookeeper.log", "zk_log", None, "real23/zk1.zookeeper.log")]:
        p = parse_log(fixture_bytes(src))
        want = sorted((r["line"], r["signature"], r["ts"], r["raw"], json.dumps(r["attrs"], sort_keys=True), r["exception"],
                       r["exception_line"], r["wording"], r["level"], r["logger"], r["zone"]) for r in event_rows(p, rel, bid))
        got = sorted((r["line"], r["signature"], r["ts"], r["raw"], json.dumps(dict(r["attrs"] or {}), sort_keys=True),
                      r["exception"], r["exception_line"], r["wording"], r["level"], r["logger"], r["zone"])
                     for r in ev.where(f"path = '{rel}' AND source = '{scan}'").collect())
        assert got == want and want, rel
    # the stdout's two kill -3 dumps are read by the thread-dump parser beside the scan
    dumps = [r for r in (real_bundle[1] if scan == "rg" else real_bundle[3])["files"] if r["path"] == "hosts/1/kafkaServer.out" and r["kind"] == "jstack"]
    assert dumps and dumps[0]["dumps"] == 2


def test_report_names_files_and_layouts(real_bundle):
    b = real_bundle[0]
    html = (b / "report.html").read_text()
    assert "Evidence read" in html and "zookeeper_myid" in html and "lab-fault-1" in html and "Incident window" in html


def _records_at_boundaries(split: int) -> bytes:
    """Six records (record, exception line, ApiKeys.forId frame) around multiples of ``split``, padding between."""
    rec, exc, frame = fixture_bytes("seed002_processor.log").splitlines(keepends=True)[:3]
    pad = b"[2017-10-12 16:52:37,000] INFO padding (kafka.log.Log)\n"
    data = b""
    for k in range(1, 7):  # boundary k*split falls before: the exception line (k%3==1), the frame (2), the record (0)
        before = {1: rec, 2: rec + exc, 0: b""}[k % 3]
        while len(data) + len(before) + len(pad) <= k * split:
            data += pad
        data += b"x" * (k * split - len(data) - len(before) - 1) + b"\n" + before  # a filler line up to the boundary
        assert len(data) == k * split
        data += {1: exc + frame, 2: frame, 0: rec + exc + frame}[k % 3]
    return data + pad


def test_record_split_from_its_exception_line_by_a_split_boundary(spark, tmp_path):
    """A record on the last line of a split keeps the exception line and the frame under it (first lines of the
    next split): the JVM scan's rows equal the pure parser's whichever line the boundary falls before."""
    from kafka_runbooks.analyze import fastscan, survey as SV, uri as U

    split = 4096
    f = tmp_path / "d ir%41" / "server é.log"  # Spark names it URL-encoded: mapped back to the bundle's file
    f.parent.mkdir()
    f.write_bytes(_records_at_boundaries(split))
    conf = {k: spark.conf.get(k) for k in ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes",
                                           "spark.sql.shuffle.partitions")}
    try:
        fastscan.configure(spark, split)
        s = SV.survey_file("server é.log", U.to_uri(str(f)), split)
        assert len(s.first_line_of_split) >= 6
        rows = fastscan.events_frame(spark, [fastscan.ScanFile("server é.log", s.uri, 1, s.layout, s.first_line_of_split)],
                                     split).collect()
    finally:
        for k, v in conf.items():
            spark.conf.set(k, v)
    want = sorted((r["line"], r["signature"], json.dumps(r["attrs"], sort_keys=True))
                  for r in event_rows(parse_log(f.read_bytes()), "server é.log", 1))
    got = sorted((r["line"], r["signature"], json.dumps(dict(r["attrs"] or {}), sort_keys=True)) for r in rows)
    assert got == want and len(want) == 6
    assert all('"api_key_frame": "1"' in a for _, _, a in got)
    assert {r["path"] for r in rows} == {"server é.log"}


def test_native_scan_rows_equal_the_pure_parser_rows(tmp_path):
    """rg's lines (matches and the two after each) through the shared per-record step: the same rows as the pure
    parser, exception line and frame included; CRLF line ends read as Spark's line reader reads them."""
    from kafka_runbooks.analyze import nativescan

    data = _records_at_boundaries(4096) + fixture_bytes("real23/broker1.server.log.pause")
    for name, body in (("lf.log", data), ("crlf.log", data.replace(b"\n", b"\r\n"))):
        f = tmp_path / name
        f.write_bytes(body)
        counts, sample, minutes = nativescan.scan_file(nativescan.find_rg("rg"), str(f), name, 1, "kafka", str(tmp_path / "out"), name)
        rows = pq_rows(tmp_path / "out" / "parquet" / "log_events" / "source=rg")
        want = sorted((r["line"], r["signature"], r["raw"], r["exception"], json.dumps(r["attrs"], sort_keys=True))
                      for r in event_rows(parse_log(data), name, 1))
        got = sorted((r["line"], r["signature"], r["raw"], r["exception"], json.dumps(dict(r["attrs"] or []), sort_keys=True))
                     for r in rows if r["path"] == name)
        assert got == want and sum(1 for g in got if '"api_key_frame": "1"' in g[4]) == 6, name
        assert sum(counts.values()) == sum(1 for w in want if w[1]) and sample


def test_native_scan_required_without_rg_fails_clearly(spark, tmp_path):
    b = make_bundle(tmp_path, [("hosts/1/server.log", "server_log", 1, fixture_bytes("real23/broker3.server.log"))])
    with pytest.raises(Exception, match="was not found on this executor"):
        run_in_session(spark, b, log_scan="rg", rg="/nonexistent/rg")


def pq_rows(d):
    import pyarrow.parquet as pq

    return [r for p in sorted(d.glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


def test_native_scan_leaves_a_file_that_fails_its_sha256_unread(spark, tmp_path):
    """A log whose bytes do not match the manifest is reported, and no scan writes rows for it."""
    b = make_bundle(tmp_path, [("hosts/1/server.log", "server_log", 1, fixture_bytes("real23/broker3.server.log")),
                               ("hosts/2/server.log", "server_log", 2, fixture_bytes("real23/broker2.server.log.shutdown"))])
    m = json.loads((b / "manifest.json").read_text())
    m["files"][0]["sha256"] = "0" * 64
    (b / "manifest.json").write_text(json.dumps(m))
    doc = run_in_session(spark, b)
    assert doc["timings"]["log_scan"] == {"rg": 1, "jvm": 0}
    assert any("sha256 mismatch" in json.dumps(f) and "hosts/1/server.log" in json.dumps(f) for f in doc["findings"])
    paths = {r["path"] for r in pq_rows(b / "parquet" / "log_events" / "source=rg")}
    assert paths == {"hosts/2/server.log"}


def test_a_log_with_invalid_utf8_is_read_by_the_pure_parser(spark, tmp_path):
    """Invalid UTF-8 in a big log: the survey sends it to the pure parser, which reports the replaced bytes (the
    JVM scan's Arrow batches cannot carry it: the job used to fail); were the native scan handed such a line it
    would give the file up and leave no rows behind."""
    from kafka_runbooks.analyze import nativescan

    data = fixture_bytes("real23/broker3.server.log")
    cut = data.index(b"Shrinking ISR") if b"Shrinking ISR" in data else data.index(b"ERROR")
    bad = data[:cut] + b"\xff\xfe " + data[cut:]
    f = tmp_path / "server.log"
    f.write_bytes(bad)
    assert nativescan.scan_file(nativescan.find_rg("rg"), str(f), "server.log", 3, "kafka", str(tmp_path / "o"), "k") is None
    assert not list((tmp_path / "o").rglob("*.parquet"))
    b = make_bundle(tmp_path / "b", [("hosts/3/server.log", "server_log", 3, bad)])
    for scan in ("auto", "jvm"):
        doc = run_in_session(spark, b, tmp_path / scan, log_scan=scan)
        assert doc["timings"]["log_scan"] == {"rg": 0, "jvm": 0}
        row = next(f for f in doc["files"] if f["path"] == "hosts/3/server.log")
        assert row["read_by"] == "python" and row["layout"] == "kafka", row


def _pieces_scan(N, f, pieces, out, entry):
    spans = [(N.SPAN * k // pieces, N.SPAN * (k + 1) // pieces) for k in range(pieces)]
    parts = [N.survey_log(entry, str(f), 4096)] + [N.scan_piece(entry, str(f), str(out), "rg", True, lo, hi)
                                                   for lo, hi in spans]
    assert [p["layout"] for p in parts[1:]] == ["kafka"] * pieces
    return N.combine_pieces(entry, parts[::-1], str(out))[1], pq_rows(out / "parquet" / "log_events" / "source=rg")


def _row_key(r):
    return r["line"], r["signature"] or "", r["raw"], json.dumps(dict(r["attrs"] or {}), sort_keys=True)


def test_native_scan_in_pieces_equals_one_piece(tmp_path):
    """A big log scanned by several tasks (equal byte ranges, rg started at each range's first line, its line
    numbers offset by the line breaks before it): the same Parquet rows, counts, sample and per-minute counts as one
    task, with range boundaries inside a record line, its exception line and its frame (checked below), and more
    than 2 x SAMPLE rows of one signature. A survey that disowns the file (sha256 mismatch) leaves no piece's rows."""
    from kafka_runbooks.analyze import nativescan as N
    from kafka_runbooks.analyze.logsummary import SAMPLE

    rec, exc, frame = fixture_bytes("seed002_processor.log").splitlines(keepends=True)[:3]
    dense = (rec + exc + frame) * 20000  # every range boundary in this part falls inside a record's three lines
    data = dense + b"".join(_records_at_boundaries(4096) + fixture_bytes(s) for s in
                            ["real23/broker1.server.log.pause", "seed001_217_server.log", "seed001_219_server.log"] * 10)
    group = len(rec + exc + frame)
    cut = {"record": 0, "exception": 0, "frame": 0}
    for pieces in (2, 3, 7):
        for k in range(1, pieces):
            at = len(data) * k // pieces
            if at < len(dense):
                o = at % group
                cut["record" if o < len(rec) else "exception" if o < len(rec + exc) else "frame"] += 1
    assert all(cut.values()), cut
    f = tmp_path / "server.log"
    f.write_bytes(data)
    e = {"path": "server.log", "kind": "server_log", "broker_id": 1}
    (counts, sample, minutes), rows = _pieces_scan(N, f, 1, tmp_path / "one", e)
    assert max(counts.values()) > 2 * SAMPLE and len(rows) > 6 * SAMPLE
    assert sorted(map(_row_key, rows)) == sorted(map(_row_key, event_rows(parse_log(data), "server.log", 1)))
    for pieces in (2, 3, 7):
        (c, s, m), r = _pieces_scan(N, f, pieces, tmp_path / f"p{pieces}", e)
        assert c == counts, pieces
        assert sorted(map(_row_key, r)) == sorted(map(_row_key, rows)), pieces
        assert sorted(map(_row_key, s)) == sorted(map(_row_key, sample)), pieces
        assert sorted(m, key=lambda x: json.dumps(x, sort_keys=True)) == sorted(minutes, key=lambda x: json.dumps(x, sort_keys=True))
    res, left = _pieces_scan(N, f, 3, tmp_path / "bad", dict(e, sha256="0" * 64))
    assert res is None and left == []


def test_native_scan_reads_a_utf8_bom_as_spark_does_in_one_piece_or_many(spark, tmp_path):
    """Spark's text source (Hadoop's line reader) drops a UTF-8 BOM at the start of a file, and only there; rg would
    strip one at the start of whatever it reads (a piece too) and count byte offsets without it (a row counted in
    two pieces). The native scan reads the bytes as they are and drops the file's own BOM: the first line is a
    record, as in Spark, a BOM inside the file stays, and every piece count equals one piece's."""
    from kafka_runbooks.analyze import nativescan as N

    lines = [b"[2026-11-23 00:00:%02d,000] ERROR boom %d (kafka.server.ReplicaManager)\n" % (i % 60, i) for i in range(3000)]
    lines[1500] = b"\xef\xbb\xbf" + lines[1500]  # not at the file's start: Spark keeps it, so no record there
    data = b"\xef\xbb\xbf" + b"".join(lines)
    f = tmp_path / "server.log"
    f.write_bytes(data)
    first = spark.read.text(str(f)).head().value
    assert first.startswith("[2026-11-23 00:00:00,000] ERROR boom 0 ")
    e = {"path": "server.log", "kind": "server_log", "broker_id": 1}
    (counts, _, _), rows = _pieces_scan(N, f, 1, tmp_path / "one", e)
    assert len(rows) == 2999 and min(r["line"] for r in rows) == 1 and 1501 not in {r["line"] for r in rows}
    assert next(r for r in rows if r["line"] == 1)["raw"] == first
    for pieces in (2, 5, 11):
        (c, _, _), r = _pieces_scan(N, f, pieces, tmp_path / f"p{pieces}", e)
        assert sorted(map(_row_key, r)) == sorted(map(_row_key, rows)) and c == counts, pieces


def test_log_tasks_are_planned_so_no_core_idles_and_no_task_is_wasted():
    """plan_log_tasks: one task per core at most; in each, the surveys (a thread) and the scans (a chain of Python
    work) are balanced apart: the surveys whole, spread by count and size, the scans cut into equal shares of
    estimated cost (no piece under MIN_PIECE); every log surveyed once and its pieces tiling it; the literal
    density weighs a log's scan; without the native scan, surveys only."""
    from kafka_runbooks.analyze.nativescan import HIT_COST, MIN_PIECE, MIN_TASK, SPAN, SURVEY_COST, plan_log_tasks

    MB = 1 << 20

    def check(sizes, cores, native=True, dens=None):
        tasks = plan_log_tasks(sizes, cores, native, dens)
        work = [w for t in tasks for w in t]
        for i in range(len(sizes)):
            assert [w for w in work if w[0] == i and w[1] is None] == [(i, None, None)]  # surveyed once
            spans = sorted((w[1], w[2]) for w in work if w[0] == i and w[1] is not None)
            if native:
                assert [a for a, _ in spans] == [0] + [z for _, z in spans[:-1]] and spans[-1][1] == SPAN, spans
                if len(spans) > 1:
                    assert all((z - a) * sizes[i] / SPAN >= MIN_PIECE - sizes[i] / SPAN for a, z in spans), spans
            else:
                assert spans == []
        assert len(work) == len(set(work)) and len(tasks) <= max(cores, 1) or not native
        assert all(t for t in tasks) and all(lo < hi for _, lo, hi in work if lo is not None)
        d = dens or [0.0] * len(sizes)
        scans = [sum(sizes[i] * (hi - lo) / SPAN * (1 + d[i] * HIT_COST) for i, lo, hi in t if lo is not None)
                 for t in tasks]
        surveys = [sum(sizes[i] * SURVEY_COST for i, lo, _ in t if lo is None) for t in tasks]
        return tasks, scans

    t, scans = check([333 * MB] * 3, 2)  # three equal logs on two cores: one is cut in two
    assert len(t) == 2 and max(scans) / min(scans) < 1.01, scans
    t, scans = check([1000 * MB], 2)  # one log: its scan in halves, its survey beside one
    assert t == [[(0, None, None), (0, 0, SPAN // 2)], [(0, SPAN // 2, SPAN)]]
    t, scans = check([900 * MB, 100 * MB, MB, 2 * MB, MB // 2], 2)
    assert len(t) == 2 and max(scans) / min(scans) < 1.01, scans
    assert [w for w in t[0] if w[1] is None] == [(0, None, None)]  # the big survey alone, the four others beside
    t, _ = check([100 * MB] * 6, 2)  # surveys spread by count when they weigh the same
    assert [sum(1 for w in task if w[1] is None) for task in t] == [3, 3]
    dens = [1e-4, 4e-4, 5e-5]  # the dense log weighs most: by bytes alone the scans would be far apart
    t, scans = check([33 * MB] * 3, 2, dens=dens)
    assert len(t) == 2 and max(scans) / min(scans) < 1.05, scans
    assert check([33 * MB] * 3, 2)[0] != t
    assert check([1000 * MB], 1)[0] == [[(0, None, None), (0, 0, SPAN)]]  # one core: nothing to balance
    assert len(check([40 * MB] * 3, 8)[0]) == 3  # no task under MIN_TASK bytes
    assert len(check([MIN_TASK // 4] * 3, 2)[0]) == 1
    t, scans = check([36 * MB, 30 * MB], 2)  # the cut would leave 3 MB: the log stays whole, the shares differ
    assert [w for task in t for w in task if w[1] is not None] == [(0, 0, SPAN), (1, 0, SPAN)] and scans == [36 * MB, 30 * MB]
    t, scans = check([40 * MB, 30 * MB], 2)  # the cut moves to leave MIN_PIECE
    assert t[0][1] == (0, 0, round(SPAN * 4 / 5)) and [round(x / MB) for x in scans] == [32, 38], (t, scans)
    assert check([1000 * MB, MB, 2 * MB, 40 * MB], 2, native=False)[0] == [[(0, None, None)], [(3, None, None)],
                                                                           [(2, None, None), (1, None, None)]]
    assert check([0, 0], 2)[0] == [[(0, None, None), (1, None, None), (0, 0, SPAN), (1, 0, SPAN)]]
    assert plan_log_tasks([], 2, True) == []


def test_rg_reads_a_piece_and_the_two_lines_under_it_only(tmp_path):
    """A piece that ends before the file does is fed to rg up to the end of the second line from its end (the
    lines under its last record), not to the file's end: a sparse log is not read to its end by every piece. A
    feed that comes up short (the file shrank) is an error, not fewer rows."""
    import os

    from kafka_runbooks.analyze import nativescan as N

    line = b"[2026-11-23 00:00:00,000] ERROR boom (kafka.server.ReplicaManager)\n"
    data = line * 100 + b"  at a\n" + b"  at b\n" + line * 100
    f = tmp_path / "server.log"
    f.write_bytes(data)
    start, stop = len(line) * 10, len(line) * 100
    run = N.RgRun(N.find_rg("rg"), str(f), start, 10, stop)
    try:
        got = list(run.lines())
    finally:
        run.close()
    assert [n for n, *_ in got] == list(range(11, 103))  # lines 11..100 matched, 101 and 102 under the last
    assert got[-1][2] == stop + 7 and got[-1][3] == b"  at b"
    r, w = os.pipe()
    feeder = N._Feeder(str(f), 0, len(data) + 100, w)
    with os.fdopen(r, "rb") as fh:
        assert fh.read() == data
    with pytest.raises(RuntimeError, match="ended 100 bytes early"):
        feeder.join()


@pytest.mark.timeout(300)
def test_a_fifo_or_a_device_in_a_bundle_is_reported_not_waited_for(spark, tmp_path):
    """A named pipe where a log should be (nobody ever writes it) and a device where a thread dump should be (it
    never ends): the driver's sampling, the survey and the parsers refuse them as not regular files, the analysis
    ends, each is an explicit finding naming the file, and the real log beside them is read."""
    import os

    log = fixture_bytes("real23/broker3.server.log")
    b = make_bundle(tmp_path / "b", [("hosts/1/server.log", "server_log", 1, log * 40),
                                     ("hosts/2/server.log", "server_log", 2, b"x" * 100),
                                     ("hosts/2/jstack-1.out", "jstack", 2, b"x")])
    (b / "hosts/2/server.log").unlink()
    os.mkfifo(b / "hosts/2/server.log")
    m = json.loads((b / "manifest.json").read_text())  # a size worth the driver's sampling: it opens the file too
    next(f for f in m["files"] if f["path"] == "hosts/2/server.log")["bytes"] = 64 << 20
    (b / "manifest.json").write_text(json.dumps(m))
    (b / "hosts/2/jstack-1.out").unlink()
    os.symlink("/dev/zero", b / "hosts/2/jstack-1.out")
    doc = run_in_session(spark, b, tmp_path / "out")
    bad = {f["details"]["path"]: f for f in doc["findings"] if f["kind"] == "unparsable"}
    assert set(bad) >= {"hosts/2/server.log", "hosts/2/jstack-1.out"}, doc["findings"]
    assert all("not a regular file" in json.dumps(bad[p]) for p in ("hosts/2/server.log", "hosts/2/jstack-1.out"))
    row = next(f for f in doc["files"] if f["path"] == "hosts/1/server.log")
    assert row["read_by"] == "spark" and row["layout"] == "kafka", row


def test_a_logs_pieces_count_only_when_they_cover_it_at_the_size_its_survey_read(tmp_path):
    """combine_pieces: a gap, an overlap, a missing piece, a piece cut by another size than the survey read (the
    file changed between tasks) or a piece given up (the file shrank under it) -> no scan, and every piece's Parquet
    part is removed; the file is then read another way. A scan_piece whose file shrinks while rg is fed gives its
    scan up with the reason instead of failing the task."""
    import os

    from kafka_runbooks.analyze import nativescan as N

    data = fixture_bytes("real23/broker3.server.log") * 20
    f = tmp_path / "server.log"
    f.write_bytes(data)
    e = {"path": "server.log", "kind": "server_log", "broker_id": 3}
    half = N.SPAN // 2

    def parts(spans, out, **change):
        ps = [N.survey_log(e, str(f), 4096)] + [N.scan_piece(e, str(f), str(out), "rg", True, lo, hi) for lo, hi in spans]
        for k, v in change.items():
            ps[1][k] = v
        return ps

    out = tmp_path / "ok"
    assert N.combine_pieces(e, parts([(0, half), (half, N.SPAN)], out), str(out))[1] is not None
    cases = {"gap": ([(0, half - 10), (half, N.SPAN)], {}), "overlap": ([(0, half + 10), (half, N.SPAN)], {}),
             "missing": ([(0, half)], {}), "resized": ([(0, half), (half, N.SPAN)], {"size": len(data) + 1}),
             "given up": ([(0, half), (half, N.SPAN)], {"problem": "shrank"})}
    for name, (spans, change) in cases.items():
        out = tmp_path / name.replace(" ", "_")
        ps = parts(spans, out, **change)
        assert any(p.get("written") for p in ps), name
        assert N.combine_pieces(e, ps, str(out))[1] is None, name
        assert not list(out.rglob("*.parquet")), name

    real = N._Feeder.__init__

    def shrink_first(self, path, offset, count, w):  # the file loses its tail after the piece was cut
        os.truncate(path, offset + count // 2)
        real(self, path, offset, count, w)

    N._Feeder.__init__ = shrink_first
    try:
        r = N.scan_piece(e, str(f), str(tmp_path / "shrunk"), "rg", True, 0, half)
    finally:
        N._Feeder.__init__ = real
    assert r["scan"] is None and "ended" in r["problem"] and r["written"] == [], r
    assert not list((tmp_path / "shrunk").rglob("*.parquet"))


@pytest.mark.timeout(60)
def test_every_reader_of_a_piece_refuses_a_fifo(tmp_path):
    """A log swapped for a named pipe after its layout was read: rg's own input, the line-start search, the line
    count and the feeder each open it as evidence (a regular file only), so the piece fails with the reason instead
    of waiting for a writer that never comes."""
    import os

    from kafka_runbooks.analyze import nativescan as N
    from kafka_runbooks.analyze.survey import line_start_at_or_after, newlines_before

    fifo = tmp_path / "server.log"
    os.mkfifo(fifo)
    rg = N.find_rg("rg")
    for read in (lambda: N.RgRun(rg, str(fifo)), lambda: N.RgRun(rg, str(fifo), 10, 1),
                 lambda: line_start_at_or_after(str(fifo), 10), lambda: newlines_before(str(fifo), 10)):
        with pytest.raises(OSError, match="not a regular file"):
            read()
    r, w = os.pipe()
    os.close(r)
    feeder = N._Feeder(str(fifo), 0, 10, w)
    with pytest.raises(N.FeedError, match="not a regular file"):
        feeder.join()


def test_small_files_ride_in_the_log_tasks_by_bytes():
    from kafka_runbooks.analyze.nativescan import RIDE_MAX, plan_riders, rides

    sizes = [5, 900, 40, 1000, 60, 0, 300]
    tasks = plan_riders(3, sizes)
    assert sorted(k for t in tasks for k in t) == list(range(len(sizes)))
    assert [sum(sizes[k] for k in t) for t in tasks] == [405, 900, 1000]  # biggest first, to the fewest (last on a tie)
    assert plan_riders(2, []) == [[], []] and plan_riders(1, [3, 4]) == [[1, 0]]
    assert rides(RIDE_MAX) and not rides(RIDE_MAX + 1)


def test_a_big_file_of_another_kind_gets_a_task_of_its_own_and_the_results_are_the_same(spark, tmp_path, monkeypatch):
    """The other files either ride in the log tasks or get tasks of their own (the big ones): the findings and the
    files table come out the same, in the manifest's order, whichever way each file went."""
    files = [("hosts/3/server.log", "server_log", 3, fixture_bytes("real23/broker3.server.log") * 3),
             ("hosts/1/gc.log", "gc_log", 1, fixture_bytes("real23/broker1.kafkaServer-gc.log")),
             ("hosts/1/ss-1.out", "sockets_ss", 1, fixture_bytes("real23/ss-tanp.txt")),
             ("hosts/1/du.out", "log_dir_listing", 1, fixture_bytes("real23/du-sb.txt")),
             ("hosts/1/dump-log.out", "dump_log", 1, fixture_bytes("real23/segment/dump.log.txt")),
             ("hosts/1/jstack-1.out", "jstack", 1, fixture_bytes("real23/broker1.jstack.txt"))]
    files += [(f"zk/{z}/{w}.out", f"zk_{w}", None, fixture_bytes(f"real23/zk{z}.{w}.txt"), str(z))
              for z in (1, 2) for w in ("srvr", "mntr")]
    b = make_bundle(tmp_path / "b", files)
    sizes = sorted(len(f[3]) for f in files[1:])
    all_ride = run_in_session(spark, b, tmp_path / "ride")
    import analyze_bundle  # on the path once run_in_session ran

    monkeypatch.setattr(analyze_bundle, "rides", lambda size: size < sizes[len(sizes) // 2])  # half ride
    mixed = run_in_session(spark, b, tmp_path / "mixed")
    assert all_ride["timings"]["python_files_s"] == 0 and mixed["timings"]["python_files_s"] > 0

    def same(doc):
        return ([{k: v for k, v in f.items() if k != "parse_s"} for f in doc["files"]],
                [{k: v for k, v in f.items() if k != "details"} for f in doc["findings"]])

    assert [f["path"] for f in mixed["files"]] == [f["path"] for f in all_ride["files"]]
    assert same(mixed) == same(all_ride)
