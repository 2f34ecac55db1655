"""The health check as its schedule would run it beside a remediation, in a process of its own (as on a worker):
``python health_loop.py OUT STOP_FILE`` checks the cluster "lab" every 2 s, reading the maintenance lock and the
plans' ledgers, and appends one JSON line per check to OUT until STOP_FILE exists.

Not a thread of the test: dag.test() runs its tasks in the test's process, and the Task SDK's in-process supervisor
swaps the module global ``task_runner.SUPERVISOR_COMMS`` out while it answers a request -- a hook's connection
lookup from another thread of that process raced with the task and failed it ("name 'SUPERVISOR_COMMS' is not
defined")."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main(out: str, stop_file: str) -> None:
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.observe import check_once
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.remediate.activity import product_activity

    config = load_cluster("lab")
    with open(out, "a") as fh:
        while not Path(stop_file).exists():
            try:
                with ZooKeeperHook(config.zk_conn_id).session() as zk:
                    activity = product_activity(config, zk)
                _, findings = check_once(config, activity=activity)
                row = {"when": "during" if any(a.running for a in activity) else "outside",
                       "findings": [{"kind": f.kind, "summary": f.summary[:300], "broker_ids": list(f.broker_ids),
                                     "during_plan": bool(f.details.get("during_plan"))} for f in findings]}
            except Exception as exc:  # noqa: BLE001 - reported to the test
                row = {"error": f"{type(exc).__name__}: {exc}"}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            time.sleep(2.0)


if __name__ == "__main__":
    main(*sys.argv[1:3])
