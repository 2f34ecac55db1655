"""Real SSH: capture of a private sshd + JVM host, strict host keys, timeouts, unreachable hosts, probes."""

from __future__ import annotations

import socket
import time

import pytest

from kafka_runbooks import model
from kafka_runbooks.capture.bundle import EvidenceBundle, verify
from kafka_runbooks.capture.collector import capture_cluster
from kafka_runbooks.hooks.ssh import ConnectError, HostKeyError, InsecureConnectionError, StrictSSHHook
from kafka_runbooks.config import CaptureSettings, ClusterConfig
from kafka_runbooks.detect.host_probe import probe_all, probe_host

from kafka_lab.net import service_ip

DOWN_HOST = service_ip("capture_ssh_down")


def _config(h, tmp_path, **capture) -> ClusterConfig:
    settings = dict(jstack_count=3, jstack_interval_s=0.5, command_timeout_s=30, connect_timeout_s=3,
                    log_tail_lines=50, remote_work_dir=h.work_dir, heap_dump=True)
    settings.update(capture)
    return ClusterConfig(
        name="capt", zk_conn_id="zk_none", hosts={1: h.conn_ok, 2: h.conn_down}, broker_port=h.broker_port,
        server_log_path=h.server_log, bundle_base=str(tmp_path), capture=CaptureSettings(**settings),
    )


def _snapshot(h) -> model.ClusterSnapshot:
    return model.ClusterSnapshot(
        cluster="capt", taken_at="2024-05-01T07:00:00Z",
        brokers=(model.Broker(1, h.host, h.broker_port), model.Broker(2, DOWN_HOST, h.broker_port)),
        controller_id=1, partitions=(model.Partition("t", 0, (1, 2), 1, (1,)),),
    )


def test_runner_runs_argv_quoted(ssh_host):
    with StrictSSHHook(ssh_host.conn_ok) as r:
        res = r.run(["printf", "%s|", "a b", "$(id)", "`id`; echo pwned", "x\ny"], timeout=10)
        assert res.ok, res
        assert res.stdout == b"a b|$(id)|`id`; echo pwned|x\ny|"
        assert res.command.endswith("printf '%s|' 'a b' '$(id)' '`id`; echo pwned' 'x\ny'")
        who = r.run(["id", "-un"], timeout=10)
        assert who.stdout.strip() == ssh_host.user.encode()
        first = r.client
        r.run(["true"], timeout=10)
        assert r.client is first  # one connection reused
        bad = r.run(["sh", "-c", "echo oops >&2; exit 3"], timeout=10)
        assert bad.exit_code == 3 and bad.stderr == b"oops\n" and bad.error is None and not bad.ok


def test_a_command_reads_an_empty_stdin_and_many_quick_commands_share_one_connection(ssh_host):
    """stdin is /dev/null on the host (no EOF sent by us: paramiko can send it after its CLOSE when a command ends at
    once, and OpenSSH then drops the whole connection); 100 commands that end at once, one connection, none refused."""
    with StrictSSHHook(ssh_host.conn_ok) as r:
        res = r.run(["cat"], timeout=10)
        assert res.ok and res.stdout == b"", res
        first = r.client
        failed = [res for res in (r.run(["true"], timeout=10) for _ in range(100)) if not res.ok]
        assert not failed and r.client is first, failed[:3]


def test_runner_timeout_kills_and_records(ssh_host):
    with StrictSSHHook(ssh_host.conn_ok) as r:
        t0 = time.monotonic()
        res = r.run(["sleep", "27"], timeout=1.5)
        assert time.monotonic() - t0 < 10
        assert res.error == "timeout after 1.5s"
        left = r.run(["ps", "-u", ssh_host.user, "-o", "args="], timeout=10)
        assert b"sleep 27" not in left.stdout


def test_runner_to_file_and_fetch(ssh_host, tmp_path):
    with StrictSSHHook(ssh_host.conn_ok) as r:
        out = tmp_path / "big.out"
        res = r.run_to_file(["head", "-c", "3000000", "/dev/zero"], 20, str(out))
        assert res.ok and res.stdout == b"" and res.stdout_bytes == 3_000_000
        assert out.stat().st_size == 3_000_000
        local = tmp_path / "log"
        assert r.fetch(ssh_host.server_log, str(local)) == local.stat().st_size
        with pytest.raises(ValueError, match="fetch limit"):
            r.fetch(ssh_host.server_log, str(tmp_path / "no"), max_bytes=10)


