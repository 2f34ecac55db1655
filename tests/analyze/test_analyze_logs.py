"""The one Kafka log parser: layouts, the public API the detectors call (parse / classify / fetch_errors),
damaged and foreign-encoded input, the per-file time budget."""

import datetime as dt
import hashlib

from kafka_runbooks.analyze.bundle import load_entry
from kafka_runbooks.analyze.diagnosis import diagnose
from kafka_runbooks.analyze.parsers.kafka_log import classify, fetch_errors, parse
from kafka_runbooks.analyze.parsers.logs import LogRecord, parse_log

from analyze_helpers import FIXTURES, fixture_bytes, fixture_text

UTC = dt.timezone.utc


def test_layouts_are_detected_per_file_with_parsed_share():
    for name, layout in (("real23/broker3.server.log", "kafka"), ("real23/zk1.zookeeper.log", "zookeeper"),
                         ("real23/zk2.zookeeper.log", "zookeeper_myid"), ("seed004_zk13_follower.log", "zookeeper_myid"),
                         ("seed001_219_server.log", "kafka")):
        p = parse_log(fixture_bytes(name))
        assert p.layout == layout and p.ok, (name, p.layout, p.unparsable)
        assert p.parsed_share == 1.0, (name, p.parsed_share)


def test_other_layouts_and_multi_line_traces():
    strimzi = ("2021-04-28 16:33:35,757 INFO Cleaner 0: Beginning cleaning of log __consumer_offsets-36. (kafka.log.LogCleaner) [kafka-log-cleaner-thread-0]\n"
               "2021-04-28 16:33:36,001 ERROR [kafka-log-cleaner-thread-0]: Error due to (kafka.log.LogCleaner) [kafka-log-cleaner-thread-0]\n"
               "java.lang.IllegalStateException: boom\n\tat kafka.log.Cleaner.clean(LogCleaner.scala:492)\n")
    p = parse_log(strimzi)
    assert p.layout == "strimzi" and [r.signature for r in p.records] == [None, "log_cleaner_died"]
    assert p.records[1].thread == "kafka-log-cleaner-thread-0" and p.records[1].exception_line == 3 and p.records[1].frames == 1
    log4j = ("2015-05-19 16:52:48,758 ERROR [kafka-log-cleaner-thread-0] kafka.log.LogCleaner - [kafka-log-cleaner-thread-0], Error due to\n"
             "java.lang.IllegalArgumentException: requirement failed: Attempt to add a new entry to a full offset map.\n"
             "       at scala.Predef$.require(Predef.scala:233)\n")
    p = parse_log(log4j)
    assert p.layout == "thread_logger" and p.records[0].signature == "log_cleaner_died" and p.records[0].end_line == 3
    spark_style = "19/07/12 11:01:43 INFO group.GroupMetadataManager: [GroupMetadataManager brokerId=0] Scheduling loading of offsets and group metadata from __consumer_offsets-0\n"
    p = parse_log(spark_style)
    assert p.layout == "logger_colon" and p.records[0].signature == "group_load_start" and p.records[0].ts == "2019-07-12T11:01:43.000"
    # Kafka's config dump (tab-indented lines under "KafkaConfig values:") is part of its record, not garbage
    p = parse_log(fixture_bytes("real23/broker1.server.log.start"))
    assert p.ok and p.parsed_share == 1.0 and max(r.continuation for r in p.records) > 100


def test_public_api_parse_and_classify():
    recs = parse(fixture_text("seed000_broker1_server.log"))
    assert recs[0].signature == "replica_fetch_error" and recs[0].attrs["leader"] == "0"
    r = LogRecord(line=1, end_line=1, ts="2026-11-22T13:59:07.466", level="WARN", logger="kafka.server.ReplicaFetcherThread",
                  thread=None, message="[ReplicaFetcher replicaId=3, leaderId=2, fetcherId=0] Error in response for fetch request (type=FetchRequest)")
    assert classify(r, "java.io.IOException: Connection to 2 was disconnected before the response was read") == "replica_fetch_error"
    assert r.attrs["fetcher"] == "3" and r.attrs["leader"] == "2" and r.attrs["disconnected_node"] == "2"


