"""The broker's own ``Kafka version : N`` line (AppInfoParser, at its start) in the health check: parsed from real
recorded logs (0.10.2.1 writes it to kafkaServer.out only, 2.3.0 to server.log too), read by the host probe once per
JVM (the server.log tail it already reads, else one grep of the stdout log and server.log; then the history),
never a predecessor JVM's line, and merged into the version ApiVersions and the registration gave: exact.
(On the real 0.10.2.1 lab it was read by tests/lab/test_kafka010_product.py, removed with that lab: issue 27.)"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from pathlib import Path

from kafka_runbooks import model, versions
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.detect.host_probe import probe_host
from kafka_runbooks.detect.observe import with_logged
from kafka_runbooks.detect.version_check import mismatch_findings
from kafka_runbooks.hooks.ssh import CommandResult

FIXTURES = Path(__file__).resolve().parents[1] / "analyze" / "fixtures"
OUT_0102 = (FIXTURES / "real0102" / "broker1.kafkaServer.out.start").read_text()
LOG_0102 = (FIXTURES / "real0102" / "broker1.server.log.start").read_text()
LOG_23 = (FIXTURES / "real23" / "broker1.server.log.start").read_text()
# the recorded lines' times (the lab's hosts log in UTC)
AT_0102 = dt.datetime(2026, 11, 24, 21, 8, 35, tzinfo=dt.timezone.utc)
AT_23 = dt.datetime(2026, 11, 22, 13, 57, 34, tzinfo=dt.timezone.utc)
# what the host's grep prints of that kafkaServer.out: its one AppInfoParser version line
GREP_0102 = next(x for x in OUT_0102.splitlines() if "Kafka version" in x) + "\n"


def test_the_line_in_real_logs_of_both_versions():
    assert versions.logged_version(OUT_0102) == "0.10.2.1"
    assert versions.logged_lines(OUT_0102) == [("2026-11-24 21:08:35", "0.10.2.1")]
    # 0.10's log4j.properties sends only kafka.* to server.log: the line is never there
    assert versions.logged_version(LOG_0102) is None
    assert versions.logged_version(LOG_23) == "2.3.0"
    # appended across restarts (the lab's kafka-start appends to kafkaServer.out): the newest JVM's
    upgraded = OUT_0102 + "[2026-11-25 08:00:01,002] INFO Kafka version: 2.3.0 (org.apache.kafka.common.utils.AppInfoParser)\n"
    assert versions.logged_version(upgraded) == "2.3.0"
    # the same words elsewhere (a quoted line, another logger) are not the broker's line
    assert versions.logged_version("[2026-11-24 21:08:35,145] INFO saw 'Kafka version : 9.9' (some.Other)\n") is None


class Host:
    """One broker host, scripted: the broker (pid 4321) listens on 10.0.0.7:9092; ``server_log`` is the tail the
    probe reads; ``grep`` what the host's grep of the stdout log and server.log prints (exit code, stdout)."""

    host = "10.0.0.7"
    address = "10.0.0.7:22"

    def __init__(self, now: dt.datetime, uptime_s: int, server_log: str = "", grep=(1, "")):
        self.now, self.uptime_s, self.server_log, self.grep = now, uptime_s, server_log, grep
        self.calls: list[tuple[str, ...]] = []

    def get_conn(self):
        return self

    def close(self):
        pass

    def run(self, argv, timeout):
        a = tuple(argv)
        self.calls.append(a)
        code, out, err = 0, "", ""
        if a[0] == "date":
            out = f"{self.now.timestamp():.3f} +0000\n"
        elif a == ("ss", "-Hltnp"):
            out = 'LISTEN 0 50 [::ffff:10.0.0.7]:9092 *:* users:(("java",pid=4321,fd=3))\n'
        elif a[:2] == ("cat", "/proc/4321/stat"):
            out = "4321 (java) S 1 4321 4321 0 -1 4194560 12 0 0 0\n"
        elif a[0] == "ps" and "etimes=" in a:
            out = f"{self.uptime_s}\n"
        elif a[0] == "tail" and a[-1] == "/var/log/kafka/server.log":
            out = self.server_log
        elif a[0] == "grep":
            code, out = self.grep
        elif a[0] in ("tail", "cat", "stat"):
            code, err = 1, "No such file or directory\n"
        return CommandResult(a, shlex.join(a), out.encode(), err.encode(), code, "2026-11-28T00:00:00+00:00", 0.01)


def _probe(runner, logged=None):
    cfg = ClusterConfig(name="c", zk_conn_id="zk", hosts={7: "ssh7"}, server_log_path="/var/log/kafka/server.log")
    return probe_host(cfg, model.Broker(7, "10.0.0.7", 9092), runner, logged=logged)


