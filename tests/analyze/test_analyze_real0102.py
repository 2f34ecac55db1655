"""Every 0.10 wording the analysis relies on, as the lab's real Kafka 0.10.2.1 brokers wrote it
(tests/analyze/fixtures/real0102/, recorded by tests/lab/test_kafka010.py's run of 2026-11-24, a test removed with the 0.10.2.1 lab: scenario.log), is
recognised by the one signature table; and what the product reads of 0.10's tools (JmxTool without --one-time,
ApiVersions) is read."""

from __future__ import annotations

import json

from analyze_helpers import fixture_bytes, fixture_text
from kafka_runbooks.analyze.parsers.kafka_log import fetch_errors, parse_kafka_log


def sigs(name: str) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in parse_kafka_log(fixture_bytes(f"real0102/{name}")).signatures():
        out.setdefault(r.signature, []).append(r)
    return out


def test_start_registration_version_and_offsets_loading_in_0_10_words():
    s = sigs("broker1.server.log.start")
    assert [r.attrs["broker"] for r in s["broker_started"]] == ["1"]
    assert s["broker_registered"][0].attrs["broker"] == "1" and "EndPoint(kafka-lab-s6-b1,9093" in s["broker_registered"][0].attrs["endpoints"]
    loads = {r.attrs["partition"] for r in s["group_load_start"]}
    done = {r.attrs["partition"]: int(r.attrs["millis"]) for r in s["group_load_done"]}
    assert loads and set(done) == loads and done["0"] == 231  # "Finished loading offsets from __consumer_offsets-0 in 231 milliseconds."
    # 0.10's log4j.properties sends AppInfoParser (org.apache.kafka.*) to stdout only: the version is in kafkaServer.out
    assert "kafka_version" not in s
    out = parse_kafka_log(fixture_bytes("real0102/broker1.kafkaServer.out.start"))
    assert out.kafka_version == "0.10.2.1"


def test_a_stuck_leader_its_isr_shrinks_and_its_peers_fetch_errors():
    s = sigs("broker3.server.log.hang")
    shrinks = s["isr_shrink"]
    assert len(shrinks) >= 15 and all(r.attrs["to"] == "3" for r in shrinks)  # seed 001: "Isr: 219"
    fe = fetch_errors(fixture_text("real0102/broker1.server.log.hang-peer"), broker_id=1)
    assert [(f.fetcher_broker_id, f.leader_broker_id, f.cause) for f in fe][:1] == [(1, 3, "disconnected")]


def test_bad_request_of_a_newer_client_names_key_version_and_connection():
    (r,) = sigs("broker3.server.log.badrequest")["invalid_request"]
    assert r.attrs["api_key"] == "32" and r.attrs["api_version"] == "0"
    assert r.attrs["connection"] == "127.106.1.3:9092-127.106.2.50:37185"  # 0.10's connection id: no "-N" index


def test_restarts_kill_start_conflict_controlled_stop_and_its_failure():
    (r,) = sigs("broker3.server.log.killstart")["registration_conflict"]
    assert r.attrs["path"] == "/brokers/ids/3"
    s = sigs("broker2.server.log.stop")
    assert [x for x in ("broker_shutting_down", "controlled_shutdown_start", "controlled_shutdown_done", "broker_shut_down") if x not in s] == []
    s = sigs("broker1.server.log.stop-hung")
    assert "controlled_shutdown_gave_up" in s and "controlled_shutdown_done" not in s


def test_session_expiry_and_re_registration():
    assert "zk_session_expired" in sigs("broker2.kafkaServer.out.zkflap")
    assert sigs("broker2.server.log.zkflap")["broker_registered"][0].attrs["broker"] == "2"


def test_controller_and_cleaner_in_0_10_words():
    s = sigs("broker1.controller.log")
    assert s["controller_elected"][0].attrs == {**s["controller_elected"][0].attrs, "broker": "1", "epoch": "1"}
    assert s["controller_resigned"][0].attrs["broker"] == "1"
    assert any(r.attrs.get("deleted") == "2" and r.attrs.get("live") == "1,3" for r in s["broker_change"])
    assert "log_cleaner_died" in sigs("broker2.log-cleaner.log")


def test_jmxtool_0_10_output_is_read():
    from kafka_runbooks.host.jmxtool import OBJECT_NAMES, REQUEST_QUEUE, parse_jmxtool_output

    reading = parse_jmxtool_output(fixture_text("real0102/jmxtool.csv"))
    values = reading.values
    assert reading.problems == () and reading.form == "original" and f"{REQUEST_QUEUE}:Value" in values
    # every object name the detectors read exists on 0.10.2.1 under the same name
    assert {k.rsplit(":", 1)[0] for k in values} == set(OBJECT_NAMES)


