"""``./run demo deployed``: the 001 drill (a deadlocked broker) on a real Airflow deployment instead of ``dag.test()``.

    python -m kafka_lab.drill deployed [--keep] [--state-dir DIR]

The lab comes up, then the deployment (deployment.py: PostgreSQL, Redis, api-server, scheduler, dag-processor,
triggerer, two Celery workers). Broker 3's JVM is deadlocked; nothing is run by hand after that: the scheduled health
check (every minute here) finds it on a worker and starts the incident response, which captures, analyzes on Spark and
plans the restart on whichever workers Celery gives its tasks; user **bob** approves through the REST API (what the
UI's Approve button calls), the engine restarts broker 3, the cluster is verified and the incident closed. The drill
prints where each task ran, the incident and its audit trail, and what on-call was sent. ``--keep`` leaves both up
(sign in at the printed URL; ``python -m kafka_lab deploy down`` and ``python -m kafka_lab down`` stop them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kafka_lab.airflow_home import REPO

RESPONSE = "kafka_incident_response"


def say(msg: str) -> None:
    print(f"[drill deployed] {msg}", flush=True)


def run(state_dir: Path, keep: bool) -> int:
    from kafka_lab import Lab
    from kafka_lab.deployment import Deployment
    from kafka_lab.procs import wait_until

    lab = Lab(state_dir / "lab")
    d = Deployment(state_dir / "airflow")
    ok = False
    try:
        t0 = time.monotonic()
        say(f"starting the lab in {lab.state} (3 ZooKeeper nodes, 3 sshd hosts, 3 Apache Kafka 2.3.0 brokers, client load)")
        lab.up()
        say(f"lab up in {time.monotonic() - t0:.0f} s; starting the Airflow deployment in {d.state}")
        t1 = time.monotonic()
        d.up(lab, fresh=True)
        say(f"deployment up in {time.monotonic() - t1:.0f} s: {d.url} (users {', '.join(d.users)}; passwords in {d.passwords_file})")
        for name, pid in d.status()["processes"].items():
            say(f"  {name:<20} pid {pid}  log {d.log(name)}")

        since = _now()
        say("injecting fault: a Java-level deadlock in broker 3's JVM that its request handlers wait behind (seed incident 001)")
        lab.deadlock(3)
        t_fault = time.monotonic()
        response = wait_until(lambda: [r for r in d.runs(RESPONSE) if (r.get("run_after") or "") >= since], 600,
                              "the scheduled health check to start an incident response", interval=3.0)[-1]
        conf = response["conf"]
        say(f"fault -> incident {conf['incident_id']} in {time.monotonic() - t_fault:.0f} s (brokers {conf['broker_ids']})")
        run_id = response["dag_run_id"]
        # mitigate first: moving leadership off the broker that does not serve, its JVM untouched, is asked before the capture
        m = d.answer_if_asked("bob", RESPONSE, run_id, "approve_mitigation", "Approve", 900)
        say(f"mitigation: {m['subject']!r} answered Approve by bob (HTTP {m['status_code']})" if m["subject"] else
            f"mitigation: not asked ({m['state']})")
        d.wait_task(RESPONSE, run_id, "approve", ("awaiting_input",), 1200)
        hitl = d.hitl(RESPONSE, run_id, "approve", "bob")
        say(f"approval waiting for {[u['id'] for u in hitl['assigned_users']]}: {hitl['subject']}")
        say("user bob answers Approve through the REST API (PATCH .../hitlDetails, as the UI does)")
        r = d.answer("bob", RESPONSE, run_id, "approve")
        if r.status_code != 200:
            say(f"the approval was refused: HTTP {r.status_code} {r.text[:300]}")
            return 1
        done = d.wait_run(RESPONSE, run_id, 1200)
        say(f"incident-response run {run_id}: {done['state']}")
        for task, ti in sorted(d.task_instances(RESPONSE, run_id).items(), key=lambda kv: kv[1].get("start_date") or ""):
            say(f"  {task:<20} {ti['state']:<16} on {d.worker_of(ti) or '-'}")
        for page in d.pages():
            say(f"on-call was sent ({page.get('event')}): {page.get('text', '').splitlines()[0]}")
        ok = done["state"] == "success" and _report_incident(d, conf["incident_id"])
        say("DRILL OK: the incident was detected, answered and closed through the deployment" if ok else "DRILL FAILED")
        return 0 if ok else 1
    finally:
        if keep:
            say(f"left running (--keep): {d.url}; stop with: python -m kafka_lab deploy down --deploy-state {d.state}; "
                f"python -m kafka_lab --state {lab.state} down")
        else:
            d.down()
            lab.down()
            say("deployment and lab stopped")


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat()


def _report_incident(d, incident_id: str) -> bool:
    """The incident and its audit trail as the product's database holds them."""
    from kafka_lab.deployment import product_state

    state = product_state(d)
    incident = state.incident(incident_id)
    say(f"incident {incident_id}: {incident['status']}" + (f" ({incident.get('resolution')})" if incident.get("resolution") else ""))
    for e in state.audit_trail(incident_id):
        say(f"  audit {e['at']} {e['actor']}: {e['action']} -> {e['outcome']}" + (f" on {e['host']}" if e.get("host") else ""))
    return incident["status"] == "closed"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "deployed":
        argv = argv[1:]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", type=Path, default=REPO / "var" / "drill-deployed")
    p.add_argument("--keep", action="store_true", help="leave the lab and the deployment running")
    a = p.parse_args(argv)
    return run(a.state_dir.resolve(), a.keep)


if __name__ == "__main__":
    sys.exit(main())
