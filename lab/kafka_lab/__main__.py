"""python -m kafka_lab [--state DIR] COMMAND

    up [--profile default|rebalance]
                                       start the lab        down     stop it        status   what runs, where
    reset                              heal every fault     env      the Airflow env (export lines)
    hang B | unhang B | isolate B | unisolate B | deadlock B | kill-cleaner B
    pause B | resume B | kill B | stop B | start B | zk-flap B [--times N]
    zk-stall Z [--seconds S] | bad-request B [--api-key K]
    profile default|rebalance          roll the brokers with that profile (issue 7)
    hold-fetchers B | release-fetchers B | hold-controller-requests B | release-controller-requests
    deploy up|status|down [--deploy-state DIR]   a real Airflow deployment (deployment.py) on this lab: PostgreSQL,
                                       Redis, api-server, scheduler, dag-processor, triggerer, two Celery workers;
                                       "up" starts the lab first when it is not running; "down" leaves the lab up
    fence-fetcher B TOPIC P            broker B's fetcher drops TOPIC-P as on FENCED_LEADER_EPOCH (a stuck follower)
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time

from .lab import Lab
from .kafka_home import KafkaHomeError
from .procs import LabError

BROKER_FAULTS = ("hang", "unhang", "isolate", "unisolate", "deadlock", "kill-cleaner", "pause", "resume", "kill", "stop", "start",
                 "hold-fetchers", "release-fetchers", "hold-controller-requests")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kafka_lab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--state", default=None, help="state dir (default $KAFKA_LAB_HOME or <repo>/var/lab)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up")
    up.add_argument("--profile", default=None)
    sub.add_parser("profile").add_argument("name")
    for c in ("down", "status", "env", "reset", "release-controller-requests"):
        sub.add_parser(c)
    for c in BROKER_FAULTS:
        sub.add_parser(c).add_argument("broker_id", type=int)
    p = sub.add_parser("zk-flap")
    p.add_argument("broker_id", type=int)
    p.add_argument("--times", type=int, default=3)
    p = sub.add_parser("fence-fetcher")
    p.add_argument("broker_id", type=int)
    p.add_argument("topic")
    p.add_argument("partition", type=int)
    p = sub.add_parser("zk-stall")
    p.add_argument("zk_id", type=int)
    p.add_argument("--seconds", type=float, default=None)
    p = sub.add_parser("deploy")
    p.add_argument("action", choices=("up", "status", "down"))
    p.add_argument("--deploy-state", default=None, help="deployment state dir (default $KAFKA_RUNBOOKS_DEPLOY_HOME or <repo>/var/deploy)")
    p = sub.add_parser("bad-request")
    p.add_argument("broker_id", type=int)
    p.add_argument("--api-key", type=int, default=60)
    a = ap.parse_args(argv)
    lab = Lab(a.state)
    t0 = time.monotonic()
    try:
        result = run(lab, a)
    except (LabError, KafkaHomeError) as exc:
        print(f"kafka_lab {a.cmd}: {exc}", file=sys.stderr)
        return 1
    finally:
        lab.close()
    if isinstance(result, str):
        print(result, end="" if result.endswith("\n") else "\n")
    elif result is not None:
        print(json.dumps(result, indent=2, default=str))
    print(f"[{a.cmd} took {time.monotonic() - t0:.1f}s]", file=sys.stderr)
    return 0


def run(lab: Lab, a: argparse.Namespace):
    if a.cmd == "deploy":
        return deploy(lab, a.action, a.deploy_state)
    if a.cmd == "up":
        lab.up(a.profile)
        return (f"lab up in {lab.up_seconds:.1f}s (Kafka {lab.kafka}, profile {lab.profile}); state in {lab.state}; "
                f"env: {lab.state / 'airflow.env'}")
    if a.cmd == "down":
        return f"lab down; ended {len(lab.down())} processes"
    if a.cmd == "status":
        return lab.status()
    if a.cmd == "env":
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in sorted(lab.airflow_env().items()))
    if a.cmd == "reset":
        return {"reset": lab.reset()}
    if a.cmd == "profile":
        return {"profile": a.name, "done": lab.use_profile(a.name)}
    if a.cmd == "release-controller-requests":
        return {"released_on": lab.release_controller_requests()}
    if a.cmd == "zk-flap":
        return {"sessions": lab.zk_flap(a.broker_id, a.times)}
    if a.cmd == "fence-fetcher":
        return lab.fence_fetcher(a.broker_id, a.topic, a.partition)
    if a.cmd == "zk-stall":
        return lab.zk_stall(a.zk_id, a.seconds)
    if a.cmd == "bad-request":
        return lab.bad_request(a.broker_id, a.api_key)
    if a.cmd == "stop":
        p = lab.stop(a.broker_id, check=False)
        if p.returncode != 0:
            raise LabError(f"kafka-stop exited {p.returncode}: {p.stdout}{p.stderr}")
        return p.stdout
    if a.cmd == "start":
        return lab.start(a.broker_id)
    return getattr(lab, a.cmd.replace("-", "_"))(a.broker_id)


def deploy(lab: Lab, action: str, state: str | None):
    from .deployment import Deployment

    d = Deployment(state)
    if action == "status":
        return d.status()
    if action == "down":
        return {"stopped": d.down(), "lab": f"still up; stop it with: python -m kafka_lab --state {lab.state} down"}
    if not all(lab.status()["processes"].values()):  # not every lab process runs: (re)start the lab
        lab.up()
    out = d.up(lab)
    out["sign_in"] = {u: f"password in {d.passwords_file}" for u in d.users}
    return out


if __name__ == "__main__":
    sys.exit(main())
