"""Collector and probe logic with a scripted runner: fallbacks and failure recording."""

from __future__ import annotations

import shlex

from kafka_runbooks import model
from kafka_runbooks.capture.bundle import EvidenceBundle, verify
from kafka_runbooks.capture.collector import capture_cluster
from kafka_runbooks.hooks.ssh import CommandResult
from kafka_runbooks.config import CaptureSettings, ClusterConfig
from kafka_runbooks.detect.host_probe import probe_host

NETSTAT_L = "tcp6 0 0 10.0.0.7:9092 :::* LISTEN 4321/java\n"
NETSTAT_A = ("tcp6 0 0 10.0.0.7:9092 10.0.0.1:5000 CLOSE_WAIT 4321/java\n"
             "tcp6 0 0 10.0.0.7:9092 10.0.0.1:5001 CLOSE_WAIT 4321/java\n"
             "tcp6 0 0 10.0.0.7:9092 10.0.0.1:5002 ESTABLISHED 4321/java\n")


class FakeRunner:
    """No `ss` on this host (exit 127); jmap fails; everything else answers."""

    host = "10.0.0.7"
    address = "10.0.0.7:22"

    def __init__(self, prefix_only_pid=False):
        self.calls: list[tuple[str, ...]] = []
        self.prefix_only_pid = prefix_only_pid

    def get_conn(self):
        return self

    def close(self):
        pass

    def _answer(self, argv):
        a = tuple(argv)
        self.calls.append(a)
        if self.prefix_only_pid:
            if a == ("ss", "-Hltnp"):
                return 0, b"LISTEN 0 50 [::ffff:10.0.0.7]:9092 *:*\n"
            if a[-2:] == ("ss", "-Hltnp"):
                return 0, b'LISTEN 0 50 [::ffff:10.0.0.7]:9092 *:* users:(("java",pid=4321,fd=3))\n'
        if a[0] == "ss" or (a[-1] == "-Hltnp"):
            return 127, b""
        if a[:2] == ("netstat", "-ltnp"):
            return 0, NETSTAT_L.encode()
        if a[:2] in (("netstat", "-anp"), ("netstat", "-tan")):
            return 0, NETSTAT_A.encode()
        if "jmap" in a:
            return 1, b""
        if "jstack" in a:
            return 0, b'Full thread dump OpenJDK 64-Bit Server VM:\n"main" #1 prio=5\n'
        if a[0] == "tail" and a[-1].endswith((".log", ".out")) and "-c" in a:
            return 1, b"", b"tail: cannot open 'x' for reading: No such file or directory\n"  # the other logs do not exist here
        if a[0] == "ps":
            return 0, b"4321 S\n" if "pid=,stat=" in a else b" 4321 100 2048 java kafka.Kafka\n"
        if a[:2] == ("cat", "/proc/4321/stat"):
            return 0, b"4321 (java) S 1 4321 4321 0 -1 4194560 12 0 0 0\n"
        if "find" in a:
            return 0, b"/proc/4321/fd/0\n/proc/4321/fd/1\n/proc/4321/fd/2\n"
        return 0, b"ok\n"

    def run(self, argv, timeout):
        code, out, *err = self._answer(argv)
        stderr = err[0] if err else (b"" if code == 0 else b"err\n")
        return CommandResult(tuple(argv), shlex.join(argv), out, stderr, code, "2024-01-01T00:00:00+00:00", 0.01)

    def run_to_file(self, argv, timeout, path):
        res = self.run(argv, timeout)
        with open(path, "wb") as fh:
            fh.write(res.stdout)
        res.stdout_path, res.stdout_bytes, res.stdout = path, len(res.stdout), b""
        return res


def _cfg(tmp_path, **cap):
    return ClusterConfig(name="c", zk_conn_id="zk", hosts={7: "ssh7"}, server_log_path="/var/log/kafka/{broker_id}.log",
                         bundle_base=str(tmp_path), capture=CaptureSettings(jstack_count=2, jstack_interval_s=3, heap_dump=True, **cap))


class FakeGate:
    """The maintenance lock and the direct check, scripted: ``serving`` brokers answer; ``busy`` = the lock is held."""

    def __init__(self, serving=(), busy=False):
        self.serving, self.busy = set(serving), busy
        self.events: list[str] = []

    import contextlib

    @contextlib.contextmanager
    def session(self):
        if self.busy:
            raise RuntimeError("cluster 'c' is under maintenance by run 'roll-1'; refusing to act")
        self.events.append("lock")
        try:
            yield {"run": "capture-run"}
        finally:
            self.events.append("unlock")

    def not_serving(self, b):
        self.events.append(f"check {b}")
        return None if b in self.serving else f"broker {b}: no answer within 5s"


