"""Read and planning paths at scale (issue 18 §4), on the lab's real ZooKeeper ensemble; prints figures beside their
budgets and asserts nothing.

    KAFKA_RUNBOOKS_SLOT=N python benchmarks/scale.py [--brokers 100] [--partitions 100000] [--parts big,health]
                                                     [--no-compare-kazoo]

1. The metadata of a big cluster (100 brokers, 100,000 partitions, RF 3 by default; no broker behind it) is written
   into a single ZooKeeper 3.8 server of this slot (127.S.2.1, Debian's, 1 GB heap: the lab's nodes run with 96 MB,
   too little for 200,000 znodes) by ``kafka_lab.bigcluster``: the snapshot read (``read_snapshot``, median of three,
   with this process's CPU time beside the wall time: on a shared machine most of the wall is waiting for a CPU; and
   the same read through kazoo alone, the reader before, side by side), the detectors on it, the rolling-restart plan of every broker (time, and its size as it travels in
   XCom and in the approval's text), and what the health check's snapshot task passes in XCom (the snapshot's ref; the
   snapshot itself is kept in the state database).
2. The health check's observation (``take_snapshot``: direct Kafka checks, SSH host probes, JMX and leadership reads,
   the ZooKeeper ensemble's four-letter words) of N registered brokers: the lab's 3 real brokers plus N-3 fakes
   registered under another chroot, whose addresses (127.S.3.x) refuse every connection, for N = 3, 25, 50, 100.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
sys.path[:0] = [str(REPO / "lab"), str(REPO / "plugins")]

MB = 1024 * 1024
BIG_ROOT = "/bench-scale"
HEALTH_ROOT = "/bench-health"
ISSUE_FIGURES = {"snapshot": "8.0 s at 50,050 partitions", "detect": "0.14 s at 50,050 partitions",
                 "plan": "28.8 MB at 60 brokers x 50,050 partitions",
                 # measured by this bench on the integration branch (9ec453e) at 100 brokers x 100,000 partitions
                 "plan_time": "42.9 s (integration 9ec453e)", "plan_xcom": "55.3 MB (integration 9ec453e)",
                 "snapshot_xcom": "17.2 MB (integration 9ec453e)"}


def row(name: str, value: str, budget: str = "", before: str = "") -> None:
    print(f"{name:<58} {value:<28} {budget:<14} {before}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--brokers", type=int, default=100)
    p.add_argument("--partitions", type=int, default=100_000)
    p.add_argument("--health-sizes", default="3,25,50,100")
    p.add_argument("--parts", default="big,health", help="big (the 100,000-partition paths), health (the health check)")
    p.add_argument("--no-compare-kazoo", dest="compare_kazoo", action="store_false",
                   help="skip reading the big snapshot through kazoo alone too (the reader before; slow)")
    a = p.parse_args(argv)
    import logging

    for name in ("kazoo", "paramiko", "airflow", "kafka_runbooks"):
        logging.getLogger(name).setLevel(logging.ERROR)
    from kafka_lab import Lab

    state = REPO / "var" / "bench-scale"
    print(f"{'figure':<58} {'value':<28} {'budget':<14} issue 18's figure before", flush=True)
    if "big" in a.parts:
        with SingleZooKeeper(state / "zookeeper") as hosts:
            big_cluster(hosts, a.brokers, a.partitions, a.compare_kazoo)
        print()
    if "health" in a.parts:  # the lab's real brokers answer for the first three
        lab = Lab(state / "lab")
        t0 = time.monotonic()
        lab.up()
        print(f"(lab up in {time.monotonic() - t0:.1f} s; load average {os.getloadavg()[0]:.1f})", flush=True)
        try:
            os.environ.update(lab.airflow_env())
            health_check_sizes(lab, [int(n) for n in a.health_sizes.split(",") if n.strip()])
        finally:
            lab.down()
    return 0


def _client(chroot: str, hosts: str | None = None):
    from kafka_runbooks.zookeeper import kazoo_client

    zk = kazoo_client(hosts or _zk(), chroot, timeout_s=30.0)
    zk.start(timeout=60)
    return zk


class SingleZooKeeper:
    """A standalone ZooKeeper server of this slot for the big tree (its data under ``state``, removed at exit)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.proc = None

    def __enter__(self) -> str:
        import shutil
        import subprocess

        from kafka_lab import net
        from kafka_lab.procs import wait_until
        from kafka_lab.zookeeper import SERVER_CP
        from kafka_runbooks.zookeeper import four_letter

        host, port = net.service_ip("zookeeper"), net.ZK_CLIENT_PORT
        shutil.rmtree(self.state, ignore_errors=True)
        (self.state / "data").mkdir(parents=True)
        (self.state / "zoo.cfg").write_text(f"tickTime=2000\ndataDir={self.state / 'data'}\nclientPort={port}\n"
                                            f"clientPortAddress={host}\nmaxClientCnxns=0\n4lw.commands.whitelist=srvr\n"
                                            "admin.enableServer=false\n")
        (self.state / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.state / 'zookeeper.log'}\nlog4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %m%n\n")
        out = open(self.state / "stdout.log", "wb")
        self.proc = subprocess.Popen(["java", "-Xmx1g", "-XX:+UseG1GC", "-cp", ":".join([str(self.state), *SERVER_CP]),
                                      "org.apache.zookeeper.server.ZooKeeperServerMain", str(self.state / "zoo.cfg")],
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        wait_until(lambda: "Mode: standalone" in four_letter(host, port, "srvr"), 120, f"ZooKeeper on {host}:{port}", interval=0.5)
        return f"{host}:{port}"

    def __exit__(self, *exc) -> None:
        import shutil

        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except Exception:  # noqa: BLE001
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.state / "data", ignore_errors=True)


