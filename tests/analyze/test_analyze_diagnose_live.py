from kafka_runbooks.analyze.diagnosis import ParsedFile, broker_table, diagnose, timeline
from kafka_runbooks.analyze.lockgraph import build_wait_for_graph, compare_dumps, find_cycles
from kafka_runbooks.analyze.parsers import parse_content
from kafka_runbooks.analyze.parsers.jstack import parse_jstack, strip_deadlock_section
from kafka_runbooks.analyze.report_html import render_report
from kafka_runbooks.model import Finding, Severity

from analyze_helpers import fixture_bytes

SEED_FILES = [
    ("hosts/219/jstack-1.out", "seed001_219_jstack_deadlock.txt", "jstack", 219),
    ("hosts/219/jstack-2.out", "seed001_219_jstack_deadlock.txt", "jstack", 219),
    ("hosts/219/netstat.out", "seed001_219_netstat_antp.txt", "sockets_netstat", 219),
    ("hosts/217/netstat.out", "seed001_217_netstat_antp.txt", "sockets_netstat", 217),
    ("hosts/218/netstat.out", "seed001_218_netstat_antp.txt", "sockets_netstat", 218),
    ("hosts/217/server_log.out", "seed001_217_server.log", "server_log", 217),
    ("hosts/218/server_log.out", "seed001_218_server.log", "server_log", 218),
    ("hosts/219/server_log.out", "seed001_219_server.log", "server_log", 219),
]


def seed_files(extra=()):
    files = [ParsedFile(path=p, kind=k, broker_id=b, result=parse_content(k, fixture_bytes(f)), seq=p)
             for p, f, k, b in SEED_FILES]
    return files + list(extra)


def _deadlock(findings):
    found = [f for f in findings if f.kind == "jvm_deadlock"]
    assert len(found) == 1, [f.summary for f in findings]
    return found[0]


def test_seed_diagnosis_with_version():
    findings = diagnose(seed_files(), kafka_version="0.10.1.0")
    f = _deadlock(findings)
    assert f.severity is Severity.CRITICAL and f.broker_ids == (219,)
    assert f.summary.startswith("JVM deadlock on broker 219: executor-Heartbeat -> group-metadata-manager-0 -> "
                                "kafka-request-handler-3 -> group-metadata-manager-0")
    assert "<0x000000070dbce4c8> (kafka.coordinator.GroupMetadata)" in f.summary
    assert "<0x0000000715a00000> (java.util.LinkedList)" in f.summary
    d = f.details
    assert d["progress"] == "stuck" and d["dumps"] == 2
    assert [c["thread"] for c in d["cycle"]] == ["executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"]
    c1 = {k: v for k, v in d["cycle"][1].items() if k in ("thread", "held_by", "in_cycle", "waiting_for")}
    assert c1 == {"thread": "group-metadata-manager-0", "held_by": "kafka-request-handler-3", "in_cycle": True,
                  "waiting_for": {"address": "0x0000000715a00000", "class": "java.util.LinkedList", "kind": "monitor"}}
    assert d["cycle"][1]["edge_source"] == "stacks"
    ids = [b["id"] for b in d["known_bugs"]]
    assert {"KAFKA-3994", "KAFKA-4399", "KAFKA-4478", "KAFKA-4562", "KAFKA-4477"} <= set(ids)
    assert "KAFKA-5970" not in ids  # no DelayedProduce lock awaited in this cycle
    assert "0.10.1.1" in d["advice"] and "KAFKA-5970" in d["advice"]
    assert [e.source for e in f.evidence] == ["hosts/219/jstack-1.out", "hosts/219/jstack-2.out"]
    assert {15, 17, 27, 36, 55, 63} <= set(f.evidence[0].lines)
    assert "waiting to lock <0x000000070dbce4c8>" in f.evidence[0].excerpt
    kinds = {x.kind for x in findings}
    assert {"broker_socket_pileup", "peer_fetch_failures"} <= kinds
    cw = next(x for x in findings if x.kind == "broker_socket_pileup")
    assert cw.broker_ids == (219,) and cw.details["states_on_port"] == {"CLOSE_WAIT": 10, "ESTABLISHED": 1}
    pf = next(x for x in findings if x.kind == "peer_fetch_failures")
    assert pf.broker_ids == (219,) and pf.details["reporters"] == [217, 218]
    assert {e.source for e in pf.evidence} == {"hosts/217/server_log.out", "hosts/218/server_log.out"}
    assert all(e.lines == (1, 2) for e in pf.evidence)
    # JSON round trip through the shared vocabulary
    assert Finding.from_dict(f.to_dict()).to_dict() == f.to_dict()


def test_fixed_version_is_not_blamed():
    for v in ("0.10.1.1", "0.10.2.0", "2.8.1"):
        d = _deadlock(diagnose(seed_files(), kafka_version=v)).details
        assert not [b for b in d["known_bugs"] if b["id"] in ("KAFKA-3994", "KAFKA-4399")], v
        assert {"KAFKA-3994", "KAFKA-4399"} <= {b["id"] for b in d["ruled_out_bugs"]}


