"""The lab's 3-node ZooKeeper ensemble (Debian's ZooKeeper 3.8 server), one loopback address per node.

Node z is a host of its own, like a broker host: it runs as user ``kzk<z>`` (``setpriv``, so the pid
recorded is the JVM's), with an sshd at ``zk_ip(z):2222`` (own host key, pinned in the lab's
known_hosts; key-only login of ``kzk<z>``) through which the product reads its log, zoo.cfg and GC log
and takes its jstack, as the JVM's own user. Its files: ``<state>/zk/<z>/`` (zoo.cfg, log4j.properties,
zookeeper.log, zookeeper-gc.log, data/, ssh/).
"""

from __future__ import annotations

from pathlib import Path

from kafka_runbooks.zookeeper import four_letter

from .net import ZK_CLIENT_PORT, ZK_ELECTION_PORT, ZK_QUORUM_PORT, zk_ip

ZK_IDS = (1, 2, 3)
CHROOT = "/kafka"  # the lab's brokers keep their znodes under it
TICK_TIME_MS = 500
INIT_LIMIT = 10
SYNC_LIMIT = 5  # a follower silent for SYNC_LIMIT x TICK_TIME_MS (2.5 s) is dropped by the leader
JAVA_LIB = "/usr/share/java"
SERVER_CP = [f"{JAVA_LIB}/zookeeper.jar", f"{JAVA_LIB}/slf4j-log4j12.jar", f"{JAVA_LIB}/log4j-1.2.jar", f"{JAVA_LIB}/servlet-api.jar"]


def zk_user(z: int) -> str:
    return f"kzk{int(z)}"


ZONES = {1: "lab-zone-a", 2: "lab-zone-b", 3: "lab-zone-c"}  # recorded with every follower drop


def connect_string(slot: int | None = None) -> str:
    return ",".join(f"{zk_ip(z, slot)}:{ZK_CLIENT_PORT}" for z in ZK_IDS)


def mode(z: int, timeout: float = 1.0) -> str | None:
    """leader / follower, or None when the node does not serve (quorum lost, stopped, down)."""
    try:
        out = four_letter(zk_ip(z), ZK_CLIENT_PORT, "srvr", timeout)
    except OSError:
        return None
    m = next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Mode:")), None)
    return m if m in ("leader", "follower") else None


def quorum_modes() -> dict[int, str] | None:
    """{z: mode} when every node serves and exactly one leads, else None."""
    modes = {z: mode(z) for z in ZK_IDS}
    if None in modes.values() or list(modes.values()).count("leader") != 1:
        return None
    return modes


def write_configs(node_dir) -> None:
    for z in ZK_IDS:
        d: Path = node_dir(z)
        (d / "data").mkdir(parents=True)
        (d / "data" / "myid").write_text(f"{z}\n")
        servers = "".join(f"server.{i}={zk_ip(i)}:{ZK_QUORUM_PORT}:{ZK_ELECTION_PORT}\n" for i in ZK_IDS)
        (d / "zoo.cfg").write_text(
            f"tickTime={TICK_TIME_MS}\ninitLimit={INIT_LIMIT}\nsyncLimit={SYNC_LIMIT}\ndataDir={d / 'data'}\n"
            f"clientPort={ZK_CLIENT_PORT}\nclientPortAddress={zk_ip(z)}\nmaxClientCnxns=0\n4lw.commands.whitelist=*\n"
            f"admin.enableServer=false\nstandaloneEnabled=false\n{servers}")
        (d / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={d / 'zookeeper.log'}\nlog4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n\n")


def server_argv(d: Path, user: str | None = None) -> list[str]:
    """The server's command line; with ``user``, run as that user (setpriv execs: the pid is the JVM's)."""
    java = ["java", "-Xms16m", "-Xmx96m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Dzookeeper.log.dir={d}",
            f"-Xlog:gc*:file={d / 'zookeeper-gc.log'}:time,tags:filecount=2,filesize=5M",
            "-cp", ":".join([str(d), *SERVER_CP]), "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(d / "zoo.cfg")]
    if user is None:
        return java
    return ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--", *java]