def test_netstat_fallback_and_failing_command(tmp_path):
    runner = FakeRunner()
    slept = []
    bundle = EvidenceBundle(tmp_path, "c", "i1")
    m = capture_cluster(_cfg(tmp_path), None, [7], bundle, lambda cid: runner, sleep=slept.append, intrusive=FakeGate())
    names = [c["name"] for c in m["commands"]]
    assert "listen-sockets-netstat" in names and "sockets-netstat-1" in names and "sockets-netstat-3" in names
    kinds = {c["name"]: c["kind"] for c in m["commands"]}
    assert kinds["sockets-netstat-1"] == "sockets_netstat"
    assert m["hosts"]["7"]["pid"] == 4321 and m["hosts"]["7"]["reachable"]
    assert m["hosts"]["7"]["open_files"] == 3
    assert ("tail", "-n", "2000", "--", "/var/log/kafka/7.log") in runner.calls
    jmap = next(c for c in m["commands"] if c["name"] == "jmap-histo")
    assert jmap["exit_code"] == 1 and jmap["stderr"] == "hosts/7/jmap-histo.err"
    assert names.index("jmap-histo") > names.index("sockets-netstat-3")  # the intrusive phase comes after the gentle one
    assert len(m["hosts"]["7"]["absent_files"]) == 5  # controller.log & co. do not exist here: noted, not failures
    assert len(slept) == 1 and 0 < slept[0] <= 3  # interval between the two jstacks
    # heap size unknown (jcmd answered 'ok'), RSS 2 MiB known, lots of disk? df output unparsable -> no dump
    assert m["hosts"]["7"]["heap_dump"]["take"] is False
    h = m["hosts"]["7"]
    assert h["status"] == "partial" and m["status"] == "partial"
    assert any(r.startswith("jmap-histo: exit 1") for r in h["status_reasons"])
    assert h["intrusive"]["not_serving"] == "broker 7: no answer within 5s" and h["intrusive"]["ran"] == ["jmap -histo:live"]
    assert not any("ss" == r.split(":")[0] for r in h["status_reasons"])  # the missing `ss` is a fallback, not a failure
    assert verify(bundle.path) == []


def test_pid_found_through_jvm_user_prefix(tmp_path):
    runner = FakeRunner(prefix_only_pid=True)
    cfg = _cfg(tmp_path, jvm_tool_prefix=["sudo", "-n", "-u", "kafka"])
    m = capture_cluster(cfg, None, [7], EvidenceBundle(tmp_path, "c", "i2"), lambda cid: runner, sleep=lambda s: None)
    assert m["hosts"]["7"]["pid"] == 4321
    assert ("sudo", "-n", "-u", "kafka", "jstack", "4321") in runner.calls  # no not-serving finding: no lock detail
    p = probe_host(cfg, model.Broker(7, "10.0.0.7", 9092), FakeRunner(prefix_only_pid=True))
    assert p.pid == 4321


def test_probe_with_netstat(tmp_path):
    p = probe_host(_cfg(tmp_path), model.Broker(7, "10.0.0.7", 9092), FakeRunner())
    assert p.reachable and p.pid == 4321 and p.process_alive and p.open_files == 3
    assert dict(p.connection_states) == {"CLOSE_WAIT": 2, "ESTABLISHED": 1}
    assert p.process_state == "sleeping" and p.listening and p.ports == (9092,) and p.addresses == ("10.0.0.7",)


def test_a_log_name_unfit_for_a_find_pattern_skips_only_the_rolled_files(tmp_path):
    """server.log's rolled files are looked for with ``find -name '<name>.*'``: a configured name outside the plain
    set is not put in a pattern. The capture records that one skip and goes on; the probe reads the rest."""
    cfg = ClusterConfig(**{**_cfg(tmp_path).__dict__, "server_log_path": "/var/log/kafka/server+{broker_id}.log"})
    runner = FakeRunner()
    m = capture_cluster(cfg, None, [7], EvidenceBundle(tmp_path, "c", "i3"), lambda cid: runner, sleep=lambda s: None)
    h = m["hosts"]["7"]
    assert h["reachable"] and h["status"] == "partial" and not any("UnsafeValueError" in r for r in h["status_reasons"])
    assert any(r.startswith("skipped server.log's rolled files: bad log file name") for r in h["status_reasons"])
    names = [c["name"] for c in m["commands"]]
    assert "server-log" in names and "disk-free" in names and "sockets-netstat-3" in names
    assert not [n for n in names if n.startswith("server-log-rolled")]
    p = probe_host(cfg, model.Broker(7, "10.0.0.7", 9092), FakeRunner())
    assert p.reachable and "refused" not in (p.error or "") and p.fetch_errors_total == 0
    assert p.log_lines == () and p.offsets_dirs == ()  # steps 6-9 ran (nothing to find on this host)


