"""Figures for issue 7 (incident 003), measured in one run of drill 003 on the lab's real Kafka 2.3.0 (prints them;
asserts nothing about speed).

    python benchmarks/election.py [--no-detect]

- time from the returning broker being ready (the deferred wait's trigger fired: in every ISR, session stable for
  ``stable_s``) to preferred leadership restored (the election task finished, every batch converged);
- canary failures during the batches (the election's own canary rounds; target 0), and the lab load's produce
  failures in each phase (its producer does not retry: a client with a stale leader counts once);
- the longest window in which some broker's own metadata disagreed with ZooKeeper about a leader (sampled every
  ~0.25 s), with automatic rebalance on (broker 3 returning and flapping) versus the deferred election.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def figures(raw: dict) -> dict[str, object]:
    """The printed figures from drill 003's raw figures (pure)."""
    on, off = raw["rebalance_on"], raw["deferred"]
    return {
        "deferred: returning broker ready -> preferred leadership restored (s)": off.get("ready_to_restored_s"),
        "deferred: broker back -> ready (s, includes stable_s)": off.get("returned_to_ready_s"),
        "deferred: partitions elected / batches": f"{off.get('elected')} / {off.get('batches')}",
        "deferred: per batch (elect_s, converged_s, canary rounds)": [
            (t.get("elect_s"), t.get("converged_s"), t.get("canary_rounds")) for t in off.get("batch_timings") or []],
        "deferred: canary failures during the batches (target 0)": off.get("canary_failures"),
        "deferred: lab load produce failures (no retries)": off.get("load_produce_failures"),
        "deferred: longest divergence window (s)": off["divergence"]["longest_s"],
        "deferred: diverged samples / samples": f"{off['divergence']['diverged_samples']} / {off['divergence']['samples']}",
        "rebalance on: longest divergence window (s)": on["divergence"]["longest_s"],
        "rebalance on: diverged samples / samples": f"{on['divergence']['diverged_samples']} / {on['divergence']['samples']}",
        "rebalance on: lab load produce failures (no retries)": on.get("load_produce_failures"),
        "rebalance on: health checks run": on.get("checks"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-detect", action="store_true", help="skip the health checks (and the held-request divergence) in phase 1")
    ap.add_argument("--keep-lab", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    from kafka_lab.drill_003 import run_drill

    out: dict = {}

    def report(raw: dict) -> None:
        out.update(figures(raw))
        out["raw"] = raw

    rc = run_drill(REPO / "var" / "bench-election", args.keep_lab, detect=not args.no_detect, report=report)
    raw = out.pop("raw", None)
    if not out:
        print("the drill did not produce figures", file=sys.stderr)
        return 1
    width = max(len(k) for k in out)
    for k, v in out.items():
        print(f"{k:<{width}}  {json.dumps(v) if isinstance(v, (dict, list)) else v}")
    print(json.dumps({"figures": out, "raw": raw}, default=str))
    return rc


if __name__ == "__main__":
    sys.exit(main())
