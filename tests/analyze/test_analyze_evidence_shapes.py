"""Issue 21: shapes of real files the analysis got wrong -- findings that claimed more than the evidence shows, and
files that parsed to nothing without saying so. Every fixture is recorded here (JDK 17 and 21, Kafka 2.3.0 and
0.10.2.1, ss) or cut from such a recording; tests/analyze/fixtures/README.md says how each was made."""

import dataclasses
import re

import pytest

from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose, file_table
from kafka_runbooks.analyze.lockgraph import build_wait_for_graph, find_cycles
from kafka_runbooks.analyze.parsers import parse_content, parse_log, parse_thread_dumps
from kafka_runbooks.analyze.parsers.kafka_log import CAUSE_FETCHER_STOPPED, fetch_errors
from kafka_runbooks.analyze.parsers.sockets import parse_sockets

from analyze_helpers import fixture_bytes, fixture_text

RW_CYCLE = {"kafka-request-handler-1", "group-metadata-manager-0", "controller-event-thread"}
SHAPES = ("shapes/deadlock_excerpt_no_header.txt", "shapes/deadlock_report_entries_only.txt",
          "shapes/deadlock_report_trailing_stack.txt")


def _kinds(fs):
    return [f.kind for f in fs]


def _dump_file(text, path="hosts/1/jstack.out", broker=1):
    return ParsedFile(path, "jstack", broker, result=parse_thread_dumps(text))


def _log_file(data, path="hosts/1/server.log", broker=1):
    return ParsedFile(path, "server_log", broker, result=parse_log(data))


# ---------------------------------------------------------------- 1. deadlock excerpts without the header


def excerpts(dump: str) -> dict[str, str]:
    """The three ways a deadlock report is pasted, cut from a real jstack output: the report and its stacks without
    the 'Found one Java-level deadlock:' heading; the report's entries alone; the heading and entries followed by a
    stack without its 'Java stack information' heading (and without the closing 'Found 1 deadlock.')."""
    lines = dump.split("\n")
    head = next(i for i, ln in enumerate(lines) if ln.startswith("Found one Java-level deadlock:"))
    info = next(i for i, ln in enumerate(lines) if ln.startswith("Java stack information for the threads listed above:"))
    end = next(i for i, ln in enumerate(lines) if re.match(r"Found \d+ deadlocks?\.", ln))
    entries = "\n".join(lines[head + 2:info]).rstrip()
    first_stack = lines[info + 2:]
    first_stack = first_stack[:next(i for i, ln in enumerate(first_stack[1:], 1) if ln.startswith('"'))]
    return {"no_header": "\n".join(lines[head + 2:end + 1]), "entries_only": entries,
            "trailing_stack": "\n".join(lines[head:head + 2]) + "\n" + entries + "\n\n" + "\n".join(first_stack)}


def _cycle_of(text):
    td = parse_thread_dumps(text)
    assert td.ok, td.unparsable
    cycles = [c for d in td.dumps for c in find_cycles(build_wait_for_graph(d))]
    assert len(cycles) == 1, [c.describe() for c in cycles]
    return cycles[0]


@pytest.mark.parametrize("name", SHAPES)
def test_deadlock_report_excerpts_of_jdk21_give_the_cycle(name):
    """Committed shapes, cut from a real JDK 21 jstack of RwLockDeadlock.java: a ReentrantReadWriteLock, a
    ReentrantLock and a monitor in one cycle."""
    c = _cycle_of(fixture_bytes(name))
    assert set(c.threads) == RW_CYCLE
    assert {e.cls for e in c.edges} == {"java.util.concurrent.locks.ReentrantReadWriteLock$NonfairSync",
                                        "java.util.concurrent.locks.ReentrantLock$NonfairSync", "java.lang.Object"}
    fs = diagnose([_dump_file(fixture_bytes(name))])
    dl = next(f for f in fs if f.kind == "jvm_deadlock")
    assert set(dl.details["cycle_threads"]) == RW_CYCLE and dl.details["lock_kinds"] == ["monitor", "synchronizer"]
    assert dl.evidence[0].lines and "held by" in dl.evidence[0].excerpt or "waiting" in dl.evidence[0].excerpt
    assert "lock_owner_unknown" not in _kinds(fs) and "unparsable" not in _kinds(fs)


