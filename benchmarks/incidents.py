"""Figures for issue #8, measured on one lab (prints them; asserts nothing about speed).

    python benchmarks/incidents.py [000 002a 002b 004]

Per drill (lab/kafka_lab/incident_drills.py, through Airflow's dag.test() as the tests run it):
- fault → finding: the fault injected until the health check opens the incident and starts its response
- capture: the response's capture task (SSH to every broker host, and for 004 to every ZooKeeper host)
- response: the whole response run (capture, Spark analysis, report, choice; approvals answered Reject so no
  broker is restarted and the lab is reset in between)
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    from kafka_lab import Lab
    from kafka_lab.airflow_home import load_dags, prepare
    from kafka_lab.incident_drills import INCIDENTS, run_incident

    wanted = [a for a in (sys.argv[1:] if argv is None else argv)] or list(INCIDENTS)
    state = REPO / "var" / "bench-incidents"
    lab = Lab(state / "lab")
    rows = []
    t0 = time.monotonic()
    lab.up()
    try:
        print(f"lab up in {time.monotonic() - t0:.1f}s", flush=True)
        prepare(state / "airflow", lab.airflow_env())
        dags = load_dags()
        for incident in wanted:
            lab.reset()
            rows.append(run_incident(lab, dags, incident, option="Reject"))
    finally:
        lab.down()
    print()
    print(f"{'drill':6} {'finding':28} {'fault→finding s':>16} {'capture s':>10} {'response s':>11}  outcome")
    for r in rows:
        print(f"{r.incident:6} {r.finding_kind:28} {r.fault_to_finding_s:16.1f} {(r.capture_s or 0):10.1f} {r.response_s:11.1f}  "
              f"{r.run_state}/{r.incident_status}{'' if r.ok else ' (DRILL FAILED)'}")
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
