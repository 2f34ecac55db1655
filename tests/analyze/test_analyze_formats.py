"""The other evidence formats: GC logs, ZooKeeper four-letter words and config, kafka-dump-log output (the
seed's excerpts verbatim, and the real Kafka 2.3.0 tool's output on real segments), log-directory listings,
socket tables of Linux and macOS/BSD, the direct Kafka checks (kafka_probe) and JmxTool output."""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose, on_broker_endpoint
from kafka_runbooks.analyze.parsers import (parse_cons, parse_dump_log, parse_gc_log, parse_jmx, parse_kafka_probe,
                                            parse_listing, parse_mntr, parse_properties, parse_sockets, parse_srvr)
from kafka_runbooks.host.sockets import split_host_port

from analyze_helpers import FIXTURES, REPO, fixture_bytes, fixture_text

KAFKA_HOME = Path(os.environ.get("KAFKA_HOME") or (REPO.parent.parent / "shared" / "kafka" / "kafka_2.12-2.3.0"))
if not KAFKA_HOME.exists():
    KAFKA_HOME = Path("/work/shared/kafka/kafka_2.12-2.3.0")


# ------------------------------------------------------------------ GC


def test_gc_unified_jdk17_real_broker_log():
    g = parse_gc_log(fixture_bytes("real23/broker1.kafkaServer-gc.log"))
    assert g.ok and g.format == "unified" and len(g.pauses) == 83 and g.unrecognized.count == 0
    p = g.longest()
    assert p.seconds == pytest.approx(0.5047) and p.at == "2026-11-22T13:59:11.054+0000" and p.kind == "young"


def test_gc_jdk8_print_gc_details():
    # real JDK 8 lines (public posts): datestamped Serial, plain Parallel, G1 with uptime only
    text = ("2020-10-26T08:07:43.116+0800: 0.767: [Full GC (Allocation Failure) 2020-10-28T08:07:43.116+0800: 0.767: [Tenured: "
            "174685K->174708K(174784K), 0.0344185 secs] 253204K->192073K(253440K), [Metaspace: 3291K->3291K(1056768K)], 0.0345011 secs] "
            "[Times: user=0.05 sys=0.00, real=0.05 secs] \n"
            "[Full GC (Allocation Failure) [PSYoungGen: 512K->0K(1536K)] [ParOldGen: 875K->1009K(4096K)] 1387K->1009K(5632K), "
            "[Metaspace: 3459K->3459K(1056768K)], 0.0070479 secs] [Times: user=0.02 sys=0.00, real=0.01 secs] \n"
            "56965.451: [Full GC (Allocation Failure)  28G->387M(28G), 1.1821630 secs]\n")
    g = parse_gc_log(text)
    assert g.format == "jdk8" and [(p.kind, p.seconds) for p in g.pauses] == [("full", 0.05), ("full", 0.01), ("full", 1.182163)]
    assert g.pauses[0].at == "2020-10-26T08:07:43.116+0800" and g.pauses[2].uptime_s == 56965.451


def test_long_gc_pause_finding_and_session_correlation():
    gc = ("[2026-11-22T13:58:20.000+0000][gc          ] GC(1) Pause Full (System.gc()) 200M->100M(256M) 9120.500ms\n")
    files = [ParsedFile("hosts/3/gc.log", "gc_log", 3, result=parse_gc_log(gc)),
             ParsedFile("hosts/3/server.log", "server_log", 3, result=__import__("kafka_runbooks.analyze.parsers", fromlist=["x"]).parse_log(
                 fixture_bytes("real23/broker3.server.log")))]
    fs = diagnose(files)
    g = next(f for f in fs if f.kind == "gc_pause_long")
    assert "9.1 s" in g.summary and g.broker_ids == (3,)
    z = next(f for f in fs if f.kind == "zk_session_expired")
    assert "46618 ms" in z.summary and "9.1 s pause" in z.summary


# ------------------------------------------------------------------ ZooKeeper