def test_unknown_host_key_refused(ssh_host):
    with pytest.raises(HostKeyError, match="UNKNOWN"):
        StrictSSHHook(ssh_host.conn_unknown).run(["true"], 5)


def test_changed_host_key_refused(ssh_host):
    with pytest.raises(HostKeyError, match="CHANGED"):
        StrictSSHHook(ssh_host.conn_changed).run(["true"], 5)


def test_no_host_key_check_connection_refused(ssh_host):
    with pytest.raises(InsecureConnectionError, match="no_host_key_check"):
        StrictSSHHook(ssh_host.conn_nocheck)


def test_allow_host_key_change_connection_refused(ssh_host):
    with pytest.raises(InsecureConnectionError, match="allow_host_key_change"):
        StrictSSHHook(ssh_host.conn_allow_change)


def test_unreachable_host_raises_connect_error_fast(ssh_host):
    t0 = time.monotonic()
    with pytest.raises(ConnectError):
        StrictSSHHook(ssh_host.conn_down).run(["true"], 5)
    assert time.monotonic() - t0 < 5


class NotServing:
    """The intrusive phase's gate, scripted: the lock is free and every broker fails its direct check."""

    import contextlib

    @contextlib.contextmanager
    def session(self):
        yield {"run": "test"}

    def not_serving(self, b):
        return f"broker {b}: no answer within 5s"


def test_capture_cluster(ssh_host, tmp_path):
    cfg = _config(ssh_host, tmp_path)
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-capture-1")
    trigger = model.Finding("broker_unresponsive", model.Severity.CRITICAL, "broker 1 silent", broker_ids=(1,))
    m = capture_cluster(cfg, _snapshot(ssh_host), [1, 2], bundle, trigger=trigger, intrusive=NotServing())
    root = bundle.path
    assert m["trigger"]["kind"] == "broker_unresponsive" and m["suspects"] == [1]

    h1, h2 = m["hosts"]["1"], m["hosts"]["2"]
    assert h1["reachable"] is True and h1["pid"] == ssh_host.jvm_pid and h1["role"] == "suspect"
    assert h1["process_state"] in ("sleeping", "running") and h1["thread_dump_method"] == "jstack"
    assert h1["ssh_conn_id"] == ssh_host.conn_ok and h1["address"] == f"{ssh_host.host}:{ssh_host.port}"
    assert h2["reachable"] is False and h2["error"] and h2["pid"] is None and h2["status"] == "failed"
    # the host has no controller.log & co. and no server.properties: noted as absent, so broker 1's capture is complete
    assert h1["status"] == "complete", h1["status_reasons"]
    assert len(h1["absent_files"]) == 6 and "/etc/kafka/server.properties" in h1["absent_files"]
    assert m["status"] == "partial" and any(r.startswith("broker 2: host unreachable") for r in m["status_reasons"])

    cmds = {c["name"]: c for c in m["commands"] if c["broker_id"] == 1}
    assert not [c for c in m["commands"] if c["broker_id"] == 2]
    jstacks = [cmds[f"jstack-{i}"] for i in (1, 2, 3)]
    for c in jstacks:
        assert c["exit_code"] == 0 and c["error"] is None and c["kind"] == "jstack"
        text = (root / c["stdout"]).read_text()
        for thread in ("kafka-request-handler-3", "group-metadata-manager-0", "executor-Heartbeat", "kafka-network-thread-0"):
            assert thread in text
        assert "Found one Java-level deadlock" in text
    # the sampling interval was respected between dump starts, with a socket table between dumps
    import datetime as dt
    starts = [dt.datetime.fromisoformat(c["started_at"]) for c in jstacks]
    assert all((b - a).total_seconds() >= 0.45 for a, b in zip(starts, starts[1:]))
    files = {f["path"]: f for f in m["files"]}
    samples = sorted((f for f in files.values() if "/sockets-ss-" in f["path"] and f["broker_id"] == 1), key=lambda f: f["seq"])
    assert [f["seq"] for f in samples] == [1, 2, 3, 4] and all(f["taken_at"] for f in samples)
    ss = (root / samples[0]["path"]).read_text()
    assert ":9092" in ss and "CLOSE-WAIT" in ss or "ESTAB" in ss

    assert cmds["jmap-histo"]["exit_code"] == 0 and "java.lang.String" in (root / cmds["jmap-histo"]["stdout"]).read_text()
    assert isinstance(h1["open_files"], int) and h1["open_files"] > 5
    log = (root / cmds["server-log"]["stdout"]).read_text().splitlines()
    assert len(log) == 50 and "Connection to 0 was disconnected" in log[-1]
    ps = (root / cmds["process-stat"]["stdout"]).read_text()
    assert str(ssh_host.jvm_pid) in ps and "DemoBroker" in ps
    assert h1["process"]["pid"] == ssh_host.jvm_pid and h1["process"]["rss_bytes"] > 0
    assert cmds["heap-info"]["exit_code"] == 0 and cmds["disk-free"]["exit_code"] == 0

    # the heap dump: written into a 0700 directory, fetched, removed with its directory
    hd = h1["heap_dump"]
    assert hd["take"] is True and ">= 2 x heap" in hd["reason"] and hd["heap_bytes"] > 0
    assert hd["fetched"] is True and hd["remote_removed"] is True
    assert (root / hd["path"]).read_bytes()[:12] == b"JAVA PROFILE"
    assert cmds["heap-dump-mkdir"]["argv"][:3] == ["mkdir", "-m", "0700"]
    assert files[hd["path"]]["kind"] == "heap_dump"
    import os
    assert not os.path.exists(hd["remote_path"]) and not os.path.exists(os.path.dirname(hd["remote_path"]))
    assert "snapshot.json" in files
    for c in m["commands"]:
        assert c["stdout"] in files

    assert verify(root) == []


