"""Shared fixtures for the Analyze stage tests: fixture files, a live deadlocked JVM, a Spark session."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyze_helpers import HERE, spark_env  # noqa: E402


@pytest.fixture(scope="session")
def live_dumps(tmp_path_factory):
    """Compile and run KafkaDeadlock.java, take `jstack -l` twice, kill the JVM. Returns [dump1, dump2] texts."""
    for tool in ("javac", "java", "jstack"):
        assert shutil.which(tool), f"{tool} is required (JDK 17) and was not found on PATH"
    d = tmp_path_factory.mktemp("jvm")
    subprocess.run(["javac", "-d", str(d), str(HERE / "java" / "KafkaDeadlock.java")], check=True, timeout=60)
    proc = subprocess.Popen(["java", "-Xmx64m", "-cp", str(d), "KafkaDeadlock"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", f"deadlock program did not start: {line!r}"
        dumps = []
        for _ in range(2):
            r = subprocess.run(["jstack", "-l", str(proc.pid)], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            dumps.append(r.stdout)
            time.sleep(0.5)
        yield dumps
    finally:
        proc.kill()  # the JVM we started, by its own handle
        proc.wait(timeout=30)


@pytest.fixture(scope="session")
def spark():
    """One in-process SparkSession for the whole test session (JVM start costs ~10 s)."""
    os.environ.update({k: v for k, v in spark_env().items() if k in ("SPARK_LOCAL_IP", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")})
    from pyspark.sql import SparkSession

    s = (SparkSession.builder.master("local[1]").appName("kafka-runbooks-analyze-tests")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    yield s
    s.stop()


@pytest.fixture(scope="session")
def lab_stall(tmp_path_factory):
    """LabStall.java on this JDK: a monitor + ReentrantLock cycle (lab-fault-1/2), four request handlers behind
    it, two threads sharing a name. Yields {"jstack_l": [dump, dump], "jstack": text, "jcmd": text, "stdout": path
    of the JVM's stdout after two kill -3}. The JVM is ours and is killed by its own handle."""
    for tool in ("javac", "java", "jstack", "jcmd"):
        assert shutil.which(tool), f"{tool} is required (JDK 17) and was not found on PATH"
    d = tmp_path_factory.mktemp("labstall")
    srcs = [str(HERE / "java" / "kafka" / "server" / "KafkaRequestHandler.java"), str(HERE / "java" / "LabStall.java")]
    subprocess.run(["javac", "-d", str(d), *srcs], check=True, timeout=120)
    out = d / "kafkaServer.out"
    with open(out, "wb") as fh:
        proc = subprocess.Popen(["java", "-Xmx64m", "-cp", str(d), "LabStall"], stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"READY" not in out.read_bytes():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, "LabStall did not get ready"
            time.sleep(0.1)
        res = {"jstack_l": [], "stdout": out}
        for _ in range(2):
            r = subprocess.run(["jstack", "-l", str(proc.pid)], capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stderr
            res["jstack_l"].append(r.stdout)
            time.sleep(0.3)
        res["jstack"] = subprocess.run(["jstack", str(proc.pid)], capture_output=True, text=True, timeout=60, check=True).stdout
        res["jcmd"] = subprocess.run(["jcmd", str(proc.pid), "Thread.print", "-l"], capture_output=True, text=True, timeout=60,
                                     check=True).stdout
        for _ in range(2):
            before = out.read_bytes().count(b"Full thread dump")
            os.kill(proc.pid, 3)
            while out.read_bytes().count(b"Full thread dump") == before or not out.read_bytes().rstrip().endswith(b"]"):
                assert time.monotonic() < deadline + 60, "kill -3 produced no dump"
                time.sleep(0.1)
                if out.read_bytes().count(b"Found 1 deadlock.") > before:
                    break
            time.sleep(0.3)
        yield res
    finally:
        proc.kill()
        proc.wait(timeout=30)
