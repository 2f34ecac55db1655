"""One row per signature wording, each with real example lines: every example yields its signature, and
docs/SIGNATURES.md is the table rendered from the code."""

import pytest

from kafka_runbooks.analyze import signatures as S
from kafka_runbooks.analyze.parsers.layouts import BY_NAME, LAYOUTS, detect, gate_key, gate_keys
from kafka_runbooks.analyze.parsers.logs import is_exception_line, parse_lines

from analyze_helpers import REPO

EXAMPLES = [(s, e) for s in S.SIGNATURES for e in s.examples]


@pytest.mark.parametrize("sig,ex", EXAMPLES, ids=[f"{s.name}:{s.versions}:{e.version}" for s, e in EXAMPLES])
def test_every_example_line_yields_its_signature(sig, ex):
    lines = ex.text.split("\n")
    p = parse_lines(lines)
    assert p.records, f"no record read from {ex.text!r}"
    r = p.records[0]
    assert r.signature == sig.name, (r.signature, r.logger, r.message)
    # and this very row's pattern matches its example (not only an earlier row of the same name)
    text = r.message if sig.on == "message" else next(l for l in lines[1:] if is_exception_line(l))
    assert r.logger_simple in sig.loggers
    assert sig.match(text) is not None


def test_every_row_has_a_real_example():
    assert [f"{s.name} {s.versions}" for s in S.SIGNATURES if not s.examples] == []


def test_wordings_of_the_issue_are_all_covered():
    by = {(s.name, s.versions) for s in S.SIGNATURES}
    for name in ("replica_fetch_error", "isr_shrink", "isr_expand", "group_load_start", "group_load_done"):
        assert sum(1 for n, _ in by if n == name) >= 2, name  # an old and a new wording at least
    texts = {e.text for _, e in EXAMPLES}
    assert any("Loading offsets and group metadata from [__consumer_offsets,19]" in t for t in texts)  # 0.9/0.10
    assert any("Scheduling loading of offsets and group metadata from __consumer_offsets-" in t for t in texts)  # 1.x+
    assert any("Error in fetch kafka.server.ReplicaFetcherThread$FetchRequest" in t for t in texts)  # 0.9-0.10
    assert any("Error sending fetch request" in t for t in texts) and any("Error in response for fetch request" in t for t in texts)
    assert any("Shrinking ISR for partition [" in t for t in texts) and any("] Shrinking ISR from " in t for t in texts)
    assert any("ISR updated to" in t for t in texts)
    assert any("LEADER ELECTION TOOK - 22978" in t for t in texts) and any("TOOK - 104 MS" in t for t in texts)


def test_signatures_doc_is_current():
    doc = (REPO / "docs" / "SIGNATURES.md").read_text(encoding="utf-8")
    assert doc == S.render_markdown(), "docs/SIGNATURES.md is stale: python -m kafka_runbooks.analyze.signatures > docs/SIGNATURES.md"


@pytest.mark.parametrize("layout", [l.name for l in LAYOUTS])
def test_layout_example_is_read_and_detected(layout):
    l = BY_NAME[layout]
    h = l.header(l.example)
    assert h is not None and h.level in ("INFO", "WARN", "ERROR")
    best, n, _ = detect([l.example])
    assert best is not None and n == 1
    if layout.startswith("zookeeper"):
        assert best.name.startswith("zookeeper")
    else:
        assert best.name == layout
    # the Spark scan's cheap gate key is the logger's simple name (kafka keeps its ")")
    key = gate_key(layout, l.example)
    assert key in gate_keys(layout, {h.logger_simple}), (key, h.logger_simple)


def test_gate_key_agrees_with_the_header_on_real_logs():
    from analyze_helpers import FIXTURES

    for name in ("real23/broker3.server.log", "real23/broker1.controller.log", "real23/zk1.zookeeper.log",
                 "real23/zk2.zookeeper.log", "seed004_zk13_follower.log"):
        lines = (FIXTURES / name).read_text(encoding="utf-8").split("\n")
        layout, _, _ = detect(lines)
        checked = 0
        for ln in lines:
            h = layout.header(ln)
            if h is not None and h.logger:
                assert gate_key(layout.name, ln) in gate_keys(layout.name, {h.logger_simple}), (name, ln)
                checked += 1
        assert checked > 0


@pytest.mark.parametrize("sig,ex", EXAMPLES, ids=[f"{s.name}:{s.versions}:{e.version}" for s, e in EXAMPLES])
def test_the_native_scan_hands_over_every_example_record(sig, ex):
    """rg's fixed strings (nativescan.literals) are found in every example's record line: the native scan never
    leaves a signature record behind, in any version's wording or layout."""
    from kafka_runbooks.analyze.nativescan import literals

    record_line = ex.text.split("\n")[0]
    assert any(lit in record_line for lit in literals()), record_line


def test_the_controllers_requests_a_2_3_broker_refused_or_failed_to_handle():
    """Real Kafka 2.3.0 (tests/analyze/fixtures/real23/drill003.broker3.server.log, drill 003's broker 3 flapping): the
    controller's UpdateMetadata for the registration the broker had just made, refused before the broker took that
    registration's epoch as its own (KafkaApis.isBrokerEpochStale: "Epoch N larger than current broker epoch M"); a
    LeaderAndIsr it failed to apply when its ZooKeeper session expired; each registration's broker epoch (czxid)."""
    from kafka_runbooks.analyze.parsers.kafka_log import parse, request_partitions

    from analyze_helpers import fixture_text

    recs = [r for r in parse(fixture_text("real23/drill003.broker3.server.log"))
            if r.signature in ("control_request_failed", "broker_registered")]
    got = [(r.signature, r.attrs.get("api"), r.attrs.get("request_broker_epoch"), r.attrs.get("current_broker_epoch"),
            r.attrs.get("broker_epoch")) for r in recs]
    assert got == [("control_request_failed", "UPDATE_METADATA", "4294968040", "4294968034", None),
                   ("control_request_failed", "UPDATE_METADATA", "4294968040", "4294968034", None),
                   ("broker_registered", None, None, None, "4294968045"),
                   ("broker_registered", None, None, None, "4294968840"),
                   ("control_request_failed", "LEADER_AND_ISR", "4294968836", None, None),
                   ("broker_registered", None, None, None, "4294968844")]
    assert {r.attrs["cause"] for r in recs if r.signature == "control_request_failed"} == {
        "java.lang.IllegalStateException", "org.apache.zookeeper.KeeperException$SessionExpiredException"}
    lai = next(r for r in recs if r.attrs.get("api") == "LEADER_AND_ISR")
    parts = request_partitions(lai.message)
    assert len(parts) == 59 and parts[0] == ("orders", 0, 1) and ("__consumer_offsets", 49, 1) in parts
    # the stale case, refused as meant for an older registration: recognised, its own signature (never fetch evidence)
    (r,) = parse("[2026-11-24 20:48:06,180] INFO [KafkaApi-3] Received update metadata request with broker epoch 4294968034 "
                 "smaller than the current broker epoch 4294968045 (kafka.server.KafkaApis)\n")  # built from 2.3.0's format
    assert r.signature == "control_request_stale_broker_epoch" and r.attrs["request"] == "update metadata"
