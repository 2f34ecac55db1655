"""The practice cluster: a 3-node ZooKeeper ensemble, 3 SSH "hosts" each running a real Apache Kafka 2.3.0 broker as its own
user, the lab's topics, and an application load. (``kafka_home.DISTRIBUTIONS`` lists the versions the lab can run:
2.3.0 alone since Kafka 0.10.2.1 was withdrawn; see docs/VERSIONS.md for what stays recorded from it.)

Everything runs on the loopback addresses of this slot (net.py) and is started and stopped by this module. Every
process the lab starts names the state directory in its command line and is recorded in a pid file, so ``down()``
(and a later ``up()``) finds and ends exactly the lab's processes, by pid. Faults live in faults.py.
"""

from __future__ import annotations

import json
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from . import agent, hosts, topics, zookeeper
from .badclient import BAD_REQUEST_WINDOW_S
from .faults import FaultsMixin
from .leadership import LeadershipMixin
from .hosts import BROKER_IDS, host_name, host_user
from .kafka_home import KAFKA_VERSION, distribution, resolve as resolve_kafka_home
from .load import groups_per_broker
from .net import (JMX_PORT, KAFKA_CLIENT_PORT, KAFKA_REPLICATION_PORT, SSH_PORT, ZK_CLIENT_PORT, ZK_ELECTION_PORT,
                  ZK_QUORUM_PORT, broker_ip, zk_ip)
from .procs import (LabError, alive, forget_stale_attach_sockets, pids_mentioning, port_open, proc_state, read_pid, run,
                    signal_if_ours, spawn, wait_until)
from .profile import DEFAULT_PROFILE, broker_settings
from .zookeeper import CHROOT, ZK_IDS, ZONES, zk_user

CLUSTER = "lab"
# Airflow users allowed to approve the lab's remediations (the drill answers as drill-bot)
APPROVERS = ("drill-bot", "oncall-alice", "oncall-bob", "oncall-carol", "oncall-dave")
APPROVAL_KEY_CONN_ID = "kafka_runbooks_approvals"
ZK_CONN_ID = "kafka_lab_zk"
REPO = Path(__file__).resolve().parents[2]
LAB_STATE_FILE = "lab-state.json"

__all__ = ["Lab", "LabError", "wait_until", "port_open", "default_state_dir", "host_conn_id", "zk_connect"]


def host_conn_id(broker_id: int) -> str:
    return f"kafka_lab_host_{int(broker_id)}"


def zk_host_conn_id(z: int) -> str:
    return f"kafka_lab_zk_host_{int(z)}"


def zk_connect() -> str:
    return zookeeper.connect_string()


def default_state_dir() -> Path:
    return Path(os.environ.get("KAFKA_LAB_HOME") or REPO / "var" / "lab")


def default_kafka() -> str:
    """The lab's Kafka version when none is given: ``KAFKA_LAB_KAFKA``, else 2.3.0."""
    return os.environ.get("KAFKA_LAB_KAFKA") or KAFKA_VERSION