def _two_suspects(tmp_path, gate, name, **cap):
    runners = {}

    def factory(cid):
        runners.setdefault(cid, FakeRunner())
        return runners[cid]

    cfg = ClusterConfig(name="c", zk_conn_id="zk", hosts={7: "ssh7", 8: "ssh8", 9: "ssh9"},
                        server_log_path="/var/log/kafka/{broker_id}.log", bundle_base=str(tmp_path),
                        capture=CaptureSettings(jstack_count=1, heap_dump=False, **cap))
    m = capture_cluster(cfg, None, [7, 8, 9], EvidenceBundle(tmp_path, "c", name), factory, suspects=[7, 8, 9],
                        sleep=lambda s: None, intrusive=gate)
    return m, runners


def _intrusive_calls(runner):
    return [c for c in runner.calls if any(t in c for t in ("jmap", "jhsdb"))]


def test_intrusive_tools_only_on_a_suspect_proven_not_serving_one_at_a_time_under_the_lock(tmp_path):
    """Issue 17 §2: broker 7 answers its direct check (serving), 8 does not; the cap keeps 9 a peer."""
    gate = FakeGate(serving={7})
    m, runners = _two_suspects(tmp_path, gate, "i3", max_suspects=2)
    assert m["suspects"] == [7, 8] and m["suspects_capped"]["as_peers"] == [9]
    assert _intrusive_calls(runners["ssh7"]) == [] and _intrusive_calls(runners["ssh9"]) == []
    assert [c[0] for c in _intrusive_calls(runners["ssh8"])] == ["jmap"]
    assert gate.events == ["lock", "check 7", "check 8", "unlock"]  # one lock for the phase, hosts in turn
    seven = m["hosts"]["7"]
    assert any(t["tool"] == "jmap -histo:live" and "answered a direct Kafka-protocol check" in t["reason"] for t in seven["left_out"])
    assert m["hosts"]["8"]["intrusive"]["ran"] == ["jmap -histo:live"]
    # phase 1 never paused anything, on any host
    for r in runners.values():
        first = r.calls[: next((i for i, c in enumerate(r.calls) if "jmap" in c), len(r.calls))]
        assert not [c for c in first if any(t in c for t in ("jmap", "jhsdb"))]


def test_no_intrusive_tool_without_the_lock_or_without_a_gate(tmp_path):
    m, runners = _two_suspects(tmp_path, FakeGate(busy=True), "i4")
    assert all(_intrusive_calls(r) == [] for r in runners.values())
    assert m["intrusive"]["outcome"].startswith("not run: RuntimeError: cluster 'c' is under maintenance")
    assert m["hosts"]["7"]["status"] == "partial" and any("under maintenance" in r for r in m["hosts"]["7"]["status_reasons"])
    m, runners = _two_suspects(tmp_path, None, "i5")
    assert all(_intrusive_calls(r) == [] for r in runners.values())
    assert m["intrusive"]["outcome"].startswith("not run: no maintenance lock")
    m, runners = _two_suspects(tmp_path, FakeGate(), "i6", intrusive=False)
    assert all(_intrusive_calls(r) == [] for r in runners.values()) and m["intrusive"]["suspects"] == []


JMX_ANSWER = (__import__("pathlib").Path(__file__).parent.parent / "detect" / "fixtures" / "jmxtool_2.3.0_csv.txt").read_bytes()


