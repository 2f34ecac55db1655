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
