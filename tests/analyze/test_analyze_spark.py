"""The Spark job end to end (spark-submit, local[2]) and the pyspark Python/JVM version check."""

import hashlib
import json
import os
import stat
import subprocess
import sys
import time

import pytest

from analyze_helpers import FIXTURES, REPO, VENV_BIN, fixture_bytes, spark_env

pytestmark = pytest.mark.second_lane  # ./run test runs it in its second lane, after the deployed suite (lane balance)

SEED_THREADS = ("executor-Heartbeat", "group-metadata-manager-0", "kafka-request-handler-3")


def test_pyspark_python_matches_jvm(spark):
    import pyspark

    assert spark.version == pyspark.__version__, (spark.version, pyspark.__version__)


def _bundle(root):
    b = root / "lab" / "inc-001"
    files = {
        "hosts/219/jstack-1.out": ("jstack", 219, fixture_bytes("seed001_219_jstack_deadlock.txt")),
        "hosts/219/jstack-2.out": ("jstack", 219, fixture_bytes("seed001_219_jstack_deadlock.txt")),
        "hosts/219/sockets_netstat.out": ("sockets_netstat", 219, fixture_bytes("seed001_219_netstat_antp.txt")),
        "hosts/217/sockets_netstat.out": ("sockets_netstat", 217, fixture_bytes("seed001_217_netstat_antp.txt")),
        "hosts/218/sockets_netstat.out": ("sockets_netstat", 218, fixture_bytes("seed001_218_netstat_antp.txt")),
        "hosts/217/server_log.out": ("server_log", 217, fixture_bytes("seed001_217_server.log")),
        "hosts/218/server_log.out": ("server_log", 218, fixture_bytes("seed001_218_server.log")),
        "hosts/219/server_log.out": ("server_log", 219, b"[2020-04-22 09:00:00,000] INFO Kafka version : 0.10.1.0 "
                                     b"(org.apache.kafka.common.utils.AppInfoParser)\n" + fixture_bytes("seed001_219_server.log")),
        "hosts/219/process_stat.out": ("process_stat", 219, b" 81068 2592000 1901924 java -Xmx1G kafka.Kafka config/server.properties\n"),
        "hosts/219/open_files.out": ("open_files", 219, b"326639\n"),
        "hosts/219/heap_info.out": ("heap_info", 219, fixture_bytes("jdk17_heap_info.txt")),
        "hosts/219/jmap_histo.out": ("jmap_histo", 219, fixture_bytes("jdk17_jmap_histo.txt")),
        "hosts/218/open_files.out": ("open_files", 218, b""),  # empty -> unparsable
        "hosts/217/jstack-1.out": ("jstack", 217, b"\x00\x01\x02 binary garbage"),  # binary -> unparsable
        "hosts/217/open_files.out": ("open_files", 217, b"12824\n"),  # tampered below -> sha256 mismatch
    }
    manifest_files, commands = [], []
    for i, (rel, (kind, bid, data)) in enumerate(files.items()):
        p = b / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        manifest_files.append({"path": rel, "broker_id": bid, "host": f"192.168.1.{bid}", "kind": kind,
                               "command": kind, "stream": "stdout", "bytes": len(data),
                               "sha256": hashlib.sha256(data).hexdigest()})
        commands.append({"broker_id": bid, "host": f"192.168.1.{bid}", "name": p.stem, "kind": kind, "argv": [kind],
                         "command": kind, "started_at": f"2020-04-22T17:20:{i:02d}+00:00", "duration_s": 0.3,
                         "exit_code": 0, "error": None, "stdout": rel, "stderr": None})
    (b / "hosts/217/open_files.out").write_bytes(b"99999\n")
    snapshot = {"cluster": "lab", "taken_at": "2020-04-22T17:20:00+00:00", "controller_id": 217, "partitions": [],
                "brokers": [{"id": i, "host": f"192.168.1.{i}", "port": 9092} for i in (217, 218, 219)]}
    (b / "snapshot.json").write_text(json.dumps(snapshot))
    data = (b / "snapshot.json").read_bytes()
    manifest_files.append({"path": "snapshot.json", "broker_id": None, "host": None, "kind": "cluster_snapshot",
                           "command": None, "stream": None, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    manifest = {"schema": "kafka-runbooks/evidence-bundle/v1", "incident_id": "inc-001", "cluster": "lab",
                "created_at": "2020-04-22T17:20:00+00:00", "finished_at": "2020-04-22T17:21:00+00:00", "trigger": None,
                "hosts": {str(i): {"ssh_conn_id": f"ssh_{i}", "address": f"192.168.1.{i}", "reachable": True,
                                   "error": None, "pid": 81068 if i == 219 else None} for i in (217, 218, 219)},
                "commands": commands, "files": manifest_files}
    (b / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return b


@pytest.fixture(scope="module")
def spark_job(tmp_path_factory):
    root = tmp_path_factory.mktemp("bundles")
    bundle = _bundle(root)
    submit = VENV_BIN / "spark-submit"
    assert submit.exists(), f"spark-submit not found at {submit}"
    t0 = time.monotonic()
    # the usual umask of whoever starts spark-submit (an Airflow worker): the job itself makes its outputs owner-only
    r = subprocess.run([str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                        str(REPO / "spark_apps" / "analyze_bundle.py"), "--bundle", str(bundle)],
                       env=spark_env(), capture_output=True, text=True, timeout=240, preexec_fn=lambda: os.umask(0o022))
    r.wall_s = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-4000:]
    return bundle, r


def test_spark_job_timings_are_durations_within_the_run(spark_job):
    """Issue 21 §8: every timing of findings.json is a duration on one monotonic clock: each phase within total_s,
    total_s within this spark-submit's wall time, the log tasks' summed seconds within the wall time per core."""
    bundle, r = spark_job
    t = json.loads((bundle / "findings.json").read_text())["timings"]
    assert 0 < t["total_s"] <= r.wall_s, (t["total_s"], r.wall_s)
    phases = {k: v for k, v in t.items() if k.endswith("_s")}
    assert {"plan_s", "log_job_s", "survey_s", "scan_build_s", "scan_s", "python_files_s", "aggregates_s"} <= set(phases), t
    for k, v in phases.items():
        assert 0 <= v <= t["total_s"], (k, v, t["total_s"])
    assert t["log_tasks"] and t["log_task_count"] >= 1
    for k, v in t["log_tasks"].items():
        assert 0 <= v <= 2 * r.wall_s, (k, v, r.wall_s)  # local[2]: two cores


def test_spark_job_findings(spark_job):
    bundle, _ = spark_job
    doc = json.loads((bundle / "findings.json").read_text())
    assert doc["schema"] == "kafka-runbooks/findings/v1" and doc["bundle"] == str(bundle) and doc["generated_at"]
    dl = [f for f in doc["findings"] if f["kind"] == "jvm_deadlock"]
    assert len(dl) == 1
    f = dl[0]
    assert f["severity"] == "critical" and f["broker_ids"] == [219]
    for t in SEED_THREADS:
        assert t in f["summary"]
    assert f["details"]["progress"] == "stuck" and f["details"]["dumps"] == 2
    assert f["details"]["kafka_version"] == "0.10.1.0"  # from 219's server.log
    assert "KAFKA-3994" in {b["id"] for b in f["details"]["known_bugs"]}
    assert [e["source"] for e in f["evidence"]] == ["hosts/219/jstack-1.out", "hosts/219/jstack-2.out"]
    assert 17 in f["evidence"][0]["lines"] and 36 in f["evidence"][0]["lines"]
    unp = {u["details"]["path"]: u for u in doc["findings"] if u["kind"] == "unparsable"}
    assert set(unp) == {"hosts/218/open_files.out", "hosts/217/jstack-1.out", "hosts/217/open_files.out"}
    assert "sha256 mismatch" in unp["hosts/217/open_files.out"]["summary"]
    kinds = {x["kind"] for x in doc["findings"]}
    assert {"broker_socket_pileup", "peer_fetch_failures"} <= kinds


def test_spark_job_report(spark_job):
    bundle, _ = spark_job
    html = (bundle / "report.html").read_text()
    for t in SEED_THREADS:
        assert t in html
    assert "326639" in html and "1901924" in html  # open files and RSS in the broker table
    assert "hosts/219/jstack-1.out" in html and "sha256 mismatch" in html


def test_spark_job_parquet_tables(spark_job, spark):
    bundle, _ = spark_job
    pq = bundle / "parquet"
    threads = spark.read.parquet(str(pq / "threads"))
    assert {r["name"] for r in threads.where("broker_id = 219").collect()} == set(SEED_THREADS)
    edges = spark.read.parquet(str(pq / "lock_edges")).collect()
    assert {(e["waiter"], e["holder"], e["in_cycle"]) for e in edges if e["path"] == "hosts/219/jstack-1.out"} == {
        ("executor-Heartbeat", "group-metadata-manager-0", False),
        ("group-metadata-manager-0", "kafka-request-handler-3", True),
        ("kafka-request-handler-3", "group-metadata-manager-0", True)}
    conns = spark.read.parquet(str(pq / "connections"))
    cw = conns.where("broker_id = 219 AND local_port = 9092 AND state = 'CLOSE_WAIT'").count()
    assert cw == 10 and conns.count() == 11 + 16 + 13
    logs = spark.read.parquet(str(pq / "log_events"))
    # log_events holds signature records (and ERROR/FATAL ones): 2 fetch failures + 219's "Kafka version" line
    assert logs.where("signature = 'replica_fetch_error'").count() == 2 and logs.count() == 3
    assert {r["layout"] for r in logs.collect()} == {"kafka"}


def test_spark_job_outputs_are_the_owners_only(spark_job):
    """Issue 29 §3: report.html, findings.json and every directory and file of parquet/ (the executors' part files) are 0600 / 0700, as the bundle is, though spark-submit started under umask 022."""
    bundle, _ = spark_job
    modes = {str(p.relative_to(bundle)): stat.S_IMODE(p.stat().st_mode)
             for p in [bundle / "findings.json", bundle / "report.html", bundle / "parquet", *(bundle / "parquet").rglob("*")]}
    assert len(modes) > 20 and any(k.endswith(".parquet") for k in modes), sorted(modes)
    wrong = {k: oct(m) for k, m in modes.items() if m != (0o700 if (bundle / k).is_dir() else 0o600)}
    assert not wrong, wrong
