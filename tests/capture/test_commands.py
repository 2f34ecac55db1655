"""Pure tests: the capture plan, validation of argv values, parsers, heap-dump decision."""

from __future__ import annotations

import shlex

import pytest

from kafka_runbooks.host import commands as C
from kafka_runbooks.config import CaptureSettings

HOSTILE = ["1; rm -rf /", "$(reboot)", "12\n34", "`id`", "1 2", "-1", "", "0x10", "１２"]


def test_command_argv_and_kinds():
    s = CaptureSettings(log_tail_lines=500, log_tail_bytes=4096, remote_work_dir="/var/tmp", jvm_tool_prefix=("sudo", "-n", "-u", "kafka"))
    assert C.jstack_command(4242, 2, s).argv == ("sudo", "-n", "-u", "kafka", "jstack", "4242")
    assert C.jstack_command(4242, 2, s, locks=True).argv == ("sudo", "-n", "-u", "kafka", "jstack", "-l", "4242")
    assert C.jstack_command(4242, 2, s).kind == "jstack"
    assert C.jmap_histo_command(4242, s).argv == ("sudo", "-n", "-u", "kafka", "jmap", "-histo:live", "4242")
    assert C.heap_info_command(4242, s).argv == ("sudo", "-n", "-u", "kafka", "jcmd", "4242", "GC.heap_info")
    assert C.open_files_command(4242, s).argv[-5:] == ("/proc/4242/fd", "-mindepth", "1", "-maxdepth", "1")
    assert C.disk_free_command(s).argv == ("df", "-Pk", "/var/tmp")
    assert C.server_log_command("/var/log/kafka/server.log", s).argv == ("tail", "-n", "500", "--", "/var/log/kafka/server.log")
    assert C.process_stat_command(4242, 5).argv == ("ps", "-o", "pid=,etimes=,rss=,args=", "-p", "4242")
    assert C.process_state_command(4242, 5).argv == ("cat", "/proc/4242/stat")
    assert (C.sockets_command(5, 2).name, C.sockets_command(5, 2).argv) == ("sockets-ss-2", ("ss", "-tanp"))
    assert C.sockets_netstat_command(5).argv == ("netstat", "-anp") and C.sockets_netstat_command(5).kind == "sockets_netstat"
    jh = C.jhsdb_jstack_command(4242, 1, s, 30)
    assert jh.argv == ("sudo", "-n", "-u", "kafka", "jhsdb", "jstack", "--pid", "4242") and jh.kind == "jstack_jhsdb"
    assert C.sigquit_command(4242, s, 5, 2).argv == ("sudo", "-n", "-u", "kafka", "kill", "-QUIT", "4242")
    assert C.sigquit_command(4242, s, 5, 2).name == "sigquit-2"
    pt = C.proc_threads_command(4242, 5)
    # a constant script, the pid its only argument; a thread that ends while the list is read is skipped
    assert pt.argv == ("sh", "-c", 'for f in /proc/"$0"/task/*/stat; do cat "$f" 2>/dev/null; done; [ -d /proc/"$0" ]', "4242")
    assert pt.kind == "proc_threads"
    assert C.tail_from_command("x", "jstack", "/l/kafkaServer.out", 100, 10, 5).argv == ("tail", "-c", "+101", "--", "/l/kafkaServer.out")
    logs = {n: C.log_tail_command(n, "/var/log/kafka", s, 5) for n in s.other_logs}
    assert logs["controller.log"].argv == ("tail", "-c", "4096", "--", "/var/log/kafka/controller.log")
    assert {n: (c.name, c.kind) for n, c in logs.items()} == {
        "controller.log": ("log-controller", "controller_log"), "state-change.log": ("log-state-change", "state_change_log"),
        "log-cleaner.log": ("log-log-cleaner", "log_cleaner_log"), "kafkaServer.out": ("log-kafkaServer", "kafka_stdout"),
        "kafkaServer-gc.log": ("log-kafkaServer-gc", "gc_log")}
    with pytest.raises(C.UnsafeValueError):
        C.log_tail_command("../../etc/shadow", "/var/log/kafka", s, 5)