class JmxRunner(FakeRunner):
    """FakeRunner whose JmxTool answers (``jmx="answer"``, the real tool's output), has no answer within its bound
    (``"timeout"``, as the SSH runner reports it), or fails at once (``"refused"``); whose jstack may time out."""

    def __init__(self, jmx="answer", jstack_hangs=False):
        super().__init__()
        self.jmx, self.jstack_hangs = jmx, jstack_hangs

    def run(self, argv, timeout):
        a = tuple(argv)
        if "kafka.tools.JmxTool" in a or ("jstack" in a and self.jstack_hangs):
            self.calls.append(a)
            said = b"Trying to connect to JMX url: service:jmx:rmi:///jndi/rmi://10.0.0.7:9999/jmxrmi.\n" if "jstack" not in a else b""
            if "jstack" in a or self.jmx == "timeout":
                return CommandResult(a, shlex.join(a), b"", said, None, "2024-01-01T00:00:00+00:00", timeout, f"timeout after {timeout:g}s")
            if self.jmx == "refused":
                said += b"Could not connect to JMX url: service:jmx:rmi:///jndi/rmi://10.0.0.7:9999/jmxrmi. Exception Failed to retrieve RMIServer stub\n"
                return CommandResult(a, shlex.join(a), b"", said, 1, "2024-01-01T00:00:00+00:00", 10.2)
            return CommandResult(a, shlex.join(a), JMX_ANSWER, said, 0, "2024-01-01T00:00:00+00:00", 1.9)
        if "Thread.print" in a:
            self.calls.append(a)
            return CommandResult(a, shlex.join(a), b'4321:\nFull thread dump OpenJDK 64-Bit Server VM:\n"main" #1 prio=5\n', b"", 0,
                                 "2024-01-01T00:00:00+00:00", 0.2)
        return super().run(argv, timeout)


def _checks(ok_at_start, ok_at_end=None):
    ok_at_end = ok_at_start if ok_at_end is None else ok_at_end
    calls = []

    def checker():
        ok = ok_at_start if not calls else ok_at_end
        calls.append(ok)
        return [model.KafkaCheck(7, "10.0.0.7:9092", ok, 3.0 if ok else None, 7 if ok else None,
                                 None if ok else "no answer within 5s", f"2024-01-01T00:00:0{len(calls)}+00:00")]
    return checker


def _capture_jmx(tmp_path, name, runner, checker=None, jmx_port=9999, **cfg):
    config = ClusterConfig(**{**_cfg(tmp_path).__dict__, **cfg})
    known = {7: model.Broker(7, "10.0.0.7", 9092, jmx_port=jmx_port)}
    bundle = EvidenceBundle(tmp_path, "c", name)
    m = capture_cluster(config, None, [7], bundle, lambda cid: runner, suspects=[], sleep=lambda s: None, checker=checker, known=known)
    assert verify(bundle.path) == []
    m["_path"] = bundle.path
    return m


def test_a_jmx_read_a_broker_serving_nothing_does_not_answer_is_evidence_not_a_gap(tmp_path):
    """Issue 17 §2: JMX is read on every host, once, bounded (leadership.jmx_timeout_s). A broker that failed every
    direct check of the capture (start and end) and whose JMX had no answer within the bound: the read's silence is
    recorded as evidence with its bound and what the tool said, and the host stays complete; the same silence from a
    broker that answered a direct check, or with no check to tell, is a gap: partial, the reason said."""
    m = _capture_jmx(tmp_path, "j1", JmxRunner("timeout"), _checks(False))
    h = m["hosts"]["7"]
    jmx = h["jmx"]
    assert h["status"] == "complete" and m["status"] == "complete", h["status_reasons"]
    assert jmx["answered"] is False and jmx["bound_s"] == 15.0 and jmx["error"] == "timeout after 15s"
    assert jmx["counted_as"] == "evidence" and "no answer within 5s" in jmx["not_serving"]
    assert "at the start" in jmx["not_serving"] and "at the end" in jmx["not_serving"]
    assert "within 15 s" in jmx["no_answer"] and "Trying to connect to JMX url" in jmx["no_answer"]
    cmd = next(c for c in m["commands"] if c["name"] == "jmx")
    assert cmd["kind"] == "jmx" and cmd["error"] == "timeout after 15s" and cmd["timeout_s"] == 15.0 and cmd["stderr"] == "hosts/7/jmx.err"
    assert h["plan"]["jmx"] is True and not h["error"]

    for i, (checker, why) in enumerate(((_checks(True), "it answered a direct Kafka-protocol check"),
                                        (_checks(False, True), "it answered a direct Kafka-protocol check"),
                                        (None, "no direct Kafka-protocol check of it"))):
        m = _capture_jmx(tmp_path, f"j2-{i}", JmxRunner("timeout"), checker)
        h = m["hosts"]["7"]
        assert h["status"] == "partial" and m["status"] == "partial" and h["jmx"]["counted_as"] == "failure"
        assert [r for r in h["status_reasons"] if r.startswith("jmx: JmxTool had no answer") and why in r], h["status_reasons"]
        assert "jmx: timeout after 15s" in h["error"]