def test_deadlock_report_excerpts_of_jdk17_and_of_the_lab_jvm(lab_stall):
    """The same three cuts of a real JDK 17 `jstack -l` (RwLockDeadlock) and of the lab's stalled JVM (`jstack`
    without -l: its ReentrantLock's holder is named only by the report)."""
    for dump, cycle in ((fixture_text("jdk17_rwlock_deadlock.jstack-l.txt"), RW_CYCLE),
                        (lab_stall["jstack"], {"lab-fault-1", "lab-fault-2"})):
        for shape, text in excerpts(dump).items():
            c = _cycle_of(text)
            assert set(c.threads) == cycle, shape
            fs = diagnose([_dump_file(text)])
            assert "jvm_deadlock" in _kinds(fs) and "lock_owner_unknown" not in _kinds(fs), (shape, _kinds(fs))
            assert "unparsable" not in _kinds(fs), shape


def test_a_trailing_stack_is_a_stack_not_a_report_entry():
    d = parse_thread_dumps(fixture_bytes("shapes/deadlock_report_trailing_stack.txt")).dumps[0]
    assert [e.thread for dl in d.deadlocks for e in dl] == ["kafka-request-handler-1", "group-metadata-manager-0",
                                                            "controller-event-thread"]
    assert all(e.held_by for dl in d.deadlocks for e in dl)
    (stack,) = d.deadlock_stacks
    assert stack.name == "kafka-request-handler-1" and stack.frames[0].text.startswith("jdk.internal.misc.Unsafe.park")
    assert any("without their 'Java stack information' heading" in n for n in d.notes)


def test_a_report_entry_without_holder_is_still_unparsable():
    """What the excerpt rule must not hide: an entry that does not name its holder."""
    text = "\n".join(ln for ln in fixture_text("shapes/deadlock_report_entries_only.txt").split("\n")
                     if "held by \"group-metadata-manager-0\"" not in ln)
    td = parse_thread_dumps("Found one Java-level deadlock:\n=============================\n" + text)
    assert not td.ok and any("has no 'which is held by' line" in r for r in td.unparsable)


# ---------------------------------------------------------------- 2. noise around a dump


@pytest.mark.parametrize("name,threads", [("real23/broker1.jstack.txt", 75), ("jdk17_rwlock_deadlock.jstack-l.txt", 22),
                                          ("jdk21/virtual_threads.jcmd-print.txt", 21)])
def test_blank_lines_a_date_or_a_prompt_around_a_dump_never_make_it_unparsable(name, threads):
    text = fixture_text(name)
    first, rest = text.split("\n", 1)
    variants = {"two blank lines": "\n\n" + text, "one blank line": "\n" + text,
                "a blank line under the date": first + "\n\n" + rest if not first.rstrip(":").isdigit() else "\n" + text,
                "a date line, then blank lines": "2026-11-24 21:00:00\n\n\n" + text,
                "blank lines and a prompt after": text + "\n\n$ \n", "blank lines on both ends": "\n\n" + text + "\n\n\n"}
    for what, v in variants.items():
        td = parse_thread_dumps(v)
        assert td.ok, (what, td.unparsable)
        assert [len(d.threads) for d in td.dumps] == [threads], what
        fs = diagnose([_dump_file(v)])
        assert "unparsable" not in _kinds(fs), what


# ---------------------------------------------------------------- 3. a session that timed out is not one that expired


