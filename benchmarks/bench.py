"""Every figure the issues ask for, in one run (prints them; asserts nothing about speed).

    ./run bench                 # all of them, in this order
    ./run bench roll analysis   # some of them

Each benchmark is its own script under benchmarks/ (run alone with ``python benchmarks/<name>.py``); the lab
ones bring up their own real-Kafka lab and tear it down. Side-by-side ratios (capture 3 hosts / 1 host, roll
time / the brokers' own time, Spark / ``rg -c``) are measured inside one script run, so they share the
machine's load at that moment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ORDER = ("dags", "lab", "detect", "roll", "election", "incidents", "analysis", "scale")


def main(argv: list[str]) -> int:
    names = argv or list(ORDER)
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {list(ORDER)}", file=sys.stderr)
        return 2
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO / "lab"),
                                                       os.environ.get("PYTHONPATH", "")]),
           "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")}
    logs = REPO / "var" / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    failed = []
    for name in names:
        script = REPO / "benchmarks" / f"{name}.py"
        if not script.exists():
            print(f"\n=== {name}: no benchmarks/{name}.py in this checkout", flush=True)
            failed.append(name)
            continue
        print(f"\n=== {name} ({script.relative_to(REPO)}) — load average {os.getloadavg()[0]:.1f}", flush=True)
        t0 = time.monotonic()
        stderr = logs / f"{name}.stderr"
        with stderr.open("wb") as err:  # clients' and Airflow's chatter; the figures go to stdout
            rc = subprocess.call([sys.executable, str(script)], cwd=REPO, env=env, stderr=err)
        print(f"=== {name}: exit {rc} after {time.monotonic() - t0:.0f} s (its log: {stderr.relative_to(REPO)})", flush=True)
        if rc:
            print(stderr.read_text(errors="replace")[-3000:], file=sys.stderr)
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that did not finish: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