def test_tool_plan_reads_the_process_state_first():
    s = CaptureSettings(jstack_count=3, heap_dump=True)
    running = C.tool_plan(C.SUSPECT, 42, "sleeping", s)
    assert (running.thread_dumps, running.dump_methods, running.heap_info, running.intrusive, running.skipped) == (
        3, ("jstack", "jcmd", "sigquit"), True, ("jhsdb", "jmap -histo:live", "heap dump"), ())
    # a stopped JVM: no attach-based tool, no SIGQUIT, each skip says why; jhsdb only as an intrusive tool (later,
    # under the lock, if the broker is proven not serving)
    stopped = C.tool_plan(C.SUSPECT, 42, "stopped", s)
    assert (stopped.thread_dumps, stopped.dump_methods, stopped.heap_info, stopped.intrusive) == (0, (), False, ("jhsdb",))
    assert {t for t, _ in stopped.skipped} == {"jstack", "SIGQUIT thread dump", "JMX read"}
    assert all("stopped" in why for _, why in stopped.skipped)
    assert C.tool_plan(C.PEER, 42, "stopped", s).skipped[:2] == stopped.skipped[:2]
    assert C.tool_plan(C.PEER, 42, "stopped", s).intrusive == ()
    assert C.tool_plan(C.SUSPECT, 42, "zombie", s).thread_dumps == 0
    assert C.tool_plan(C.SUSPECT, None, None, s).skipped == (("JVM tools", "no broker process found"),)


def test_no_tool_that_pauses_a_jvm_runs_in_the_first_phase_and_peers_never_get_one():
    """Issue 17 §2: the first phase is non-intrusive on every broker; jmap -histo:live, heap dumps and jhsdb are
    only ever planned as intrusive tools of a suspect (never of a peer), or left out when capture.intrusive is off."""
    s = CaptureSettings(jstack_count=3, heap_dump=True)
    for role in (C.SUSPECT, C.PEER):
        for state in ("running", "sleeping", "stopped", "disk_sleep"):
            plan = C.tool_plan(role, 42, state, s)
            assert set(plan.dump_methods) <= set(C.GENTLE_DUMPS) and not set(plan.dump_methods) & set(C.INTRUSIVE_TOOLS)
            assert set(plan.intrusive) <= set(C.INTRUSIVE_TOOLS) and (role == C.SUSPECT or plan.intrusive == ())
    peer = C.tool_plan(C.PEER, 42, "running", s)
    assert (peer.thread_dumps, peer.dump_methods, peer.heap_info, peer.intrusive) == (1, ("jstack", "jcmd", "sigquit"), False, ())
    assert peer.skipped == () and peer.left_out[0][0] == "jmap -histo:live" and "never a healthy peer" in peer.left_out[0][1]
    assert ("jhsdb", "stops the process while it reads it: suspect broker only") in peer.left_out
    unconfigured = C.tool_plan(C.SUSPECT, 42, "running", CaptureSettings())
    assert unconfigured.intrusive == ("jhsdb", "jmap -histo:live") and unconfigured.skipped == ()
    assert ("heap dump", "heap dumps not configured for this cluster (capture.heap_dump)") in unconfigured.left_out
    off = C.tool_plan(C.SUSPECT, 42, "running", CaptureSettings(intrusive=False, heap_dump=True))
    assert off.intrusive == () and {t for t, why in off.left_out if "capture.intrusive is off" in why} == set(C.INTRUSIVE_TOOLS)
    assert C.jcmd_thread_print_command(42, 2, s).argv == ("jcmd", "42", "Thread.print")
    assert C.jcmd_thread_print_command(42, 2, s, locks=True).argv == ("jcmd", "42", "Thread.print", "-l")


