"""Pure tests: the capture plan, validation of argv values, parsers, heap-dump decision."""

from __future__ import annotations

import shlex

import pytest

from kafka_runbooks.capture import commands as C
from kafka_runbooks.config import CaptureSettings

HOSTILE = ["1; rm -rf /", "$(reboot)", "12\n34", "`id`", "1 2", "-1", "", "0x10", "１２"]


def test_plan_with_pid():
    s = CaptureSettings(jstack_count=4, log_tail_lines=500, remote_work_dir="/var/tmp", jvm_tool_prefix=("sudo", "-n", "-u", "kafka"))
    plan = C.host_plan(4242, "/var/log/kafka/server.log", s)
    names = [c.name for c in plan]
    assert names == ["process-stat", "jstack-1", "jstack-2", "jstack-3", "jstack-4", "jmap-histo", "heap-info",
                     "open-files", "sockets-ss", "disk-free", "server-log"]
    by = {c.name: c for c in plan}
    assert by["jstack-2"].argv == ("sudo", "-n", "-u", "kafka", "jstack", "-l", "4242")
    assert by["jstack-2"].kind == "jstack"
    assert by["jmap-histo"].argv == ("sudo", "-n", "-u", "kafka", "jmap", "-histo:live", "4242")
    assert by["heap-info"].argv == ("sudo", "-n", "-u", "kafka", "jcmd", "4242", "GC.heap_info")
    assert by["open-files"].argv[-5:] == ("find", "/proc/4242/fd", "-mindepth", "1", "-maxdepth", "1")[-5:]
    assert by["disk-free"].argv == ("df", "-Pk", "/var/tmp")
    assert by["server-log"].argv == ("tail", "-n", "500", "--", "/var/log/kafka/server.log")
    assert by["process-stat"].argv == ("ps", "-o", "pid=,etimes=,rss=,args=", "-p", "4242")
    assert by["sockets-ss"].argv == ("ss", "-tanp")
    kinds = {c.kind for c in plan}
    assert kinds <= {"jstack", "jmap_histo", "heap_info", "open_files", "sockets_ss", "disk_free", "server_log", "process_stat"}
    assert C.sockets_netstat_command(5).argv == ("netstat", "-anp")
    assert C.sockets_netstat_command(5).kind == "sockets_netstat"


def test_plan_without_pid_skips_jvm_tools():
    plan = C.host_plan(None, "/x/server.log", CaptureSettings())
    assert [c.name for c in plan] == ["sockets-ss", "disk-free", "server-log"]


def test_heap_dump_command_and_path():
    s = CaptureSettings(remote_work_dir="/data/dumps/")
    p = C.heap_dump_path(s, 3, "20240501T070000Z")
    assert p == "/data/dumps/kafka-3-20240501T070000Z.hprof"
    cmd = C.heap_dump_command(77, p, s)
    assert cmd.argv == ("jmap", f"-dump:live,format=b,file={p}", "77")
    assert cmd.kind == "heap_dump"


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
        C.heap_dump_path(CaptureSettings(), bad, "20240101T000000Z")


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
        C.heap_dump_path(CaptureSettings(remote_work_dir=bad), 1, "20240101T000000Z")


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
