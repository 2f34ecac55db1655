"""Thread dumps of every format, and lock analysis on a real JVM: cycles made of a monitor and a
ReentrantLock, found with and without jstack's own report, the request handlers stalled behind them,
threads told apart by nid, several dumps per file (kill -3 into the broker's stdout)."""

from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose
from kafka_runbooks.analyze.lockgraph import build_wait_for_graph, find_cycles, stalled_request_handlers
from kafka_runbooks.analyze.parsers import parse_log, parse_thread_dumps
from kafka_runbooks.analyze.parsers.jstack import parse_json_dump, strip_deadlock_section

from analyze_helpers import fixture_bytes, fixture_text

CYCLE = {"lab-fault-1", "lab-fault-2"}
HANDLERS = {f"data-plane-kafka-request-handler-{i}" for i in range(4)}


def _one(text):
    td = parse_thread_dumps(text)
    assert td.ok, td.unparsable
    return td.dumps[0]


def _cycle(dump):
    g = build_wait_for_graph(dump)
    cycles = find_cycles(g)
    assert [set(c.threads) for c in cycles] == [CYCLE]
    return g, cycles[0]


def test_real_jvm_monitor_and_reentrantlock_cycle_with_and_without_the_report(lab_stall):
    for text in (lab_stall["jstack_l"][0], lab_stall["jcmd"]):
        for variant in (text, strip_deadlock_section(text)):
            d = _one(variant)
            g, c = _cycle(d)
            assert {e.kind for e in c.edges} == {"monitor", "synchronizer"}
            assert {e.cls for e in c.edges} == {"java.lang.Object", "java.util.concurrent.locks.ReentrantLock$NonfairSync"}
            assert all(e.source == "stacks" for e in c.edges)  # from lock ownership, not from jstack's report
            assert {t.name for t in stalled_request_handlers(d, g, c)} == HANDLERS


def test_without_jstack_l_the_report_names_the_owner_and_nothing_is_claimed_without_it(lab_stall):
    d = _one(lab_stall["jstack"])
    assert not d.ownable_info
    g, c = _cycle(d)
    assert any(e.source == "deadlock_report" for e in c.edges)
    fs = diagnose([ParsedFile("hosts/1/jstack.out", "jstack", 1, result=parse_thread_dumps(strip_deadlock_section(lab_stall["jstack"])))])
    assert not [f for f in fs if f.kind == "jvm_deadlock"]
    u = next(f for f in fs if f.kind == "lock_owner_unknown")
    assert "without jstack -l" in u.summary and "neither shown nor ruled out" in u.summary


def test_threads_sharing_a_name_are_told_apart(lab_stall):
    d = _one(lab_stall["jstack_l"][0])
    flushers = [t for t in d.threads if t.name == "log-flusher"]
    assert len(flushers) == 2 and len({t.key for t in flushers}) == 2 and all(t.key.startswith("nid=") for t in flushers)


def test_kill_3_dumps_inside_the_broker_stdout_are_several_dumps_in_order(lab_stall):
    raw = lab_stall["stdout"].read_bytes()
    td = parse_thread_dumps(raw)
    assert len(td.dumps) == 2 and td.dumps[0].first_line < td.dumps[1].first_line and td.ok
    for d in td.dumps:
        _cycle(d)
        assert d.reported_deadlock_count == 1
    fs = diagnose([ParsedFile("hosts/1/kafkaServer.out", "jstack", 1, result=td, embedded=True)])
    dl = next(f for f in fs if f.kind == "jvm_deadlock")
    assert dl.details["dumps"] == 2 and dl.details["progress"] == "stuck"
    assert "request handling stalled behind the deadlock: 4 request handler thread(s)" in dl.summary
    st = next(f for f in fs if f.kind == "request_handling_stalled")
    assert set(st.details["handlers"]) == HANDLERS and st.details["cause"] == "deadlock"


