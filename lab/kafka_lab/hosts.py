"""The lab's broker hosts: an OS user, an sshd with a pinned host key, and the host's own Kafka files and scripts.

Host b lives at ``broker_ip(b)``: sshd on 2222, Kafka's CLIENT listener on 9092, the REPLICATION listener on 9093
(advertised by host name, ``kafka-lab-s<slot>-b<b>``, which /etc/hosts maps to the same address) and JMX on 9999.
Its files are under ``<state>/host<b>/``: ``bin/`` (kafka-start, kafka-stop, kafka-kill), ``config/``
(server.properties, Kafka's own log4j.properties), ``logs/``, ``data/`` (log.dirs), ``run/`` (pid file, the fault
agent's command and state files) and ``tmp/`` (0700, the JVM's java.io.tmpdir, for heap dumps).
"""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path

from .net import JMX_PORT, KAFKA_CLIENT_PORT, KAFKA_REPLICATION_PORT, SSH_PORT, broker_ip, slot
from .procs import LabError, run
from .profile import HEAP_OPTS, JVM_PERFORMANCE_OPTS

BROKER_IDS = (1, 2, 3)
CLIENT_LISTENER = "CLIENT"
REPLICATION_LISTENER = "REPLICATION"
ETC_HOSTS = Path("/etc/hosts")
HOSTS_MARKER = "# kafka-runbooks lab"
AGENT_OPENS = ("java.base/java.lang", "java.base/java.util.concurrent")
# Kafka 0.10.2.1 on JDK 17 (../shared/kafka/kafka_2.11-0.10.2.1/README.md): its index files are unmapped through
# sun.nio.ch.DirectBuffer / jdk.internal.ref.Cleaner, and its kafka-run-class.sh -loggc passes JDK 8 GC flags that
# JDK 17 refuses ("Unrecognized VM option 'PrintGCDateStamps'"): a non-empty KAFKA_GC_LOG_OPTS replaces them with the
# unified GC log that 2.3's script writes on JDK 9+.
OLD_JDK_EXPORTS = ("java.base/sun.nio.ch", "java.base/jdk.internal.ref")
OLD_GC_LOG_OPTS = "-Xlog:gc*:file=$LOG_DIR/kafkaServer-gc.log:time,tags:filecount=10,filesize=102400"


def host_user(b: int) -> str:
    return f"kbroker{int(b)}"


def host_name(b: int, s: int | None = None) -> str:
    return f"kafka-lab-s{slot() if s is None else s}-b{int(b)}"


def client_bootstrap(b: int) -> str:
    return f"{broker_ip(b)}:{KAFKA_CLIENT_PORT}"


def ensure_user(user: str) -> None:
    for attempt in range(20):  # useradd fails while another lab holds /etc/passwd's lock
        if subprocess.run(["id", "-u", user], capture_output=True).returncode == 0:
            break
        p = subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], capture_output=True, text=True)
        if p.returncode == 0:
            break
        time.sleep(0.2 + 0.1 * attempt)
    else:
        raise LabError(f"could not create user {user}: {p.stderr.strip()}")
    run(["usermod", "-p", "*", user])  # an account with "!" is locked and sshd refuses it


def ensure_etc_hosts(entries: dict[str, str], path: Path = ETC_HOSTS) -> None:
    """Add ``address name`` lines (with the lab's marker) that are missing; idempotent, never removes anything."""
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            known = {tuple(line.split("#", 1)[0].split()[:2]) for line in fh.read().splitlines() if line.split("#", 1)[0].strip()}
            missing = [f"{addr} {name} {HOSTS_MARKER}\n" for name, addr in sorted(entries.items()) if (addr, name) not in known]
            if missing:
                fh.seek(0, os.SEEK_END)
                fh.write("".join(missing))
                fh.flush()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_sshd(h: Path, b: int, client_pub: str) -> None:
    write_sshd_for(h, broker_ip(b), host_user(b), client_pub, f"host{b}")


def write_sshd_for(h: Path, ip: str, user: str, client_pub: str, comment: str) -> None:
    """An sshd of one simulated host in ``h/ssh``: its own host key, key-only login of ``user`` at ``ip``:2222."""
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(h / "ssh" / "ssh_host_ed25519_key")])
    (h / "ssh" / "authorized_keys").write_text(client_pub)
    os.chmod(h / "ssh" / "authorized_keys", 0o644)
    (h / "ssh" / "sshd_config").write_text(
        f"ListenAddress {ip}:{SSH_PORT}\nHostKey {h / 'ssh' / 'ssh_host_ed25519_key'}\n"
        f"PidFile {h / 'ssh' / 'sshd.pid'}\nAuthorizedKeysFile {h / 'ssh' / 'authorized_keys'}\n"
        "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        f"PermitRootLogin no\nAllowUsers {user}\nStrictModes no\nPrintMotd no\nX11Forwarding no\n"
        "Subsystem sftp internal-sftp\n")