def test_heap_dump_commands_run_as_the_jvm_user_in_a_private_directory():
    s = CaptureSettings(remote_work_dir="/data/dumps/", jvm_tool_prefix=("sudo", "-n", "-u", "kafka"))
    d = C.heap_dump_dir(s, 3, "20240501T070000Z")
    assert d == "/data/dumps/kafka-runbooks-3-20240501T070000Z"
    assert C.mkdir_private_command(d, s, 5).argv == ("sudo", "-n", "-u", "kafka", "mkdir", "-m", "0700", "--", d)
    cmd = C.heap_dump_command(77, f"{d}/heap.hprof", s)
    assert cmd.argv == ("sudo", "-n", "-u", "kafka", "jmap", f"-dump:live,format=b,file={d}/heap.hprof", "77")
    assert cmd.kind == "aux" and C.cat_as_jvm_user_command("heap-dump-hprof", f"{d}/heap.hprof", s, 5).kind == "heap_dump"
    assert C.cat_as_jvm_user_command("heap-dump-hprof", f"{d}/heap.hprof", s, 5).argv[:4] == ("sudo", "-n", "-u", "kafka")
    assert [c.argv[4:] for c in C.remove_dump_commands(f"{d}/heap.hprof", d, s, 5)] == [
        ("rm", "-f", "--", f"{d}/heap.hprof"), ("rmdir", "--", d)]


@pytest.mark.parametrize("bad", HOSTILE + [None, 1.5, True, "99999999999"])
def test_hostile_pid_refused(bad):
    with pytest.raises(C.UnsafeValueError):
        C.jstack_command(bad, 1, CaptureSettings())
    with pytest.raises(C.UnsafeValueError):
        C.process_stat_command(bad, 5)
    with pytest.raises(C.UnsafeValueError):
        C.open_files_command(bad, CaptureSettings())


def test_pid_as_digit_string_accepted():
    assert C.jstack_command("123", 1, CaptureSettings()).argv[-1] == "123"


@pytest.mark.parametrize("bad", ["1; rm -rf /", "$(reboot)", "a\nb", -1, "3/../4", True])
def test_hostile_broker_id_refused(bad):
    with pytest.raises(C.UnsafeValueError):
        C.heap_dump_dir(CaptureSettings(), bad, "20240101T000000Z")


@pytest.mark.parametrize(
    "bad",
    ["relative/server.log", "/var/log/kafka/server.log\n/etc/shadow", "/var/log/\x00x", "/var/log/../../etc/shadow", "", None],
)
def test_hostile_log_path_refused(bad):
    with pytest.raises(C.UnsafeValueError):
        C.server_log_command(bad, CaptureSettings())


@pytest.mark.parametrize("bad", ["/tmp/a,b", "/tmp/$(reboot)", "/tmp/a b", "tmp", "/tmp/\nx", "/tmp/../etc", "/tmp;rm -rf /"])
def test_hostile_work_dir_refused(bad):
    with pytest.raises(C.UnsafeValueError):
        C.disk_free_command(CaptureSettings(remote_work_dir=bad))
    with pytest.raises(C.UnsafeValueError):
        C.heap_dump_dir(CaptureSettings(remote_work_dir=bad), 1, "20240101T000000Z")


def test_log_path_with_shell_metacharacters_stays_one_quoted_word():
    # a legal but odd path is allowed, and shlex.join keeps it a single word
    cmd = C.server_log_command("/var/log/kafka $(reboot);`id`.log", CaptureSettings())
    line = shlex.join(cmd.argv)
    assert shlex.split(line) == list(cmd.argv)
    assert "'/var/log/kafka $(reboot);`id`.log'" in line


def test_argv_with_nul_refused():
    with pytest.raises(C.UnsafeValueError):
        C.validate_argv(["echo", "a\x00b"])
    with pytest.raises(C.UnsafeValueError):
        C.validate_argv("echo hi")


def test_df_and_heap_info_parsers():
    df = "Filesystem     1024-blocks      Used Available Capacity Mounted on\n/dev/sda1        1000000    400000    600000      40% /\n"
    assert C.parse_df_available(df) == 600000 * 1024
    assert C.parse_df_available("garbage") is None
    g1 = """12345:
 garbage-first heap   total 262144K, used 12000K [0x00000000f0000000, 0x0000000100000000)
  region size 1024K, 4 young (4096K), 0 survivors (0K)
 Metaspace       used 1500K, committed 1700K, reserved 1114112K
  class space    used 150K, committed 256K, reserved 1048576K
"""
    assert C.parse_heap_info(g1) == 262144 * 1024
    serial = """42:
 def new generation   total 4928K, used 1334K [0x...)
  eden space 4416K,  30% used [0x...)
 tenured generation   total 10944K, used 0K [0x...)
 Metaspace       used 120K, committed 320K, reserved 1114112K
"""
    assert C.parse_heap_info(serial) == (4928 + 10944) * 1024
    assert C.parse_heap_info(" ZHeap           used 8M, capacity 64M, max capacity 1024M\n") == 64 * 1024**2
    assert C.parse_heap_info("42:\nAttach failed\n") is None