def test_zk_four_letter_words_real_38():
    m = parse_mntr(fixture_bytes("real23/zk3.mntr.txt"))
    assert m.ok and m.mode == "leader" and m.synced_followers == 2 and m.packets_received > 0 and m.connections == 4
    s = parse_srvr(fixture_bytes("real23/zk1.srvr.txt"))
    assert s.ok and s.mode == "follower" and s.zxid == 0x1000005cf and s.epoch == 1 and s.connections == 1
    assert (s.latency_min, s.latency_max) == (0.0, 57.0)
    c = parse_cons(fixture_bytes("real23/zk3.cons.txt"))
    assert c.ok and len(c.connections) == 4
    assert c.connections[0].session == "0x300000bb0b00003" and c.connections[0].timeout_ms == 6000
    cfg = parse_properties(fixture_bytes("real23/zk1.zoo.cfg"))
    assert cfg.int("tickTime") == 500 and cfg.int("syncLimit") == 4
    assert parse_srvr("This ZooKeeper instance is not currently serving requests\n").unparsable


def test_zk_follower_drop_seed004_with_sync_arithmetic():
    files = [ParsedFile("zk/13/zookeeper.log", "zk_log", None, result=__import__("kafka_runbooks.analyze.parsers", fromlist=["x"]).parse_log(
                 fixture_bytes("seed004_zk13_follower.log")), server="13"),
             ParsedFile("zk/37/zookeeper.log", "zk_log", None, result=__import__("kafka_runbooks.analyze.parsers", fromlist=["x"]).parse_log(
                 fixture_bytes("seed004_zk37_leader.log")), server="37"),
             ParsedFile("zk/13/zoo.cfg", "zk_config", None, result=parse_properties("tickTime=2000\ninitLimit=10\nsyncLimit=5\n"), server="13")]
    f = next(x for x in diagnose(files, zk_zones={"13": "us-east-1a"}) if x.kind == "zookeeper_follower_dropped")
    assert "follower(s) 13 dropped out of the ensemble 1 time(s)" in f.summary and "rejoined after 104 ms" in f.summary
    assert "the leader dropped learner(s) 13" in f.summary
    assert "syncLimit 5 x tickTime 2000 ms = 10000 ms" in f.summary
    drops = [d for d in f.details["drops"] if "leader_side" not in d]
    assert drops[0]["at"] == "2023-09-01T04:02:01.662" and drops[0]["server"] == "13" and drops[0]["rejoined_after_ms"] == 104
    assert drops[0]["zone"] == "us-east-1a"  # recorded so recurrence can be counted by zone
    assert {e.source for e in f.evidence} == {"zk/13/zookeeper.log", "zk/37/zookeeper.log"}


def test_zk_follower_drop_real_38_ensemble():
    from kafka_runbooks.analyze.parsers import parse_log

    files = [ParsedFile(f"zk/{z}/zookeeper.log", "zk_log", None, result=parse_log(fixture_bytes(f"real23/zk{z}.zookeeper.log")), server=str(z))
             for z in (1, 2, 3)]
    files.append(ParsedFile("zk/1/zoo.cfg", "zk_config", None, result=parse_properties(fixture_bytes("real23/zk1.zoo.cfg")), server="1"))
    f = next(x for x in diagnose(files) if x.kind == "zookeeper_follower_dropped")
    assert "follower(s) 1, 2 dropped out of the ensemble 2 time(s)" in f.summary
    assert "the leader dropped learner(s) 1, 2" in f.summary and "= 2000 ms" in f.summary


# ------------------------------------------------------------------ kafka-dump-log


def test_dump_log_seed004_excerpts_verbatim():
    idx = parse_dump_log(fixture_bytes("seed004_dump_index.txt"))
    f = idx.files[0]
    assert idx.ok and f.kind == "index" and f.path.endswith("00000000000004353579.index")
    assert [(e.offset, e.position) for e in f.index][:2] == [(4353580, 34112), (4353581, 70021)] and len(f.index) == 7
    ti = parse_dump_log(fixture_bytes("seed004_dump_timeindex.txt")).files[0]
    assert ti.kind == "timeindex" and ti.time_range() == (1697055992377, 1697055992488) and ti.offset_range() == (4322574, 4322580)
    log = parse_dump_log(fixture_bytes("seed004_dump_log.txt"))
    b = log.files[0].batches
    assert log.ok and len(b) == 2 and log.files[0].records == 2
    # the blog wrapped each batch line in the middle of "compresscodec": re-joined
    assert b[0].fields["compresscodec"] == "none" and b[0].fields["magic"] == "2" and b[0].int("crc") == 3906560868
    assert b[1].fields["compresscodec"] == "none" and b[1].int("position") == 1242
    assert b[0].timestamp_type == "LogAppendTime" and b[0].fields["deleteHorizonMs"] == "OptionalLong.empty"
    assert b[0].int("partitionLeaderEpoch") == 4 and b[0].valid is True and not log.files[0].problems()


