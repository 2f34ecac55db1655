"""The same job on a real Spark standalone cluster: a master and a worker started from the installed PySpark
(spark-class ...Master / ...Worker) on this slot's addresses, the job submitted through SparkSubmitOperator
(our AnalyzeBundleOperator) with spark_default = spark://<master>:7077, and the findings equal local[2]'s."""

import json
import os
import socket
import subprocess
import time

import pytest

from analyze_helpers import VENV_BIN, fixture_bytes, make_bundle, spark_env, submit

pytestmark = pytest.mark.second_lane  # ./run test runs it in its second lane, after the deployed suite (lane balance)

MASTER_PORT = 7077


def _wait_port(host, port, deadline, proc):
    while time.monotonic() < deadline:
        assert proc.poll() is None, "Spark daemon exited"
        try:
            with socket.create_connection((host, port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"nothing listens on {host}:{port}")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    from kafka_lab import net

    mip, wip = net.service_ip("spark_master"), net.service_ip("spark_worker")
    d = tmp_path_factory.mktemp("spark-standalone")
    spark_class = VENV_BIN / "spark-class"
    assert spark_class.exists(), f"spark-class not found at {spark_class}"
    procs = []
    try:
        env = dict(spark_env(), SPARK_LOCAL_IP=mip, SPARK_LOG_DIR=str(d / "logs"))
        master = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.master.Master", "--host", mip, "--port",
                                   str(MASTER_PORT), "--webui-port", "8080"], env=env, stdout=open(d / "master.out", "wb"),
                                  stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(master)
        deadline = time.monotonic() + 120
        _wait_port(mip, MASTER_PORT, deadline, master)
        env = dict(spark_env(), SPARK_LOCAL_IP=wip, SPARK_LOG_DIR=str(d / "logs"))
        worker = subprocess.Popen([str(spark_class), "org.apache.spark.deploy.worker.Worker", f"spark://{mip}:{MASTER_PORT}",
                                   "--host", wip, "--webui-port", "8081", "--cores", "2", "--work-dir", str(d / "work")],
                                  env=env, stdout=open(d / "worker.out", "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        procs.append(worker)
        while b"Registering worker" not in (d / "master.out").read_bytes():
            assert worker.poll() is None, (d / "worker.out").read_text()
            assert time.monotonic() < deadline, (d / "master.out").read_text()[-2000:]
            time.sleep(0.3)
        yield {"master": f"spark://{mip}", "port": MASTER_PORT, "driver_ip": mip, "dir": d}
    finally:
        for p in procs:  # our own daemons, by their handles
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _comparable(doc):
    return sorted((f["kind"], f["severity"], tuple(f["broker_ids"]), f["summary"]) for f in doc["findings"])


@pytest.mark.timeout(900)
def test_standalone_master_gives_the_same_findings_as_local(standalone, tmp_path, monkeypatch, airflow_db):
    files = [("hosts/3/server.log", "server_log", 3, fixture_bytes("real23/broker3.server.log")),
             ("hosts/1/server.log", "server_log", 1, fixture_bytes("real23/broker1.server.log.pause")),
             ("hosts/219/jstack-1.out", "jstack", 219, fixture_bytes("seed001_219_jstack_deadlock.txt")),
             ("hosts/219/netstat.out", "sockets_netstat", 219, fixture_bytes("seed001_219_netstat_antp.txt")),
             ("zk/1/zookeeper.log", "zk_log", None, fixture_bytes("real23/zk1.zookeeper.log"), "1"),
             ("zk/3/zookeeper.log", "zk_log", None, fixture_bytes("real23/zk3.zookeeper.log"), "3")]
    bundle = make_bundle(tmp_path, files)
    local_out = tmp_path / "local-out"
    r = submit("analyze_bundle.py", ["--bundle", str(bundle), "--out", str(local_out)])
    assert r.returncode == 0, r.stderr[-3000:]
    local = json.loads((local_out / "findings.json").read_text())

    from kafka_runbooks.operators.analyze import AnalyzeBundleOperator

    for k, v in spark_env().items():
        if k in ("PATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
            monkeypatch.setenv(k, v)
    monkeypatch.delenv("SPARK_HOME", raising=False)
    monkeypatch.setenv("SPARK_LOCAL_IP", standalone["driver_ip"])
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps(
        {"conn_type": "spark", "host": standalone["master"], "port": standalone["port"]}))
    op = AnalyzeBundleOperator(task_id="analyze", bundle_dir=str(bundle), kafka_version="", conn_id="spark_default",
                               conf={"spark.ui.enabled": "false", "spark.driver.host": standalone["driver_ip"]})
    op.execute({})
    remote = json.loads((bundle / "findings.json").read_text())
    assert _comparable(remote) == _comparable(local) and local["findings"]
    kinds = {f["kind"] for f in remote["findings"]}
    assert {"jvm_deadlock", "zookeeper_follower_dropped", "fetch_failures_own_doing"} <= kinds
    # the work ran on the standalone worker: its executor wrote a log for this application
    apps = list((standalone["dir"] / "work").glob("app-*"))
    assert apps, "no application directory on the worker"
