"""DAG parse cost (prints it; asserts nothing): what a DAG processor pays per parse of the project's DAG files.

    python benchmarks/dags.py

Measured in fresh interpreters: the Airflow SDK and providers alone, then every file under dags/ on top.
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