def test_a_peer_gets_one_plain_jstack_and_no_stop_the_world_tool(ssh_host, tmp_path):
    cfg = _config(ssh_host, tmp_path)
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-peer")
    m = capture_cluster(cfg, _snapshot(ssh_host), [1, 2], bundle, suspects=[2])
    h1 = m["hosts"]["1"]
    names = [c["name"] for c in m["commands"] if c["broker_id"] == 1]
    assert h1["role"] == "peer" and [n for n in names if n.startswith("jstack")] == ["jstack-1"]
    assert not [n for n in names if n.startswith(("jmap", "heap"))]
    assert h1["heap_dump"]["take"] is False
    assert {"tool": "jmap -histo:live", "reason": "stop-the-world tool: suspect broker only, never a healthy peer"} in h1["left_out"]
    assert h1["status"] == "complete" and h1["skipped"] == []


def test_a_server_log_rolled_within_the_tail_is_completed_from_its_newest_rolled_file(ssh_host, tmp_path):
    """log4j rolls server.log every hour: when the current file holds fewer lines than log_tail_lines, the capture
    takes the rest from the newest rolled file beside it (by its date suffix; other names ignored), and only then."""
    import os
    import shutil
    import uuid

    d = os.path.join(os.path.dirname(ssh_host.server_log), f"rolled-{uuid.uuid4().hex[:8]}")
    os.mkdir(d, 0o755)
    try:
        def write(name, lines):
            path = os.path.join(d, name)
            with open(path, "w") as fh:
                fh.write("".join(f"[2026-11-22 23:59:{i % 60:02d},000] INFO {lines} {i} (kafka.server.KafkaServer)\n"
                                 for i in range(100 if lines != "now" else 30)))
            os.chmod(path, 0o644)
            return path

        log = write("server.log", "now")
        write("server.log.2026-11-22-22", "older")
        write("server.log.2026-11-22-23", "prev")
        write("server.log.9999-12-31-23;id", "hostile")  # not a rolled name: ignored
        write("server.log.2026-11-22-23.gz", "archived")
        cfg = _config(ssh_host, tmp_path, jstack_count=1, heap_dump=False, log_tail_lines=50)
        cfg = ClusterConfig(**{**cfg.__dict__, "server_log_path": log})
        bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-rolled")
        m = capture_cluster(cfg, _snapshot(ssh_host), [1], bundle, suspects=[2])
        cmds = {c["name"]: c for c in m["commands"] if c["broker_id"] == 1}
        bundle_dir = str(bundle.path)
        now = open(os.path.join(bundle_dir, cmds["server-log"]["stdout"])).read().splitlines()
        prev = open(os.path.join(bundle_dir, cmds["server-log-rolled"]["stdout"])).read().splitlines()
        assert len(now) == 30 and all(" now " in x for x in now)
        assert [x.split()[4] for x in prev] == [str(i) for i in range(80, 100)] and all(" prev " in x for x in prev)
        assert cmds["server-log-rolled"]["argv"][-1] == os.path.join(d, "server.log.2026-11-22-23")
        entry = next(f for f in m["files"] if f["path"] == cmds["server-log-rolled"]["stdout"])
        assert entry["kind"] == "server_log" and entry["rolled_from"] == "server.log.2026-11-22-23"
        assert verify(bundle_dir) == []

        cfg = ClusterConfig(**{**cfg.__dict__, "capture": CaptureSettings(**{**cfg.capture.__dict__, "log_tail_lines": 30})})
        m = capture_cluster(cfg, _snapshot(ssh_host), [1], EvidenceBundle(cfg.bundle_base, cfg.name, "inc-rolled-2"), suspects=[2])
        names = [c["name"] for c in m["commands"] if c["broker_id"] == 1]
        assert "server-log" in names and not [n for n in names if n.startswith("server-log-rolled")]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_a_stopped_jvm_is_captured_within_the_deadline_without_attach_tools(ssh_host, tmp_path):
    import os
    import signal

    cfg = _config(ssh_host, tmp_path, host_deadline_s=60)
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-stopped")
    os.kill(ssh_host.jvm_pid, signal.SIGSTOP)
    try:
        m = capture_cluster(cfg, _snapshot(ssh_host), [1], bundle, suspects=[1], intrusive=NotServing())
        with open(f"/proc/{ssh_host.jvm_pid}/stat") as fh:
            still = fh.read().rsplit(")", 1)[1].split()[0]
    finally:
        os.kill(ssh_host.jvm_pid, signal.SIGCONT)
    h = m["hosts"]["1"]
    assert still == "T"  # the capture left it as it found it
    assert h["process_state"] == "stopped" and h["status"] == "partial" and m["status"] == "partial"
    names = [c["name"] for c in m["commands"]]
    assert not [n for n in names if n.startswith(("jstack-1", "jmap", "heap"))], names
    assert h["duration_s"] <= 60 and m["duration_s"] <= 60 + 15
    threads = next(c for c in m["commands"] if c["name"] == "proc-threads")
    assert " T " in (bundle.path / threads["stdout"]).read_text()  # every thread listed, stopped, without the JVM's help
    reasons = " ".join(h["status_reasons"])
    assert "skipped jstack: the process is stopped" in reasons and "attach-based tools" in reasons
    dump = next(c for c in m["commands"] if c["name"] == "jstack-jhsdb-1")
    assert dump["kind"] == "jstack_jhsdb" and dump["exit_code"] == 0
    assert "kafka-request-handler-3" in (bundle.path / dump["stdout"]).read_text()
    assert h["thread_dump_method"] == "jhsdb"