def server_properties(b: int, h: Path, zk_connect: str, settings: dict) -> dict:
    ip = broker_ip(b)
    return {
        "broker.id": b,
        "listeners": f"{CLIENT_LISTENER}://{ip}:{KAFKA_CLIENT_PORT},{REPLICATION_LISTENER}://{ip}:{KAFKA_REPLICATION_PORT}",
        "advertised.listeners": f"{CLIENT_LISTENER}://{ip}:{KAFKA_CLIENT_PORT},{REPLICATION_LISTENER}://{host_name(b)}:{KAFKA_REPLICATION_PORT}",
        "listener.security.protocol.map": f"{CLIENT_LISTENER}:PLAINTEXT,{REPLICATION_LISTENER}:PLAINTEXT",
        "inter.broker.listener.name": REPLICATION_LISTENER,
        "zookeeper.connect": zk_connect,
        "log.dirs": str(h / "data"),
        **settings,
    }


def _script_header(b: int, h: Path, what: str) -> str:
    return f"""#!/bin/bash
# {what}
# Broker {b} of the kafka-runbooks lab, host {broker_ip(b)} (user {host_user(b)}). Generated by kafka_lab/hosts.py.
set -u
HOST_DIR={shlex.quote(str(h))}
PIDFILE="$HOST_DIR/run/kafka.pid"
CONFIG="$HOST_DIR/config/server.properties"
# the pid in the pid file, if that process is alive (not a zombie) and is this broker's JVM
proc_alive() {{ local s; s=$(sed -E 's/^.*\\) (.).*$/\\1/' "/proc/$1/stat" 2>/dev/null) || return 1; [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; }}
running_pid() {{
  local p; p=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$p" ] && proc_alive "$p" && tr '\\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF "$CONFIG" && echo "$p"
}}
"""


def control_scripts(b: int, h: Path, kafka_home: Path, agent_jar: Path, kafka: str = "2.3.0") -> dict[str, str]:
    ip = broker_ip(b)
    old = kafka.startswith("0.")
    jmx = (f"-Dcom.sun.management.jmxremote -Dcom.sun.management.jmxremote.authenticate=false "
           f"-Dcom.sun.management.jmxremote.ssl=false -Dcom.sun.management.jmxremote.host={ip} "
           f"-Dcom.sun.management.jmxremote.rmi.port={JMX_PORT} -Djava.rmi.server.hostname={ip}")
    opens = " ".join(f"--add-opens={m}=ALL-UNNAMED" for m in AGENT_OPENS)
    kafka_opts = (f"-Dzookeeper.sasl.client=false -Djava.io.tmpdir={h / 'tmp'} "
                  f"-javaagent:{agent_jar}={h / 'run'} {opens}")
    if old:
        kafka_opts += "".join(f" --add-exports={m}=ALL-UNNAMED" for m in OLD_JDK_EXPORTS)
    gc = f'export KAFKA_GC_LOG_OPTS="{OLD_GC_LOG_OPTS}"\n' if old else ""
    start = _script_header(b, h, "kafka-start: starts the broker detached and returns at once, like `systemctl start`.") + f"""
# It does not wait for the broker nor retry: a broker that dies on start (e.g. its previous ZooKeeper session still
# holds /brokers/ids/{b}) leaves Kafka's own error in logs/server.log and logs/kafkaServer.out.
if pid=$(running_pid); then echo "broker {b} already running (pid $pid)"; exit 0; fi
rm -f "$PIDFILE" "$HOST_DIR/run/fault-command" "$HOST_DIR/run/fault-state.json"
unset KAFKA_DEBUG KAFKA_GC_LOG_OPTS EXTRA_ARGS CLASSPATH SCALA_VERSION
export KAFKA_HOME={shlex.quote(str(kafka_home))}
export LOG_DIR="$HOST_DIR/logs"
export KAFKA_LOG4J_OPTS="-Dlog4j.configuration=file:$HOST_DIR/config/log4j.properties"
export KAFKA_HEAP_OPTS={shlex.quote(HEAP_OPTS)}
export KAFKA_JVM_PERFORMANCE_OPTS={shlex.quote(JVM_PERFORMANCE_OPTS)}
export JMX_PORT={JMX_PORT}
export KAFKA_JMX_OPTS={shlex.quote(jmx)}
export KAFKA_OPTS={shlex.quote(kafka_opts)}
{gc}cd "$HOST_DIR"
# kafka-server-start.sh runs kafka-run-class.sh with "-name kafkaServer -loggc": GC log in logs/kafkaServer-gc.log.
# The child writes its own pid before exec'ing, so the pid file names the JVM whatever setsid does.
setsid nohup bash -c 'echo $$ >"$0"; exec "$1/bin/kafka-server-start.sh" "$2"' "$PIDFILE" "$KAFKA_HOME" "$CONFIG" \\
  >>"$LOG_DIR/kafkaServer.out" 2>&1 </dev/null &
for _ in $(seq 100); do [ -s "$PIDFILE" ] && break; sleep 0.05; done
pid=$(cat "$PIDFILE" 2>/dev/null)
[ -n "$pid" ] || {{ echo "broker {b}: no pid file after launch" >&2; exit 1; }}
echo "broker {b} launched (pid $pid)"
"""
    stop = _script_header(b, h, "kafka-stop: SIGTERM (Kafka's controlled shutdown), then waits up to KAFKA_STOP_TIMEOUT_S (default 30).") + f"""
# Exit 0 once the JVM is gone; exit 1 if it is still alive then. It never sends SIGKILL: that is kafka-kill's.
pid=$(running_pid) || {{ echo "broker {b} is not running"; exit 0; }}
timeout=${{KAFKA_STOP_TIMEOUT_S:-30}}
kill -TERM "$pid" || exit 1
deadline=$((SECONDS + timeout))
while proc_alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
if proc_alive "$pid"; then
  echo "broker {b} (pid $pid) is still running ${{timeout}}s after SIGTERM: its shutdown is stuck; not killed (use kafka-kill)" >&2
  exit 1
fi
echo "broker {b} stopped (pid $pid)"
"""
    kill = _script_header(b, h, "kafka-kill: SIGKILL, no shutdown at all; its ZooKeeper session lives until it times out.") + f"""
pid=$(running_pid) || {{ echo "broker {b} is not running"; exit 0; }}
kill -KILL "$pid" || exit 1
for _ in $(seq 200); do proc_alive "$pid" || break; sleep 0.05; done
if proc_alive "$pid"; then echo "broker {b} (pid $pid) still alive after SIGKILL" >&2; exit 1; fi
# A killed JVM leaves its attach socket; jstack on the next JVM given this pid would fail on it.
rm -f "/tmp/.java_pid$pid"
echo "broker {b} killed (pid $pid)"
"""
    return {"kafka-start": start, "kafka-stop": stop, "kafka-kill": kill}