def test_version_from_server_log_and_unknown_version():
    log = ParsedFile("hosts/219/server_log-2.out", "server_log", 219, result=parse_content(
        "server_log", "[2020-04-01 00:00:00,000] INFO Kafka version : 0.10.1.0 (org.apache.kafka.common.utils.AppInfoParser)\n"))
    d = _deadlock(diagnose(seed_files([log]))).details
    assert d["kafka_version"] == "0.10.1.0" and "KAFKA-3994" in {b["id"] for b in d["known_bugs"]}
    d = _deadlock(diagnose(seed_files())).details
    assert d["kafka_version"] is None and all(b["status"].startswith("version unknown") for b in d["known_bugs"])


def test_unparsable_files_become_findings():
    bad = [ParsedFile("hosts/219/jstack-3.out", "jstack", 219, result=parse_content("jstack", b"\x00\xff" * 100)),
           ParsedFile("hosts/219/open_files.out", "open_files", 219, result=parse_content("open_files", b"")),
           ParsedFile("hosts/219/lsof.out", "open_files", 219, problems=["sha256 mismatch: manifest aa, file bb"])]
    findings = diagnose(seed_files(bad), kafka_version="0.10.1.0")
    unp = {f.details["path"]: f for f in findings if f.kind == "unparsable"}
    assert set(unp) == {"hosts/219/jstack-3.out", "hosts/219/open_files.out", "hosts/219/lsof.out"}
    assert all(f.severity is Severity.WARNING for f in unp.values())
    assert "sha256 mismatch" in unp["hosts/219/lsof.out"].summary
    _deadlock(findings)  # the good evidence is still diagnosed


def test_report_is_self_contained_and_escaped():
    hostile = ParsedFile("hosts/219/jstack-9.out", "jstack", 219, result=parse_jstack(
        "Found one Java-level deadlock:\n=============================\n"
        '"<script>alert(1)</script>":\n  waiting to lock monitor 0x1 (object 0x00000000000000aa, a <b>X</b>),\n'
        '  which is held by "t2"\n"t2":\n  waiting to lock monitor 0x2 (object 0x00000000000000bb, a Y),\n'
        '  which is held by "<script>alert(1)</script>"\n\nJava stack information for the threads listed above:\n'
        "===================================================\n"
        '"<script>alert(1)</script>":\n\tat A.a(A.java:1)\n\t- waiting to lock <0x00000000000000aa> (a <b>X</b>)\n'
        "\t- locked <0x00000000000000bb> (a Y)\n"
        '"t2":\n\tat B.b(B.java:1)\n\t- waiting to lock <0x00000000000000bb> (a Y)\n\t- locked <0x00000000000000aa> (a <b>X</b>)\n'
        "\nFound 1 deadlock.\n"))
    files = seed_files([hostile])
    findings = diagnose(files, kafka_version="0.10.1.0")
    html = render_report(findings, {"bundle": "/b<i>", "brokers": broker_table(files), "timeline": timeline(files)})
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>X</b>" not in html
    for name in ("executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"):
        assert name in html
    assert "http://" not in html.replace("https://issues.apache.org", "") and "<link" not in html and "src=" not in html
    assert "hosts/217/server_log.out:1" in html  # timeline citation
    assert "0x0000000715a00000" in html and "java.util.LinkedList" in html


# ------------------------------------------------------------------ live JVM

LIVE_MONITOR = frozenset({"executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3"})
LIVE_LOCKS = frozenset({"replica-fetcher-lock-A", "log-cleaner-lock-B"})


def test_live_jvm_deadlocks_found_and_stuck(live_dumps):
    for strip in (False, True):
        texts = [strip_deadlock_section(t) if strip else t for t in live_dumps]
        if strip:
            assert all("Found one Java-level deadlock" not in t for t in texts)
        dumps = [parse_jstack(t) for t in texts]
        for d in dumps:
            assert d.ok, d.unparsable
            assert d.full_dump and d.complete
            cycles = find_cycles(build_wait_for_graph(d))
            keys = {frozenset(c.threads) for c in cycles}
            assert LIVE_MONITOR in keys and LIVE_LOCKS in keys, keys
            kinds = {frozenset(c.threads): {e.kind for e in c.edges} for c in cycles}
            assert kinds[LIVE_MONITOR] == {"monitor"} and kinds[LIVE_LOCKS] == {"synchronizer"}
        for threads in (LIVE_MONITOR, LIVE_LOCKS):
            p = compare_dumps(dumps, tuple(sorted(threads)))
            assert p.status == "stuck", p.reasons
    files = [ParsedFile(f"hosts/1/jstack-{i}.out", "jstack", 1, result=parse_jstack(strip_deadlock_section(t)), seq=str(i))
             for i, t in enumerate(live_dumps, start=1)]
    found = [f for f in diagnose(files, kafka_version="0.10.1.0") if f.kind == "jvm_deadlock"]
    assert {frozenset(f.details["cycle_threads"]) for f in found} == {LIVE_MONITOR, LIVE_LOCKS}
    assert all(f.details["progress"] == "stuck" and f.details["dumps"] == 2 for f in found)
    assert all(not f.details["reported_by_jstack"] for f in found)
