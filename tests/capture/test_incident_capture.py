"""Capture additions for incidents 000, 002b and 004, without a lab: the commands (argv only, hostile values refused),
the bundle's ZooKeeper layout, and one member's capture with a scripted runner (statuses and reasons)."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.host import commands as C
from kafka_runbooks.capture.bundle import EvidenceBundle, verify
from kafka_runbooks.capture.zookeeper import capture_member
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.host import procfs
from kafka_runbooks.detect.zk_probe import Member
from kafka_runbooks.hooks.ssh import CommandResult


def test_dump_log_runs_the_brokers_own_tool_on_segment_files_only():
    from kafka_runbooks import versions

    v23 = versions.cluster_version({1: [versions.from_log_line(1, "2.3.0")]})
    cmd = C.dump_log_command("/opt/kafka", ["/data/__consumer_offsets-7/00000000000000000000.log",
                                            "/data/__consumer_offsets-7/00000000000000000000.index"], "dump-log-oldest", 60, v23)
    assert cmd.kind == "dump_log"
    # a constant script; the tool and the files are its arguments
    assert cmd.argv[:3] == ("sh", "-c", 'exec "$0" "$@" 2>&1') and cmd.argv[3] == "/opt/kafka/bin/kafka-dump-log.sh"
    files = ("--deep-iteration", "--files", "/data/__consumer_offsets-7/00000000000000000000.log,"
                                            "/data/__consumer_offsets-7/00000000000000000000.index")
    assert cmd.argv[4:] == files
    # before 2.0 (KAFKA-6615), and when the version is unknown, the class the script runs
    for v in (versions.cluster_version({1: [versions.from_log_line(1, "0.10.2.1")]}), versions.UNKNOWN, None):
        old = C.dump_log_command("/opt/kafka", ["/data/__consumer_offsets-7/00000000000000000000.log",
                                                "/data/__consumer_offsets-7/00000000000000000000.index"], "d", 60, v)
        assert old.argv[3:] == ("/opt/kafka/bin/kafka-run-class.sh", "kafka.tools.DumpLogSegments", *files)
    for bad in (["/data/x/../etc/passwd"], ["relative/00000000000000000000.log"], ["/data/p/00000000000000000000.log,/etc/shadow"],
                ["/data/p/notasegment.log"], ["/data/p/00000000000000000000.log; rm -rf /"], []):
        with pytest.raises(C.UnsafeValueError):
            C.dump_log_command("/opt/kafka", bad, "d", 60)
    with pytest.raises(C.UnsafeValueError):
        C.dump_log_command("opt/kafka", ["/d/00000000000000000000.log"], "d", 60)


def test_log_dir_commands_use_finds_own_patterns_never_a_shell_glob():
    seg = C.offsets_segments_command("/var/kafka/data/", 30, 2)
    assert seg.argv == ("find", "/var/kafka/data", "-mindepth", "2", "-maxdepth", "2", "-path", "/var/kafka/data/__consumer_offsets-*/*.log",
                        "-printf", "%h %f %s\n")
    assert C.du_log_dir_command("/var/kafka/data", 30).argv == ("du", "-b", "--max-depth=1", "--", "/var/kafka/data")
    assert C.ls_partition_command("/d/__consumer_offsets-3", 30).argv == ("ls", "-lR", "--", "/d/__consumer_offsets-3")
    assert C.meminfo_command(5, 2).name == "meminfo-2" and C.process_status_command(42, 5).argv == ("cat", "/proc/42/status")
    for bad in ("relative", "/a/../b", "/a\nb"):
        with pytest.raises(C.UnsafeValueError):
            C.offsets_segments_command(bad, 30)


def test_offsets_dirs_from_find_output():
    text = ("/d/__consumer_offsets-7 00000000000000000000.log 1048576\n/d/__consumer_offsets-7 00000000000000003300.log 1048000\n"
            "/d/__consumer_offsets-12 00000000000000000000.log 0\n/d/orders-1 00000000000000000000.log 5\ngarbage line\n")
    dirs = procfs.offsets_dirs(text, "/d")
    assert [(o.partition, o.segments, o.bytes, o.oldest_segment, o.newest_segment) for o in dirs] == [
        (7, 2, 2096576, "00000000000000000000.log", "00000000000000003300.log"), (12, 1, 0, "00000000000000000000.log", "00000000000000000000.log")]


def test_proc_parsers():
    assert procfs.meminfo_available("MemTotal:       24 kB\nMemAvailable:   1000 kB\n") == 1024000
    assert procfs.status_rss("Name:\tjava\nVmRSS:\t  2048 kB\n") == 2 << 20
    assert procfs.thread_names("11 (java) S 1\n12 (group-metadata-) S 1\n13 (weird ) name)) R 1\n") == {
        11: "java", 12: "group-metadata-", 13: "weird ) name)"}
    assert procfs.io_rchar_total("rchar: 100\nwchar: 5\nrchar: 23\n") == 123 and procfs.io_rchar_total("") is None


class ScriptedZkHost:
    """A ZooKeeper host over 'SSH': zoo.cfg and the log exist, the GC log does not, jstack works."""

    host = "10.1.0.1"
    address = "10.1.0.1:22"

    def __init__(self):
        self.calls = []

    def get_conn(self):
        return self

    def close(self):
        pass

    def run_to_file(self, argv, timeout, path):
        a = tuple(argv)
        self.calls.append(a)
        out, err, rc = b"", b"", 0
        if a[:2] == ("cat", "/proc/loadavg"):
            out = b"0.52 0.40 0.31 1/200 999\n"
        elif a[-1].endswith("zoo.cfg"):
            out = b"tickTime=2000\nsyncLimit=5\n"
        elif a[0] == "tail" and a[-1].endswith("zookeeper.log"):
            out = b"2023-09-01 04:02:01,971 [myid:13] - INFO [QuorumPeer[myid=13](plain=...):QuorumPeer@916] - Peer state changed: looking\n"
        elif a[0] == "tail":
            rc, err = 1, b"tail: cannot open 'gc' for reading: No such file or directory\n"
        elif a[:2] == ("ss", "-Hltnp"):
            out = b'LISTEN 0 50 10.1.0.1:2181 0.0.0.0:* users:(("java",pid=4242,fd=45))\n'
        elif a[:2] == ("cat", "/proc/4242/stat"):
            out = b"4242 (java) S 1 4242\n"
        elif a[0] == "ps":
            out = b" 4242 100 2048 java QuorumPeerMain\n"
        elif "jstack" in a:
            out = b'Full thread dump\n"main" #1\n'
        with open(path, "wb") as fh:
            fh.write(out)
        return CommandResult(a, " ".join(a), b"", err, rc, "2026-11-22T00:00:00.000Z", 0.01, None, path, len(out))


def _config(tmp_path):
    return ClusterConfig.from_dict("c", {
        "zk_conn_id": "zk", "hosts": {"1": "h1"}, "bundle_base": str(tmp_path), "incident_base": str(tmp_path),
        "zookeeper": {"servers": {"13": {"address": "10.1.0.1:2181", "ssh_conn_id": "zkhost13", "zone": "az-2"}},
                      "config_path": "/etc/zk/zoo.cfg", "log_path": "/var/log/zk/zookeeper.log", "gc_log_path": "/var/log/zk/gc.log"}})


def test_a_members_capture_words_files_and_jstack_of_the_affected_one(tmp_path):
    cfg = _config(tmp_path)
    bundle = EvidenceBundle(tmp_path / "b", "c", "i1", capture_id="x")
    host = ScriptedZkHost()
    words = []

    def ask(h, p, word, timeout):
        words.append(word)
        return {"srvr": "Mode: follower\nConnections: 4\n", "mntr": "zk_server_state\tfollower\n", "cons": " /10.0.0.9:5000[1](queued=0)\n"}[word]

    capture_member(cfg, bundle, Member("13", "10.1.0.1", 2181, "zkhost13", "az-2"), True, lambda conn: host, ask)
    m = bundle.write_manifest()
    z = m["zookeeper"]["13"]
    assert z["role"] == "affected" and z["zone"] == "az-2" and z["pid"] == 4242 and z["process_state"] == "sleeping"
    assert z["status"] == "partial" and z["status_reasons"] == ["skipped /var/log/zk/gc.log: no such file on the host"]
    assert words == ["srvr", "mntr", "cons"] * 2  # at the start and at the end; never ruok
    kinds = {(f["path"], f["kind"], f["server"]) for f in m["files"] if f.get("stream") == "stdout"}
    for path, kind in (("zookeeper/13/srvr-1.out", "zk_srvr"), ("zookeeper/13/mntr-2.out", "zk_mntr"), ("zookeeper/13/cons-1.out", "zk_cons"),
                       ("zookeeper/13/zoo-cfg.out", "zk_config"), ("zookeeper/13/zookeeper-log.out", "zk_log"), ("zookeeper/13/jstack-1.out", "jstack")):
        assert (path, kind, "13") in kinds, path
    assert ("jstack", "4242") in host.calls  # a plain dump: -l walks the heap at a safepoint
    assert not any("-l" in c for c in host.calls if "jstack" in c)
    assert all(c["broker_id"] is None and c["server"] == "13" for c in m["commands"])
    assert verify(bundle.path) == []
    assert json.loads((bundle.path / "manifest.json").read_text())["zookeeper"]["13"]["status"] == "partial"


def test_a_member_that_does_not_answer_and_has_no_host_is_failed(tmp_path):
    cfg = _config(tmp_path)
    bundle = EvidenceBundle(tmp_path / "b", "c", "i2", capture_id="x")

    def ask(h, p, word, timeout):
        raise TimeoutError("timed out")

    capture_member(cfg, bundle, Member("13", "10.1.0.1", 2181), False, None, ask)
    z = bundle.write_manifest()["zookeeper"]["13"]
    assert z["status"] == "failed" and any("TimeoutError" in r for r in z["status_reasons"])
    assert any("no SSH connection configured" in r for r in z["status_reasons"])