def big_cluster(hosts: str, brokers: int, partitions: int, compare_kazoo: bool) -> None:
    from kafka_lab.bigcluster import write_cluster
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.detectors import detect
    from kafka_runbooks.detect.history import HistoryStore
    from kafka_runbooks.detect.record import record_check
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.runbook import plans
    from kafka_runbooks.runbook.restart import GATES, ROLLING_RESTART
    from kafka_runbooks.model import Plan
    from kafka_runbooks.remediate.briefing import approval_body
    from kafka_runbooks.remediate.digest import plan_digest
    from kafka_runbooks.remediate.plan import plan_restart, safety_settings

    writer = _client("", hosts)
    try:
        info = write_cluster(writer, BIG_ROOT, brokers=brokers, partitions=partitions)
        row(f"metadata written ({info['znodes']:,} znodes, {brokers} brokers, {partitions:,} partitions, RF 3)",
            f"{info['seconds']:.1f} s")
        zk = _client(BIG_ROOT, hosts)
        try:
            times, cpu = [], []
            for _ in range(3):
                t, c = time.monotonic(), time.process_time()
                snapshot = read_snapshot(zk, "scale")
                times.append(time.monotonic() - t)
                cpu.append(time.process_time() - c)
            assert len(snapshot.partitions) == partitions and len(snapshot.brokers) == brokers, snapshot.unparsable[:5]
            wall = statistics.median(times)
            row(f"snapshot read ({partitions:,} partitions), median of 3", f"{wall:.2f} s ({min(times):.2f}-{max(times):.2f})",
                "<= 5 s", ISSUE_FIGURES["snapshot"])
            row("  this process's CPU time in it (the rest: waiting for a CPU)", f"{statistics.median(cpu):.2f} s "
                f"(load average {os.getloadavg()[0]:.1f})")
            if compare_kazoo:
                t, c = time.monotonic(), time.process_time()
                plain = read_snapshot(zk, "scale", pipelined=False)
                took, took_cpu = time.monotonic() - t, time.process_time() - c
                row("  the same read through kazoo alone (the reader before)",
                    f"{took:.2f} s (x{took / wall:.1f}), CPU {took_cpu:.2f} s (x{took_cpu / statistics.median(cpu):.1f})")
                assert len(plain.partitions) == partitions
        finally:
            zk.stop()
            zk.close()

        from kafka_runbooks.xcom_size import xcom_bytes

        config = ClusterConfig.from_dict("scale", {"zk_conn_id": "scale_zk", "hosts": {str(b): f"scale_host_{b}" for b in range(1, brokers + 1)},
                                                   "kafka_version": "2.3.0"})
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            from kafka_runbooks.state import StateDb
            from kafka_runbooks.state.snapshots import Snapshots

            # the snapshot task keeps the snapshot in the state database and passes its ref (state/snapshots.py)
            kept = Snapshots(StateDb.embedded(tmp))
            t = time.monotonic()
            ref = kept.put(snapshot)
            put_s = time.monotonic() - t
            t = time.monotonic()
            assert kept.get(ref) == snapshot
            get_s = time.monotonic() - t
            row("  the snapshot as the health check's XCom (snapshot -> detect: its ref)", f"{xcom_bytes(ref.to_dict())} B",
                "<= 1 MB", ISSUE_FIGURES["snapshot_xcom"] + f"; the whole snapshot as JSON: {xcom_bytes(snapshot.to_dict()) / MB:.1f} MB")
            row("  kept in / read back from the state database (embedded SQLite)", f"{put_s:.2f} s / {get_s:.2f} s "
                f"({ref.compressed_bytes / MB:.1f} MB compressed)")

            history = record_check(HistoryStore(StateDb.embedded(tmp), "scale", config.health.history_samples), snapshot)
            t = time.monotonic()
            findings = detect(snapshot, config.health, history, config.zookeeper_health, leadership=config.leadership,
                              kafka_version=config.kafka_version)
            took = time.monotonic() - t
        row(f"detect ({len(findings)} findings)", f"{took:.2f} s", "<= 1 s", ISSUE_FIGURES["detect"])
        row("  the findings as XCom", f"{xcom_bytes([f.to_dict() for f in findings]) / MB:.2f} MB", "<= 1 MB")

        everyone = list(range(1, brokers + 1))
        t, c = time.monotonic(), time.process_time()
        plan = plan_restart(snapshot, everyone, config, kind=ROLLING_RESTART, settings=safety_settings(config, {}), roll_id="bench-scale")
        digest = plan_digest(plan)
        took, took_cpu = time.monotonic() - t, time.process_time() - c
        xcom = plans.output(plan, digest)  # what travels: the reference; the plan itself is in the state database
        size = xcom_bytes(xcom)
        commands = {s.broker_id: {w: config.argv(f"{w}_command", s.broker_id) for w in ("stop", "start", "kill")} for s in plan.steps}
        travelled = Plan.from_dict(json.loads(json.dumps(plan.to_dict())))
        t = time.monotonic()
        body = approval_body([], travelled, report_path=None, approval_timeout="1:00:00", commands=commands, digest=digest, gates=GATES)
        body_took = time.monotonic() - t
        lines = sum(len(v) for v in plan.detail.effects.values()) if plan.detail is not None else None
        row(f"rolling-restart plan of all {brokers} brokers ({len(plan.steps)} steps, {len(plan.refusals)} refusals)",
            f"{took:.2f} s (CPU {took_cpu:.2f} s)", "<= 5 s", ISSUE_FIGURES["plan_time"])
        row("  the plan task's XCom (the recorded plan's reference)", f"{size / MB:.4f} MB", "<= 1 MB",
            f"{ISSUE_FIGURES['plan_xcom']}; {ISSUE_FIGURES['plan']}")
        row("  the approval's text (HITL body)", f"{len(body.encode()) / MB:.2f} MB ({body_took:.2f} s)", "<= 1 MB")
        row("  the recorded plan (its planned entry; sealed in the ledger and krb_approval)", f"{xcom_bytes(plan.to_dict()) / MB:.2f} MB", "<= 1 MB")
        # every partition led by its second replica: the election of a whole unbalanced cluster
        from kafka_runbooks.remediate.election import plan_election

        unbalanced = dataclasses.replace(snapshot, partitions=tuple(dataclasses.replace(p, leader=p.replicas[1]) for p in snapshot.partitions))
        t = time.monotonic()
        election = plan_election(unbalanced, config)
        took = time.monotonic() - t
        moved = sum(len(b.partitions) for b in election.batches)
        row(f"election plan of a whole unbalanced cluster ({moved:,} of {partitions:,} partitions, {len(election.batches):,} batches)",
            f"{took:.2f} s; XCom {xcom_bytes(election.to_dict()) / MB:.2f} MB", "<= 1 MB",
            f"at most election.max_partitions ({config.election.max_partitions:,}) per election")
        if lines is not None:
            import tempfile as _t

            from kafka_runbooks.state import StateDb
            from kafka_runbooks.state.plans import PlanDetails

            with _t.TemporaryDirectory(prefix="bench-plan-detail-") as tmp:
                db = StateDb.embedded(tmp)
                t = time.monotonic()
                PlanDetails(db).put("bench-scale", digest, plan)
                put_took = time.monotonic() - t
                t = time.monotonic()
                back = PlanDetails(db).with_detail(travelled, "bench-scale", digest)
                get_took = time.monotonic() - t
                stored = sum(f.stat().st_size for f in Path(tmp).glob("kafka_runbooks.sqlite*"))  # the WAL too
            assert back.detail is not None
            row(f"  the whole blast radius ({lines:,} lines) kept in the state database",
                f"{stored / MB:.1f} MB; put {put_took:.2f} s, read {get_took:.2f} s")
    finally:
        writer.stop()
        writer.close()


