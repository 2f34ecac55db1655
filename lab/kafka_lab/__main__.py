"""python -m kafka_lab up|down|status|deadlock N|stop N|start N|restart N|env"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from .lab import Lab


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafka_lab")
    ap.add_argument("--state", default=None, help="state dir (default $KAFKA_LAB_HOME or <repo>/var/lab)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for c in ("up", "down", "status", "env"):
        sub.add_parser(c)
    for c in ("deadlock", "stop", "start", "restart"):
        sub.add_parser(c).add_argument("broker_id", type=int)
    a = ap.parse_args(argv)
    lab = Lab(a.state)
    t0 = time.monotonic()
    if a.cmd == "up":
        lab.up()
        print(f"lab up in {time.monotonic() - t0:.1f}s; state in {lab.state}; env: {lab.state / 'airflow.env'}")
    elif a.cmd == "down":
        killed = lab.down()
        print(f"lab down in {time.monotonic() - t0:.1f}s; ended {len(killed)} processes")
    elif a.cmd == "status":
        print(json.dumps(lab.status(), indent=2))
    elif a.cmd == "env":
        for k, v in sorted(lab.airflow_env().items()):
            print(f"export {k}={shlex.quote(v)}")
    elif a.cmd == "deadlock":
        lab.deadlock(a.broker_id)
        print(f"deadlock injected into broker {a.broker_id}")
    elif a.cmd == "stop":
        lab.stop(a.broker_id)
        print(f"broker {a.broker_id} killed (SIGKILL)")
    elif a.cmd == "start":
        print(lab.start(a.broker_id), end="")
    elif a.cmd == "restart":
        print(lab.restart(a.broker_id), end="")
    lab._close_kazoo()
    return 0


if __name__ == "__main__":
    sys.exit(main())