def test_live_diagnosis_across_two_jstack_files(lab_stall):
    files = [ParsedFile(f"hosts/1/jstack-{i}.out", "jstack", 1, result=parse_thread_dumps(t), seq=str(i))
             for i, t in enumerate(lab_stall["jstack_l"])]
    dl = next(f for f in diagnose(files) if f.kind == "jvm_deadlock")
    assert set(dl.details["cycle_threads"]) == CYCLE and dl.details["dumps"] == 2 and dl.details["progress"] == "stuck"
    assert set(dl.details["request_handlers_stalled"]) == HANDLERS
    assert dl.details["lock_kinds"] == ["monitor", "synchronizer"]


def test_real_kafka_23_dumps_have_no_false_cycle():
    for name in ("real23/broker1.jstack.txt", "real23/broker1.jcmd.txt"):
        d = _one(fixture_bytes(name))
        assert len(d.threads) == 75 and not find_cycles(build_wait_for_graph(d))
        assert sum(t.serves_requests for t in d.threads) == 8  # 2.3's data-plane-kafka-request-handler-0..7
    td = parse_thread_dumps(fixture_bytes("real23/broker1.kafkaServer.out"))
    assert [len(d.threads) for d in td.dumps] == [69, 69]
    assert not [f for f in diagnose([ParsedFile("o", "jstack", 1, result=td)]) if f.kind == "jvm_deadlock"]
    # the same file as a log: its log lines are read, the dumps are not mistaken for log records
    p = parse_log(fixture_bytes("real23/broker1.kafkaServer.out"))
    assert p.layout == "kafka" and p.records


def test_jdk21_headers_visualvm_and_json_dumps():
    d = _one(fixture_text("jdk21_headers.txt"))
    t = d.threads[0]
    assert (t.name, t.number, t.nid, t.tid, t.state) == ("main", 1, "7", "0x00007776a802ad50", "RUNNABLE")
    assert t.frames[0].text == "java.util.LinkedList.node(java.base@21.0.12/LinkedList.java:582)"
    t = _one(fixture_text("jdk21_headers_e.txt")).threads[0]
    assert t.nid == "12" and t.header_state == "waiting on condition"
    # VisualVM: owners printed on the waiting line, threads known by t@N
    d = _one(fixture_bytes("visualvm_deadlock.txt"))
    assert d.format == "visualvm"
    g = build_wait_for_graph(d)
    c = find_cycles(g)
    assert [set(x.threads) for x in c] == [{"线程A", "线程B"}] and {e.source for e in c[0].edges} == {"stacks"}
    # jcmd JSON format 1 (JDK 19-24) and 2 (JDK 25+): threads and stacks; no lock data in format 1, said so
    v1 = parse_json_dump(fixture_text("jcmd_threads_v1.json"))
    assert v1.format == "json" and [t.name for t in v1.threads] == ["Reference Handler"] and v1.threads[0].tid == "8"
    assert v1.threads[0].frames[0].text.startswith("java.base/java.lang.ref.Reference.waitForReferencePendingList")
    v2 = parse_json_dump(fixture_text("jcmd_threads_v2.json"))
    assert v2.threads[0].state == "RUNNABLE" and v2.threads[0].tid == "8"
    assert parse_thread_dumps(fixture_bytes("jcmd_threads_v1.json")).dumps[0].format == "json"


def test_seed_excerpt_without_header_still_yields_its_cycle():
    text = fixture_text("seed001_219_jstack_deadlock.txt")
    stacks = text[text.index("Java stack information"):]
    d = _one(strip_deadlock_section("Found one Java-level deadlock:\n" + "Found 1 deadlock.\n" + stacks))
    g = build_wait_for_graph(d)
    assert [set(c.threads) for c in find_cycles(g)] == [{"group-metadata-manager-0", "kafka-request-handler-3"}]
    c = find_cycles(g)[0]
    assert {t.name for t in stalled_request_handlers(d, g, c)} == {"kafka-request-handler-3"}
