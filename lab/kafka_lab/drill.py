"""The demo drill: lab up (real Kafka 2.3.0) → deadlock broker 3 → health check finds it → incident response runs
capture, Spark analysis, report and plan → the approval is answered → broker 3 restarted →
recovery verified → incident closed → lab torn down.

    python -m kafka_lab.drill [--broker 3] [--reject] [--keep-lab]
    python -m kafka_lab.drill 000|002a|002b|003|004|all|deployed

The approval is answered by this program (user "drill-bot"), the way on-call would click Approve
in the Airflow UI; it says so in its output.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kafka_lab.airflow_home import REPO, incident_of, load_dags, prepare, take_triggered_confs
from kafka_lab.approvals import incident_answers

HEALTH = "kafka_health_check_lab"  # the lab cluster's health-check DAG (one per cluster: runbook/detect.health_dag_id)
RESPONSE = "kafka_incident_response"


class DrillFailed(RuntimeError):
    """A drill could not go on (no finding in time, ...): said in one line, never a traceback."""


def say(msg: str) -> None:
    print(f"[drill] {msg}", flush=True)


def detect_until_finding(health_dag, cluster: str, timeout_s: float) -> list[dict]:
    """Runs the health check as its schedule would, until it opens an incident (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        health_dag.test(run_conf={"cluster": cluster})
        confs = take_triggered_confs(RESPONSE)
        if confs:
            return confs
        if time.monotonic() > deadline:
            raise DrillFailed(f"the health check raised no finding within {timeout_s:.0f}s")


def say_mitigation(run) -> None:
    """What the mitigation (move leadership off the broker first) did in a response run, in a line or two."""
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    plan, mitigate = tis.get("plan_mitigation"), tis.get("mitigate")
    if plan is None or mitigate is None:
        return
    out = mitigate.xcom_pull(task_ids="mitigate") if mitigate.state == "success" else None
    if out:
        t = out.get("timing") or {}
        say(f"mitigation: moved {len(out['moved'])} partition(s) off broker {out['broker_id']} at {out.get('at')} "
            f"(reassignment {t.get('reassign_s')} s, election {t.get('elect_s')} s, leaders moved {t.get('moved_s')} s); "
            f"staying down until the restart: {sorted(out.get('stays_offline') or {}) or 'none'}; its JVM was not touched")
    elif mitigate.state != "failed":
        say(f"mitigation: plan {plan.state}, approval {tis['approve_mitigation'].state}, move {mitigate.state}: nothing moved")
    else:
        m = recorded_mitigation(run)
        say(f"mitigation: the move {str(m.get('outcome', 'halted')).upper()} ({m.get('code')}): "
            + " / ".join(str(x) for x in (m.get("reason") or ["see the mitigate task's log"])[:2]) + "; the capture went on")


def recorded_mitigation(run) -> dict:
    """The response run's incident's recorded mitigation (``runbook/mitigate.py``'s ``on_incident``); {} if none."""
    from kafka_runbooks.config import load_cluster  # deferred: the drill module loads before the lab's Airflow environment is set
    from kafka_runbooks.incidents.store import IncidentStore  # deferred: as above

    conf = run.conf or {}
    if not conf.get("incident_id"):
        return {}
    try:
        incident = IncidentStore(load_cluster(conf.get("cluster") or "lab")).get(conf["incident_id"]) or {}
    except Exception as exc:  # noqa: BLE001 - a line of the drill's output, never its verdict
        return {"reason": [f"the incident's record could not be read: {type(exc).__name__}: {exc}"]}
    return dict(incident.get("mitigation") or {})


@dataclass(frozen=True)
class Drill001:
    ok: bool  # the response run succeeded and the incident ended as the answer asks (Approve: closed, else needs_person)
    incident_id: str
    run_state: str


def run_001(lab, dags, broker: int = 3, option: str = "Approve", finding_timeout_s: float = 600,
            user: str = "drill-bot", mitigation: str | None = None) -> Drill001:
    """Incident 001 on a running, healthy lab (Airflow prepared): deadlock -> incident -> response, the approvals
    answered as ``user``: the restart's ``option``, the mitigation's (move leadership off the broker first, asked before
    the capture) ``mitigation`` (default: the same as ``option``) -> verdict."""
    from kafka_runbooks.config import load_cluster

    config = load_cluster("lab")
    say(f"injecting fault: a Java-level deadlock in broker {broker}'s JVM that its request handlers wait behind (seed incident 001)")
    t_fault = time.monotonic()
    lab.deadlock(broker)
    confs = detect_until_finding(dags.get_dag(HEALTH), "lab", timeout_s=finding_timeout_s)  # a bound, not a speed: the machine may be loaded
    opened = incident_of(confs[0])  # the conf names the incident; its finding is on the record
    say(f"fault → incident in {time.monotonic() - t_fault:.1f}s ({(opened.get('trigger') or {}).get('kind')}, held for the "
        f"consecutive checks): incident {confs[0]['incident_id']}, brokers {confs[0]['broker_ids']}: {opened.get('reason')}")

    mitigation = mitigation or option
    say(f"the approvals will be answered by this drill as user {user!r}: move leadership off broker {broker} first "
        f"(mitigate-first): {mitigation}; the restart: {option}")
    with incident_answers(option, mitigation, user=user, timeout_s=900) as answers:
        run = dags.get_dag(RESPONSE).test(run_conf=confs[0])
    if answers.error:
        raise answers.error
    say_mitigation(run)

    from kafka_runbooks.incidents.store import IncidentStore

    store = IncidentStore(config)
    incident = store.get(confs[0]["incident_id"])
    say(f"incident-response run: {run.state}")
    say(f"incident {incident['id']}: {incident['status']}" + (f" ({incident.get('resolution')})" if incident.get("resolution") else ""))
    for f in incident.get("findings", []):
        if f["severity"] == "critical":
            say(f"finding: {f['summary']}")
    for entry in store.audit_trail(incident["id"]):
        say(f"audit {entry['at']} {entry['actor']}: {entry['action']} → {entry['outcome']}" + (f" on {entry['host']}" if entry.get("host") else ""))
        if entry["action"] == "capture":
            for reason in entry["details"].get("reasons", []):
                say(f"      capture: {reason}")
    say(f"evidence bundle: {incident.get('bundle_dir')}")
    say(f"report: {incident.get('report')}")
    # Approve: restarted and verified -> closed; Reject: nothing changed, a person owns it -> needs_person
    expected = "closed" if option == "Approve" else "needs_person"
    ok = run.state == "success" and incident["status"] == expected
    if not ok:
        say(f"DRILL FAILED: expected run success and incident {expected}")
    return Drill001(ok, incident["id"], run.state)


def run_drill(state_dir: Path, broker: int, option: str, keep_lab: bool) -> int:
    from kafka_lab import Lab

    lab = Lab(state_dir)
    t0 = time.monotonic()
    say(f"starting the lab in {state_dir} (3-node ZooKeeper, 3 sshd hosts, 3 Apache Kafka {lab.kafka} brokers, client load)")
    lab.up()
    try:
        say(f"lab up in {time.monotonic() - t0:.1f}s")
        prepare(state_dir / "airflow", lab.airflow_env())
        return 0 if run_001(lab, load_dags(), broker, option).ok else 1
    except DrillFailed as exc:
        say(f"DRILL FAILED: {exc}")
        return 1
    finally:
        if keep_lab:
            say("lab left running (--keep-lab); stop it with: python -m kafka_lab down")
        else:
            lab.down()
            say("lab torn down")


# ``./run demo <name>``: the other incidents' drills, each in its own module (its ``main(argv)`` gets the name first)
DRILLS = {"000": "kafka_lab.incident_drills", "002a": "kafka_lab.incident_drills", "002b": "kafka_lab.incident_drills",
          "004": "kafka_lab.incident_drills", "003": "kafka_lab.drill_003", "deployed": "kafka_lab.drill_deployed",
          "all": "kafka_lab.drill_all"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in DRILLS:
        import importlib

        return importlib.import_module(DRILLS[argv[0]]).main(argv)
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", type=Path, default=REPO / "var" / "drill")
    p.add_argument("--broker", type=int, default=3)
    p.add_argument("--reject", action="store_true", help="answer Reject instead of Approve")
    p.add_argument("--keep-lab", action="store_true")
    p.add_argument("--verbose", action="store_true", help="show Airflow's INFO logs of every task")
    args = p.parse_args(argv)
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO" if args.verbose else "WARNING")
    return run_drill(args.state_dir.resolve(), args.broker, "Reject" if args.reject else "Approve", args.keep_lab)


if __name__ == "__main__":
    sys.exit(main())
