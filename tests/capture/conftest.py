"""A private SSH "broker host" for the capture tests: one sshd on 127.0.0.21:2222 (own ed25519
host key, key-only auth, UsePAM no) and one small JVM running as that host's user, listening on
127.0.0.21:9092 with Kafka-like thread names (and a Java-level deadlock), plus a fake server.log.

Connections are provided as AIRFLOW_CONN_<ID> env vars (JSON form); SSHHook resolves them
without an Airflow metadata DB. Nothing is skipped: a missing component fails the tests.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafka_lab.net import service_ip

HOST = service_ip("capture_ssh")
DOWN_HOST = service_ip("capture_ssh_down")
SSH_PORT = 2222
BROKER_PORT = 9092
USER = "krcapture"

JAVA_SRC = r"""
import java.net.*;
import java.util.*;

public class DemoBroker {
    static final Object groupLock = new Object();
    static final Object purgatoryLock = new Object();
    static final List<Socket> held = Collections.synchronizedList(new ArrayList<>());

    static void nap(long ms) { try { Thread.sleep(ms); } catch (InterruptedException e) { } }

    public static void main(String[] args) throws Exception {
        ServerSocket ss = new ServerSocket();
        ss.setReuseAddress(true);
        ss.bind(new InetSocketAddress(InetAddress.getByName(args[0]), Integer.parseInt(args[1])), 50);
        Thread a = new Thread(() -> { synchronized (groupLock) { nap(300); synchronized (purgatoryLock) { } } },
                              "group-metadata-manager-0");
        Thread b = new Thread(() -> { synchronized (purgatoryLock) { nap(300); synchronized (groupLock) { } } },
                              "kafka-request-handler-3");
        Thread hb = new Thread(() -> { while (true) nap(1000); }, "executor-Heartbeat");
        a.start(); b.start(); hb.start();
        Thread.currentThread().setName("kafka-network-thread-0");
        System.out.println("listening");
        System.out.flush();
        while (true) { held.add(ss.accept()); }   // accepted sockets are never read or closed
    }
}
"""


def _must(cond: bool, msg: str) -> None:
    if not cond:
        pytest.fail(msg, pytrace=False)


def _sh(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def _wait_port(host: str, port: int, timeout: float, proc: subprocess.Popen | None = None, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what} exited early with {proc.returncode}", pytrace=False)
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{what} not listening on {host}:{port} after {timeout}s", pytrace=False)


def _pids_of_user(uid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.stat(f"/proc/{d}").st_uid == uid:
                    out.append(int(d))
            except FileNotFoundError:
                pass
    return out


@dataclass
class SshHost:
    dir: Path
    host: str
    port: int
    user: str
    uid: int
    jvm_pid: int
    broker_port: int
    server_log: str
    fifo_log: str
    work_dir: str
    host_pub: str
    other_pub: str
    conn_ok: str = "kr_capture_ok"
    conn_down: str = "kr_capture_down"
    conn_changed: str = "kr_capture_changed"
    conn_unknown: str = "kr_capture_unknown"
    conn_nocheck: str = "kr_capture_nocheck"
    conn_allow_change: str = "kr_capture_allow_change"


@pytest.fixture(scope="session")
def ssh_host():
    _must(os.geteuid() == 0, "capture SSH tests need root (to create the test user and run sshd)")
    for tool in ("/usr/sbin/sshd", "ssh-keygen", "javac", "java", "useradd", "usermod", "ss", "jstack", "jmap", "jcmd"):
        _must(shutil.which(tool) is not None or os.path.exists(tool), f"{tool} not found (apt: openssh-server, openjdk-17-jdk-headless, iproute2, passwd)")

    # the host's user: unlocked (key-only), /bin/sh
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        _sh("useradd", "-m", "-s", "/bin/sh", USER)
        pw = pwd.getpwnam(USER)
    _sh("usermod", "-p", "*", USER)

    d = Path(tempfile.mkdtemp(prefix="kr-capture-", dir="/tmp"))
    os.chmod(d, 0o755)
    procs: list[subprocess.Popen] = []
    saved_env = {k: os.environ.get(k) for k in list(os.environ) if k.startswith("AIRFLOW_CONN_KR_CAPTURE")}
    try:
        for name in ("host_ed25519", "other_ed25519", "client_ed25519"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(d / name))
        ak = d / "authorized_keys"
        ak.mkdir(mode=0o755)
        (ak / USER).write_text((d / "client_ed25519.pub").read_text())
        os.chmod(ak / USER, 0o644)
        (d / "empty_known_hosts").write_text("")
        work = d / "work"
        work.mkdir()
        os.chown(work, pw.pw_uid, pw.pw_gid)
        log = d / "server.log"
        log.write_text("".join(f"[2024-05-01 07:00:{i % 60:02d},000] INFO line {i} (kafka.server.KafkaServer)\n" for i in range(200))
                       + "[2024-05-01 07:01:00,000] WARN [ReplicaFetcherThread-0-0], Error in fetch "
                         "java.io.IOException: Connection to 0 was disconnected before the response was read\n")
        os.chmod(log, 0o644)
        fifo = d / "stuck.log"
        os.mkfifo(fifo, 0o644)  # `tail` on a FIFO with no writer blocks forever: a command that times out

        cfg = d / "sshd_config"
        cfg.write_text(
            f"ListenAddress {HOST}:{SSH_PORT}\n"
            f"HostKey {d / 'host_ed25519'}\n"
            f"PidFile {d / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {ak}/%u\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            "UsePAM no\nStrictModes no\nPermitRootLogin no\n"
            f"AllowUsers {USER}\nSubsystem sftp internal-sftp\nMaxStartups 100\nMaxSessions 50\n"
            "LogLevel INFO\n"
        )
        os.makedirs("/run/sshd", exist_ok=True)
        _sh("/usr/sbin/sshd", "-t", "-f", str(cfg))
        sshd_log = open(d / "sshd.log", "wb")
        sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)], stdout=sshd_log, stderr=subprocess.STDOUT)
        procs.append(sshd)

        jdir = d / "java"
        jdir.mkdir(mode=0o755)
        (jdir / "DemoBroker.java").write_text(JAVA_SRC)
        _sh("javac", "-d", str(jdir), str(jdir / "DemoBroker.java"))
        for p in jdir.iterdir():
            os.chmod(p, 0o644)
        jvm_log = open(d / "jvm.log", "wb")
        jvm = subprocess.Popen(
            ["java", "-Xmx64m", "-Xms16m", "-XX:+UseSerialGC", "-cp", str(jdir), "DemoBroker", HOST, str(BROKER_PORT)],
            user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], cwd=str(work),
            env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": pw.pw_dir, "LANG": "C.UTF-8"},
            stdout=jvm_log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        procs.append(jvm)
        _wait_port(HOST, SSH_PORT, 10, sshd, "sshd")
        _wait_port(HOST, BROKER_PORT, 20, jvm, "demo broker JVM")

        host_pub = " ".join((d / "host_ed25519.pub").read_text().split()[:2])
        other_pub = " ".join((d / "other_ed25519.pub").read_text().split()[:2])
        key = str(d / "client_ed25519")

        def conn(host: str, **extra) -> str:
            return json.dumps({"conn_type": "ssh", "host": host, "port": SSH_PORT, "login": USER,
                               "extra": {"key_file": key, "conn_timeout": 5, "cmd_timeout": 60, "look_for_keys": False, **extra}})

        h = SshHost(d, HOST, SSH_PORT, USER, pw.pw_uid, jvm.pid, BROKER_PORT, str(log), str(fifo), str(work), host_pub, other_pub)
        env = {
            h.conn_ok: conn(HOST, host_key=host_pub, no_host_key_check=False),
            h.conn_down: conn(DOWN_HOST, host_key=host_pub, no_host_key_check=False),
            h.conn_changed: conn(HOST, host_key=other_pub, no_host_key_check=False),
            h.conn_unknown: conn(HOST, known_hosts=str(d / "empty_known_hosts")),
            h.conn_nocheck: conn(HOST, no_host_key_check=True),
            h.conn_allow_change: conn(HOST, host_key=host_pub, allow_host_key_change=True),
        }
        for cid, value in env.items():
            os.environ[f"AIRFLOW_CONN_{cid.upper()}"] = value
        yield h
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        # per-connection sshd children and commands of our dedicated test user
        try:
            uid = pwd.getpwnam(USER).pw_uid
            for pid in _pids_of_user(uid):
                try:
                    os.kill(pid, 9)
                except ProcessLookupError:
                    pass
        except KeyError:
            pass
        for k in [k for k in os.environ if k.startswith("AIRFLOW_CONN_KR_CAPTURE")]:
            del os.environ[k]
        for k, v in saved_env.items():
            if v is not None:
                os.environ[k] = v
        shutil.rmtree(d, ignore_errors=True)