def test_fetch_errors_attribution_and_window():
    # 0.10: the line names the leader in the thread name; the fetcher is the log's own broker (given by the caller)
    fe = fetch_errors(fixture_text("seed001_217_server.log"), broker_id=217)
    assert [(f.fetcher_broker_id, f.leader_broker_id, f.line_no, f.cause) for f in fe] == [(217, 219, 1, "disconnected")]
    assert fe[0].at == dt.datetime(2020, 4, 22, 10, 43, 36, 369000, tzinfo=UTC) and fe[0].exception_line_no == 2
    # 2.3: the line itself names both ends; FetchSessionHandler's INFO twin is not counted twice (the pair is
    # cited by its first line, the INFO, with the WARN's exception line)
    text = fixture_text("real23/broker3.server.log")
    fe = fetch_errors(text, broker_id=3)
    assert {(f.fetcher_broker_id, f.leader_broker_id) for f in fe} == {(3, 1), (3, 2)}
    assert all(f.signature == "fetch_session_error" and f.cause == "disconnected" and "logged twice" in f.note
               and f.exception_line_no == f.line_no + 2 for f in fe)
    # windowed: nothing before `since`, nothing after `until`; naive datetimes are UTC
    assert fetch_errors(text, since=dt.datetime(2026, 11, 22, 13, 59, 8)) == []
    assert len(fetch_errors(text, since=dt.datetime(2026, 11, 22, 13, 59, 7), until=dt.datetime(2026, 11, 22, 13, 59, 8))) == len(fe)
    # local-time logs: the caller's UTC offset moves the window
    shifted = fetch_errors(text, since=dt.datetime(2026, 11, 22, 5, 59, tzinfo=UTC), until=dt.datetime(2026, 11, 22, 6, 0, tzinfo=UTC),
                           utc_offset=dt.timedelta(hours=8))
    assert len(shifted) == len(fe)


def test_damaged_range_keeps_the_valid_parts(tmp_path):
    good = fixture_bytes("seed001_217_server.log")
    # a zero-filled range in the middle of a line (as after a crash), and another on a line of its own
    damaged = good[:200] + b"\x00" * 1000 + good[200:] + b"\x00" * 3 + b"\n" + fixture_bytes("seed001_219_server.log")
    p = parse_log(damaged)
    assert [r.signature for r in p.records if r.signature] == ["replica_fetch_error"]
    assert len(p.records) == 1 + 10 and any("damaged range" in n and "bytes 200-1199" in n for n in p.notes)
    assert p.records[1].line == 18  # line numbers unchanged: the NUL run held no line break
    (tmp_path / "kafkaServer.out").write_bytes(damaged)
    pfs, rows = load_entry(str(tmp_path), {"path": "kafkaServer.out", "kind": "kafka_stdout", "broker_id": 217, "host": None,
                                          "stream": "stdout", "sha256": hashlib.sha256(damaged).hexdigest(), "bytes": len(damaged)})
    findings = diagnose(pfs)
    dmg = [f for f in findings if f.kind == "damaged_evidence"]
    assert dmg and "kafkaServer.out" in dmg[0].summary and "NUL" in dmg[0].summary
    assert any(f.kind == "peer_fetch_failures" for f in findings)  # the valid part still counts


def test_utf16_and_invalid_utf8_are_decoded_or_reported():
    text = fixture_text("seed001_217_server.log")
    for enc in ("utf-16", "utf-16-le"):
        p = parse_log(text.encode(enc))
        assert p.ok and p.records[0].signature == "replica_fetch_error" and any("UTF-16" in n for n in p.notes)
    bad = fixture_bytes("seed001_219_server.log").replace(b"Deleting", b"Del\xff\xfeting", 2)
    p = parse_log(bad)
    assert p.ok and len(p.records) == 10 and any("invalid UTF-8" in n for n in p.notes)


def test_per_file_budget_becomes_an_unparsable_finding(tmp_path):
    data = fixture_bytes("real23/broker1.server.log.pause") * 6
    (tmp_path / "server.log").write_bytes(data)
    e = {"path": "server.log", "kind": "server_log", "broker_id": 1, "host": None, "stream": "stdout",
         "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    pfs, rows = load_entry(str(tmp_path), e, budget_base_s=0.0, budget_per_mb_s=0.0)  # no time at all
    assert pfs[0].result is None and "time budget exceeded" in pfs[0].problems[0]
    f = [x for x in diagnose(pfs) if x.kind == "unparsable"][0]
    assert f.details["path"] == "server.log" and "time budget" in f.summary and "rest of the bundle" in f.summary
    pfs, rows = load_entry(str(tmp_path), e)  # the default budget is ample
    assert pfs[0].result is not None and not pfs[0].problems
