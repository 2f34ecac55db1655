"""What the lab's own background load costs its brokers (prints it; asserts nothing): the three brokers' CPU seconds a
minute, and the load process's own, with the load at its defaults (lab/kafka_lab/load.py) and at the settings it had
until 2026-11-30 (10 messages/s, commits every second, 1 s heartbeats), alternating in one run so that both share the
machine's load; then with no load at all. ``./run test`` runs up to four labs on two cores: this is their floor.

    KAFKA_RUNBOOKS_SLOT=N python benchmarks/load.py [--window 60] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "plugins")]

SETTINGS = (("defaults", ()), ("until 2026-11-30", ("--rate", "10", "--commit-every", "1", "--heartbeat-ms", "1000")))
WARM_S = 12.0  # the consumer groups join and the first fetches settle before a window starts


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a live process (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def window(lab, load_pid: int | None, seconds: float) -> tuple[float, float]:
    """(the brokers' CPU seconds a minute, the load's) over ``seconds``."""
    pids = [lab.broker_pid(b) for b in (1, 2, 3)]
    b0, l0 = sum(cpu_s(p) for p in pids), cpu_s(load_pid) if load_pid else 0.0
    time.sleep(seconds)
    b1, l1 = sum(cpu_s(p) for p in pids), cpu_s(load_pid) if load_pid else 0.0
    return (b1 - b0) * 60 / seconds, (l1 - l0) * 60 / seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--window", type=float, default=60.0, help="seconds each measurement lasts")
    ap.add_argument("--rounds", type=int, default=2, help="how many times each setting is measured")
    args = ap.parse_args(argv)
    from kafka_lab import Lab

    lab = Lab(REPO / "var" / "bench-load")
    lab.up()
    rows: dict[str, list[tuple[float, float]]] = {name: [] for name, _ in SETTINGS}
    try:
        lab.stop_load()
        for _ in range(args.rounds):
            for name, options in SETTINGS:
                pid = lab.start_load(options)
                time.sleep(WARM_S)
                rows[name].append(window(lab, pid, args.window))
                lab.stop_load()
        time.sleep(WARM_S)
        rows["no load"] = [window(lab, None, args.window)]
    finally:
        lab.down()
    print(f"{'load':<18} {'brokers CPU s/min':>26} {'load process CPU s/min':>26}")
    for name, got in rows.items():
        print(f"{name:<18} {' / '.join(f'{b:.2f}' for b, _ in got):>26} {' / '.join(f'{x:.2f}' for _, x in got):>26}")
    new, old = (statistics.median(b for b, _ in rows[n]) for n, _ in SETTINGS)
    print(f"brokers' CPU, defaults / until 2026-11-30 (medians): {new:.2f} / {old:.2f} s/min = x{new / old:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