def _greps(runner):
    return [a for a in runner.calls if a[0] == "grep"]


def test_0_10_the_probe_greps_kafkaserver_out_once_per_jvm():
    # the JVM started 15 s before it logged its version; 0.10's server.log tail has no such line
    host = Host(AT_0102 + dt.timedelta(seconds=30), 45, LOG_0102, (0, GREP_0102))
    p = _probe(host)
    assert (p.kafka_version_logged, p.kafka_version_log) == ("0.10.2.1", "kafkaServer.out or server.log"), p.error
    (grep,) = _greps(host)
    assert grep[-3:] == ("--", "/var/log/kafka/kafkaServer.out", "/var/log/kafka/server.log")
    # the next check of the same JVM (pid 4321, from the history): no grep
    host2 = Host(AT_0102 + dt.timedelta(seconds=90), 105, LOG_0102, (2, "should not be read"))
    p2 = _probe(host2, logged=(4321, "0.10.2.1"))
    assert (p2.kafka_version_logged, p2.kafka_version_log) == ("0.10.2.1", "history") and _greps(host2) == []
    # another JVM (another pid in the history): read again
    host3 = Host(AT_0102 + dt.timedelta(seconds=90), 105, LOG_0102, (0, GREP_0102))
    assert _probe(host3, logged=(1111, "0.9.0.1")).kafka_version_logged == "0.10.2.1" and len(_greps(host3)) == 1


def test_a_predecessor_jvms_line_is_not_taken_for_this_one():
    # restarted 5 s ago, not yet at its AppInfoParser line: the newest line is the previous JVM's (25 s before it started)
    host = Host(AT_0102 + dt.timedelta(seconds=30), 5, LOG_0102, (0, GREP_0102))
    p = _probe(host)
    assert (p.kafka_version_logged, p.kafka_version_log) == (None, None)  # not looked at: read again next time
    # a log with no such line at all: looked for, remembered as none (history: "")
    host = Host(AT_0102 + dt.timedelta(seconds=30), 45, LOG_0102, (1, ""))
    p = _probe(host)
    assert (p.kafka_version_logged, p.kafka_version_log) == (None, "kafkaServer.out or server.log")
    assert "Kafka version line" not in (p.error or "")
    from kafka_runbooks.detect.history import broker_samples

    snap = model.ClusterSnapshot(cluster="c", taken_at="2026-11-28T00:00:00Z", brokers=(), controller_id=None, partitions=(),
                                 probes=(p,))
    assert broker_samples(snap)["broker-7"].values["kafka_version_logged"] == ""


def test_2_3_the_server_log_tail_already_read_has_it_no_grep():
    host = Host(AT_23 + dt.timedelta(seconds=20), 30, LOG_23, (2, "should not be read"))
    p = _probe(host)
    assert (p.kafka_version_logged, p.kafka_version_log) == ("2.3.0", "server.log") and _greps(host) == []


def test_the_line_makes_the_apiversions_range_exact():
    ranges = {int(k): tuple(v) for k, v in json.loads((FIXTURES / "real0102" / "api_versions.json").read_text()).items()}
    kv = versions.cluster_version({b: [versions.from_znode(b, 4), versions.from_api_versions(b, ranges)] for b in (1, 2, 3)})
    assert kv.describe() == ">= 0.10.2, < 0.11.0 (every broker)" and kv.exact is None
    exact = with_logged(kv, {b: ("0.10.2.1", "kafkaServer.out or server.log") for b in (1, 2, 3)})
    assert exact.describe() == "0.10.2.1" and exact.exact == "0.10.2.1" and exact.notes == ()
    assert [f for f in versions.FEATURES if exact.has(f)] == ["api_versions"]
    # one broker's line alone: that broker exact, the others still ranges
    one = with_logged(kv, {2: ("0.10.2.1", "kafkaServer.out or server.log"), 9: ("2.3.0", "server.log")})
    assert one.describe() == "broker 1: >= 0.10.2, < 0.11.0; broker 2: 0.10.2.1; broker 3: >= 0.10.2, < 0.11.0"
    # a line that contradicts ApiVersions is said (2.3.0's line, 0.10.2's API keys)
    bad = with_logged(kv, {1: ("2.3.0", "server.log")})
    assert any("its log says 2.3.0 but broker 1 api_versions: >= 0.10.2, < 0.11.0" in n for n in bad.notes), bad.notes
    # the configured setting is compared with the exact version
    (f,) = mismatch_findings(exact, "2.3.0")
    assert "brokers 1, 2, 3 run 0.10.2.1" in f.summary