def test_sigquit_fallback_cuts_the_dump_out_of_the_stdout_file(ssh_host, tmp_path):
    from kafka_runbooks.capture.collector import _HostCapture, _thread_dump
    from kafka_runbooks.config import ClusterConfig

    cfg = _config(ssh_host, tmp_path)
    cfg = ClusterConfig(**{**cfg.__dict__, "capture": type(cfg.capture)(**{**cfg.capture.__dict__, "stdout_log": "jvm.log",
                                                                         "log_dir": str(ssh_host.dir)})})
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-sigquit")
    with StrictSSHHook(ssh_host.conn_ok) as r:
        h = _HostCapture(cfg, bundle, r, 1, r.address, time.sleep)
        method = _thread_dump(h, cfg, ssh_host.jvm_pid, 1, ["sigquit"])
    assert method == "sigquit", h.failed
    text = (bundle.path / "hosts" / "1" / "jstack-sigquit-1.out").read_text()
    assert text.count("Full thread dump") == 1 and "kafka-request-handler-3" in text


def test_capture_records_command_timeout_and_continues(ssh_host, tmp_path):
    cfg = _config(ssh_host, tmp_path, jstack_count=1, command_timeout_s=3, heap_dump=False)
    cfg = ClusterConfig(**{**cfg.__dict__, "server_log_path": ssh_host.fifo_log})
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-timeout")
    m = capture_cluster(cfg, None, [1], bundle)  # no snapshot: port from config, address from the SSH host
    cmds = {c["name"]: c for c in m["commands"]}
    assert cmds["server-log"]["error"] == "timeout after 3s"
    assert cmds["jstack-1"]["exit_code"] == 0
    assert m["hosts"]["1"]["reachable"] is True and m["hosts"]["1"]["pid"] == ssh_host.jvm_pid
    assert "server-log: timeout after 3s" in m["hosts"]["1"]["error"]
    assert m["hosts"]["1"]["heap_dump"]["take"] is False and "not configured" in m["hosts"]["1"]["heap_dump"]["reason"]
    assert m["hosts"]["1"]["status"] == "partial" and m["status"] == "partial"
    assert verify(bundle.path) == []