def test_a_reconnect_with_the_same_session_is_not_an_expiry():
    """Real Kafka 2.3.0: the broker's ZooKeeper server was stopped 8 s; its client timed out after 6,670 ms and
    re-established session 0x200001131670001 on another server."""
    fs = diagnose([_log_file(fixture_bytes("real23/broker2.server.log.zk-reconnect"), broker=2)])
    assert "zk_session_expired" not in _kinds(fs)
    t = next(f for f in fs if f.kind == "zk_session_timeout")
    assert "6670 ms" in t.summary and "same session (0x200001131670001)" in t.summary and "stayed registered" in t.summary
    assert t.details["reconnected"] == 1 and t.severity.value == "info"
    assert all("0 time(s)" not in f.summary for f in fs)


def test_a_new_session_id_after_a_timeout_is_an_expiry():
    """The same real lines, but the session re-established is a new one (the old one expired while the client was
    away): an expiry, said once, with both session ids."""
    data = fixture_text("real23/broker2.server.log.zk-reconnect")
    data = data.replace("session id = 0x200001131670001", "session id = 0x100001131670007")
    fs = diagnose([_log_file(data.encode(), broker=2)])
    z = next(f for f in fs if f.kind == "zk_session_expired")
    assert "expired 1 time(s)" in z.summary and "0x200001131670001 -> 0x100001131670007" in z.summary
    assert "zk_session_timeout" not in _kinds(fs)


def test_a_real_expiry_logged_twice_counts_once_and_zero_is_never_said():
    fs = diagnose([_log_file(fixture_bytes("real23/broker3.server.log"), broker=3)])
    z = next(f for f in fs if f.kind == "zk_session_expired")
    assert z.details["expiries"] == 1 and z.details["expiry_lines"] == 2 and "46618 ms" in z.summary
    for name in ("real23/broker1.server.log.pause", "real23/broker1.server.log.restart", "real23/broker2.server.log.shutdown",
                 "seed000_broker1_server.log", "real23/broker2.server.log.zk-reconnect"):
        assert all(" 0 time(s)" not in f.summary for f in diagnose([_log_file(fixture_bytes(name))])), name


def test_a_timeout_the_log_does_not_resolve_is_said_to_be_unknown():
    data = "\n".join(ln for ln in fixture_text("real23/broker2.server.log.zk-reconnect").split("\n")
                     if "Session establishment complete" not in ln)
    fs = diagnose([_log_file(data.encode(), broker=2)])
    t = next(f for f in fs if f.kind == "zk_session_timeout")
    assert "whether the session survived is not shown" in t.summary and t.details["ambiguity"]
    assert "zk_session_expired" not in _kinds(fs)


# ---------------------------------------------------------------- 4. a fetcher stopped by a leadership change


def test_a_fetch_error_of_a_fetcher_being_stopped_by_a_leadership_change_is_not_the_leaders_fault():
    data = fixture_bytes("shapes/fetcher_stopped_by_leadership_change.log")
    fs = diagnose([_log_file(data)])
    assert "peer_fetch_failures" not in _kinds(fs)
    own = next(f for f in fs if f.kind == "fetch_failures_own_doing")
    assert own.broker_ids == (1,) and "leaders named: 3" in own.summary
    assert "Removed fetcher for partitions" in own.summary and "leadership moved" in own.summary
    (fe,) = fetch_errors(data, broker_id=1)
    assert fe.cause == CAUSE_FETCHER_STOPPED and fe.leader_broker_id == 3


def test_the_same_error_outside_a_stopping_fetcher_still_counts_against_the_leader():
    """Without the fetcher's 'Shutting down' before it, nothing says the fetcher was being stopped."""
    data = b"\n".join(ln for ln in fixture_bytes("shapes/fetcher_stopped_by_leadership_change.log").split(b"\n")
                      if b"] Shutting down" not in ln)
    fs = diagnose([_log_file(data)])
    p = next(f for f in fs if f.kind == "peer_fetch_failures")
    assert p.broker_ids == (3,)


# ---------------------------------------------------------------- 5. socket tables that parsed to zero rows