def test_ps_parser():
    p = C.parse_ps("  4242   3600 524288 java -Xmx1G kafka.Kafka /etc/kafka/server.properties\n")
    assert p == {"pid": 4242, "uptime_s": 3600, "rss_bytes": 524288 * 1024, "args": "java -Xmx1G kafka.Kafka /etc/kafka/server.properties"}
    assert C.parse_ps_rss("  1 2 10 x\n") == 10240


def test_heap_dump_decision():
    gib = 1 << 30
    d = C.heap_dump_decision(4 * gib, 8 * gib)
    assert d.take and "8589934592 B >= 2 x heap" in d.reason
    d = C.heap_dump_decision(4 * gib, 8 * gib - 1)
    assert not d.take and d.reason.startswith("not enough disk")
    d = C.heap_dump_decision(None, 100 * gib, rss_bytes=6 * gib)
    assert d.take and "RSS" in d.reason
    d = C.heap_dump_decision(None, 10 * gib, rss_bytes=6 * gib)
    assert not d.take
    assert not C.heap_dump_decision(None, 10 * gib).take
    assert not C.heap_dump_decision(1, None).take
    d = C.heap_dump_decision(1, 10 * gib, enabled=False)
    assert not d.take and "disabled" in d.reason
    assert set(d.to_dict()) == {"take", "reason", "heap_bytes", "free_bytes"}


def test_command_names_validated():
    with pytest.raises(C.UnsafeValueError):
        C.CaptureCommand("../x", "jstack", ("true",), 1)


def test_listen_sockets_as_jvm_user():
    assert C.listen_sockets_command(5).argv == ("ss", "-Hltnp")
    c = C.listen_sockets_command(5, ("sudo", "-n", "-u", "kafka"))
    assert c.argv == ("sudo", "-n", "-u", "kafka", "ss", "-Hltnp") and c.name == "listen-sockets-jvm-user"


def test_newest_rolled_log_and_its_commands():
    from kafka_runbooks.host.commands import newest_rolled, rolled_log_command, rolled_logs_command

    listing = "\0".join(["1700000100.5 server.log.2026-11-22-22", "1700003600.0 server.log.2026-11-22-23",
                          "1700000000 server.log.2026-11-21", "1800000000 server.log.9999-12-31-23;id",
                          "1800000000 server.log.2026-11-23-00.gz", "1800000000 other.log.2099-01-01-00",
                          "1800000000 server.log.1 2", "x server.log.2026-11-23-01", "1800000000",
                          "1800000000 server.log.2\n1900000000 server.log.3", ""])
    assert newest_rolled("server.log", listing) == "server.log.2026-11-22-23"  # a name with a line break fakes nothing
    assert newest_rolled("server.log", "3 server.log.3\x009 server.log.1\x005 server.log.12\x00") == "server.log.1"
    assert newest_rolled("server.log", "1 server.log\x002 server.logx.1\x003 server.log.\x00") is None
    assert rolled_logs_command("/var/log/kafka/server.log", 5).argv == (
        "find", "/var/log/kafka", "-maxdepth", "1", "-type", "f", "-name", "server.log.*", "-printf", "%T@ %f\\0")
    assert rolled_logs_command("/var/log/kafka/log-cleaner.log", 5, 16, "x").argv[7:11] == (
        "log-cleaner.log.*", "-mmin", "-16", "-printf")
    cmd = rolled_log_command("/var/log/kafka/server.log", "server.log.2026-11-22-23", 20, 5)
    assert cmd.argv == ("tail", "-n", "20", "--", "/var/log/kafka/server.log.2026-11-22-23") and cmd.kind == "server_log"
    for bad in ("server.log.1;id", "../server.log.1", "other.log.1", "server.log.1\n", "-server.log.1"):
        with pytest.raises(C.UnsafeValueError):
            rolled_log_command("/var/log/kafka/server.log", bad, 20, 5)
    for bad in ("/var/log/kafka/server log", "/var/log/kafka/server+1.log", "/var/log/kafka/*.log"):
        with pytest.raises(C.UnsafeValueError):
            rolled_logs_command(bad, 5)


