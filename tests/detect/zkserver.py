"""A real, single ZooKeeper 3.8 node (Debian `zookeeper` package) for tests.

Shared by tests/detect and tests/remediate (loaded once, reference-counted, so the two conftests
never start two servers on one port).  Missing Java or jars -> the test FAILS with the reason:
these tests are the proof that the reader works against real ZooKeeper, never skipped.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from kafka_lab.lab import port_open
from kafka_runbooks.zookeeper import four_letter
from kafka_lab.net import ZK_CLIENT_PORT, service_ip

HOST = service_ip("zookeeper")
PORT = ZK_CLIENT_PORT
JARS = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-log4j12.jar",
    "log4j-1.2.jar",
    "servlet-api.jar",
    "netty-handler.jar",
    "netty-common.jar",
    "netty-transport.jar",
    "netty-buffer.jar",
    "netty-codec.jar",
    "netty-resolver.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
    "metrics-core.jar",
]
JAVA_DIR = Path("/usr/share/java")
START_TIMEOUT_S = 20.0


class ZooKeeperServer:
    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.log: Path | None = None

    @property
    def hosts(self) -> str:
        return f"{HOST}:{PORT}"

    def start(self) -> None:
        java = shutil.which("java")
        if java is None:
            pytest.fail("ZooKeeper tests need `java` on PATH (OpenJDK 17); it is missing", pytrace=False)
        missing = [j for j in JARS if not (JAVA_DIR / j).exists()]
        if missing:
            pytest.fail(
                f"ZooKeeper tests need the Debian `zookeeper` package (apt-get install -y zookeeper); "
                f"missing in {JAVA_DIR}: {missing}",
                pytrace=False,
            )
        if port_open(HOST, PORT, timeout=0.3):
            pytest.fail(f"port {PORT} is already in use (a leftover ZooKeeper?); free it and rerun", pytrace=False)
        self.workdir = Path(tempfile.mkdtemp(prefix="kr-zk-"))
        conf = self.workdir / "conf"
        data = self.workdir / "data"
        conf.mkdir()
        data.mkdir()
        (conf / "zoo.cfg").write_text(
            f"tickTime=500\nmaxSessionTimeout=60000\ndataDir={data}\nclientPort={PORT}\nclientPortAddress={HOST}\n"
            "admin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\nmaxClientCnxns=0\n"
        )
        self.log = self.workdir / "zookeeper.log"
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, FILE\n"
            "log4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.log}\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d %p [%t] %c{1}: %m%n\n"
        )
        cp = ":".join([str(conf)] + [str(JAVA_DIR / j) for j in JARS])
        out = open(self.workdir / "stdout.log", "wb")
        self.proc = subprocess.Popen(
            # jute.maxbuffer raised so the tests can write a 1 MB hostile value
            [java, "-Xmx256m", "-Djute.maxbuffer=4194304", "-cp", cp,
             "org.apache.zookeeper.server.ZooKeeperServerMain", str(conf / "zoo.cfg")],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                self._fail(f"ZooKeeper exited with code {self.proc.returncode} while starting")
            try:
                if "Mode: standalone" in four_letter(HOST, PORT, "srvr"):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._fail(f"ZooKeeper did not serve on {self.hosts} within {START_TIMEOUT_S:g}s")
            time.sleep(0.1)

    def _fail(self, why: str) -> None:
        tail = ""
        for f in (self.workdir / "stdout.log", self.log):
            if f and f.exists():
                tail += f"\n--- {f.name} ---\n" + f.read_text(errors="replace")[-3000:]
        self.stop()
        pytest.fail(why + tail, pytrace=False)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def client(self, chroot: str | None = None, timeout_s: float = 5.0):
        """A started kazoo client; ``timeout_s`` its session timeout (the server grants up to 60 s: stand-in brokers
        whose registrations must outlive a loaded machine's stalls ask for 30 s)."""
        from kafka_runbooks.zookeeper import kazoo_client

        zk = kazoo_client(self.hosts, chroot, timeout_s=timeout_s)
        zk.start(timeout=10)
        return zk


_lock = threading.Lock()
_server: ZooKeeperServer | None = None
_refs = 0


def acquire() -> ZooKeeperServer:
    global _server, _refs
    with _lock:
        if _server is None:
            server = ZooKeeperServer()
            server.start()
            _server = server
        _refs += 1
        return _server


def release() -> None:
    global _server, _refs
    with _lock:
        _refs -= 1
        if _refs == 0 and _server is not None:
            _server.stop()
            _server = None


def fresh_chroot(server: ZooKeeperServer) -> str:
    """A new empty path to use as one test's Kafka chroot."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    admin = server.client()
    try:
        admin.ensure_path(chroot)
    finally:
        admin.stop()
        admin.close()
    return chroot