def write_server_properties(h: Path, b: int, zk_connect: str, settings: dict, kafka: str = "2.3.0") -> None:
    props = server_properties(b, h, zk_connect, settings)
    (h / "config" / "server.properties").write_text(
        f"# Apache Kafka {kafka} broker of the kafka-runbooks lab (kafka_lab/hosts.py; lab profile in kafka_lab/profile.py)\n"
        + "".join(f"{k}={v}\n" for k, v in props.items()))


def write_broker_host(h: Path, b: int, kafka_home: Path, agent_jar: Path, zk_connect: str, settings: dict,
                      kafka: str = "2.3.0") -> None:
    user = host_user(b)
    for sub in ("bin", "config", "logs", "run", "data", "tmp"):
        (h / sub).mkdir(parents=True, exist_ok=True)
    write_server_properties(h, b, zk_connect, settings, kafka)
    shutil.copyfile(kafka_home / "config" / "log4j.properties", h / "config" / "log4j.properties")
    for name, text in control_scripts(b, h, kafka_home, agent_jar, kafka).items():
        p = h / "bin" / name
        p.write_text(text)
        os.chmod(p, 0o755)
    run(["chown", "-R", f"{user}:{user}", *(str(h / d) for d in ("logs", "run", "data", "tmp"))])
    os.chmod(h / "tmp", 0o700)


def ssh_client(b: int, key_file: Path, known_hosts: Path, timeout: float = 10):
    """A paramiko client logged into host b as its user, with the pinned host key (RejectPolicy)."""
    return ssh_client_at(broker_ip(b), host_user(b), key_file, known_hosts, timeout)


def ssh_client_at(ip: str, user: str, key_file: Path, known_hosts: Path, timeout: float = 10):
    import paramiko

    c = paramiko.SSHClient()
    c.load_host_keys(str(known_hosts))
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    c.connect(ip, port=SSH_PORT, username=user, key_filename=str(key_file), look_for_keys=False,
              allow_agent=False, timeout=timeout, banner_timeout=timeout, auth_timeout=timeout)
    return c


def ssh_run(b: int, argv: list[str], key_file: Path, known_hosts: Path, timeout: float = 60) -> tuple[int, str, str]:
    """Runs argv (quoted, never a shell string built from values) on host b; (exit status, stdout, stderr)."""
    return ssh_run_at(broker_ip(b), host_user(b), argv, key_file, known_hosts, timeout)


def ssh_run_at(ip: str, user: str, argv: list[str], key_file: Path, known_hosts: Path, timeout: float = 60) -> tuple[int, str, str]:
    c = ssh_client_at(ip, user, key_file, known_hosts)
    try:
        _, out, err = c.exec_command(shlex.join(argv), timeout=timeout)
        o, e = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        return out.channel.recv_exit_status(), o, e
    finally:
        c.close()
