"""Fault -> incident as deployed (issue 30): a real Airflow deployment (PostgreSQL, Redis, api-server, scheduler,
dag-processor, triggerer, two Celery workers: lab/kafka_lab/deployment.py) on the lab's real Kafka 2.3.0 brokers, the
health check on the product's default cron (every 5 minutes) so that what starts it within seconds is a watch in the
triggerer: the serving watch (triggers/serving.py) for a hang or a deadlock, the serving or the ZooKeeper watch for a
kill. Prints, per fault, where the time went, side by side with the goals; asserts nothing.

    KAFKA_RUNBOOKS_SLOT=N python benchmarks/detect_deployed.py [--faults hang deadlock kill]

Each fault hits another broker (hang 3, deadlock 2, kill 1): an incident still open for one broker never holds back
the next. The incident-response DAG is paused: its runs wait, nothing is captured or restarted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
sys.path[:0] = [str(REPO / "lab"), str(REPO / "plugins")]

GOALS = {"hang": 30.0, "deadlock": 30.0, "kill": 15.0}
BROKER = {"hang": 3, "deadlock": 2, "kill": 1}
SCHEDULE = "*/5 * * * *"  # the product's default (deployment.py's own is every minute)


def _ts(value) -> float | None:
    """An Airflow / product timestamp -> epoch seconds."""
    if not value:
        return None
    text = str(value).strip().replace("Z", "+00:00")
    if " " in text and "T" not in text:
        text = text.replace(" ", "T", 1)
    if text[-3] in "+-" and text[-6] not in "+-":  # PostgreSQL's "+00"
        text += ":00"
    return datetime.fromisoformat(text).timestamp()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--faults", nargs="+", choices=list(GOALS), default=list(GOALS))
    args = ap.parse_args(argv)

    from kafka_lab import Lab
    from kafka_lab.deployment import HEALTH_DAG, Deployment, product_state
    from kafka_lab.procs import wait_until

    state = REPO / "var" / "bench-detect-deployed"
    lab = Lab(state / "lab")
    d = Deployment(state / "airflow", health_schedule=SCHEDULE)
    rows: list[tuple[str, str]] = []

    def row(name: str, value: str) -> None:
        rows.append((name, value))
        print(f"{name:<66} {value}", flush=True)

    t0 = time.monotonic()
    lab.up()
    try:
        d.up(lab, fresh=True)
        row("lab + deployment up", f"{time.monotonic() - t0:.0f} s (load average {os.getloadavg()[0]:.1f})")
        d.set_paused("kafka_incident_response", True)
        wait_until(lambda: d.metadata_query("SELECT id FROM trigger WHERE classpath LIKE '%ServingWatchTrigger' "
                                            "AND triggerer_id IS NOT NULL"), 300, "the serving watch to run in the triggerer",
                   interval=2.0)
        time.sleep(10)  # its first rounds
        products = product_state(d)
        for fault in args.faults:
            b = BROKER[fault]
            lab.reset()
            quiet(d, HEALTH_DAG)  # the runs the reset's own changes started (a restarted broker re-registers) are over
            since = time.time()
            getattr(lab, fault)(b)
            load = os.getloadavg()[0]

            def opened():
                from kafka_runbooks.incidents.store import IncidentStore

                return [r for r in IncidentStore(products.db).records("lab")
                        if r.get("broker_ids") == [b] and (_ts(r.get("opened_at")) or 0) >= since]

            found = wait_until(opened, 600, f"an incident for broker {b} ({fault})", interval=0.5)[0]
            report(row, d, fault, b, since, found, load)
    finally:
        d.down()
        lab.down()
    print(json.dumps(dict(rows), indent=1))
    return 0


def quiet(d, dag_id: str, still_s: float = 20.0) -> None:
    """Until no run of ``dag_id`` is queued or running and none started for ``still_s`` (an idle health check: the
    run a watch starts is not queued behind another, max_active_runs=1)."""
    from kafka_lab.procs import wait_until

    def idle() -> bool:
        runs = d.runs(dag_id, limit=5)
        return not [r for r in runs if r["state"] in ("queued", "running")]

    while True:
        wait_until(idle, 600, "no health check running", interval=2.0)
        newest = (d.runs(dag_id, limit=1) or [{}])[0].get("dag_run_id")
        time.sleep(still_s)
        if idle() and (d.runs(dag_id, limit=1) or [{}])[0].get("dag_run_id") == newest:
            return


def report(row, d, fault: str, b: int, since: float, incident: dict, load: float) -> None:
    """Fault -> incident, and where the time went: the watch's event, the run's queue, each task's wait and work."""
    from kafka_lab.deployment import HEALTH_DAG

    total = _ts(incident["opened_at"]) - since
    goal = GOALS[fault]
    row(f"{fault} (broker {b}): fault -> incident opened", f"{total:.1f} s (goal <= {goal:g} s: {'MET' if total <= goal else 'NOT MET'}; "
        f"load {load:.1f})")
    run_id = str(incident.get("opened_by") or "").split("/run:", 1)[-1]
    events = d.metadata_query("SELECT to_char(timestamp AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"'), extra "
                              f"FROM asset_event WHERE timestamp >= to_timestamp({since}) ORDER BY timestamp")
    for at, extra in events[:4]:
        try:
            payload = json.loads(extra).get("payload") or {}
        except ValueError:
            payload = {}
        what = ",".join(payload.get("changed") or ["?"])
        detail = sorted(payload.get("not_answering") or {}) if what == "serving" else payload.get("after", {}).get("brokers")
        row(f"  {fault}: fault -> {what} watch event {detail}", f"{_ts(at) - since:.1f} s")
    try:
        run = d.run(HEALTH_DAG, run_id)
        tis = d.task_instances(HEALTH_DAG, run_id)
    except Exception as exc:  # noqa: BLE001 - figures only
        row(f"  {fault}: the health run", f"not read ({exc})")
        return
    row(f"  {fault}: health run {run.get('run_type')}: fault -> run queued", f"{_ts(run.get('queued_at')) - since:.1f} s")
    for task in ("snapshot", "detect"):
        ti = tis.get(task) or {}
        q, s, e = _ts(ti.get("queued_when")), _ts(ti.get("start_date")), _ts(ti.get("end_date"))
        if s is None:
            continue
        waited = f"waited {s - q:.1f} s for a worker, " if q else ""
        row(f"  {fault}: {task} task", f"{waited}started at {s - since:+.1f} s, ran {((e or s) - s):.1f} s")
    try:  # the snapshot task's own account of its parts (detect/observe.py take_snapshot's log line)
        parts = [ln for ln in d.task_log(HEALTH_DAG, run_id, "snapshot").splitlines() if "snapshot of " in ln and " s: " in ln]
    except Exception as exc:  # noqa: BLE001 - figures only
        parts = [f"not read ({exc})"]
    row(f"  {fault}: snapshot parts", parts[-1].split(" s: ", 1)[-1] if parts else "no line in its log")
    row(f"  {fault}: detect start -> incident opened", f"{_ts(incident['opened_at']) - (_ts((tis.get('detect') or {}).get('start_date')) or since):.1f} s")


if __name__ == "__main__":
    sys.exit(main())
