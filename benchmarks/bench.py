"""Figures for issue #2, measured in one run on the lab (prints them; asserts nothing about speed).

    ./run bench

- fault → finding: deadlock injected on broker 3 until the detectors (kazoo snapshot + SSH probes) report it
- capture wall time: one host alone, then three hosts in parallel (ratio = parallel / single)
- Spark analysis wall time for the three-host bundle (spark-submit, local[2], JVM start included)
- parse time of all DAG files (fresh interpreter, as a DAG processor would)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def dag_parse_seconds() -> tuple[float, float]:
    """(Airflow SDK + providers import, then both DAG files on top), in a fresh interpreter."""
    code = (
        "import sys, time; t0 = time.perf_counter()\n"
        "import airflow.sdk, airflow.providers.standard.operators.trigger_dagrun, airflow.providers.apache.spark.operators.spark_submit\n"
        "t1 = time.perf_counter()\n"
        f"sys.path[:0] = [{str(REPO / 'dags')!r}]\n"
        "import kafka_health_check, kafka_incident_response\n"
        "print(t1 - t0, time.perf_counter() - t1)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    base, dags = map(float, out.stdout.strip().splitlines()[-1].split())
    return base, dags


def main() -> int:
    from kafka_lab import Lab
    from kafka_lab.airflow_home import airflow_environment

    state = REPO / "var" / "bench"
    lab = Lab(state / "lab")
    figures: dict[str, float] = {}
    t_up, _ = timed(lab.up)
    figures["lab up (s)"] = t_up
    try:
        os.environ.update(airflow_environment(state / "airflow", lab.airflow_env()))
        from kafka_runbooks.capture.bundle import EvidenceBundle
        from kafka_runbooks.capture.collector import capture_cluster
        from kafka_runbooks.config import ClusterConfig

        config = ClusterConfig.from_dict("lab", lab.cluster_settings()["lab"])

        from kafka_runbooks.detect.observe import check_once

        check_once(config)  # the history knows broker 3 answered before the fault
        lab.deadlock(3)
        t0 = time.perf_counter()
        deadline = t0 + 120
        while True:
            snap, findings = check_once(config)  # ZooKeeper, direct checks, probes, history, detectors
            if any(f.kind == "broker_unresponsive" and 3 in f.broker_ids for f in findings):
                break
            if time.perf_counter() > deadline:
                raise SystemExit("no finding within 120 s")
        figures["fault -> finding (s)"] = time.perf_counter() - t0

        stamp = time.strftime("%Y%m%dT%H%M%S")
        one, _ = timed(lambda: capture_cluster(config, snap, [3], EvidenceBundle(config.bundle_base, "lab", f"bench-one-{stamp}")))
        bundle3 = EvidenceBundle(config.bundle_base, "lab", f"bench-three-{stamp}")
        three, _ = timed(lambda: capture_cluster(config, snap, [1, 2, 3], bundle3))
        figures["capture, 1 host (s)"] = one
        figures["capture, 3 hosts in parallel (s)"] = three
        figures["capture ratio 3-parallel / 1"] = three / one

        env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
        spark_submit = str(Path(sys.executable).parent / "spark-submit")
        app = str(REPO / "spark_apps" / "analyze_bundle.py")
        spark, proc = timed(
            lambda: subprocess.run(
                [spark_submit, "--master", "local[2]", app, "--bundle", str(bundle3.path), "--kafka-version", "0.10.1.0"],
                env=env, capture_output=True, text=True,
            )
        )
        if proc.returncode != 0:
            raise SystemExit(f"spark-submit failed:\n{proc.stderr[-4000:]}")
        figures["Spark analysis of the 3-host bundle (s)"] = spark
        size = sum(f["bytes"] for f in json.loads((bundle3.path / "manifest.json").read_text())["files"])
        figures["bundle size (MB)"] = size / 1e6
    finally:
        lab.down()
    base, dags = dag_parse_seconds()
    figures["Airflow SDK + providers import (s)"] = base
    figures["both DAG files on top of it (s)"] = dags

    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
