"""Analysis speed: 100 MB, 500 MB and 1 GB bundles of broker logs, the Spark job vs ``rg -c``.

    python benchmarks/analysis.py [--sizes 100,500,1000] [--runs 2] [--keep DIR]

Builds each bundle from the project's own fixtures (real Kafka 2.3.0 broker logs of tests/analyze/fixtures/real23
and the seed post-mortem excerpts), repeated and re-timed (every repetition moves the timestamps forward an
hour), three brokers' server.log plus the small evidence of a capture (jstack, socket tables, ZooKeeper logs).
Then, per size and run, in one fresh ``spark-submit --master local[2]`` with Spark's default driver/executor
memory (``--log-scan auto``, as deployed: the big logs are read by ripgrep inside the Spark tasks when rg is on the
executors, as it is here; each line says which scan read them, ``log_scan``):

- the application start, measured apart (the issue's "JVM start excluded and reported separately"): the JVM and
  the SparkSession, then the PySpark workers (the application's first Python job, a trivial map: the Python
  daemon forks its workers; every PySpark application pays it once, whatever it then reads);
- the analysis in that fresh application: the job's own end-to-end time (survey, scan, Parquet, aggregates,
  findings, report) on the first run: class loading of the job's code paths, imports in the workers, JIT
  warm-up included. MB/s = bundle log bytes / that time; the same figure with the workers' start added is
  printed beside it (what a run without the warm-up pays);
- the same job again in the same (now warm) application, into another output: the steady-state rate of a
  long-lived Spark application (e.g. a Spark Connect server);
- the same job with the pure Spark (JVM) scan (``log_scan="jvm"``, the fallback when an executor has no rg), and
  whether its findings equal the native scan's;
- ``rg -c`` with the same signature set (every pattern of analyze/signatures.py) on the same files, right after;
- Spark's floor: ``spark.read.text(files).count()`` in the same session (reading lines and nothing else).

Prints one table. The machine is shared: figures vary between runs (each is printed, with the load average).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "analyze" / "fixtures"
BROKER_SOURCES = {  # broker id -> fixture logs whose lines make up its server.log
    1: ["real23/broker1.server.log.start", "real23/broker1.server.log.pause", "real23/broker1.server.log.badrequest",
        "real23/broker1.server.log.restart", "seed001_217_server.log"],
    2: ["real23/broker2.server.log.shutdown", "seed001_218_server.log", "real23/broker1.controller.log"],
    3: ["real23/broker3.server.log", "seed001_219_server.log", "real23/broker1.kafkaServer.out"],
}
SMALL = [("hosts/3/jstack-1.out", "jstack", 3, "jdk17_live_sample.jstack.txt"),
         ("hosts/3/sockets-ss.out", "sockets_ss", 3, "real23/ss-tanp.txt"),
         ("zk/1/zookeeper.log", "zk_log", None, "real23/zk1.zookeeper.log"),
         ("zk/2/zookeeper.log", "zk_log", None, "real23/zk2.zookeeper.log"),
         ("zk/3/zookeeper.log", "zk_log", None, "real23/zk3.zookeeper.log")]
_TS = re.compile(rb"^\[(\d{4}-\d\d-\d\d \d\d):", re.M)


def _block(sources: list[str]) -> bytes:
    """One repetition: the fixture logs with every '[YYYY-MM-DD HH:' prefix set to a template hour."""
    parts = []
    for s in sources:
        data = (FIX / s).read_bytes()
        if not data.endswith(b"\n"):
            data += b"\n"
        parts.append(_TS.sub(b"[2026-01-01 00:", data))
    return b"".join(parts)


def build_bundle(root: Path, size_mb: int) -> tuple[Path, list[Path], int]:
    """A capture bundle with ~size_mb MB of broker logs; returns (bundle dir, log files, log bytes)."""
    b = root / f"bundle-{size_mb}mb"
    if b.exists():
        shutil.rmtree(b)
    (b / "hosts").mkdir(parents=True)
    files, logs, total = [], [], 0
    per_broker = size_mb * 1_000_000 // len(BROKER_SOURCES)
    for bid, sources in BROKER_SOURCES.items():
        block = _block(sources)
        path = b / "hosts" / str(bid) / "server.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        n, k = 0, 0
        with open(path, "wb") as fh:
            while n < per_broker:
                day, hour = 1 + k // 24, k % 24  # re-time: each repetition is the next hour
                chunk = block.replace(b"[2026-01-01 00:", f"[2026-01-{day:02d} {hour:02d}:".encode())
                chunk = chunk[: per_broker - n] if n + len(chunk) > per_broker else chunk
                if n + len(chunk) >= per_broker:  # end on a whole line
                    chunk = chunk[: chunk.rfind(b"\n") + 1]
                fh.write(chunk)
                h.update(chunk)
                n += len(chunk)
                k += 1
                if not chunk:
                    break
        files.append({"path": f"hosts/{bid}/server.log", "broker_id": bid, "host": f"10.0.0.{bid}", "kind": "server_log",
                      "command": "tail", "stream": "stdout", "bytes": n, "sha256": h.hexdigest()})
        logs.append(path)
        total += n
    for rel, kind, bid, src in SMALL:
        data = (FIX / src).read_bytes()
        p = b / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        files.append({"path": rel, "broker_id": bid, "host": None, "kind": kind, "command": kind, "stream": "stdout",
                      "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
        if kind == "zk_log":
            logs.append(p)
            total += len(data)
    manifest = {"schema": "kafka-runbooks/evidence-bundle/v1", "incident_id": f"bench-{size_mb}", "cluster": "bench",
                "created_at": "2026-02-01T00:00:00Z", "finished_at": "2026-02-01T00:01:00Z", "trigger": None,
                "hosts": {}, "commands": [], "files": files}
    (b / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return b, logs, total


INNER = r'''
import json, sys, time
t0 = time.monotonic()
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("kafka-runbooks-bench").getOrCreate()
spark.sparkContext.setLogLevel("ERROR")
t_session = time.monotonic() - t0
t = time.monotonic()  # the application's first Python job: the PySpark daemon forks its workers
spark.sparkContext.parallelize([0, 1], 2).map(lambda x: x).collect()
t_workers = time.monotonic() - t
sys.path.insert(0, sys.argv[3])
import analyze_bundle
t1 = time.monotonic()
doc = analyze_bundle.run(spark, sys.argv[1], sys.argv[2])
t_run = time.monotonic() - t1
t3 = time.monotonic()
doc2 = analyze_bundle.run(spark, sys.argv[1], sys.argv[2] + "-warm")
t_warm = time.monotonic() - t3
assert doc2["findings"] == doc["findings"]
t4 = time.monotonic()
doc3 = analyze_bundle.run(spark, sys.argv[1], sys.argv[2] + "-jvm", log_scan="jvm")
t_jvm = time.monotonic() - t4
files = json.loads(sys.argv[4])
t2 = time.monotonic()
lines = spark.read.text(files).count()
t_floor = time.monotonic() - t2
spark.stop()
print("BENCH " + json.dumps({"session_s": t_session, "workers_s": t_workers, "run_s": t_run, "warm_s": t_warm,
                             "floor_s": t_floor, "lines": lines, "findings": len(doc["findings"]),
                             "timings": doc.get("timings"), "warm_timings": doc2.get("timings"), "jvm_s": t_jvm,
                             "jvm_timings": doc3.get("timings"), "same_findings": doc3["findings"] == doc["findings"]}))
'''


def _submit(script: str, args: list[str]) -> tuple[dict, float]:
    env = dict(os.environ)
    venv_bin = Path(sys.executable).parent
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}",
                "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), env.get("PYTHONPATH", "")])})
    env.pop("SPARK_HOME", None)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(script)
        inner = fh.name
    try:
        t = time.monotonic()
        r = subprocess.run([str(venv_bin / "spark-submit"), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                            "--conf", "spark.ui.showConsoleProgress=false", inner, *args],
                           env=env, capture_output=True, text=True, timeout=3600)
        wall = time.monotonic() - t
    finally:
        os.unlink(inner)
    line = next((l for l in r.stdout.splitlines() if l.startswith("BENCH ")), None)
    if r.returncode != 0 or line is None:
        raise RuntimeError(f"spark-submit failed ({r.returncode}): {r.stderr[-3000:]}")
    return json.loads(line[6:]), wall


def run_job(bundle: Path, out: Path, logs: list[Path]) -> dict:
    res, wall = _submit(INNER, [str(bundle), str(out), str(REPO / "spark_apps"), json.dumps([str(p) for p in logs])])
    res["wall_s"] = wall
    return res


def rg_patterns() -> list[str]:
    sys.path.insert(0, str(REPO / "plugins"))
    from kafka_runbooks.analyze.signatures import SIGNATURES, java_pattern

    # rg joins -e patterns into one alternation: group names would clash, so use numbered groups
    return [java_pattern(s.pattern)[0] for s in SIGNATURES]


def run_rg(logs: list[Path], patterns: list[str]) -> tuple[float, int]:
    args = ["rg", "-c", "--no-filename", "--regex-size-limit", "1G", "--dfa-size-limit", "1G"]
    for p in patterns:
        args += ["-e", p]
    t = time.monotonic()
    r = subprocess.run(args + [str(p) for p in logs], capture_output=True, text=True, timeout=600)
    d = time.monotonic() - t
    if r.returncode not in (0, 1):
        raise RuntimeError(f"rg failed: {r.stderr[-2000:]}")
    return d, sum(int(x) for x in r.stdout.split() if x.isdigit())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="analysis speed vs rg")
    ap.add_argument("--sizes", default="100,500,1000", help="bundle sizes in MB (decimal)")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--keep", default=None, help="build bundles here and keep them (default: a temp dir, removed)")
    args = ap.parse_args(argv)
    if not shutil.which("rg"):
        print("ripgrep (rg) is not installed: the comparison needs it (Debian package ripgrep)", file=sys.stderr)
        return 2
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="kafka-runbooks-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    patterns = rg_patterns()
    rows = []
    try:
        for size in [int(x) for x in args.sizes.split(",") if x.strip()]:
            bundle, logs, nbytes = build_bundle(root, size)
            mb = nbytes / 1e6
            for run in range(1, args.runs + 1):
                load = os.getloadavg()[0]
                res = run_job(bundle, root / f"out-{size}-{run}", logs)
                rg_s, rg_lines = run_rg(logs, patterns)
                r = {"size_mb": round(mb), "run": run, "load": load, "load_after": os.getloadavg()[0], "rg_s": rg_s,
                     "rg_lines": rg_lines, "session_s": res["session_s"], "workers_s": res["workers_s"],
                     "wall_s": res["wall_s"], "fresh_s": res["run_s"], "cold_s": res["run_s"] + res["workers_s"],
                     "warm_s": res["warm_s"], "jvm_s": res["jvm_s"], "floor_s": res["floor_s"],
                     "same_findings": res["same_findings"], "findings": res["findings"],
                     "log_scan": (res.get("timings") or {}).get("log_scan"),
                     "jvm_log_scan": (res.get("jvm_timings") or {}).get("log_scan"),
                     "timings": res.get("timings"), "warm_timings": res.get("warm_timings")}
                for k in ("fresh", "cold", "warm", "jvm", "floor"):
                    r[k + "_mb_s"], r[k + "_x"] = mb / r[k + "_s"], r[k + "_s"] / rg_s
                rows.append(r)
                print(f"{r['size_mb']:>6} MB run {run}: app start: JVM+session {r['session_s']:.2f} s, PySpark workers "
                      f"{r['workers_s']:.2f} s | analysis in the fresh app (log scan {r['log_scan']}) {r['fresh_s']:.2f} s = "
                      f"{r['fresh_mb_s']:.0f} MB/s = {r['fresh_x']:.1f}x rg; with the workers' start {r['cold_s']:.2f} s = "
                      f"{r['cold_mb_s']:.0f} MB/s = {r['cold_x']:.1f}x rg | same job again (warm app) {r['warm_s']:.2f} s = "
                      f"{r['warm_mb_s']:.0f} MB/s = {r['warm_x']:.1f}x rg | rg -c {rg_s:.2f} s ({rg_lines} lines) | pure "
                      f"Spark (JVM) scan (log scan {r['jvm_log_scan']}) {r['jvm_s']:.2f} s = {r['jvm_mb_s']:.0f} MB/s = "
                      f"{r['jvm_x']:.1f}x rg, same findings: {'yes' if r['same_findings'] else 'NO'} | Spark text count "
                      f"{r['floor_s']:.2f} s = {r['floor_mb_s']:.0f} MB/s | spark-submit wall {r['wall_s']:.1f} s | load "
                      f"{load:.2f} -> {r['load_after']:.2f} on {os.cpu_count()} CPUs | stages, fresh {r['timings']} | "
                      f"warm {r['warm_timings']}", flush=True)
            shutil.rmtree(bundle, ignore_errors=True)
            for run in range(1, args.runs + 1):
                for suffix in ("", "-warm", "-jvm"):
                    shutil.rmtree(root / f"out-{size}-{run}{suffix}", ignore_errors=True)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print("Analysis of the bundle's logs on local[2], Spark's default memory; big logs read by ripgrep inside the Spark "
          "tasks (--log-scan auto); 'pure Spark' = the JVM scan fallback (--log-scan jvm). Medians (min-max) over the runs.")
    print("| bundle | runs | app start: JVM+session s | PySpark workers s | fresh app MB/s | x rg -c | with workers' start "
          "MB/s | x rg -c | warm app MB/s | x rg -c | pure Spark MB/s | x rg -c | same findings | rg -c s | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def med(rs, k, fmt="{:.0f}"):
        v = [r[k] for r in rs]
        m = fmt.format(statistics.median(v))
        return m if len(v) == 1 else f"{m} ({fmt.format(min(v))}-{fmt.format(max(v))})"

    verdict = []
    for size in sorted({r["size_mb"] for r in rows}):
        rs = [r for r in rows if r["size_mb"] == size]
        print(f"| {size} MB | {len(rs)} | {med(rs, 'session_s', '{:.1f}')} | {med(rs, 'workers_s', '{:.1f}')} | "
              f"{med(rs, 'fresh_mb_s')} | {med(rs, 'fresh_x', '{:.1f}')} | {med(rs, 'cold_mb_s')} | {med(rs, 'cold_x', '{:.1f}')} | "
              f"{med(rs, 'warm_mb_s')} | {med(rs, 'warm_x', '{:.1f}')} | {med(rs, 'jvm_mb_s')} | {med(rs, 'jvm_x', '{:.1f}')} | "
              f"{'yes' if all(r['same_findings'] for r in rs) else 'NO'} | {med(rs, 'rg_s', '{:.2f}')} | {med(rs, 'load', '{:.1f}')} |")
        for k, what in (("fresh", "fresh app"), ("cold", "with workers' start"), ("warm", "warm app")):
            mbs, x = statistics.median(r[k + "_mb_s"] for r in rs), statistics.median(r[k + "_x"] for r in rs)
            verdict.append(f"{size} MB {what}: {mbs:.0f} MB/s {'>=' if mbs >= 100 else '<'} 100, {x:.1f}x rg "
                           f"{'<=' if x <= 3 else '>'} 3x: {'met' if mbs >= 100 and x <= 3 else 'NOT met'}")
    print()
    print("Targets (issue 9: >= 100 MB/s and <= 3x rg -c, JVM start excluded), medians:")
    for v in verdict:
        print("  " + v)
    if not all(r["same_findings"] for r in rows):
        print("the native (rg) and the pure Spark scan gave different findings", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