def test_capture_records_insecure_connection_per_host(ssh_host, tmp_path):
    cfg = _config(ssh_host, tmp_path, jstack_count=1, heap_dump=False)
    cfg = ClusterConfig(**{**cfg.__dict__, "hosts": {1: ssh_host.conn_ok, 3: ssh_host.conn_nocheck, 4: ssh_host.conn_changed}})
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-insecure")
    m = capture_cluster(cfg, None, [1, 3, 4, 5], bundle)
    assert m["hosts"]["1"]["reachable"] is True
    assert "InsecureConnectionError" in m["hosts"]["3"]["error"] and m["hosts"]["3"]["reachable"] is False
    assert "HostKeyError" in m["hosts"]["4"]["error"] and m["hosts"]["4"]["reachable"] is False
    assert "no SSH connection for broker 5" in m["hosts"]["5"]["error"]


def test_probe_host_and_probe_all(ssh_host, tmp_path):
    cfg = _config(ssh_host, tmp_path)
    b1 = model.Broker(1, ssh_host.host, ssh_host.broker_port)
    # one live connection and one the client closed: the JVM never closes its side -> CLOSE_WAIT
    live = socket.create_connection((ssh_host.host, ssh_host.broker_port))
    gone = socket.create_connection((ssh_host.host, ssh_host.broker_port))
    gone.close()
    try:
        time.sleep(0.3)
        with StrictSSHHook(ssh_host.conn_ok) as r:
            p = probe_host(cfg, b1, r)
        assert p.reachable and p.pid == ssh_host.jvm_pid and p.process_alive and p.error is None
        assert p.open_files and p.open_files > 5
        assert p.connection_states.get("ESTABLISHED", 0) >= 1
        assert p.connection_states.get("CLOSE_WAIT", 0) >= 1
        assert "LISTEN" not in p.connection_states
        probes = probe_all(cfg, [b1, model.Broker(2, DOWN_HOST, ssh_host.broker_port), model.Broker(9, "h", 9092)])
        assert [x.broker_id for x in probes] == [1, 2, 9]
        assert probes[0].reachable and probes[0].pid == ssh_host.jvm_pid
        assert not probes[1].reachable and "ConnectError" in probes[1].error
        assert not probes[2].reachable and "no SSH connection" in probes[2].error
        assert model.HostProbe.from_dict(probes[0].to_dict()) == probes[0]
    finally:
        live.close()


def test_probe_reads_the_server_log_rolled_within_its_windows(ssh_host, tmp_path):
    """A peer's fetch error written a minute ago, just before log4j rolled server.log at the hour, still counts:
    the probe reads the newest rolled file written within its windows beside the current one."""
    import datetime as dt
    import os
    import shutil
    import uuid
    from pathlib import Path

    d = os.path.join(os.path.dirname(ssh_host.server_log), f"probe-rolled-{uuid.uuid4().hex[:8]}")
    os.mkdir(d, 0o755)
    try:
        before = dt.datetime.now() - dt.timedelta(seconds=60)  # the lab host's local time (its log4j's)
        text = (Path(__file__).parents[1] / "detect" / "fixtures" / "kafka23_server_fetch_errors.log").read_text()
        old = text.replace("[2026-11-22 14:0", "[2026-11-22 13:0").replace("[2026-11-22 14:1", "[2026-11-22 13:1")
        rolled = old.replace("[2026-11-22 14:21:", f"[{before:%Y-%m-%d %H:%M}:")  # one failure a minute ago, the rest old
        hostile = rolled.replace("leaderId=1", "leaderId=3").replace("Connection to 1 ", "Connection to 3 ")
        for name, body in (("server.log", "[2026-11-23 00:00:01,000] INFO rolled (kafka.server.KafkaServer)\n"),
                           (f"server.log.{before:%Y-%m-%d-%H}", rolled), ("server.log.9999-12-31-23;id", hostile)):
            Path(d, name).write_text(body)
            os.chmod(os.path.join(d, name), 0o644)
        later = time.time() + 5  # the hostile name is the newest file: it must be ignored for its name
        os.utime(os.path.join(d, "server.log.9999-12-31-23;id"), (later, later))
        cfg = ClusterConfig(**{**_config(ssh_host, tmp_path).__dict__, "server_log_path": os.path.join(d, "server.log")})
        with StrictSSHHook(ssh_host.conn_ok) as r:
            p = probe_host(cfg, model.Broker(2, ssh_host.host, ssh_host.broker_port), r)
        assert p.reachable and p.fetch_errors_total == 1, (p.fetch_errors_total, p.error)
        (e,) = p.fetch_errors
        assert (e.fetcher_broker_id, e.leader_broker_id, e.cause) == (2, 1, "disconnected")
        assert "Connection to 1 was disconnected before the response was read" in e.excerpt
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_probe_wrong_port_reports_no_process(ssh_host, tmp_path):
    cfg = _config(ssh_host, tmp_path)
    with StrictSSHHook(ssh_host.conn_ok) as r:
        p = probe_host(cfg, model.Broker(1, ssh_host.host, 9999), r)
    assert p.reachable and p.pid is None and not p.process_alive and "no visible process" in p.error