def test_dump_log_real_23_outputs():
    d = parse_dump_log(fixture_bytes("real23/t1.log.txt"))
    f = d.files[0]
    assert d.ok and f.kind == "log" and f.starting_offset == 367528 and f.batches[0].int("count") == 168
    assert f.batches[0].fields["compresscodec"] == "NONE" and f.records > 200
    idx = parse_dump_log(fixture_bytes("real23/t1.index.txt")).files[0]
    assert idx.kind == "index" and len(idx.index) == 76 and not idx.problems()


@pytest.mark.timeout(300)
def test_dump_log_of_the_real_tool_on_real_segments(tmp_path):
    """Runs Kafka 2.3.0's kafka-dump-log.sh on segment files a real broker wrote (fixtures/real23/segment)."""
    tool = KAFKA_HOME / "bin" / "kafka-dump-log.sh"
    assert tool.exists(), f"Kafka 2.3.0 distribution not found at {KAFKA_HOME}"
    seg = tmp_path / "seg"
    shutil.copytree(FIXTURES / "real23" / "segment", seg)
    env = {k: v for k, v in os.environ.items() if k not in ("JMX_PORT", "KAFKA_OPTS")}
    outs = {}
    for ext in ("index", "timeindex", "log"):
        r = subprocess.run([str(tool), "--files", str(seg / f"00000000000000000000.{ext}"), "--print-data-log"],
                           capture_output=True, text=True, timeout=240, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        outs[ext] = parse_dump_log(r.stdout + r.stderr)  # the tool prints its own index verification on stderr
    assert [(e.offset, e.position) for e in outs["index"].files[0].index] == [(100, 3101), (150, 6103), (200, 9151), (250, 12195)]
    tf = outs["timeindex"].files[0]
    assert tf.kind == "timeindex" and [e.offset for e in tf.index] == [51, 101, 151, 201]
    # 2.3 verifies the time index against the log: its entries point inside batches (normal with batching)
    assert [(a, b) for _, a, b in tf.mismatches] == [(51, 100), (101, 150), (151, 200), (201, 250)] and not outs["timeindex"].unrecognized.count
    lf = outs["log"].files[0]
    assert lf.kind == "log" and len(lf.batches) >= 6 and lf.offset_range() == (0, 250) and not lf.problems()
    assert all(b.valid for b in lf.batches) and lf.records == 251
    # the file parsed from the fixture copy of the same output agrees
    assert parse_dump_log(fixture_bytes("real23/segment/dump.log.txt")).files[0].records == lf.records


def test_dump_log_damage_is_a_finding():
    text = fixture_text("real23/t1.log.nodata.txt").replace("isvalid: true", "isvalid: false", 1)
    f = next(x for x in diagnose([ParsedFile("hosts/1/dump.txt", "dump_log", 1, result=parse_dump_log(text))]) if x.kind == "segment_damage")
    assert "invalid CRC" in f.summary and f.evidence[0].lines


# ------------------------------------------------------------------ listings


def test_listings_du_and_ls():
    du = parse_listing(fixture_bytes("real23/du-sb.txt"))
    assert du.ok and du.partitions["__consumer_offsets-0"].bytes == 20975616
    ls = parse_listing("/data/__consumer_offsets-19:\n" + fixture_text("real23/ls-l-offsets-0.txt"))
    p = ls.partitions["__consumer_offsets-19"]
    assert p.segments == 1 and p.oldest_base == 0
    # 2,000 segments of ~100 MB (seed 002): an oversized offsets partition
    big = "/var/kafka/__consumer_offsets-19:\n" + "".join(
        f"-rw-r--r-- 1 kafka kafka 104857600 Oct 12 16:52 {i * 1000:020d}.log\n" for i in range(2000))
    f = next(x for x in diagnose([ParsedFile("hosts/3/ls.out", "log_dir_listing", 3, result=parse_listing(big))])
             if x.kind == "offsets_partition_oversized")
    assert "__consumer_offsets-19: 2000 segments" in f.summary


# ------------------------------------------------------------------ sockets


def test_macos_netstat_counts_each_socket_once_and_labels_ports():
    t = parse_sockets(fixture_bytes("macos_netstat_an.txt"))
    assert t.ok and t.format == "netstat_bsd" and len(t.rows) == 24
    assert split_host_port("127.0.0.1.9092", bsd=True) == ("127.0.0.1", 9092) and split_host_port("*.*", bsd=True) == ("*", None)
    assert t.rows[15].local_host == "::1" and t.rows[15].local_port == 2181 and t.rows[15].state == "CLOSE_WAIT"
    assert t.rows[1].state == "FIN_WAIT2"  # BSD FIN_WAIT_2 normalised
    # both ends of every loopback connection are in the table: the listener's own sockets are its server side only
    served = [r for r in t.rows if on_broker_endpoint(r, 0, {0: 9092}, {0: "127.0.0.1"}) and r.state != "LISTEN"]
    assert sorted(r.state for r in served) == ["CLOSE_WAIT"] * 3 + ["ESTABLISHED"] * 3
    zk = [r for r in t.served_on(2181) if r.state != "LISTEN"]
    assert len(zk) == 6 and sum(r.recv_q for r in zk if r.state == "CLOSE_WAIT") == 147


def test_linux_netstat_unix_rows_are_not_tcp_and_duplicates_count_once():
    t = parse_sockets(fixture_bytes("real23/netstat-anp.txt"))
    assert t.ok and t.unix_rows >= 6 and all(r.proto.startswith(("tcp", "udp")) for r in t.rows)
    text = fixture_text("seed001_219_netstat_antp.txt")
    lines = text.splitlines()
    doubled = "\n".join(lines + lines[1:4]) + "\n"  # a pasted table repeating three sockets
    t1, t2 = parse_sockets(text), parse_sockets(doubled)
    assert len(t2.rows) == len(t1.rows) and t2.duplicates == 3 and "counted once" in t2.notes[0]
    ss = parse_sockets(fixture_bytes("real23/ss-tanp.txt"))
    assert ss.ok and ss.format == "ss" and ss.rows


# ------------------------------------------------------------------ kafka_probe + JmxTool


def test_probe_timeouts_and_growing_recv_q_mean_request_handling_stalled():
    probe = json.dumps({"schema": "kafka-runbooks/kafka-probe/v1", "broker_id": 3, "endpoint": "127.101.1.3:9092", "results": [
        {"at": "2026-11-22T14:00:00Z", "check": "api_versions", "ok": False, "latency_ms": 5000, "error": "KafkaError{code=_TIMED_OUT}: timed out"},
        {"at": "2026-11-22T14:00:10Z", "check": "metadata", "ok": False, "latency_ms": 5000, "error": "Request timed out"}]})
    t1 = "State Recv-Q Send-Q Local Address:Port Peer Address:Port\nESTAB 10 0 127.101.1.3:9092 127.0.0.1:1000\n"
    t2 = ("State Recv-Q Send-Q Local Address:Port Peer Address:Port\nCLOSE-WAIT 900 0 127.101.1.3:9092 127.0.0.1:1000\n"
          "ESTAB 4000 0 127.101.1.3:9092 127.0.0.1:1001\n")
    files = [ParsedFile("hosts/3/probe.json", "kafka_probe", 3, result=parse_kafka_probe(probe)),
             ParsedFile("hosts/3/ss-1.out", "sockets_ss", 3, result=parse_sockets(t1), seq="1"),
             ParsedFile("hosts/3/ss-2.out", "sockets_ss", 3, result=parse_sockets(t2), seq="2")]
    hosts, ports = {3: "127.101.1.3"}, {3: 9092}
    f = next(x for x in diagnose(files, broker_ports=ports, broker_hosts=hosts) if x.kind == "request_handling_stalled")
    assert "all 2 direct Kafka check(s) failed (2 timed out)" in f.summary and "10 -> 4900" in f.summary
    # the same failed checks without Recv-Q growth are not claimed as a stall
    files[2] = ParsedFile("hosts/3/ss-2.out", "sockets_ss", 3, result=parse_sockets(t1), seq="2")
    fs = diagnose(files, broker_ports=ports, broker_hosts=hosts)
    assert not [x for x in fs if x.kind == "request_handling_stalled"]
    u = next(x for x in fs if x.kind == "broker_unresponsive")
    assert "ambiguous" in u.summary and u.details["ambiguity"]
    assert parse_kafka_probe("not json").unparsable


def test_capture_kafka_checks_listener_table_and_process_state():
    """The capture's own kinds (docs/CONTRACTS.md, "Capture for real Kafka"): kafka-checks.json at the bundle root
    (model.KafkaCheck dicts for every broker) becomes one probe per broker; a listener-only table (`ss -Hltnp`)
    is not a connection sample; /proc/<pid>/stat state T is a stopped broker."""
    from kafka_runbooks.analyze.bundle import load_entry
    from kafka_runbooks.analyze.parsers import parse_content

    checks = [{"broker_id": 3, "endpoint": "127.101.1.3:9092", "ok": False, "latency_ms": 5003.1, "answered_by": None,
               "error": "Local: Timed out", "error_code": "_TIMED_OUT", "at": "2026-11-22T14:00:00Z", "registered": True,
               "during_capture": "start"},
              {"broker_id": 3, "endpoint": "127.101.1.3:9092", "ok": False, "latency_ms": 5001.0, "answered_by": None,
               "error": "Local: Timed out", "error_code": "_TIMED_OUT", "at": "2026-11-22T14:01:00Z", "registered": True,
               "during_capture": "end"},
              {"broker_id": 1, "endpoint": "127.101.1.1:9092", "ok": True, "latency_ms": 3.2, "answered_by": 1,
               "error": None, "error_code": None, "at": "2026-11-22T14:00:00Z", "registered": True, "during_capture": "start"}]
    kc = parse_content("kafka_checks", json.dumps(checks))
    assert kc.ok and sorted(kc.probes) == [1, 3] and len(kc.probes[3].timeouts) == 2
    listen = "LISTEN 0 50 127.101.1.3:9092 0.0.0.0:* users:((\"java\",pid=7,fd=100))\n"
    t1 = "State Recv-Q Send-Q Local Address:Port Peer Address:Port\nESTAB 10 0 127.101.1.3:9092 127.0.0.1:1000\n"
    t2 = "State Recv-Q Send-Q Local Address:Port Peer Address:Port\nESTAB 4000 0 127.101.1.3:9092 127.0.0.1:1000\n"
    files = [ParsedFile("kafka-checks.json", "kafka_probe", 3, result=kc.probes[3], embedded=True),
             ParsedFile("hosts/3/listen-sockets.out", "sockets_ss", 3, result=parse_sockets(listen), seq="0"),
             ParsedFile("hosts/3/sockets-ss-1.out", "sockets_ss", 3, result=parse_sockets(t1), seq="1"),
             ParsedFile("hosts/3/sockets-ss-2.out", "sockets_ss", 3, result=parse_sockets(t2), seq="2")]
    hosts, ports = {3: "127.101.1.3"}, {3: 9092}
    f = next(x for x in diagnose(files, broker_ports=ports, broker_hosts=hosts) if x.kind == "request_handling_stalled")
    assert "10 -> 4000" in f.summary and "across 2 socket tables" in f.summary
    # without growth between the two connection samples the listener-only table does not make one up
    files[3] = ParsedFile("hosts/3/sockets-ss-2.out", "sockets_ss", 3, result=parse_sockets(t1), seq="2")
    assert not [x for x in diagnose(files, broker_ports=ports, broker_hosts=hosts) if x.kind == "request_handling_stalled"]
    # /proc/<pid>/stat: the state is the field after the LAST ')' (a comm may hold ') ')
    st = parse_content("process_state", "4242 (java) T 1 4242 4242 0 -1 4194560 1 2 3\n")
    assert st.ok and st.state_word == "stopped"
    f = next(x for x in diagnose([ParsedFile("hosts/3/process-state.out", "process_state", 3, result=st)])
             if x.kind == "process_stopped")
    assert f.broker_ids == (3,) and "SIGCONT" in f.summary and f.evidence[0].lines == (1,)
    threads = parse_content("proc_threads", "4242 (java) T 1\n4300 (data-plane-kafk) T 1\n4301 (a) b) c) S 1\n")
    assert [t.name for t in threads.threads] == ["java", "data-plane-kafk", "a) b) c"] and threads.states() == {"T": 2, "S": 1}
    assert parse_content("process_state", "no such process").unparsable
    assert parse_content("kafka_checks", "{}").unparsable
    # through the bundle loader: one kafka_probe per broker from the one root file
    import hashlib
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        data = json.dumps(checks).encode()
        (Path(d) / "kafka-checks.json").write_bytes(data)
        pfs, _ = load_entry(d, {"path": "kafka-checks.json", "kind": "kafka_checks", "broker_id": None,
                                "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)})
    assert sorted((p.kind, p.broker_id) for p in pfs) == [("kafka_checks", None), ("kafka_probe", 1), ("kafka_probe", 3)]


def test_jmxtool_csv():
    j = parse_jmx('Trying to connect to JMX url: service:jmx:rmi:///jndi/rmi://127.0.0.1:9999/jmxrmi.\n'
                  '"time","kafka.network:type=RequestChannel,name=RequestQueueSize:Value"\n'
                  '1795356000000,0\n1795356002000,500\n')
    assert j.ok and j.series("RequestQueueSize") == [(1795356000000, 0.0), (1795356002000, 500.0)]
    f = next(x for x in diagnose([ParsedFile("hosts/3/jmx.out", "jmx", 3, result=j)], broker_versions={3: "1.1.0"})
             if x.kind == "request_queue_saturated")
    assert "reached 500 of queued.max.requests 500 (default)" in f.summary and "KIP-291" in f.summary


def test_stdout_without_thread_dumps_is_not_unparsable(tmp_path):
    """kafkaServer.out is read for thread dumps too; one without any (the usual case) is not 'unparsable'."""
    from kafka_runbooks.analyze.bundle import load_entry

    (tmp_path / "out").write_bytes(fixture_bytes("real23/broker1.server.log.start"))
    pfs, _ = load_entry(str(tmp_path), {"path": "out", "kind": "kafka_stdout", "broker_id": 1})
    assert [(p.kind, p.reasons) for p in pfs] == [("kafka_stdout", [])]
    assert load_entry(str(tmp_path), {"path": "out", "kind": "jstack", "embedded_in": "kafka_stdout", "broker_id": 1})[0] == []
    (tmp_path / "dumps").write_bytes(fixture_bytes("real23/broker1.kafkaServer.out"))
    pfs, _ = load_entry(str(tmp_path), {"path": "dumps", "kind": "jstack", "embedded_in": "kafka_stdout", "broker_id": 1})
    assert [(p.kind, len(p.result.dumps), p.embedded) for p in pfs] == [("jstack", 2, True)]


def test_timestamps_are_normalised_with_their_fraction_and_zone():
    from kafka_runbooks.analyze.parsers.layouts import normalise_ts

    assert normalise_ts("2020-04-22 10:43:36,369") == ("2020-04-22T10:43:36.369", None)
    assert normalise_ts("2020-04-22T10:43:36.369") == ("2020-04-22T10:43:36.369", None)
    assert normalise_ts("2020-04-22 10:43:36,12Z") == ("2020-04-22T10:43:36.120", "Z")  # 23 characters, not a fraction of 3
    assert normalise_ts("2020-04-22 10:43:36,1+0800") == ("2020-04-22T10:43:36.100", "+0800")
    assert normalise_ts("2020-04-22 10:43:36") == ("2020-04-22T10:43:36.000", None)
    assert normalise_ts("2020-04-22 10:43:36,123456789") == ("2020-04-22T10:43:36.123", None)
    assert normalise_ts("19/07/12 11:01:43") == ("2019-07-12T11:01:43.000", None)


def test_a_gc_pause_and_its_safepoint_line_are_one_stop():
    """Recorded on JDK 17 with -Xlog:gc,safepoint: every GC pause is followed by the safepoint line of the same stop.
    Counting both said "2 GC pauses" for one stop of the application (PrintGCApplicationStoppedTime double count)."""
    g = parse_gc_log(fixture_bytes("jdk17_safepoints.gc.log"))
    assert len(g.pauses) == 45 and len(g.stopped) == 45
    stops = g.stops()
    assert len(stops) == 45
    full = [s for s in stops if s.kind == "full"]
    assert len(full) == 2 and all(s.cause.startswith("Pause Full (System.gc())") for s in full)
    by_line = {p.line: p for p in g.pauses}
    for s in stops:  # a stop is at least as long as its pause: the safepoint adds the time to reach it
        assert s.seconds >= by_line[s.line].seconds
    # a long stop is one finding's one pause, not two: the last full GC made 9.4 s long, its safepoint 9.5 s
    import dataclasses

    g.pauses[-1] = dataclasses.replace(g.pauses[-1], seconds=9.4)
    g.stopped[-1] = dataclasses.replace(g.stopped[-1], seconds=9.5)
    files = [ParsedFile("hosts/3/gc.log", "gc_log", 3, result=g)]
    f = next(x for x in diagnose(files) if x.kind == "gc_pause_long")
    assert f.summary.startswith("broker 3: 1 GC pause(s)") and f.details["pauses_s"] == [9.5]
