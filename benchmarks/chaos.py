"""The chaos table of issue 29 §5 on the real deployment (prints it; asserts nothing about speed).

    python benchmarks/chaos.py [--faults postgres,worker_kill] [--boundaries after_stop,in_gate] [--brokers 1,2]
                               [--outage-s 20] [--stall-s 6]

For each fault of the engine's own control plane -- the deployment's PostgreSQL stopped (``pg_ctl stop -m
immediate``: the state database and Airflow's metadata database), the worker running the roll SIGKILLed, the
maintenance lock's znodes deleted, the plan's XCom edited, ZooKeeper unreachable (the whole ensemble stalled) -- at
each step boundary of a real rolling restart (the stop command arriving on the host, the JVM gone, a new JVM, the
new JVM registered but not yet in every ISR): one row with the outcome (no two brokers of the roll down at once, no
broker down without a record saying so, ``resume`` completes, the closed record true; see kafka_lab/chaos.py), the
case's wall time, and the record check. One lab and one deployment (var/bench-chaos), one case at a time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _names(text: str, allowed: tuple[str, ...], what: str) -> list[str]:
    names = [n for n in text.split(",") if n]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise SystemExit(f"unknown {what} {bad}; choose from {list(allowed)}")
    return names


def main(argv: list[str] | None = None) -> int:
    from kafka_lab.chaos import BOUNDARIES, FAULTS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {', '.join(FAULTS)}")
    ap.add_argument("--boundaries", default=",".join(BOUNDARIES), help=f"comma-separated, of {', '.join(BOUNDARIES)}")
    ap.add_argument("--brokers", default="", help="the roll's brokers (comma-separated); 'two': two brokers, neither the "
                    "controller (as the CI cases); empty: every broker")
    ap.add_argument("--outage-s", type=float, default=20.0, help="how long PostgreSQL stays stopped")
    ap.add_argument("--stall-s", type=float, default=6.0, help="how long the ZooKeeper ensemble stays stalled")
    ap.add_argument("--state-dir", type=Path, default=REPO / "var" / "bench-chaos")
    args = ap.parse_args(argv)
    faults = _names(args.faults, FAULTS, "faults")
    boundaries = _names(args.boundaries, BOUNDARIES, "boundaries")
    brokers = [] if args.brokers == "two" else [int(b) for b in args.brokers.split(",") if b]

    from kafka_lab import Lab
    from kafka_lab.chaos import run_case, save, table, two_brokers
    from kafka_lab.deployment import Deployment

    lab = Lab(args.state_dir / "lab")
    d = Deployment(args.state_dir / "airflow")
    cases = []
    try:
        lab.up()
        t0 = time.monotonic()
        d.up(lab, fresh=True)
        print(f"deployment up in {time.monotonic() - t0:.0f} s: {d.url}", flush=True)
        for boundary in boundaries:  # boundary by boundary: a table cut short still has every fault's row
            for fault in faults:
                roll = brokers or (two_brokers(lab) if args.brokers == "two" else [])
                c = run_case(d, lab, fault, boundary, brokers=roll, outage_s=args.outage_s, stall_s=args.stall_s,
                             say=lambda s: print(f"  {s}", flush=True))
                cases.append(c)
                print(table([c]).splitlines()[-1 - len(c.get("why") or [])], flush=True)
                save(cases, args.state_dir / "chaos.json")
    finally:
        d.down()
        lab.down()
    print()
    print(table(cases))
    print(f"\n{sum(1 for c in cases if c.get('ok'))} of {len(cases)} cases OK; every case in {args.state_dir / 'chaos.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
