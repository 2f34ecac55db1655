"""Figures for issue 6, measured in one rolling restart of the lab's three real Kafka brokers (prints them;
asserts nothing about speed).

    python benchmarks/roll.py [--rate 20]

- total roll time (the execute task, from taking the maintenance lock to the last gate) against the sum of
  each broker's own stop -> deregistered -> started and registered -> back in sync -> coordinators loaded
  time (target <= 1.1x: the engine waits for nothing else);
- canary failures during the roll: produces that failed after the client's retries, records never read,
  committed offsets lost (target 0), and the engine's canary gate rounds that failed;
- canary p99 (and max) produce latency during the roll.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OWN_PHASES = ("stop_s", "deregister_s", "start_register_s", "in_sync_s", "coordinator_s")


def figures(result: dict, load: dict, committed_now: dict[int, int], gate_failures: int) -> dict[str, object]:
    """The figures from the executor's result and the canary load's stats (pure)."""
    own = [sum(t.get(k, 0.0) for k in OWN_PHASES) for t in result["timings"]]
    lost_commits = sorted(p for p, o in load["commits"].items() if committed_now.get(int(p), -1) < o)
    return {
        "brokers restarted (in order)": result["restarted"],
        "total roll time (s)": result["wall_s"],
        "sum of each broker's own stop -> in sync -> coordinators loaded (s)": round(sum(own), 2),
        "ratio (target <= 1.1)": round(result["wall_s"] / sum(own), 3) if own and sum(own) else None,
        "per broker (s)": {t["broker_id"]: {k: t.get(k) for k in (*OWN_PHASES, "canary_s", "total_s")} for t in result["timings"]},
        "canary produces sent": load["sent"],
        "canary produces failed after retries": sum(load["failed"].values()),
        "canary records never read": len(load["never_read"]),
        "committed offsets lost (partitions)": lost_commits,
        "canary gate rounds failed": gate_failures,
        "canary p99 produce latency during the roll (ms)": round(load["p99_ms"], 1) if load["p99_ms"] is not None else None,
        "canary max produce latency (ms)": round(load["max_ms"], 1) if load["max_ms"] is not None else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=20.0, help="canary produces per second")
    args = ap.parse_args(argv)

    from kafka_lab import Lab
    from kafka_lab.airflow_home import load_dags, prepare
    from kafka_lab.approvals import Responder
    from kafka_lab.rollwatch import CanaryLoad

    state = REPO / "var" / "bench-roll"
    lab = Lab(state / "lab")
    lab.up()
    try:
        prepare(state / "airflow", lab.airflow_env())
        from kafka_lab.topics import bootstrap_all
        from kafka_runbooks.config import ClusterConfig
        from kafka_runbooks.incidents.store import IncidentStore

        topic = CanaryLoad.create_topic(bootstrap_all(), f"bench-canary-{uuid.uuid4().hex[:6]}")
        lab.wait_full_isr(60)
        load = CanaryLoad(bootstrap_all(), topic, f"{topic}-group", rate_per_s=args.rate).start()
        time.sleep(3)  # the load flows before the roll starts
        form = {"cluster": "lab", "brokers": [], "reason": "benchmark", "mode": "execute", "canary": True}
        with Responder("kafka_rolling_restart", "approve", "Approve", user="drill-bot", timeout_s=900):
            run = load_dags().get_dag("kafka_rolling_restart").test(run_conf=form)
        stats = load.stop()
        committed_now = load.broker_committed()
        tis = {ti.task_id: ti for ti in run.get_task_instances()}
        if run.state != "success":
            print(f"the roll did not complete: {({k: ti.state for k, ti in tis.items()})}", file=sys.stderr)
            return 1
        result = tis["execute"].xcom_pull(task_ids="execute")
        settings = lab.cluster_settings()["lab"]
        audit = IncidentStore(ClusterConfig.from_dict("lab", settings)).audit_trail(result["record_id"])
        gate_failures = sum(len(e["details"].get("failed_rounds") or []) for e in audit if e["action"] == "gate_canary")
        out = figures(result, stats, committed_now, gate_failures)
    finally:
        lab.down()
    width = max(len(k) for k in out)
    for k, v in out.items():
        print(f"{k:<{width}}  {json.dumps(v) if isinstance(v, (dict, list)) else v}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