def test_api_versions_of_0_10_2_1_place_it_and_its_branches():
    from kafka_runbooks import versions

    ranges = {int(k): tuple(v) for k, v in json.loads(fixture_text("real0102/api_versions.json")).items()}
    o = versions.from_api_versions(1, ranges)
    assert (o.low, o.high) == ((0, 10, 2), (0, 11, 0))
    kv = versions.cluster_version({1: [o]})
    assert [f for f in versions.FEATURES if kv.has(f)] == ["api_versions"]
    assert all(kv.lacks(f) for f in versions.FEATURES if f != "api_versions")


def test_a_leader_and_isr_of_the_epoch_the_follower_has_is_ignored_in_0_10_words():
    """fence-fetcher then zk-flap on broker 2 (tests/lab/test_kafka010.py): the controller's LeaderAndIsr for the
    re-registered broker carries orders-0's leader epoch 0, which broker 2 already has: WARN, [topic,p], both epochs."""
    (r,) = sigs("broker2.state-change.log.fence")["leader_and_isr_ignored"]
    assert r.wording == "0.9 – 0.11" and r.level == "WARN"
    assert {k: r.attrs[k] for k in ("broker", "controller", "correlation", "topic", "partition", "epoch", "current_epoch")} == {
        "broker": "2", "controller": "1", "correlation": "1", "topic": "orders", "partition": "0", "epoch": "0",
        "current_epoch": "0"}


def test_a_follower_that_refuses_to_truncate_is_a_finding_naming_broker_partition_offsets_and_the_decision():
    """Drill 003 on 0.10.2.1 (slot 9, 2026-11-25 12:54): broker 3 re-registered after its session loss, follows broker 2
    for orders-5 and exits rather than truncate (unclean.leader.election.enable=false; pre-KIP-101
    ReplicaFetcherThread.handleOffsetOutOfRange), then runs the shutdown hook's controlled shutdown."""
    from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose
    from kafka_runbooks.analyze.parsers import parse_content

    s = sigs("broker3.server.log.truncation-halt")
    (r,) = s["log_truncation_refused"]
    assert r.level == "FATAL" and r.wording == "0.10.1 – 0.11" and r.line == 22
    assert {k: r.attrs[k] for k in ("fetch_leader", "topic", "partition", "leader", "leader_offset", "broker", "replica_offset")} == {
        "fetch_leader": "2", "topic": "orders", "partition": "5", "leader": "2", "leader_offset": "1102", "broker": "3",
        "replica_offset": "1103"}
    assert "controlled_shutdown_start" in s  # System.exit(1): the shutdown hook's controlled shutdown, not a halt

    log = ParsedFile(path="hosts/b3/server_log.out", kind="server_log", broker_id=3,
                     result=parse_content("server_log", fixture_bytes("real0102/broker3.server.log.truncation-halt")), seq="1")
    (f,) = [x for x in diagnose([log], kafka_version="0.10.2.1") if x.kind == "log_truncation_refused"]
    assert f.severity.value == "critical" and f.broker_ids == (3,) and f.partitions == ("orders-5",)
    assert (f.details["leader"], f.details["leader_end_offset"], f.details["replica_end_offset"], f.details["records_only_here"]) == (2, 1102, 1103, 1)
    assert "exist only on broker 3" in f.summary and "truncates them" in f.summary and "decides" in f.summary
    (ev,) = f.evidence
    assert ev.lines == (22,) and "Exiting because log truncation is not allowed for partition orders-5" in ev.excerpt


def test_the_truncation_refusal_in_every_wording_of_kafkas_source():
    from kafka_runbooks.analyze.signatures import SIGNATURES

    rows = [s for s in SIGNATURES if s.name == "log_truncation_refused"]
    assert [s.versions for s in rows] == ["0.9 – 0.10.0", "0.10.1 – 0.11", "1.0 – 2.0"]
    for s in rows:
        for e in s.examples:
            msg = e.text.split("] ", 1)[1].split(" ", 1)[1].rsplit(" (kafka.", 1)[0]  # after the level, before the logger
            a = s.match(msg)
            assert a and a["leader_offset"] == "1102" and a["replica_offset"] == "1103" and a["broker"] == "3" and a["topic"] == "orders", (s.versions, msg)
    # 0.11.0's lower-case "current leader 2's" (FatalExitError instead of System.exit) is read by the 0.10.1 row
    assert rows[1].match("[ReplicaFetcherThread-0-2]: Exiting because log truncation is not allowed for partition orders-5, current "
                         "leader 2's latest offset 7 is less than replica 3's latest offset 9")["partition"] == "5"