class Lab(FaultsMixin, LeadershipMixin):
    def __init__(self, state_dir: str | os.PathLike | None = None, profile: str | None = None, kafka: str | None = None):
        self.state = Path(state_dir or default_state_dir()).resolve()
        saved = self._saved()
        self.profile = profile or saved.get("profile") or DEFAULT_PROFILE
        self.kafka = kafka or saved.get("kafka") or default_kafka()
        distribution(self.kafka)  # an unknown version or profile fails here, not half-way through up()
        broker_settings(self.profile, self.kafka)
        self.groups: dict[int, str] = {int(k): v for k, v in saved.get("groups", {}).items()}
        self.up_seconds: float | None = None
        self._kz = None

    # ------------------------------------------------------------------ paths
    def host_dir(self, b: int) -> Path:
        return self.state / f"host{int(b)}"

    def zk_dir(self, z: int) -> Path:
        return self.state / "zk" / str(int(z))

    def run_dir(self, b: int) -> Path:
        return self.host_dir(b) / "run"

    @property
    def key_file(self) -> Path:
        return self.state / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state / "ssh" / "known_hosts"

    def log_path(self, b: int, name: str = "server.log") -> Path:
        return self.host_dir(b) / "logs" / name

    def server_log(self, b: int) -> Path:
        return self.log_path(b, "server.log")

    def log_text(self, b: int, name: str = "server.log") -> str:
        """The whole log since the lab started: Kafka's log4j rolls server.log & co. every hour
        (``<name>.yyyy-MM-dd-HH``), so the rolled files first, oldest first, then the current one."""
        current = self.log_path(b, name)
        rolled = sorted(current.parent.glob(f"{name}.????-??-??-??"))
        return "".join(p.read_text(errors="replace") for p in [*rolled, current] if p.exists())

    def zk_log(self, z: int) -> Path:
        return self.zk_dir(z) / "zookeeper.log"

    def script(self, b: int, name: str) -> Path:
        return self.host_dir(b) / "bin" / name

    def broker_pid(self, b: int) -> int | None:
        return read_pid(self.run_dir(b) / "kafka.pid")

    def zk_pid(self, z: int) -> int | None:
        return read_pid(self.state / "run" / f"zk{int(z)}.pid")

    @property
    def marker(self) -> str:
        """Every lab process names a path under the state dir in its command line (not <state>.prev/...)."""
        return str(self.state) + os.sep

    def _pid_file(self, name: str) -> Path:
        return self.state / "run" / f"{name}.pid"

    @property
    def kafka_home(self) -> Path:
        saved = self._saved().get("kafka_home")
        return Path(saved) if saved else resolve_kafka_home(REPO, allow_download=False, version=self.kafka)

    @property
    def settings(self) -> dict:
        """The brokers' lab settings (profile and version)."""
        return broker_settings(self.profile, self.kafka)

    def kafka_capabilities(self):
        """The product's view of the lab's version (kafka_runbooks.versions), as its log line would say."""
        from kafka_runbooks import versions

        return versions.cluster_version({b: [versions.from_log_line(b, self.kafka)] for b in BROKER_IDS})

    def _saved(self) -> dict:
        try:
            return json.loads((self.state / LAB_STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def _forget_state_db(self) -> None:
        """The lab's embedded state database moved with its directory, on purpose: this process's engine for it goes
        (the product refuses a database file moved under a process that did not say so)."""
        from kafka_runbooks.state.db import EMBEDDED_FILE, forget  # deferred: the lab starts without the product loaded

        forget(self.state / "incidents" / EMBEDDED_FILE)

    def _save(self, **kw) -> None:
        data = {**self._saved(), **kw}
        (self.state / LAB_STATE_FILE).write_text(json.dumps(data, indent=2) + "\n")

    # ------------------------------------------------------------------ lifecycle
    def up(self, profile: str | None = None, kafka: str | None = None) -> dict:
        if kafka:
            distribution(kafka)
            self.kafka = kafka
        if profile:
            broker_settings(profile, self.kafka)
            self.profile = profile
        t0 = time.monotonic()
        if os.geteuid() != 0:
            raise LabError("the lab needs root: it creates the hosts' users, runs their sshd and runs each broker as its host's user")
        for parent in self.state.parents:
            if parent.exists() and not os.stat(parent).st_mode & 0o001:
                raise LabError(f"{parent} is not searchable by other users; the broker hosts' users ({host_user(1)}..) "
                               f"must reach {self.state}: choose another state dir (KAFKA_LAB_HOME)")
        self.down()
        # a SIGKILLed JVM's threads may still be closing its sockets after its main thread is gone: wait a little
        busy: list[str] = []
        deadline = time.monotonic() + 20
        while True:
            busy = [f"{h}:{p}" for h, p in self._addresses() if port_open(h, p)]
            if not busy or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if busy:
            raise LabError(f"ports already in use (another lab in this slot, KAFKA_RUNBOOKS_SLOT?): {busy}")
        kafka_home = resolve_kafka_home(REPO, version=self.kafka)
        if self.state.exists():  # the previous run's state (logs) stays one run for post-mortems
            prev = self.state.with_name(self.state.name + ".prev")
            shutil.rmtree(prev, ignore_errors=True)
            self.state.rename(prev)
            self._forget_state_db()
        self.state.mkdir(parents=True)
        os.chmod(self.state, 0o755)
        (self.state / "run").mkdir()
        self._save(profile=self.profile, kafka=self.kafka, kafka_home=str(kafka_home))
        javac = agent.start_build(self.state / "agent")
        zookeeper.write_configs(self.zk_dir)
        self._setup_ssh()  # the hosts' users first: each ZooKeeper node runs as its own
        for z in ZK_IDS:
            run(["chown", "-R", f"{zk_user(z)}:{zk_user(z)}", str(self.zk_dir(z) / "data")])
            run(["chown", f"{zk_user(z)}:{zk_user(z)}", str(self.zk_dir(z))])
            self._start_zk(z)
        for b in BROKER_IDS:
            self._start_sshd(b)
        for z in ZK_IDS:
            self._start_zk_sshd(z)
        hosts.ensure_etc_hosts({host_name(b): broker_ip(b) for b in BROKER_IDS})
        self._check_readable_by_host_users(kafka_home)
        jar = agent.finish_build(javac, self.state / "agent")
        settings = self.settings
        for b in BROKER_IDS:
            hosts.write_broker_host(self.host_dir(b), b, kafka_home, jar, zk_connect() + CHROOT, settings, self.kafka)
        wait_until(zookeeper.quorum_modes, 30, "the 3-node ZooKeeper ensemble to elect a leader", interval=0.2)
        for b in BROKER_IDS:
            self.host_script(b, "kafka-start")
        for b in BROKER_IDS:
            wait_until(lambda b=b: port_open(broker_ip(b), SSH_PORT), 10, f"sshd on {broker_ip(b)}:{SSH_PORT}")
        for z in ZK_IDS:
            wait_until(lambda z=z: port_open(zk_ip(z), SSH_PORT), 10, f"sshd on {zk_ip(z)}:{SSH_PORT}")
        self.wait_registered(BROKER_IDS, 120)
        ctrl = wait_until(self.controller, 30, "a controller in /kafka/controller")["brokerid"]
        # an admin request waits for the controller its broker's metadata names; a broker learns it from the
        # controller's first UpdateMetadata, which can come after the broker accepts clients (a CI run's
        # create_topics, sent as the last broker started, timed out "waiting for controller" after 10 s)
        for b in BROKER_IDS:
            wait_until(lambda b=b: topics.list_topics_at(b).controller_id == ctrl, 30,
                       f"broker {b}'s metadata to name controller {ctrl}", interval=0.2)
        topics.create_topics()
        topics.force_offsets_topic()
        self.wait_partitions(lambda ps: len([k for k in ps if k[0] == topics.OFFSETS]) == topics.OFFSETS_PARTITIONS, 60,
                             f"{topics.OFFSETS_PARTITIONS} partitions of {topics.OFFSETS}")
        self.wait_full_isr(120)
        self.ensure_preferred_leaders()
        leaders = {p: s["replicas"][0] for (t, p), s in self.partitions([topics.OFFSETS]).items()}
        self.groups = groups_per_broker(leaders)
        self._save(groups={str(b): g for b, g in self.groups.items()})
        self.start_load()
        self.wait_load(60)
        self._write_env_files()
        self.up_seconds = time.monotonic() - t0
        self._save(up_seconds=round(self.up_seconds, 1))
        return self.status()

    def down(self) -> list[int]:
        """Stop every lab process (pid files first, then any process whose command line names the state dir)."""
        self.close()
        marker = self.marker
        killed: list[int] = []
        pids = [read_pid(self._pid_file("load")), read_pid(self._pid_file("bad-client"))] + [self.broker_pid(b) for b in BROKER_IDS] + \
               [read_pid(self._pid_file(f"sshd{b}")) for b in BROKER_IDS] + [self.zk_pid(z) for z in ZK_IDS] + \
               [read_pid(self._pid_file(f"sshd-zk{z}")) for z in ZK_IDS]
        for pid in pids + pids_mentioning(marker):
            if pid and proc_state(pid) in ("T", "t"):
                signal_if_ours(pid, marker, signal.SIGCONT)
            if signal_if_ours(pid, marker):
                killed.append(pid)
        wait_until(lambda: not any(alive(p) for p in killed), 15, "the lab's processes to exit")
        left = pids_mentioning(marker)
        if left:
            raise LabError(f"lab processes still running after down: {left}")
        return killed

    def processes(self) -> list[int]:
        """Pids of running processes that belong to this lab (their command line names the state dir)."""
        return pids_mentioning(self.marker)

    def _addresses(self) -> list[tuple[str, int]]:
        return ([(zk_ip(z), p) for z in ZK_IDS for p in (ZK_CLIENT_PORT, ZK_QUORUM_PORT, ZK_ELECTION_PORT, SSH_PORT)]
                + [(broker_ip(b), p) for b in BROKER_IDS for p in (SSH_PORT, KAFKA_CLIENT_PORT, KAFKA_REPLICATION_PORT, JMX_PORT)])

    # ------------------------------------------------------------------ processes
    def _start_zk(self, z: int) -> int:
        d = self.zk_dir(z)
        return spawn(zookeeper.server_argv(d, zk_user(z)), d / "zookeeper.out", self._pid_file(f"zk{z}"), cwd=d)

    def _start_zk_sshd(self, z: int) -> int:
        d = self.zk_dir(z)
        return spawn(["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "ssh" / "sshd_config")], d / "sshd.log", self._pid_file(f"sshd-zk{z}"))

    def zk_ssh(self, z: int, argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
        """Runs argv on ZooKeeper node z's host over SSH as its user, with the pinned host key."""
        return hosts.ssh_run_at(zk_ip(z), zk_user(z), argv, self.key_file, self.known_hosts, timeout)

    def zk_host_key(self, z: int) -> str:
        pub = (self.zk_dir(z) / "ssh" / "ssh_host_ed25519_key.pub").read_text().split()
        return f"{pub[0]} {pub[1]}"

    def _start_sshd(self, b: int) -> int:
        h = self.host_dir(b)
        return spawn(["/usr/sbin/sshd", "-D", "-e", "-f", str(h / "ssh" / "sshd_config")], h / "logs" / "sshd.log",
                     self._pid_file(f"sshd{b}"))

    def host_script(self, b: int, name: str, timeout: float = 120, check: bool = True,
                    env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        """Runs one of host b's control scripts as the host's user (as systemd or an operator over SSH would)."""
        # the lab's own JVMs (ZooKeeper nodes, tools) run as this user: their stale sockets can meet a broker's pid too
        jvm_users = {os.getuid(), *(pwd.getpwnam(host_user(x)).pw_uid for x in BROKER_IDS)}
        if name == "kafka-start":
            forget_stale_attach_sockets(jvm_users)
        argv = ["runuser", "-u", host_user(b), "--", "env", *(f"{k}={v}" for k, v in (env or {}).items()), str(self.script(b, name))]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd="/")
        if name == "kafka-start":
            forget_stale_attach_sockets(jvm_users)  # the new JVM's pid is known now: a socket left under it goes
        if check and p.returncode != 0:
            raise LabError(f"{name} on host {b} exited {p.returncode}: {p.stdout}{p.stderr}")
        return p

    def start_load(self, options: Sequence[str] = ()) -> int:
        """The lab's load (load.py), unless it runs already; ``options``: load.py's own (``--rate``, ...)."""
        if not self.groups:
            raise LabError("no consumer groups chosen yet: the lab is not up")
        pid = read_pid(self._pid_file("load"))
        if alive(pid):
            return pid
        argv = [sys.executable, "-m", "kafka_lab.load", "--state", str(self.state), "--bootstrap", topics.bootstrap_all(),
                "--groups", ",".join(self.groups[b] for b in sorted(self.groups)), "--stats", str(self.load_stats_path),
                *options]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
        return spawn(argv, self.state / "run" / "load.log", self._pid_file("load"), env=env)

    def stop_load(self, timeout: float = 15) -> None:
        pid = read_pid(self._pid_file("load"))
        if signal_if_ours(pid, self.marker, signal.SIGTERM):
            try:
                wait_until(lambda: not alive(pid), timeout, "the load to stop")
            except LabError:
                signal_if_ours(pid, self.marker)

    @property
    def load_stats_path(self) -> Path:
        return self.state / "run" / "load-stats.json"

    def load_stats(self) -> dict:
        try:
            return json.loads(self.load_stats_path.read_text())
        except (OSError, ValueError) as exc:
            raise LabError(f"no load stats in {self.load_stats_path}: {exc}") from exc

    def wait_load(self, timeout: float = 60) -> dict:
        """Until the load produces and every group has committed offsets since ``wait_load`` was called."""
        since = time.time()

        def healthy():
            s = self.load_stats()
            return s if ((s.get("last_produce_ok_at") or 0) > since
                         and all((g["last_commit_ok_at"] or 0) > since for g in s["groups"].values())) else None
        return wait_until(healthy, timeout, "the load to produce and every group to commit", interval=0.5)

    # ------------------------------------------------------------------ ZooKeeper views (kazoo)
    def kazoo(self):
        """The lab's own kazoo client; a new one when the last one's session was lost. ci11 saw this client's session
        expire once (no ping heard for 10 s on a host at load ~40) and every call after it raise SessionExpiredError
        for 8 minutes: the lab does not wait for kazoo to come back by itself."""
        if self._kz is not None and (self._kz.state == "LOST" or self._kz.client_state in ("EXPIRED_SESSION", "CLOSED")):
            self.close()
        if self._kz is None:
            from kazoo.client import KazooClient

            kz = KazooClient(hosts=zk_connect() + CHROOT, timeout=10.0)
            with warnings.catch_warnings():  # before the first broker starts, Kafka has not created its chroot yet
                warnings.filterwarnings("ignore", "No chroot path exists")
                kz.start(timeout=15)
            self._kz = kz
        return self._kz

    def close(self) -> None:
        if self._kz is not None:
            try:
                self._kz.stop()
                self._kz.close()
            except Exception:  # noqa: BLE001
                pass
            self._kz = None

    def registration(self, b: int) -> tuple[dict, Any] | None:
        """(registration JSON, ZnodeStat) of /brokers/ids/<b>, or None when it is not registered."""
        from kazoo.exceptions import NoNodeError

        try:
            data, stat = self.kazoo().get(f"/brokers/ids/{int(b)}")
        except NoNodeError:
            return None
        return json.loads(data), stat

    def registered_brokers(self) -> dict[int, dict]:
        out = {}
        for c in self.kazoo().get_children("/brokers/ids"):
            r = self.registration(int(c))
            if r:
                out[int(c)] = r[0]
        return out

    def controller(self) -> dict | None:
        from kazoo.exceptions import NoNodeError

        try:
            return json.loads(self.kazoo().get("/controller")[0])
        except (NoNodeError, ValueError):
            return None

    def partitions(self, topic_names: list[str] | None = None) -> dict[tuple[str, int], dict]:
        """{(topic, partition): {"replicas": [...], "leader", "leader_epoch", "isr", "controller_epoch"}}."""
        from kazoo.exceptions import NoNodeError

        kz = self.kazoo()
        out = {}
        for t in topic_names or kz.get_children("/brokers/topics"):
            assignment = json.loads(kz.get(f"/brokers/topics/{t}")[0])["partitions"]
            for p, replicas in assignment.items():
                try:
                    state = json.loads(kz.get(f"/brokers/topics/{t}/partitions/{p}/state")[0])
                except NoNodeError:
                    state = {"leader": -1, "isr": [], "leader_epoch": -1}
                out[(t, int(p))] = {"replicas": replicas, **state}
        return out

    def wait_registered(self, ids, timeout: float = 60) -> dict:
        ids = {int(i) for i in ids}
        return wait_until(lambda: (r := self.registered_brokers()) and ids <= set(r) and r, timeout,
                          f"brokers {sorted(ids)} registered", interval=0.2)

    def wait_unregistered(self, broker_id: int, timeout: float = 60) -> None:
        wait_until(lambda: self.registration(broker_id) is None, timeout, f"broker {broker_id} registration to disappear",
                   interval=0.1)

    @staticmethod
    def _full_isr(ps: dict) -> bool:
        return all(sorted(s["isr"]) == sorted(s["replicas"]) and s["leader"] in s["replicas"] for s in ps.values())

    def full_isr(self) -> bool:
        return self._full_isr(self.partitions())

    def wait_full_isr(self, timeout: float = 60, stable_s: float = 0.0) -> dict:
        """Every partition led, its ISR full -- and, with ``stable_s``, still so after that many seconds of looking.
        A leader that was hung shrinks its ISR to itself on its first ISR-expiration tick after it runs again (its
        followers fetched nothing while it hung; Kafka 2.3 Partition.maybeShrinkIsr), then expands it a second later:
        a full ISR read between the unhang and that tick is not yet the settled one (seen in CI: orders-3 [1] at the
        plan, 0.1 s after the test's full-ISR wait)."""
        deadline = time.monotonic() + timeout
        while True:
            ps = self.wait_partitions(self._full_isr, max(1.0, deadline - time.monotonic()),
                                      "every partition to have a leader and a full ISR")
            held = time.monotonic() + stable_s
            while time.monotonic() < held and self._full_isr(self.partitions()):
                time.sleep(0.5)
            if time.monotonic() >= held:
                return ps
            if time.monotonic() > deadline:
                raise LabError(f"no full ISR held for {stable_s:g} s within {timeout:g} s")

    def wait_partitions(self, predicate: Callable[[dict], bool], timeout: float, what: str) -> dict:
        def check():
            ps = self.partitions()
            return ps if predicate(ps) else None
        return wait_until(check, timeout, what, interval=0.3)

    def non_preferred(self) -> list[tuple[str, int]]:
        return sorted(k for k, s in self.partitions().items() if s["leader"] != s["replicas"][0])

    def ensure_preferred_leaders(self, timeout: float = 60) -> None:
        """A preferred-replica election (Admin API) for partitions not led by their first replica, then waits; asked
        again while some are not, until ``timeout``. Seen on Kafka 2.3.0 (bench mitigate, a minute after the product restarted
        the hung controller): the controller logged "Starting preferred replica leader election" and the ElectLeaders
        answer did not come within the client's 10 s; what the partitions' leaders became is what counts."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout
        while True:
            moved = self.non_preferred()
            if not moved:
                return
            try:
                if self.kafka_capabilities().has("elect_leaders_api"):
                    topics.elect_preferred(moved, timeout=max(1.0, deadline - time.monotonic()))
                else:  # before 2.2 (KIP-183) the controller reads the znode, as kafka-preferred-replica-election.sh writes it
                    topics.elect_preferred_znode(self.kazoo(), moved, timeout=max(1.0, deadline - time.monotonic()))
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    raise LabError(f"preferred leaders not elected within {timeout:g} s: {exc}") from exc
            try:
                self.wait_partitions(lambda ps: all(s["leader"] == s["replicas"][0] for s in ps.values()),
                                     max(1.0, min(15.0, deadline - time.monotonic())), "preferred leaders")
                return
            except LabError:
                if time.monotonic() > deadline:
                    raise

    # ------------------------------------------------------------------ SSH
    def ssh(self, b: int, argv: list[str], timeout: float = 60) -> tuple[int, str, str]:
        """Runs argv on host b over SSH as its user, with the pinned host key."""
        return hosts.ssh_run(b, argv, self.key_file, self.known_hosts, timeout)

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

    def _setup_ssh(self) -> None:
        sshd = self.state / "ssh"
        sshd.mkdir(mode=0o700)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kafka-lab-client", "-f", str(self.key_file)])
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        client_pub = self.key_file.with_suffix(".pub").read_text()
        known = []
        for b in BROKER_IDS:
            hosts.ensure_user(host_user(b))
            h = self.host_dir(b)
            (h / "ssh").mkdir(parents=True)
            hosts.write_sshd(h, b, client_pub)
            known.append(f"[{broker_ip(b)}]:{SSH_PORT} {self.host_key(b)}\n")
        for z in ZK_IDS:
            hosts.ensure_user(zk_user(z))
            d = self.zk_dir(z)
            (d / "ssh").mkdir(parents=True)
            hosts.write_sshd_for(d, zk_ip(z), zk_user(z), client_pub, f"zk{z}")
            known.append(f"[{zk_ip(z)}]:{SSH_PORT} {self.zk_host_key(z)}\n")
        self.known_hosts.write_text("".join(known))
        os.chmod(self.known_hosts, 0o644)

    def _check_readable_by_host_users(self, kafka_home: Path) -> None:
        jar = kafka_home / distribution(self.kafka).core_jar
        p = subprocess.run(["runuser", "-u", host_user(1), "--", "test", "-r", str(jar)], capture_output=True, timeout=30)
        if p.returncode != 0:
            raise LabError(f"{jar} is not readable by {host_user(1)}: the broker hosts' users must read KAFKA_HOME ({kafka_home})")

    # ------------------------------------------------------------------ status / settings
    def status(self) -> dict:
        procs: dict[str, Any] = {}
        for name, pid in ([("load", read_pid(self._pid_file("load")))] + [(f"zk{z}", self.zk_pid(z)) for z in ZK_IDS]
                          + [(f"sshd{b}", read_pid(self._pid_file(f"sshd{b}"))) for b in BROKER_IDS]
                          + [(f"sshd-zk{z}", read_pid(self._pid_file(f"sshd-zk{z}"))) for z in ZK_IDS]
                          + [(f"broker{b}", self.broker_pid(b)) for b in BROKER_IDS]):
            procs[name] = {"pid": pid, "state": proc_state(pid)} if alive(pid) else None
        out: dict[str, Any] = {"state_dir": str(self.state), "profile": self.profile, "kafka": self.kafka, "processes": procs,
                               "zookeeper": {z: zookeeper.mode(z) or "not serving" for z in ZK_IDS},
                               "agents": {b: agent.read_state(self.run_dir(b)) for b in BROKER_IDS}}
        try:
            regs = {b: self.registration(b) for b in BROKER_IDS}
            out["registered"] = {b: {"czxid": r[1].czxid, "session": hex(r[1].ephemeralOwner)} if r else None for b, r in regs.items()}
            out["controller"] = (self.controller() or {}).get("brokerid")
            parts = self.partitions()
            out["partitions"] = len(parts)
            out["under_replicated"] = sorted(f"{t}-{p}" for (t, p), s in parts.items() if len(s["isr"]) < len(s["replicas"]))
            out["not_preferred"] = sorted(f"{t}-{p}" for (t, p), s in parts.items() if s["leader"] != s["replicas"][0])
        except Exception as exc:  # noqa: BLE001 - status must report, not fail
            out["zookeeper_error"] = repr(exc)
        try:
            s = self.load_stats()
            out["load"] = {k: s[k] for k in ("produced_ok", "produced_failed", "produce_errors", "consumed", "commits_ok",
                                             "commits_failed", "produce_latency_ms", "updated_at")}
        except LabError as exc:
            out["load"] = str(exc)
        return out

    def cluster_settings(self) -> dict:
        host_tmpl = str(self.state / "host{broker_id}")
        return {
            CLUSTER: {
                "zk_conn_id": ZK_CONN_ID,
                "hosts": {str(b): host_conn_id(b) for b in BROKER_IDS},
                "listener": hosts.REPLICATION_LISTENER,
                "broker_port": KAFKA_CLIENT_PORT,
                "stop_command": [f"{host_tmpl}/bin/kafka-stop"],
                "start_command": [f"{host_tmpl}/bin/kafka-start"],
                "kill_command": [f"{host_tmpl}/bin/kafka-kill"],
                "server_log_path": f"{host_tmpl}/logs/server.log",
                "server_properties_path": f"{host_tmpl}/config/server.properties",
                "kafka_home": str(self.kafka_home),
                "kafka_version": self.kafka,
                "bundle_base": str(self.state / "bundles"),
                "incident_base": str(self.state / "incidents"),
                "approvals": {"approvers": list(APPROVERS), "timeout_s": 600.0},
                "gates": {"stop_s": 60.0, "stop_unserving_s": 10.0, "deregister_s": 30.0, "register_s": 90.0, "in_sync_s": 120.0,
                          "coordinator_s": 120.0, "canary_s": 60.0, "poll_s": 0.5, "lock_wait_s": 5.0},
                "capture": {"jstack_count": 3, "jstack_interval_s": 1.0, "command_timeout_s": 30.0, "connect_timeout_s": 5.0,
                            "log_tail_lines": 2000, "heap_dump": True, "remote_work_dir": "/tmp",
                            # the lab's tests and drills respond to far more incidents an hour than a real cluster should
                            "max_per_hour": 60},
                # the lab's brokers log a line every 10 s (profile.py): a server.log silent for 30 s is silent
                # a bad client's lines count for BAD_REQUEST_WINDOW_S (its drill sends every 3 s; reset() waits them out)
                "health": {"log_silent_s": 30.0, "offsets_segments_max": 100, "offsets_load_expected_s": 5.0,
                           "bad_request_window_s": BAD_REQUEST_WINDOW_S},
                "zookeeper": {
                    "servers": {str(z): {"address": f"{zk_ip(z)}:{ZK_CLIENT_PORT}", "ssh_conn_id": zk_host_conn_id(z), "zone": ZONES[z]}
                                for z in ZK_IDS},
                    "config_path": str(self.state / "zk" / "{server_id}" / "zoo.cfg"),
                    "log_path": str(self.state / "zk" / "{server_id}" / "zookeeper.log"),
                    "gc_log_path": str(self.state / "zk" / "{server_id}" / "zookeeper-gc.log"),
                },
                "zookeeper_health": {"drop_window_s": 300.0},
            }
        }

    def airflow_env(self) -> dict[str, str]:
        env = {
            f"AIRFLOW_CONN_{ZK_CONN_ID.upper()}": json.dumps({"conn_type": "generic", "host": zk_connect(), "extra": {"chroot": CHROOT}}),
            "AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS": json.dumps(self.cluster_settings()),
            f"AIRFLOW_CONN_{APPROVAL_KEY_CONN_ID.upper()}": json.dumps({"conn_type": "generic", "password": self.approval_key()}),
        }
        for z in ZK_IDS:
            env[f"AIRFLOW_CONN_{zk_host_conn_id(z).upper()}"] = json.dumps({
                "conn_type": "ssh", "host": zk_ip(z), "port": SSH_PORT, "login": zk_user(z),
                "extra": {"key_file": str(self.key_file), "host_key": self.zk_host_key(z), "no_host_key_check": False,
                          "conn_timeout": 10, "cmd_timeout": 60},
            })
        for b in BROKER_IDS:
            env[f"AIRFLOW_CONN_{host_conn_id(b).upper()}"] = json.dumps({
                "conn_type": "ssh", "host": broker_ip(b), "port": SSH_PORT, "login": host_user(b),
                "extra": {"key_file": str(self.key_file), "host_key": self.host_key(b), "no_host_key_check": False,
                          "conn_timeout": 10, "cmd_timeout": 60},
            })
        return env

    def _write_env_files(self) -> None:
        env = self.airflow_env()
        (self.state / "airflow.env").write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in sorted(env.items())))
        (self.state / "clusters.json").write_text(json.dumps(self.cluster_settings(), indent=2) + "\n")
        info = {
            "state_dir": str(self.state), "zk_connect": zk_connect(), "chroot": CHROOT, "known_hosts": str(self.known_hosts),
            "key_file": str(self.key_file), "profile": self.profile, "kafka": self.kafka, "kafka_home": str(self.kafka_home),
            "brokers": {str(b): {"address": broker_ip(b), "host_name": host_name(b), "ssh_port": SSH_PORT, "user": host_user(b),
                                 "client_port": KAFKA_CLIENT_PORT, "replication_port": KAFKA_REPLICATION_PORT, "jmx_port": JMX_PORT,
                                 "server_log": str(self.server_log(b)), "host_key": self.host_key(b),
                                 "bin": str(self.host_dir(b) / "bin")} for b in BROKER_IDS},
            "consumer_groups": {str(b): g for b, g in self.groups.items()},
            "cluster_settings": self.cluster_settings(), "airflow_env": env,
        }
        (self.state / "lab.json").write_text(json.dumps(info, indent=2) + "\n")
