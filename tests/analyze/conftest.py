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
