"""Linear time on any input: every regex passes the static audit, and every parser digests 1-10 MB lines of
blanks, tabs and repeated fragments well under a second per MB.

The time is measured and asserted against a very generous bound (5 s per MB) so the test cannot flake on a
busy machine; what it catches is quadratic or worse blow-ups, which on these inputs take minutes to hours.
"""

import json
import time

import pytest

from kafka_runbooks.analyze import signatures as S
from kafka_runbooks.analyze.parsers import PARSERS
from kafka_runbooks.analyze.parsers.kafka_log import fetch_errors
from kafka_runbooks.analyze.regex_audit import audit_all, audit_pattern

MB = 1_000_000
SECONDS_PER_MB = 5.0  # generous: linear parsing here is ~0.01-0.3 s/MB

HEADERS = {
    "kafka": "[2020-04-22 10:43:36,369] WARN ",
    "zk": "2023-09-01 04:02:01,662 [myid:13] - WARN  [",
    "jstack": '"',
    "sockets": "tcp        0      0 ",
    "gc": "[2026-11-22T13:57:31.642+0000][gc          ] GC(0) Pause Young ",
    "dumplog": "baseOffset: 1 ",
    "mntr": "zk_version\t",
}
FRAGMENTS = [
    " ", "\t", "Error in fetch ", "[ReplicaFetcherThread-0-", "Shrinking ISR from 1,2,", "[Partition t-",
    "Closing socket for ", "(kafka.server.ReplicaFetcherThread) ", "Exception when following the leader ",
    "- waiting to lock <0x1> (a ", "at kafka.server.KafkaApis.handle(", "baseOffset: 1 lastOffset: ", "GC(1) Pause ",
    '"a" ', "] - ", "::ffff:1.2.3.4:", "0x", "(", ")", "[", "]", ":", "@", ",", "=",
]


def _line(kind: str, body: str, size: int) -> str:
    head = HEADERS.get(kind, "")
    reps = size // max(1, len(body)) + 1
    return head + (body * reps)[:size] + " (kafka.server.ReplicaFetcherThread)\n"


def _timed(fn, data) -> float:
    t = time.perf_counter()
    fn(data)
    return time.perf_counter() - t


def test_static_audit_of_every_pattern():
    assert audit_all() == []
    # the audit does catch the constructs that made the old parsers quadratic
    assert audit_pattern(r"^\[(?P<ts>\d+)\]\s+(?P<msg>.*?)(?:\s+\((?P<logger>[\w.]*)\))?\s*$")
    assert audit_pattern(r"\bnid=\S+\s+(?P<s>[^\[]*?)\s*(?:\[0x[0-9a-fA-F]+\])?\s*$")
    assert audit_pattern(r"(a+)+b") and audit_pattern(r"\s+\S*\s+")


PARSER_INPUT = {k: ("kafka" if k.endswith("_log") or k == "kafka_stdout" else k.split("_")[0]) for k in PARSERS}


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_every_parser_is_linear_on_long_lines(kind):
    fn = PARSERS[kind]
    header = {"zk": "zk", "jstack": "jstack", "thread": "jstack", "sockets": "sockets", "gc": "gc", "dump": "dumplog",
              "zk_mntr": "mntr"}.get(PARSER_INPUT[kind], "kafka")
    worst = 0.0
    cases = [(" ", 10 * MB), ("\t", 4 * MB)] + [(f, MB) for f in FRAGMENTS[2:]]
    for body, size in cases:
        data = _line(header, body, size)
        d = _timed(fn, data)
        worst = max(worst, d / (size / MB))
        assert d < SECONDS_PER_MB * size / MB, f"{kind}: {d:.1f} s for a {size // MB} MB line of {body!r}"
    print(f"{kind}: worst {worst:.3f} s/MB")


@pytest.mark.parametrize("layout", ["kafka", "zk"])
def test_log_parser_multi_line_input_is_linear(layout):
    """Many lines of repeated signature fragments (a hostile log), 10 MB: linear too."""
    for frag in ("Error in fetch ", "Shrinking ISR for partition [t,", " " * 50, "Exception when following the leader "):
        text = "".join(_line(layout, frag, 2000) for _ in range(10 * MB // 2040))
        d = _timed(PARSERS["server_log"], text)
        assert d < SECONDS_PER_MB * 10, f"{d:.1f} s for 10 MB of {frag!r} lines"


def test_classifier_and_fetch_errors_on_long_messages():
    for frag in FRAGMENTS:
        msg = (frag * (MB // max(1, len(frag)) + 1))[:MB]
        for sig in S.SIGNATURES:
            t = time.perf_counter()
            sig.match(msg)
            assert time.perf_counter() - t < SECONDS_PER_MB, (sig.name, frag)
        assert _timed(lambda x: fetch_errors(x), _line("kafka", frag, MB)) < SECONDS_PER_MB


def test_json_probe_and_jmx_with_long_values():
    doc = json.dumps({"broker_id": 1, "results": [{"at": "x", "ok": False, "error": " " * (5 * MB), "check": "metadata"}]})
    assert _timed(PARSERS["kafka_probe"], doc) < SECONDS_PER_MB * 5
    jmx = '"time","a:Value"\n' + ("1," + " " * MB + "\n") * 3
    assert _timed(PARSERS["jmx"], jmx) < SECONDS_PER_MB * 3