def test_ss_a_without_n_is_read_with_its_service_names_and_interface_suffixes():
    """Real `ss -a` (iproute2 6.1) of the slot-1 lab, ports named by /etc/services (IANA's XmlIpcRegSvc = 9092,
    eforward = 2181), columns padded to the UNIX sockets' paths, a listener bound to lo (`%lo`)."""
    t = parse_sockets(fixture_bytes("real23/ss-a-service-names.txt"))
    assert t.ok and t.format == "ss" and len(t.rows) == 89 and t.unix_rows == 63
    assert any("XmlIpcRegSvc=9092" in n for n in t.notes)
    lo = [r for r in t.rows if r.local.startswith("127.101.9.9%lo")]
    assert {(r.local_host, r.local_port, r.state) for r in lo} == {("127.101.9.9", 9092, "LISTEN"), ("127.101.9.9", 9092, "CLOSE_WAIT")}
    served = [r for r in t.rows if r.local_host == "127.101.1.1" and r.local_port == 9092 and r.state == "ESTABLISHED"]
    assert served
    # where UNIX sockets dominate, the old reader said "fine" with 0 rows
    lines = fixture_text("real23/ss-a-service-names.txt").split("\n")
    few = "\n".join([ln for ln in lines if not ln.startswith(("tcp", "udp"))] + [ln for ln in lines if ln.startswith("tcp")][:10])
    t2 = parse_sockets(few)
    assert t2.ok and len(t2.rows) == 10


def test_macos_netstat_An_is_read_and_its_cut_addresses_are_said():
    t = parse_sockets(fixture_bytes("macos_netstat_An.txt"))
    assert t.ok and t.format == "netstat_bsd" and len(t.rows) == 13 and t.unix_rows == 40
    assert sum(1 for r in t.rows if r.local_port == 9092 and r.state == "CLOSE_WAIT") == 5
    cut = next(r for r in t.rows if r.local.startswith("192.168.100.123"))
    assert cut.local_port is None and any("netstat -A's 18 characters" in n for n in t.notes)
    fs = diagnose([ParsedFile("hosts/1/sockets.out", "sockets_netstat", 1, result=t)], broker_ports={1: 9092},
                  broker_hosts={1: "192.168.1.10"})
    assert "broker_socket_pileup" in _kinds(fs)


def test_a_table_with_lines_but_no_rows_is_never_silently_fine():
    text = fixture_text("macos_netstat_An.txt").replace("tcp4", "TCPv4").replace("tcp46", "TCPv46").replace("udp4", "UDPv4")
    t = parse_sockets(text)
    assert not t.rows and not t.ok
    assert any(re.match(r"no socket rows recognised: \d+ of \d+ non-blank lines not understood", u) for u in t.unparsable)
    fs = diagnose([ParsedFile("hosts/1/sockets.out", "sockets_netstat", 1, result=t)])
    assert "unparsable" in _kinds(fs)


# ---------------------------------------------------------------- 6. JDK 21 thread dumps


def test_jcmd_thread_dump_to_file_text_of_jdk21_is_read():
    td = parse_thread_dumps(fixture_bytes("jdk21/virtual_threads.dump_to_file.txt"))
    assert td.ok, td.unparsable
    (d,) = td.dumps
    assert d.format == "text" and d.jvm == "21.0.8+9-LTS" and d.timestamp.startswith("2026-11-24T20:54:57")
    virtual = [t for t in d.threads if t.virtual]
    assert [(t.number, t.name) for t in virtual] == [(19, "vt-pinned-on-monitor"), (21, ""), (23, ""), (24, "")]
    pinned = virtual[0]
    assert pinned.frames[0].text == "VirtualThreads.lambda$main$1(VirtualThreads.java:33)"
    assert any("no states or lock information" in n for n in d.notes)
    assert "unparsable" not in _kinds(diagnose([_dump_file(fixture_bytes("jdk21/virtual_threads.dump_to_file.txt"))]))