def health_check_sizes(lab, sizes: list[int]) -> None:
    """take_snapshot of the lab's 3 brokers plus fakes, registered under their own chroot (the lab's brokers never see
    them): every check, probe and JMX read of a fake is refused at once (nothing listens on 127.S.3.x)."""
    from kafka_lab import net
    from kafka_lab.bigcluster import registration
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.observe import take_snapshot

    base = lab.cluster_settings()["lab"]
    real = {b: lab.registration(b)[0] for b in (1, 2, 3)}
    key = lab.key_file.read_text()
    for n in sizes:
        root = f"{HEALTH_ROOT}-{n}"
        writer = _client("")
        try:
            if writer.exists(root):
                writer.delete(root, recursive=True)
            for path in ("", "/brokers", "/brokers/ids", "/brokers/topics", "/config", "/config/topics"):
                writer.create(root + path, b"")
            for (topic, part), st in lab.partitions().items():  # the lab's topics, as they are now
                if not writer.exists(f"{root}/brokers/topics/{topic}"):
                    assignment = {str(p): s["replicas"] for (t, p), s in lab.partitions([topic]).items()}
                    writer.create(f"{root}/brokers/topics/{topic}", json.dumps({"version": 1, "partitions": assignment}).encode())
                    writer.create(f"{root}/config/topics/{topic}", json.dumps({"version": 1, "config": {}}).encode())
                writer.create(f"{root}/brokers/topics/{topic}/partitions/{part}/state",
                              json.dumps({k: st[k] for k in ("leader", "isr", "leader_epoch", "controller_epoch") if k in st}).encode(),
                              makepath=True)
            for b in range(1, n + 1):
                data = json.dumps(real[b]).encode() if b in real else registration(b, f"127.{100 + net.slot()}.3.{b}")
                writer.create(f"{root}/brokers/ids/{b}", data, ephemeral=True)
            writer.create(f"{root}/controller", json.dumps({"version": 1, "brokerid": 1, "timestamp": "0"}).encode(), ephemeral=True)
            conn = f"bench_health_zk_{n}"
            os.environ[f"AIRFLOW_CONN_{conn.upper()}"] = json.dumps({"conn_type": "generic", "host": _zk(), "extra": {"chroot": root}})
            hosts = {}
            for b in range(1, n + 1):
                if b in real:
                    hosts[str(b)] = base["hosts"][str(b)]
                    continue
                cid = f"bench_fake_host_{b}"
                hosts[str(b)] = cid
                os.environ[f"AIRFLOW_CONN_{cid.upper()}"] = json.dumps({
                    "conn_type": "ssh", "host": f"127.{100 + net.slot()}.3.{b}", "port": net.SSH_PORT, "login": "kafka",
                    "extra": {"private_key": key, "host_key": lab.host_key(1), "no_host_key_check": False, "conn_timeout": 5}})
            settings = {**base, "zk_conn_id": conn, "hosts": hosts, "incident_base": tempfile.mkdtemp(prefix="bench-health-")}
            config = ClusterConfig.from_dict("lab", settings)
            times = []
            for _ in range(2):
                t = time.monotonic()
                snapshot = take_snapshot(config)
                times.append(time.monotonic() - t)
            answered = sum(1 for c in snapshot.kafka_checks if c.ok)
            row(f"health check observation of {n} registered brokers ({n - 3} fakes), two runs", f"{times[0]:.1f} s, {times[1]:.1f} s",
                "", f"direct checks answered {answered}/{len(snapshot.kafka_checks)}, host probes {len(snapshot.probes)}")
        finally:
            writer.stop()
            writer.close()


def _zk() -> str:
    from kafka_lab import zk_connect

    return zk_connect()


if __name__ == "__main__":
    sys.exit(main())
