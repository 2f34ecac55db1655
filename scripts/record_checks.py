"""Record real health checks on the lab around a fault, for the detectors' replay tests.

    python scripts/record_checks.py zk_stall OUT.json     # ZooKeeper follower stalled past syncLimit x tickTime
    python scripts/record_checks.py isolate OUT.json      # broker 3 isolated (incident 000)

Needs a running lab (``python -m kafka_lab up``, same KAFKA_RUNBOOKS_SLOT, KAFKA_LAB_HOME or --state).
Writes {"fault": ..., "snapshots": [ClusterSnapshot.to_dict()...], "history": {series: [samples]}}.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import threading
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("fault", choices=["zk_stall", "isolate"])
    ap.add_argument("out")
    ap.add_argument("--state", default=None)
    ap.add_argument("--after", type=int, default=5, help="checks after the fault")
    a = ap.parse_args()
    from kafka_lab import Lab
    from kafka_lab.zookeeper import quorum_modes

    lab = Lab(a.state)
    os.environ.update(lab.airflow_env())
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.history import HistoryStore
    from kafka_runbooks.detect.observe import check_once

    with tempfile.TemporaryDirectory() as tmp:
        raw = {**lab.cluster_settings()["lab"], "incident_base": tmp}
        raw["canary"] = {"enabled": True}
        config = ClusterConfig.from_dict("lab", raw)
        snaps = []
        for _ in range(2):
            snaps.append(check_once(config)[0])
            time.sleep(2)
        fault: dict = {"name": a.fault}
        if a.fault == "zk_stall":
            follower = min(z for z, m in quorum_modes().items() if m == "follower")
            t = threading.Thread(target=lambda: fault.update(lab.zk_stall(follower, 5.0)))
            t.start()
            time.sleep(1.0)
            snaps.append(check_once(config)[0])  # during the stall
            t.join()
        else:
            fault.update(lab.isolate(3) or {})
        for _ in range(a.after):
            snaps.append(check_once(config)[0])
            time.sleep(2)
        if a.fault == "isolate":
            lab.reset()
        history = HistoryStore(config.incident_base, "lab", config.health.history_samples).read_all()
        doc = {"fault": fault, "snapshots": [s.to_dict() for s in snaps],
               "history": {k: [s.to_dict() for s in v] for k, v in history.items()}}
    with open(a.out, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    print(f"{len(snaps)} checks recorded in {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