def test_a_carrier_is_linked_to_the_virtual_thread_it_carries():
    for name in ("jdk21/virtual_threads.jstack-l.txt", "jdk21/virtual_threads.jcmd-print.txt"):
        d = parse_thread_dumps(fixture_bytes(name)).dumps[0]
        carrier = next(t for t in d.threads if t.carrying is not None)
        assert (carrier.name, carrier.carrying) == ("ForkJoinPool-1-worker-1", 19) and not d.unrecognized.count
    files = [_dump_file(fixture_bytes("jdk21/virtual_threads.jstack-l.txt"), "hosts/1/jstack-1.out"),
             _dump_file(fixture_bytes("jdk21/virtual_threads.dump_to_file.txt"), "hosts/1/threads.txt")]
    diagnose(files)
    note = "virtual thread #19 'vt-pinned-on-monitor' (hosts/1/threads.txt:61) is mounted on carrier 'ForkJoinPool-1-worker-1' (hosts/1/jstack-1.out:114)"
    rows = {r["path"]: r for r in file_table(files)}
    assert note in rows["hosts/1/jstack-1.out"]["notes"] and note in rows["hosts/1/threads.txt"]["notes"]
    assert rows["hosts/1/threads.txt"]["virtual_threads"] == 4 and rows["hosts/1/jstack-1.out"]["carriers"] == 1
    v = next(t for t in files[1].result.dumps[0].threads if t.number == 19)
    assert v.carrier == "ForkJoinPool-1-worker-1"


# ---------------------------------------------------------------- 7. a broker that failed to start


@pytest.mark.parametrize("name,cause", [
    ("real23/fatal-startup-oom.server.log", "java.lang.OutOfMemoryError: Java heap space"),
    ("real23/fatal-startup-bind.server.log", "Socket server failed to bind to 127.101.1.1:9092: Address already in use."),
    ("real010/fatal-startup-bind.server.log", "kafka.common.KafkaException: Socket server failed to bind"),
    ("real010/fatal-startup-bind.kafkaServer.out", "kafka.common.KafkaException: Socket server failed to bind")])
def test_a_broker_that_failed_to_start_is_a_finding_with_its_cause(name, cause):
    fs = diagnose([_log_file(fixture_bytes(name), "hosts/9/server.log", 9)])
    f = next(f for f in fs if f.kind == "broker_startup_failed")
    assert f.severity.value == "critical" and f.broker_ids == (9,) and cause in f.details["cause"] and cause[:40] in f.summary
    assert f.details["failed_starts"] == 1 and f.evidence[0].lines


def test_a_crash_loop_is_several_failed_starts():
    data = fixture_bytes("real23/fatal-startup-bind.server.log")
    f = next(f for f in diagnose([_log_file(data + data, "hosts/9/server.log", 9)]) if f.kind == "broker_startup_failed")
    assert f.details["failed_starts"] == 2 and "crash loop" in f.summary


