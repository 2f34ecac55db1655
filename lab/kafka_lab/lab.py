"""The practice cluster: 3-node ZooKeeper, 3 SSH "hosts", 3 Kafka 0.10.1.0 broker stand-ins, client load.

Everything runs on loopback and is started/stopped by this module. Every process the lab starts carries the
state directory in its command line and is recorded in a pid file, so ``down()`` (and a later ``up()``) can find
and end exactly the lab's processes, by pid.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

BROKER_IDS = (1, 2, 3)
ZK_IDS = (1, 2, 3)
ZK_CLIENT_PORT = {1: 21811, 2: 21812, 3: 21813}
ZK_CONNECT = ",".join(f"127.0.0.1:{p}" for p in ZK_CLIENT_PORT.values())
CHROOT = "/kafka"
SSH_PORT = 2222
BROKER_PORT = 9092
KAFKA_VERSION = "0.10.1.0"
CLUSTER = "lab"
# Airflow users allowed to approve the lab's remediations (the drill answers as drill-bot)
APPROVERS = ("drill-bot", "oncall-alice", "oncall-bob", "oncall-carol", "oncall-dave")
APPROVAL_KEY_CONN_ID = "kafka_runbooks_approvals"
ZK_CONN_ID = "kafka_lab_zk"
JAVA_LIB = "/usr/share/java"
ZK_SERVER_CP = [f"{JAVA_LIB}/zookeeper.jar", f"{JAVA_LIB}/slf4j-log4j12.jar", f"{JAVA_LIB}/log4j-1.2.jar", f"{JAVA_LIB}/servlet-api.jar"]
BROKER_CP = [f"{JAVA_LIB}/zookeeper.jar", f"{JAVA_LIB}/slf4j-nop.jar"]
TOPICS = {
    "__consumer_offsets": (50, {"segment.bytes": "104857600", "cleanup.policy": "compact", "compression.type": "producer"}),
    "orders": (6, {"min.insync.replicas": "2"}),
}
JAVA_SRC = Path(__file__).with_name("java")
REPO = Path(__file__).resolve().parents[2]


class LabError(RuntimeError):
    pass


def host_address(broker_id: int) -> str:
    return f"127.0.0.{10 + int(broker_id)}"


def host_user(broker_id: int) -> str:
    return f"kbroker{int(broker_id)}"


def host_conn_id(broker_id: int) -> str:
    return f"kafka_lab_host_{int(broker_id)}"


def default_state_dir() -> Path:
    return Path(os.environ.get("KAFKA_LAB_HOME") or REPO / "var" / "lab")


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.1) -> Any:
    """Poll ``predicate`` until it returns a truthy value; raise LabError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 - report the last failure if we time out
            last_exc = exc
        if time.monotonic() >= deadline:
            raise LabError(f"timed out after {timeout:.1f}s waiting for {what}" + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def four_letter(port: int, cmd: str = "srvr", timeout: float = 1.0, host: str = "127.0.0.1") -> str:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


class Lab:
    def __init__(self, state_dir: str | os.PathLike | None = None,
                 replica_lag_time_max_ms: int = 3000, zk_session_timeout_ms: int = 2000, client_conns: int = 4):
        self.state = Path(state_dir) if state_dir else default_state_dir()
        self.state = self.state.resolve()
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.zk_session_timeout_ms = zk_session_timeout_ms
        self.client_conns = client_conns
        self._kz = None

    # ------------------------------------------------------------------ paths
    def host_dir(self, b: int) -> Path:
        return self.state / f"host{int(b)}"

    def zk_dir(self, z: int) -> Path:
        return self.state / "zk" / str(z)

    @property
    def key_file(self) -> Path:
        return self.state / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state / "ssh" / "known_hosts"

    def server_log(self, b: int) -> Path:
        return self.host_dir(b) / "logs" / "server.log"

    def script(self, b: int, name: str) -> Path:
        return self.host_dir(b) / "bin" / name

    def broker_pid(self, b: int) -> int | None:
        return _read_pid(self.host_dir(b) / "run" / "kafka.pid")

    # ------------------------------------------------------------------ lifecycle
    def up(self) -> dict:
        t0 = time.monotonic()
        for parent in self.state.parents:
            if parent.exists() and not os.stat(parent).st_mode & 0o001:
                raise LabError(f"{parent} is not searchable by other users; the broker hosts' users ({host_user(1)}..) "
                               f"must reach {self.state}: choose another state dir (KAFKA_LAB_HOME)")
        self.down()
        busy = [f"{h}:{p}" for h, p in [("127.0.0.1", z) for z in ZK_CLIENT_PORT.values()]
                + [(host_address(b), port) for b in BROKER_IDS for port in (SSH_PORT, BROKER_PORT)] if port_open(h, p)]
        if busy:
            raise LabError(f"ports already in use (another lab with a different state dir?): {busy}")
        if self.state.exists():
            shutil.rmtree(self.state)
        self.state.mkdir(parents=True)
        os.chmod(self.state, 0o755)
        (self.state / "run").mkdir()
        javac = self._start_javac()
        self._write_zk_configs()
        for z in ZK_IDS:
            self._spawn(f"zk{z}", self._zk_argv(z), self.zk_dir(z) / "zookeeper.out", cwd=self.zk_dir(z))
        self._setup_ssh()
        for b in BROKER_IDS:
            self._spawn(f"sshd{b}", ["/usr/sbin/sshd", "-D", "-e", "-f", str(self.host_dir(b) / "ssh" / "sshd_config")],
                        self.host_dir(b) / "logs" / "sshd.log")
        self._wait_zk_quorum(30)
        self._bootstrap_zk()
        out, err = javac.communicate(timeout=120)
        if javac.returncode != 0:
            raise LabError(f"javac failed:\n{out}\n{err}")
        for b in BROKER_IDS:
            self._write_broker_host(b)
        starts = [subprocess.Popen(["runuser", "-u", host_user(b), "--", str(self.script(b, "kafka-start"))],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for b in BROKER_IDS]
        for b, p in zip(BROKER_IDS, starts):
            out, _ = p.communicate(timeout=90)
            if p.returncode != 0:
                raise LabError(f"broker {b} failed to start: {out}\n--- server.log tail:\n{_tail(self.server_log(b))}")
        for b in BROKER_IDS:
            wait_until(lambda b=b: port_open(host_address(b), SSH_PORT), 10, f"sshd on {host_address(b)}:{SSH_PORT}")
            if not _alive(_read_pid(self.state / "run" / f"sshd{b}.pid") or 0):
                raise LabError(f"sshd for host {b} exited: {_tail(self.host_dir(b) / 'logs' / 'sshd.log')}")
        self._spawn("clients", [sys.executable, "-m", "kafka_lab.clients", "--state", str(self.state), "--conns", str(self.client_conns),
                                "--brokers", ",".join(f"{host_address(b)}:{BROKER_PORT}" for b in BROKER_IDS)],
                    self.state / "run" / "clients.log", env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
        self.wait_registered(BROKER_IDS, 30)
        wait_until(self.controller, 30, "a controller in /kafka/controller")
        self._create_topics()
        self.wait_full_isr(30)
        wait_until(lambda: all(s["leader"] == s["replicas"][0] for s in self.partitions().values()), 10, "preferred leaders")
        self._write_env_files()
        self.up_seconds = time.monotonic() - t0
        return self.status()

    def down(self) -> list[int]:
        """Stop every lab process (pid files first, then any process whose command line names the state dir)."""
        self._close_kazoo()
        killed: list[int] = []
        # clients and brokers first, then sshd, then ZooKeeper
        order = ["clients"] + [f"broker{b}" for b in BROKER_IDS] + [f"sshd{b}" for b in BROKER_IDS] + [f"zk{z}" for z in ZK_IDS]
        for name in order:
            pid = self.broker_pid(int(name[-1])) if name.startswith("broker") else _read_pid(self.state / "run" / f"{name}.pid")
            if pid and _kill_if_ours(pid, str(self.state)):
                killed.append(pid)
        for pid in _pids_mentioning(str(self.state)):
            if _kill_if_ours(pid, str(self.state)):
                killed.append(pid)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(p) for p in killed):
            time.sleep(0.05)
        left = [p for p in _pids_mentioning(str(self.state))]
        if left:
            raise LabError(f"lab processes still running after down: {left}")
        return killed

    def processes(self) -> list[int]:
        """Pids of running processes that belong to this lab (their command line names the state dir)."""
        return _pids_mentioning(str(self.state))

    # ------------------------------------------------------------------ faults
    def deadlock(self, broker_id: int) -> None:
        """Incident 001: a real Java monitor deadlock (executor-Heartbeat, group-metadata-manager-0,
        kafka-request-handler-3) inside the running broker JVM; the broker stays registered in ZooKeeper."""
        pid = self._require_broker_pid(broker_id)
        os.kill(pid, signal.SIGUSR1)

    def stop(self, broker_id: int) -> None:
        """SIGKILL the broker JVM (its registration disappears after the ZooKeeper session timeout)."""
        pid = self._require_broker_pid(broker_id)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not _alive(pid), 10, f"broker {broker_id} pid {pid} to exit")

    def start(self, broker_id: int, timeout: float = 60) -> str:
        """Start the broker JVM with its host's own start script, as the host's user."""
        wait_until(lambda: not self._registered(broker_id), timeout, f"old registration of broker {broker_id} to expire")
        p = subprocess.run(["runuser", "-u", host_user(broker_id), "--", str(self.script(broker_id, "kafka-start"))],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise LabError(f"kafka-start {broker_id} failed: {p.stdout}{p.stderr}")
        return p.stdout

    def restart(self, broker_id: int, timeout: float = 90) -> str:
        p = subprocess.run(["runuser", "-u", host_user(broker_id), "--", str(self.script(broker_id, "kafka-restart"))],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0:
            raise LabError(f"kafka-restart {broker_id} failed: {p.stdout}{p.stderr}")
        return p.stdout

    def _require_broker_pid(self, b: int) -> int:
        pid = self.broker_pid(b)
        if not pid or not _alive(pid):
            raise LabError(f"broker {b} is not running")
        return pid

    # ------------------------------------------------------------------ ZooKeeper views (kazoo)
    def kazoo(self):
        if self._kz is None:
            from kazoo.client import KazooClient

            kz = KazooClient(hosts=ZK_CONNECT + CHROOT, timeout=5.0)
            kz.start(timeout=15)
            self._kz = kz
        return self._kz

    def _close_kazoo(self) -> None:
        if self._kz is not None:
            try:
                self._kz.stop()
                self._kz.close()
            except Exception:  # noqa: BLE001
                pass
            self._kz = None

    def registered_brokers(self) -> dict[int, dict]:
        kz = self.kazoo()
        out = {}
        for c in kz.get_children("/brokers/ids"):
            try:
                data, _ = kz.get(f"/brokers/ids/{c}")
            except Exception:  # noqa: BLE001 - vanished between list and get
                continue
            out[int(c)] = json.loads(data)
        return out

    def _registered(self, b: int) -> bool:
        return self.kazoo().exists(f"/brokers/ids/{int(b)}") is not None

    def controller(self) -> dict | None:
        kz = self.kazoo()
        if not kz.exists("/controller"):
            return None
        try:
            return json.loads(kz.get("/controller")[0])
        except Exception:  # noqa: BLE001
            return None

    def partitions(self, topics: list[str] | None = None) -> dict[tuple[str, int], dict]:
        """{(topic, partition): {"replicas": [...], "leader", "leader_epoch", "isr", "controller_epoch"}}."""
        kz = self.kazoo()
        out = {}
        for t in topics or kz.get_children("/brokers/topics"):
            assignment = json.loads(kz.get(f"/brokers/topics/{t}")[0])["partitions"]
            for p, replicas in assignment.items():
                state = json.loads(kz.get(f"/brokers/topics/{t}/partitions/{p}/state")[0])
                out[(t, int(p))] = {"replicas": replicas, **state}
        return out

    def wait_registered(self, ids, timeout: float = 30) -> dict:
        ids = {int(i) for i in ids}
        return wait_until(lambda: (r := self.registered_brokers()) and ids <= set(r) and r, timeout, f"brokers {sorted(ids)} registered")

    def wait_unregistered(self, broker_id: int, timeout: float = 30) -> None:
        wait_until(lambda: not self._registered(broker_id), timeout, f"broker {broker_id} registration to disappear")

    def wait_full_isr(self, timeout: float = 30) -> dict:
        def full():
            ps = self.partitions()
            return ps if all(sorted(s["isr"]) == sorted(s["replicas"]) and s["leader"] in s["replicas"] for s in ps.values()) else None
        return wait_until(full, timeout, "every partition to have a leader and a full ISR")

    def wait_partitions(self, predicate: Callable[[dict], bool], timeout: float, what: str) -> dict:
        def check():
            ps = self.partitions()
            return ps if predicate(ps) else None
        return wait_until(check, timeout, what)

    # ------------------------------------------------------------------ status / settings
    def status(self) -> dict:
        procs = {}
        for name in ["clients"] + [f"sshd{b}" for b in BROKER_IDS] + [f"zk{z}" for z in ZK_IDS]:
            pid = _read_pid(self.state / "run" / f"{name}.pid")
            procs[name] = pid if pid and _alive(pid) else None
        for b in BROKER_IDS:
            pid = self.broker_pid(b)
            procs[f"broker{b}"] = pid if pid and _alive(pid) else None
        zk_modes = {}
        for z, port in ZK_CLIENT_PORT.items():
            try:
                zk_modes[z] = next((l.split(":", 1)[1].strip() for l in four_letter(port).splitlines() if l.startswith("Mode:")), "?")
            except OSError as exc:
                zk_modes[z] = f"down ({exc.__class__.__name__})"
        out: dict[str, Any] = {"state_dir": str(self.state), "processes": procs, "zookeeper": zk_modes}
        try:
            out["registered_brokers"] = sorted(self.registered_brokers())
            out["controller"] = self.controller()
            ps = self.partitions()
            out["partitions"] = {f"{t}-{p}": {k: s[k] for k in ("leader", "leader_epoch", "isr")} for (t, p), s in sorted(ps.items())}
            out["under_replicated"] = sorted(f"{t}-{p}" for (t, p), s in ps.items() if len(s["isr"]) < len(s["replicas"]))
        except Exception as exc:  # noqa: BLE001 - status must work on a half-broken lab
            out["zk_error"] = repr(exc)
        return out

    def host_key(self, b: int) -> str:
        pub = (self.host_dir(b) / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
        return f"{pub[0]} {pub[1]}"

    def approval_key(self) -> str:
        """The key that seals recorded approval decisions (an Airflow connection's password in real deployments)."""
        path = self.state / "approval.key"
        if not path.exists():
            import secrets

            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets.token_hex(32))
            os.chmod(path, 0o600)
        return path.read_text().strip()

    def cluster_settings(self) -> dict:
        return {
            CLUSTER: {
                "zk_conn_id": ZK_CONN_ID,
                "hosts": {str(b): host_conn_id(b) for b in BROKER_IDS},
                "broker_port": BROKER_PORT,
                "stop_command": [str(self.state / "host{broker_id}" / "bin" / "kafka-stop")],
                "start_command": [str(self.state / "host{broker_id}" / "bin" / "kafka-start")],
                "server_properties_path": str(self.state / "host{broker_id}" / "config" / "server.properties"),
                "server_log_path": str(self.state / "host{broker_id}" / "logs" / "server.log"),
                "kafka_version": KAFKA_VERSION,
                "bundle_base": str(self.state / "bundles"),
                "incident_base": str(self.state / "incidents"),
                "approvals": {"approvers": list(APPROVERS), "timeout_s": 600.0},
                "gates": {"stop_s": 60.0, "deregister_s": 30.0, "register_s": 90.0, "in_sync_s": 120.0,
                          "coordinator_s": 120.0, "canary_s": 60.0, "poll_s": 0.5, "lock_wait_s": 5.0},
                "capture": {"jstack_count": 3, "jstack_interval_s": 1.0, "command_timeout_s": 30.0, "connect_timeout_s": 5.0,
                            "log_tail_lines": 2000, "heap_dump": True, "remote_work_dir": "/tmp"},
            }
        }

    def airflow_env(self) -> dict[str, str]:
        env = {
            f"AIRFLOW_CONN_{ZK_CONN_ID.upper()}": json.dumps({"conn_type": "generic", "host": ZK_CONNECT, "extra": {"chroot": CHROOT}}),
            "AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS": json.dumps(self.cluster_settings()),
            f"AIRFLOW_CONN_{APPROVAL_KEY_CONN_ID.upper()}": json.dumps({"conn_type": "generic", "password": self.approval_key()}),
        }
        for b in BROKER_IDS:
            env[f"AIRFLOW_CONN_{host_conn_id(b).upper()}"] = json.dumps({
                "conn_type": "ssh", "host": host_address(b), "port": SSH_PORT, "login": host_user(b),
                "extra": {"key_file": str(self.key_file), "host_key": self.host_key(b), "no_host_key_check": False,
                          "conn_timeout": 10, "cmd_timeout": 60},
            })
        return env

    def _write_env_files(self) -> None:
        env = self.airflow_env()
        (self.state / "airflow.env").write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in sorted(env.items())))
        (self.state / "clusters.json").write_text(json.dumps(self.cluster_settings(), indent=2) + "\n")
        info = {
            "state_dir": str(self.state), "zk_connect": ZK_CONNECT, "chroot": CHROOT, "known_hosts": str(self.known_hosts),
            "key_file": str(self.key_file),
            "brokers": {str(b): {"address": host_address(b), "ssh_port": SSH_PORT, "user": host_user(b), "port": BROKER_PORT,
                                 "server_log": str(self.server_log(b)), "host_key": self.host_key(b),
                                 "bin": str(self.host_dir(b) / "bin")} for b in BROKER_IDS},
            "cluster_settings": self.cluster_settings(), "airflow_env": env,
        }
        (self.state / "lab.json").write_text(json.dumps(info, indent=2) + "\n")

    # ------------------------------------------------------------------ internals
    def _spawn(self, name: str, argv: list[str], log: Path, cwd: Path | None = None, env: dict | None = None) -> int:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            p = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                 start_new_session=True)
        (self.state / "run" / f"{name}.pid").write_text(f"{p.pid}\n")
        return p.pid

    def _start_javac(self) -> subprocess.Popen:
        classes = self.state / "classes"
        classes.mkdir()
        srcs = sorted(str(p) for p in JAVA_SRC.glob("*.java"))
        if not srcs:
            raise LabError(f"no Java sources in {JAVA_SRC}")
        return subprocess.Popen(["javac", "-nowarn", "-XDignore.symbol.file", "-J-Xmx256m", "-d", str(classes), "-cp", ":".join(BROKER_CP), *srcs],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def _write_zk_configs(self) -> None:
        for z in ZK_IDS:
            d = self.zk_dir(z)
            (d / "data").mkdir(parents=True)
            (d / "data" / "myid").write_text(f"{z}\n")
            servers = "".join(f"server.{i}=127.0.0.1:{28880 + i}:{38880 + i}\n" for i in ZK_IDS)
            (d / "zoo.cfg").write_text(
                f"tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={d / 'data'}\nclientPort={ZK_CLIENT_PORT[z]}\n"
                f"clientPortAddress=127.0.0.1\nmaxClientCnxns=0\n4lw.commands.whitelist=*\nadmin.enableServer=false\n"
                f"standaloneEnabled=false\n{servers}")
            (d / "log4j.properties").write_text(
                "log4j.rootLogger=INFO, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\n"
                f"log4j.appender.FILE.File={d / 'zookeeper.log'}\nlog4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n\n")

    def _zk_argv(self, z: int) -> list[str]:
        d = self.zk_dir(z)
        return ["java", "-Xms16m", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dzookeeper.log.dir={d}",
                "-cp", ":".join([str(d), *ZK_SERVER_CP]), "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(d / "zoo.cfg")]

    def _wait_zk_quorum(self, timeout: float) -> None:
        def modes():
            ms = []
            for port in ZK_CLIENT_PORT.values():
                out = four_letter(port)
                m = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Mode:")), None)
                if m not in ("leader", "follower"):
                    return None
                ms.append(m)
            return ms if ms.count("leader") == 1 else None
        wait_until(modes, timeout, "the 3-node ZooKeeper ensemble to elect a leader", interval=0.2)

    def _bootstrap_zk(self) -> None:
        """Kafka's persistent paths (what the first broker's startup creates)."""
        from kazoo.client import KazooClient

        kz = KazooClient(hosts=ZK_CONNECT, timeout=5.0)
        kz.start(timeout=15)
        try:
            kz.ensure_path(CHROOT)
            for p in ("/consumers", "/brokers/ids", "/brokers/topics", "/brokers/seqid", "/config/changes", "/config/topics",
                      "/config/clients", "/admin/delete_topics", "/isr_change_notification"):
                kz.ensure_path(CHROOT + p)
        finally:
            kz.stop()
            kz.close()

    def _create_topics(self) -> None:
        """What `kafka-topics --create` writes (config, then the replica assignment); the controller then creates
        the partition state znodes. Preferred leaders are spread round-robin over the brokers."""
        kz = self.kazoo()
        for topic, (n, cfg) in TOPICS.items():
            assignment = {str(p): [BROKER_IDS[(p + k) % len(BROKER_IDS)] for k in range(3)] for p in range(n)}
            kz.create(f"/config/topics/{topic}", json.dumps({"version": 1, "config": cfg}, separators=(",", ":")).encode())
            kz.create(f"/brokers/topics/{topic}", json.dumps({"version": 1, "partitions": assignment}, separators=(",", ":")).encode())

    def _setup_ssh(self) -> None:
        sshd = self.state / "ssh"
        sshd.mkdir(mode=0o700)
        _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kafka-lab-client", "-f", str(self.key_file)])
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        client_pub = (self.key_file.with_suffix(".pub")).read_text()
        known = []
        for b in BROKER_IDS:
            user = host_user(b)
            if subprocess.run(["id", "-u", user], capture_output=True).returncode != 0:
                _run(["useradd", "--create-home", "--shell", "/bin/bash", user])
            _run(["usermod", "-p", "*", user])
            h = self.host_dir(b)
            for sub in ("ssh", "bin", "config", "logs", "run"):
                (h / sub).mkdir(parents=True, exist_ok=True)
            _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"host{b}", "-f", str(h / "ssh" / "ssh_host_ed25519_key")])
            (h / "ssh" / "authorized_keys").write_text(client_pub)
            os.chmod(h / "ssh" / "authorized_keys", 0o644)
            (h / "ssh" / "sshd_config").write_text(
                f"ListenAddress {host_address(b)}:{SSH_PORT}\nHostKey {h / 'ssh' / 'ssh_host_ed25519_key'}\n"
                f"PidFile {h / 'ssh' / 'sshd.pid'}\nAuthorizedKeysFile {h / 'ssh' / 'authorized_keys'}\n"
                "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
                f"PermitRootLogin no\nAllowUsers {user}\nStrictModes no\nPrintMotd no\nX11Forwarding no\n"
                "Subsystem sftp internal-sftp\n")
            known.append(f"[{host_address(b)}]:{SSH_PORT} {self.host_key(b)}\n")
        self.known_hosts.write_text("".join(known))
        os.chmod(self.known_hosts, 0o644)

    def _write_broker_host(self, b: int) -> None:
        h = self.host_dir(b)
        props = {
            "broker.id": b, "listeners": f"PLAINTEXT://{host_address(b)}:{BROKER_PORT}", "host.name": host_address(b),
            "zookeeper.connect": ZK_CONNECT + CHROOT, "zookeeper.session.timeout.ms": self.zk_session_timeout_ms,
            "zookeeper.connection.timeout.ms": 6000, "num.network.threads": 3, "num.io.threads": 8,
            "queued.max.requests": 64, "replica.lag.time.max.ms": self.replica_lag_time_max_ms,
            "replica.socket.timeout.ms": 2000, "replica.fetch.wait.max.ms": 150, "replica.fetch.backoff.ms": 500,
            "num.replica.fetchers": 1, "offsets.topic.replication.factor": 3, "offsets.topic.num.partitions": 50,
            "offsets.retention.check.interval.ms": 500, "unclean.leader.election.enable": "false",
            "auto.leader.rebalance.enable": "false", "controlled.shutdown.enable": "false",
            "log.dirs": str(h / "data"), "kafka.logs.dir": str(h / "logs"), "lab.ready.file": str(h / "run" / "kafka.ready"),
        }
        (h / "config" / "server.properties").write_text(
            "# Kafka 0.10.1.0 broker stand-in (kafka-runbooks lab)\n" + "".join(f"{k}={v}\n" for k, v in props.items()))
        (h / "data").mkdir(exist_ok=True)
        classpath = ":".join([str(self.state / "classes"), *BROKER_CP])
        java = ["java", "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dkafka.logs.dir={h / 'logs'}", "-cp", classpath, "kafka.Kafka", str(h / "config" / "server.properties")]
        common = f"""#!/bin/bash
# Broker {b} control script of the kafka-runbooks lab host {host_address(b)} (runs as {host_user(b)}).
set -u
HOST_DIR={shlex.quote(str(h))}
PIDFILE="$HOST_DIR/run/kafka.pid"
READY="$HOST_DIR/run/kafka.ready"
running_pid() {{ local p; p=$(cat "$PIDFILE" 2>/dev/null) || return 1; [ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"; }}
"""
        start = common + f"""
# Starts the JVM detached (setsid/nohup: it outlives the SSH session); exits 0 once it is registered and listening.
if pid=$(running_pid); then echo "broker {b} already running (pid $pid)"; exit 0; fi
deadline=$((SECONDS + ${{KAFKA_START_TIMEOUT_S:-60}}))
while :; do
  rm -f "$READY"
  cd "$HOST_DIR"
  setsid nohup {' '.join(shlex.quote(a) for a in java)} >>"$HOST_DIR/logs/kafkaServer.out" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PIDFILE"
  while kill -0 "$pid" 2>/dev/null && [ ! -s "$READY" ] && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if [ -s "$READY" ] && kill -0 "$pid" 2>/dev/null; then echo "broker {b} started (pid $pid)"; exit 0; fi
  if kill -0 "$pid" 2>/dev/null; then echo "broker {b}: not ready before timeout (pid $pid)" >&2; exit 1; fi
  # The JVM exited: most often its previous ZooKeeper session still holds /brokers/ids/{b} (killed broker,
  # session not yet expired). Kafka refuses to start then; retry until the deadline.
  if [ $SECONDS -ge $deadline ]; then echo "broker {b} failed to start; see $HOST_DIR/logs/server.log" >&2; exit 1; fi
  sleep 1
done
"""
        stop = common + f"""
# SIGTERM, wait up to KAFKA_STOP_TIMEOUT_S (a deadlocked broker never finishes its shutdown), then SIGKILL.
pid=$(running_pid) || {{ echo "broker {b} not running"; rm -f "$READY"; exit 0; }}
kill -TERM "$pid"
deadline=$((SECONDS + ${{KAFKA_STOP_TIMEOUT_S:-5}}))
while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then
  echo "broker {b} (pid $pid) did not stop after SIGTERM; sending SIGKILL"
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
fi
rm -f "$READY"
echo "broker {b} stopped (pid $pid)"
"""
        restart = common + f"""
"$HOST_DIR/bin/kafka-stop" || exit 1
exec "$HOST_DIR/bin/kafka-start"
"""
        for name, text in (("kafka-start", start), ("kafka-stop", stop), ("kafka-restart", restart)):
            p = h / "bin" / name
            p.write_text(text)
            os.chmod(p, 0o755)
        _run(["chown", "-R", f"{host_user(b)}:{host_user(b)}", str(h / "logs"), str(h / "run"), str(h / "data")])


# ---------------------------------------------------------------------- process helpers
def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _is_lab_command(cmd: str, marker: str) -> bool:
    """A lab process: java (ZooKeeper, broker), sshd, the client load, or a host control script -- naming the state dir."""
    if marker not in cmd:
        return False
    argv0 = os.path.basename(cmd.split(" ", 1)[0])
    return argv0 in ("java", "javac") or argv0.startswith("sshd") or "kafka_lab.clients" in cmd or "/bin/kafka-" in cmd


def _pids_mentioning(text: str) -> list[int]:
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != me and _is_lab_command(_cmdline(int(d)), text) and _alive(int(d)):
            out.append(int(d))
    return sorted(out)


def _kill_if_ours(pid: int, marker: str) -> bool:
    """SIGKILL ``pid`` only if its command line names the lab's state dir (pid files can be stale)."""
    if not _alive(pid) or not _is_lab_command(_cmdline(pid), marker):
        return False
    try:
        os.kill(pid, signal.SIGKILL)
        return True
    except ProcessLookupError:
        return False


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "".join(path.read_text(errors="replace").splitlines(True)[-n:])
    except OSError:
        return "(none)"
