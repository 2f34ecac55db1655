"""Every drill in one go, on one lab (``./run demo all``): the lab comes up once, each drill runs on it healed
(``Lab.reset()``) with its own incident store and health history, and one line per drill says how it went.

    python -m kafka_lab.drill all [--only 001,004] [--keep-lab]

=====  ==========================================================================================================
001    a JVM deadlock in broker 3 -> incident -> capture, analysis -> approved restart through the engine -> closed
000    broker 3 isolated (serves nothing, logs nothing) -> approved restart, peers looked at again -> closed
002a   a client's unknown API key -> explained (client, key, version), nothing restarted -> needs a person
002b   a dead log cleaner -> approved restart, a holder of every offsets partition kept up -> closed
004    a ZooKeeper follower stalled 2 x syncLimit x tickTime, no check during it -> found after the fact, explained
003    automatic rebalance vs a returning broker (hazard, storm, divergence); then the deferred election, a stuck
       follower found, explained and fixed through the engine, preferred leadership restored
=====  ==========================================================================================================

Exit status 0 only when every drill passed. Each verdict line: ``drill <name> PASS|FAIL <seconds> s: <what>``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

from kafka_lab.airflow_home import REPO, load_dags, prepare
from kafka_lab.drill import say

ORDER = ("001", "000", "002a", "002b", "004", "003")


def _own_store(lab, state: Path, name: str) -> None:
    """This drill's own incident store, bundles and health history (nothing of an earlier drill is seen)."""
    clusters = lab.cluster_settings()
    base = state / "drills" / f"{name}-{int(time.time())}"
    clusters["lab"] = {**clusters["lab"], "incident_base": str(base / "incidents"), "bundle_base": str(base / "bundles")}
    os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"] = json.dumps(clusters)


def run_one(lab, dags, name: str) -> tuple[bool, str]:
    """(passed, what it showed) of one drill on the running lab."""
    if name == "001":
        from kafka_lab.drill import run_001

        return run_001(lab, dags).ok, "deadlock -> incident -> approved restart -> closed"
    if name == "003":
        from kafka_lab.drill_003 import run_003

        ok, figures = run_003(lab)
        first = (figures["deferred"].get("first_election") or {})
        how = ("election gave up early on the stuck follower; fixed by an approved restart; election re-run"
               if first.get("gave_up") else "election completed at the first try")
        return ok, f"hazard/storm/divergence raised; {how}; restored {figures['deferred'].get('restored')}"
    from kafka_lab.airflow_home import take_triggered_confs
    from kafka_lab.drill import RESPONSE
    from kafka_lab.incident_drills import run_incident

    take_triggered_confs(RESPONSE)
    r = run_incident(lab, dags, name)
    return r.ok, (f"{r.finding_kind} in {r.fault_to_finding_s:.0f} s, response {r.run_state} in {r.response_s:.0f} s, "
                  f"incident {r.incident_status}")


def main(argv: list[str] | None = None) -> int:
    from kafka_lab import Lab

    p = argparse.ArgumentParser(prog="kafka_lab.drill all", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", type=Path, default=REPO / "var" / "drill-all")
    p.add_argument("--only", default=",".join(ORDER), help="comma-separated drills, in this order")
    p.add_argument("--keep-lab", action="store_true")
    p.add_argument("--verbose", action="store_true", help="show Airflow's INFO logs of every task")
    argv = list(argv or [])
    args = p.parse_args(argv[1:] if argv[:1] == ["all"] else argv)
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO" if args.verbose else "WARNING")
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(ORDER))
    if unknown:
        p.error(f"unknown drills {unknown}; one of {list(ORDER)}")
    state = args.state_dir.resolve()
    lab = Lab(state)
    t_all = time.monotonic()
    say(f"starting the lab in {state} (3 Apache Kafka {lab.kafka} brokers) for drills {names}")
    lab.up()
    verdicts: list[tuple[str, bool, float, str]] = []
    try:
        say(f"lab up in {time.monotonic() - t_all:.1f}s")
        prepare(state / "airflow", lab.airflow_env())
        dags = load_dags()
        for name in names:
            t0 = time.monotonic()
            say(f"===== drill {name}")
            try:
                healed = lab.reset()
                if healed:
                    say(f"lab healed: {healed}")
                _own_store(lab, state, name)
                ok, what = run_one(lab, dags, name)
            except Exception as exc:  # noqa: BLE001 - one drill's failure is its verdict; the others still run
                traceback.print_exc()
                ok, what = False, f"{type(exc).__name__}: {str(exc)[:300]}"
            verdicts.append((name, ok, time.monotonic() - t0, what))
            say(f"drill {name} {'PASS' if ok else 'FAIL'} {time.monotonic() - t0:.0f} s: {what}")
    finally:
        if args.keep_lab:
            say("lab left running (--keep-lab); stop it with: python -m kafka_lab down")
        else:
            lab.down()
    print(f"\n==== drills on one Kafka {lab.kafka} lab, {time.monotonic() - t_all:.0f} s in all (lab up included)", flush=True)
    for name, ok, secs, what in verdicts:
        print(f"drill {name} {'PASS' if ok else 'FAIL'} {secs:.0f} s: {what}", flush=True)
    return 0 if verdicts and all(ok for _, ok, _, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
