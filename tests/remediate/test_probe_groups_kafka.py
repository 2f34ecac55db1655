"""The probe group ids map to the partitions Kafka itself computes: a Java program calls Kafka 2.3.0's
own ``String.hashCode`` and ``org.apache.kafka.common.utils.Utils.abs`` from the distribution's jars."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kafka_lab.airflow_home import REPO
from kafka_runbooks.remediate.gates import offsets_partition_for, probe_groups

pytestmark = pytest.mark.timeout(120)

PROGRAM = """
public class PartitionFor {
    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        for (int i = 1; i < args.length; i++)
            System.out.println(args[i] + " " + (org.apache.kafka.common.utils.Utils.abs(args[i].hashCode()) % n));
    }
}
"""


def kafka_libs() -> Path:
    candidates = [os.environ.get("KAFKA_HOME")] + [str(p / "shared" / "kafka" / "kafka_2.12-2.3.0") for p in (REPO.parent, REPO.parents[1])]
    for c in candidates:
        if c and (Path(c) / "libs").is_dir():
            return Path(c) / "libs"
    pytest.fail(f"no Kafka 2.3.0 distribution found (KAFKA_HOME, or {candidates[1:]})", pytrace=False)


def test_probe_groups_land_where_kafka_puts_them(tmp_path):
    if not shutil.which("javac"):
        pytest.fail("javac (JDK 17) is needed", pytrace=False)
    cp = ":".join(str(j) for j in sorted(kafka_libs().glob("*.jar")))
    (tmp_path / "PartitionFor.java").write_text(PROGRAM)
    subprocess.run(["javac", "-cp", cp, "-d", str(tmp_path), str(tmp_path / "PartitionFor.java")], check=True, capture_output=True)
    groups = probe_groups(50)
    names = list(groups.values()) + ["polygenelubricants", "big-5", "console-consumer-12345", "\u00e9t\u00e9-\U0001F600"]
    out = subprocess.run(["java", "-cp", f"{cp}:{tmp_path}", "PartitionFor", "50", *names], check=True, capture_output=True, text=True).stdout
    kafka = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.strip()}
    assert kafka == {g: offsets_partition_for(g, 50) for g in names}
    assert {kafka[g] for g in groups.values()} == set(range(50))