RECORD = re.compile(r"^\[(?P<d>[0-9-]{10}) (?P<t>[0-9:,]{12})\] (?P<p>[A-Z]+) (?P<m>.*) \((?P<c>[A-Za-z0-9.$]+)\)$")
LAYOUTS = {  # log4j 1 and 2 patterns of docs/SIGNATURES.md, the same records in each
    "strimzi": lambda d, t, p, m, c: f"{d} {t} {p} {m} ({c}) [main]",
    "thread_logger": lambda d, t, p, m, c: f"{d} {t} {p} [main] {c} - {m}",
    "bracketed": lambda d, t, p, m, c: f"[{d} {t}] [{p}] [main] [{c}] - {m}",
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_failed_start_is_found_in_every_layout(layout):
    out = []
    for ln in fixture_text("real23/fatal-startup-oom.server.log").split("\n"):
        m = RECORD.match(ln)
        out.append(LAYOUTS[layout](*m.group("d", "t", "p", "m", "c")) if m else ln)
    p = parse_log("\n".join(out).encode())
    assert p.layout == layout
    f = next(f for f in diagnose([ParsedFile("hosts/9/server.log", "server_log", 9, result=p)]) if f.kind == "broker_startup_failed")
    assert "java.lang.OutOfMemoryError: Java heap space" in f.summary and f.details["exited"]


# ---------------------------------------------------------------- issue 16 §3: empty optional files are not findings


def test_an_empty_optional_file_is_a_note_and_an_empty_required_one_a_finding():
    empty_gc = ParsedFile("hosts/3/log-kafkaServer-gc.out", "gc_log", 3, result=parse_content("gc_log", b""), optional=True)
    empty_out = dataclasses.replace(_log_file(b"", "hosts/3/log-kafkaServer.out", 3), kind="kafka_stdout", optional=True)
    empty_jstack = ParsedFile("hosts/3/jstack-1.out", "jstack", 3, result=parse_thread_dumps(b""))
    fs = diagnose([empty_gc, empty_out, empty_jstack])
    assert [(f.kind, f.details["path"]) for f in fs] == [("unparsable", "hosts/3/jstack-1.out")]
    assert "empty input" in fs[0].summary
    notes = {r["path"]: r["notes"] for r in file_table([empty_gc, empty_out, empty_jstack])}
    assert "an optional file" in notes["hosts/3/log-kafkaServer-gc.out"] and "an optional file" in notes["hosts/3/log-kafkaServer.out"]


NOISE_BUNDLE = "bundles/real23-noise"
GC, STDOUT, JSTACK = "hosts/3/log-kafkaServer-gc.out", "hosts/3/log-kafkaServer.out", "hosts/3/jstack-1.out"


def _noise_bundle(tmp_path, empty=()):
    """The real capture of the slot-1 lab (broker 3's small files; its GC log was empty, as after a rotation), with
    ``empty`` files emptied as the capture would record them (bytes 0, sha256 of nothing)."""
    import hashlib
    import json
    import shutil

    from analyze_helpers import FIXTURES

    dst = tmp_path / "bundle"
    shutil.copytree(FIXTURES / NOISE_BUNDLE, dst)
    m = json.loads((dst / "manifest.json").read_text())
    for rel in empty:
        (dst / rel).write_bytes(b"")
        entry = next(f for f in m["files"] if f["path"] == rel)
        entry.update(bytes=0, sha256=hashlib.sha256(b"").hexdigest())
    (dst / "manifest.json").write_text(json.dumps(m, indent=1))
    return dst


def test_a_real_capture_says_nothing_of_its_empty_optional_files_and_still_of_an_empty_required_one(spark, tmp_path):
    """Issue 16 §3: kafkaServer-gc.log (empty in the real capture) and kafkaServer.out (empty, as for a broker whose
    stdout goes to the journal) are optional: no finding, so nothing on the approval page's "Key evidence"; the
    suspect's first jstack, emptied, is required: an unparsable finding that says so."""
    from kafka_runbooks.model import Finding
    from kafka_runbooks.remediate.briefing import _findings_section

    from analyze_helpers import run_in_session

    b = _noise_bundle(tmp_path, empty=[STDOUT, JSTACK])
    assert (b / GC).stat().st_size == 0
    doc = run_in_session(spark, b, tmp_path / "out")
    named = {f["details"].get("path") for f in doc["findings"] if f["kind"] in ("unparsable", "damaged_evidence")}
    assert GC not in named and STDOUT not in named
    (unp,) = [f for f in doc["findings"] if f["kind"] == "unparsable" and f["details"]["path"] == JSTACK]
    assert "empty input" in unp["summary"]
    text = "\n".join(_findings_section([Finding.from_dict(f) for f in doc["findings"]], None))
    assert GC not in text and STDOUT not in text and JSTACK in text
    files = {r["path"]: r for r in doc["files"]}
    for rel in (GC, STDOUT):
        assert files[rel]["problems"] is None and "an optional file" in files[rel]["notes"], files[rel]
    assert "empty input" in files[JSTACK]["problems"]
