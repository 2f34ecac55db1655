"""Every figure the issues ask for, in one run (prints them; asserts nothing about speed).

    ./run bench                 # all of them, in this order
    ./run bench roll analysis   # some of them
    ./run bench scale --parts big --no-compare-kazoo   # a benchmark's own options follow its name
    ./run bench --dry-run scale --parts big            # check the names and options, run nothing

Each benchmark is its own script under benchmarks/ (run alone with ``python benchmarks/<name>.py``); the lab
ones bring up their own real-Kafka lab and tear it down. Side-by-side ratios (capture 3 hosts / 1 host, roll
time / the brokers' own time, Spark / ``rg -c``) are measured inside one script run, so they share the
machine's load at that moment.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ORDER = ("dags", "lab", "load", "detect", "detect_deployed", "roll", "election", "incidents", "mitigate", "analysis", "scale",
         "chaos")


class _Parsed(Exception):
    """Raised in place of a benchmark's work once its options parsed (``check_options``)."""


def split_runs(argv: list[str]) -> list[tuple[str, list[str]]]:
    """``NAME [its options and their values] NAME ...`` -> [(name, options)]: a word that names a benchmark starts the
    next one; anything else belongs to the benchmark before it (an option, or an option's value). An option's value
    that is also a benchmark's name is given as ``--option=value`` (``mitigate --modes=mitigate``)."""
    runs: list[tuple[str, list[str]]] = []
    for a in argv:
        if a in ORDER:
            runs.append((a, []))
        elif runs and (runs[-1][1] or a.startswith("-") or runs[-1][0] == "incidents"):
            runs[-1][1].append(a)  # incidents takes incident ids as words
        else:
            raise SystemExit(f"unknown benchmark {a!r}; choose from {list(ORDER)}" if not a.startswith("-")
                             else f"option {a!r} before any benchmark name: options follow the benchmark they are for")
    return runs


def _module(name: str):
    spec = importlib.util.spec_from_file_location(f"kafka_runbooks_bench_{name}", REPO / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the scripts do their work in main() only
    return mod


def check_options(name: str, options: list[str]) -> None:
    """Parses a benchmark's options with its own argument parser, running nothing: its main() is called with
    argparse's parse_args standing in by one that parses (errors exit 2, as they would) and then stops it."""
    sys.path[:0] = [p for p in (str(REPO / "lab"), str(REPO / "plugins")) if p not in sys.path]
    main = _module(name).main
    if not inspect.signature(main).parameters:
        if options:
            raise SystemExit(f"benchmark {name} takes no options (given: {' '.join(options)})")
        return
    if name == "incidents":  # incident ids, no parser
        from kafka_lab.incident_drills import INCIDENTS

        unknown = [o for o in options if o not in INCIDENTS]
        if unknown:
            raise SystemExit(f"incidents: unknown incident(s) {unknown}; choose from {list(INCIDENTS)}")
        return

    def parse_only(self, args=None, namespace=None):
        _, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error("unrecognized arguments: " + " ".join(extras))
        raise _Parsed

    real = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = parse_only
    try:
        main(list(options))
    except _Parsed:
        return
    finally:
        argparse.ArgumentParser.parse_args = real
    raise SystemExit(f"benchmark {name}: its main() returned without parsing its options")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="./run bench", description="Runs the benchmarks named (all, in this order, when "
                                 "none is): " + ", ".join(ORDER) + ". A benchmark's own options follow its name, e.g. "
                                 "`./run bench scale --parts big --no-compare-kazoo` (a value that is also a benchmark's name as --option=value: "
                                 "`./run bench mitigate --modes=mitigate`); `./run bench NAME --help` prints them.")
    ap.add_argument("--dry-run", action="store_true", help="check the names and each benchmark's options; run nothing")
    own = []
    while argv and argv[0] in ("--dry-run", "-h", "--help"):
        own.append(argv.pop(0))
    runs = split_runs(argv) if argv else [(n, []) for n in ORDER]
    for name, options in runs:
        if "-h" in options or "--help" in options:
            return subprocess.call([sys.executable, str(REPO / "benchmarks" / f"{name}.py"), *options], cwd=REPO)
        check_options(name, options)
    args = ap.parse_args(own)
    if args.dry_run:
        for name, options in runs:
            print(f"{name} {' '.join(options)}".rstrip())
        return 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "plugins"), str(REPO / "lab"),
                                                       os.environ.get("PYTHONPATH", "")]),
           "AIRFLOW__LOGGING__LOGGING_LEVEL": os.environ.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")}
    logs = REPO / "var" / "bench-logs"
    logs.mkdir(parents=True, exist_ok=True)
    failed = []
    for name, options in runs:
        script = REPO / "benchmarks" / f"{name}.py"
        if not script.exists():
            print(f"\n=== {name}: no benchmarks/{name}.py in this checkout", flush=True)
            failed.append(name)
            continue
        print(f"\n=== {name} ({script.relative_to(REPO)}) — load average {os.getloadavg()[0]:.1f}", flush=True)
        t0 = time.monotonic()
        stderr = logs / f"{name}.stderr"
        with stderr.open("wb") as err:  # clients' and Airflow's chatter; the figures go to stdout
            rc = subprocess.call([sys.executable, str(script), *options], cwd=REPO, env=env, stderr=err)
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
