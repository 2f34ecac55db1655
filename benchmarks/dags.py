"""DAG parse cost (prints it; asserts nothing): what a DAG processor pays per parse of the project's DAG files.

    python benchmarks/dags.py

Measured in fresh interpreters: the Airflow SDK and providers alone, then every file under dags/ on top; and the
fleet's health-check file (one DAG per cluster of the Variable) parsed by Airflow's own DagBag with 1 and with 50
clusters in the Variable (DagBag's own per-file duration, the figure the DAG processor reports).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE = """
import importlib.util, pathlib, sys, time
t0 = time.perf_counter()
import airflow.sdk, airflow.providers.standard.operators.trigger_dagrun, airflow.providers.apache.spark.operators.spark_submit
t1 = time.perf_counter()
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(t1 - t0, time.perf_counter() - t1)
"""


FLEET = """
import json, os, sys
from airflow.dag_processing.dagbag import DagBag
n = int(sys.argv[2])
cluster = {"zk_conn_id": "zk", "hosts": {str(b): f"h{b}" for b in range(1, 4)}}
os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"] = json.dumps({f"c{i:02d}": cluster for i in range(n)})
bag = DagBag(sys.argv[1])
assert not bag.import_errors, bag.import_errors
(stat,) = bag.dagbag_stats
print(stat.duration.total_seconds(), stat.dag_num)
"""


def fleet_parse(clusters: int) -> tuple[float, int]:
    import os

    env = {**os.environ, "AIRFLOW_HOME": str(REPO / "var" / "bench-dags" / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags")}
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", FLEET, str(REPO / "dags" / "kafka_health_check.py"), str(clusters)],
                             capture_output=True, text=True, check=True, env=env)
        seconds, dags = out.stdout.split()[-2:]
        runs.append((float(seconds), int(dags)))
    return statistics.median(r[0] for r in runs), runs[0][1]


def main() -> int:
    runs = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", CODE, str(REPO / "dags")], capture_output=True, text=True, check=True)
        runs.append(tuple(map(float, out.stdout.split()[-2:])))
    base = statistics.median(r[0] for r in runs)
    dags = statistics.median(r[1] for r in runs)
    n = len(list((REPO / "dags").glob("*.py")))
    print(f"Airflow SDK + providers import (median of 3 fresh interpreters)  {base:6.2f} s")
    print(f"all {n} DAG files on top of it                                    {dags:6.2f} s")
    one, _ = fleet_parse(1)
    fifty, count = fleet_parse(50)
    print(f"kafka_health_check.py, DagBag parse, 1 cluster in the Variable      {one:6.3f} s")
    print(f"kafka_health_check.py, DagBag parse, 50 clusters ({count} DAGs)         {fifty:6.3f} s  (budget 1 s; x{fifty / one:.1f} of 1 cluster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