def test_the_capture_reads_jmx_once_exactly_as_the_health_check_does():
    """Issue 17 §2: the default capture's JMX read is the health check's (``detect.jmxtool.jmx_read``): one JmxTool
    run with --one-time CSV on 2.x, until its first row on 0.10, the light JVM, ``leadership.jmx_timeout_s``; no
    port, no usable host or a hostile value -> no command, the reason said. Every host gets it, except a process that
    cannot answer (stopped, zombie)."""
    from kafka_runbooks import versions
    from kafka_runbooks.config import ClusterConfig, LeadershipSettings
    from kafka_runbooks.host.jmxtool import LIGHT_JVM, jmx_read
    from kafka_runbooks.model import Broker

    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1"}, kafka_home="/opt/kafka",
                        leadership=LeadershipSettings(jmx_timeout_s=12.0, jmx_host="127.0.0.9"))
    b = Broker(1, "kafka1", 9092, jmx_port=9999)
    v23, v0102 = versions.assumed("2.3.0"), versions.assumed("0.10.2.1")
    cmd = C.jmx_command(cfg, b, v23)
    assert (cmd.name, cmd.kind, cmd.timeout) == ("jmx", "jmx", 12.0) and cmd.argv == jmx_read(cfg, b, (), v23).argv
    assert cmd.argv[cmd.argv.index("--jmx-url") + 1] == "service:jmx:rmi:///jndi/rmi://127.0.0.9:9999/jmxrmi"
    assert {"--one-time", "--report-format", "csv", *LIGHT_JVM.split(), "-Xmx64m", "/opt/kafka/libs/*", "kafka.tools.JmxTool"} <= set(cmd.argv)
    assert cmd.argv[:6] == ("env", "-u", "JMX_PORT", "-u", "CLASSPATH", "java")
    old = C.jmx_command(cfg, b, v0102)
    assert old.argv[:2] == ("bash", "-c") and "--one-time" not in old.argv and "--reporting-interval" in old.argv
    assert "no JMX port in its registration" in C.jmx_command(cfg, Broker(1, "kafka1", 9092), v23)
    bad_host = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1"}, kafka_home="/opt/kafka")
    assert "no usable JMX host ('$(reboot)')" in C.jmx_command(bad_host, Broker(1, "$(reboot)", 9092, jmx_port=9999), v23)
    with pytest.raises(C.UnsafeValueError):
        C.jmx_command(ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1"}, kafka_home="opt/kafka"), b, v23)
    s = CaptureSettings()
    assert C.tool_plan(C.PEER, 4242, "sleeping", s).jmx and C.tool_plan(C.SUSPECT, 4242, "running", s).jmx
    assert C.tool_plan(C.PEER, None, None, s).jmx  # no process seen (another user's): its JMX port may still answer
    stopped = C.tool_plan(C.SUSPECT, 4242, "stopped", s)
    assert not stopped.jmx and any(t == "JMX read" and "cannot answer" in why for t, why in stopped.skipped)
    assert not C.tool_plan(C.PEER, 4242, "zombie", s).jmx


def test_the_analysis_reads_the_capture_s_jmx_file_in_both_of_the_real_tool_s_forms():
    """The `jmx` kind as the real JmxTool prints it (recorded from the lab's broker, tests/detect/fixtures): 2.x's
    --one-time CSV with its first ``time,"<ms>"`` line, and the original header-and-rows form."""
    from pathlib import Path

    from kafka_runbooks.analyze.parsers import parse_jmx

    fixtures = Path(__file__).parent.parent / "detect" / "fixtures"
    for name in ("jmxtool_2.3.0_csv.txt", "jmxtool_2.3.0_original.txt"):
        j = parse_jmx((fixtures / name).read_bytes())
        assert j.ok and len(j.rows) == 1 and j.rows[0]["time"] > 1.7e12, (name, j.unparsable)
        assert j.series("RequestQueueSize") == [(j.rows[0]["time"], 0.0)], name
    assert not parse_jmx(b'time,"1795553235973"\nError: connection refused\n').ok