def test_a_jmx_read_that_fails_is_a_gap_one_that_answers_is_read_and_no_port_is_left_out(tmp_path):
    # the tool itself failed (no RMI stub): not silence, a failure -- even on a broker that serves nothing
    m = _capture_jmx(tmp_path, "j3", JmxRunner("refused"), _checks(False))
    h = m["hosts"]["7"]
    assert h["status"] == "partial" and "counted_as" not in h["jmx"] and h["jmx"]["error"] == "exit 1"
    assert [r for r in h["status_reasons"] if r.startswith("jmx: JmxTool exit 1 reading service:jmx:rmi:///jndi/rmi://10.0.0.7:9999/jmxrmi")
            and "Failed to retrieve RMIServer stub" in r]
    # it answers: the figures are in jmx.out, read by the analysis
    from kafka_runbooks.analyze.parsers import parse_jmx

    m = _capture_jmx(tmp_path, "j4", JmxRunner("answer"), _checks(True))
    h = m["hosts"]["7"]
    assert h["status"] == "complete" and h["jmx"]["answered"] is True and "error" not in h["jmx"]
    assert parse_jmx((m["_path"] / "hosts" / "7" / "jmx.out").read_bytes()).series("RequestQueueSize")
    # no JMX port registered: nothing to read, said as left out (not a gap); leadership.jmx off: the same
    from kafka_runbooks.config import LeadershipSettings

    for name, port, cfg, why in (("j5", None, {}, "no JMX port in its registration"),
                                 ("j6", 9999, {"leadership": LeadershipSettings(jmx=False)}, "leadership.jmx is off")):
        runner = JmxRunner("answer")
        m = _capture_jmx(tmp_path, name, runner, _checks(True), jmx_port=port, **cfg)
        h = m["hosts"]["7"]
        assert h["status"] == "complete" and "jmx" not in h and not [c for c in runner.calls if "kafka.tools.JmxTool" in c]
        assert [t for t in h["left_out"] if t["tool"] == "JMX read" and why in t["reason"]], h["left_out"]


def test_a_thread_dump_method_that_fails_before_another_works_is_recorded_not_a_gap(tmp_path):
    """jstack times out (its attach did not answer), jcmd Thread.print gives the dump: the capture has its dumps; the
    failed attempt stays in the manifest's commands and the host's thread_dump_fallbacks, not in status_reasons."""
    m = _capture_jmx(tmp_path, "j7", JmxRunner("answer", jstack_hangs=True), _checks(True))
    h = m["hosts"]["7"]
    assert h["thread_dump_method"] == "jcmd" and h["status"] == "complete", h["status_reasons"]
    assert h["thread_dump_fallbacks"] == ["jstack-1: timeout after 60s", "thread dump 1: jstack did not produce a dump; trying jcmd"]
    names = [c["name"] for c in m["commands"]]
    assert "jstack-1" in names and "jstack-jcmd-1" in names and "jstack-2" not in names


def _analysed(m):
    """The capture's bundle through the analysis' own loader and diagnosis (what the Spark job runs per file)."""
    from kafka_runbooks.analyze.bundle import load_entry, manifest_entries
    from kafka_runbooks.analyze.diagnosis import diagnose

    entries, problems = manifest_entries(m)
    assert problems == []
    files = [pf for e in entries for pf in load_entry(str(m["_path"]), e)[0]]
    return diagnose(files)


def test_the_analysis_cites_a_jmx_read_that_had_no_answer_with_the_direct_checks_beside_it(tmp_path):
    found = _analysed(_capture_jmx(tmp_path, "j8", JmxRunner("timeout"), _checks(False)))
    (f,) = [x for x in found if x.kind == "request_metrics_unknown"]
    assert f.broker_ids == (7,) and f.evidence[0].source == "hosts/7/jmx.out" and "timeout after 15s" in f.evidence[0].excerpt
    assert "request queues unknown" in f.summary and "every direct Kafka check of it during the capture failed too (2 of 2" in f.summary
    assert not [x for x in found if x.kind == "unparsable" and "jmx" in x.summary]  # its silence, not a parse failure
    found = _analysed(_capture_jmx(tmp_path, "j9", JmxRunner("timeout"), _checks(True)))
    (f,) = [x for x in found if x.kind == "request_metrics_unknown"]
    assert "it answered 2 of 2 direct Kafka checks" in f.summary and f.details["direct_checks_failed"] == 0
    found = _analysed(_capture_jmx(tmp_path, "j10", JmxRunner("answer"), _checks(True)))
    assert not [x for x in found if x.kind == "request_metrics_unknown" or (x.kind == "unparsable" and "jmx" in x.summary)], \
        [x.summary for x in found]