def test_thread_dumps_are_staggered_across_hosts_and_lock_detail_only_where_a_deadlock_is_suspected(ssh_host, tmp_path):
    """Issue 29 §4: ``-l`` makes HotSpot walk the heap for java.util.concurrent lock owners at its safepoint. Broker 1
    (a suspect its not-serving finding accuses) gets ``jstack -l``; broker 3 (a suspect nothing accuses) and broker 4 (a
    peer) plain dumps; and no two hosts' thread dumps run at once. The three brokers are the one real JVM behind the
    sshd (three SSH connections, captured in parallel as three hosts would be)."""
    import datetime as dt

    cfg = ClusterConfig(name="capt", zk_conn_id="zk_none", hosts={1: ssh_host.conn_ok, 3: ssh_host.conn_ok, 4: ssh_host.conn_ok},
                        broker_port=ssh_host.broker_port, server_log_path=ssh_host.server_log, bundle_base=str(tmp_path),
                        capture=CaptureSettings(jstack_count=2, jstack_interval_s=0.2, command_timeout_s=30, connect_timeout_s=3,
                                                log_tail_lines=20, remote_work_dir=ssh_host.work_dir))
    snap = model.ClusterSnapshot(cluster="capt", taken_at="2024-05-01T07:00:00Z", controller_id=1, partitions=(),
                                 brokers=tuple(model.Broker(b, ssh_host.host, ssh_host.broker_port) for b in (1, 3, 4)))
    trigger = model.Finding("broker_unresponsive", model.Severity.CRITICAL, "broker 1 failed its direct check; peers name it",
                            broker_ids=(1,))
    bundle = EvidenceBundle(cfg.bundle_base, cfg.name, "inc-stagger", trigger=trigger.to_dict())
    m = capture_cluster(cfg, snap, [1, 3, 4], bundle, trigger=trigger, suspects=[1, 3])
    dumps = {b: [c for c in m["commands"] if c["broker_id"] == b and c["kind"] == "jstack"] for b in (1, 3, 4)}
    assert [len(dumps[b]) for b in (1, 3, 4)] == [2, 2, 1], {b: [c["name"] for c in d] for b, d in dumps.items()}
    assert all(c["argv"][-2:] == ["-l", str(ssh_host.jvm_pid)] for c in dumps[1]), [c["argv"] for c in dumps[1]]
    for b in (3, 4):
        assert all("-l" not in c["argv"] and c["exit_code"] == 0 for c in dumps[b]), [c["argv"] for c in dumps[b]]
    assert [m["hosts"][str(b)]["plan"]["lock_detail"] for b in (1, 3, 4)] == [True, False, False]
    assert "Found one Java-level deadlock" in (bundle.path / dumps[1][0]["stdout"]).read_text()  # the suspect's detail kept

    spans = sorted((dt.datetime.fromisoformat(c["started_at"].replace("Z", "+00:00")).timestamp(), c["duration_s"], b)
                   for b, d in dumps.items() for c in d)
    for (s1, d1, b1), (s2, _, b2) in zip(spans, spans[1:]):
        assert s2 >= s1 + d1 - 0.01, f"broker {b2}'s dump began {s1 + d1 - s2:.3f} s before broker {b1}'s ended: {spans}"
    turns = [t for b in (1, 3, 4) for t in m["hosts"][str(b)]["dump_turns"]]
    assert len(turns) == 5 and all(t["had_turn"] for t in turns), turns
