"""The drills of incidents 000, 002a, 002b and 004 (``./run demo 000|002a|002b|004``): lab up
(real Kafka 2.3.0, real ZooKeeper 3.8) → the incident's fault → the health check finds it and starts ONE response → capture, Spark
analysis, report → a restart through the engine (000, 002b: the approval answered by this program as user
"drill-bot", the way on-call would click in the Airflow UI) or an explanation handed to a person (002a, 004) →
lab torn down.

    python -m kafka_lab.drill 000 [--reject] [--keep-lab]

=====  ==================================================  =====================================================
000    ``isolate`` broker 3: it stops serving and logging,   restart it (approved), then its peers looked at again
       stays registered, its process lives
002a   a client sending an API key newer than the broker     explained: which client, which key, no restart
       (60 to 2.3, 32 to 0.10.2) to broker 2 every 3 s
002b   ``kill-cleaner`` on broker 1                          restart it one at a time (approved): the cleaner runs
004    ``zk-stall`` a ZooKeeper follower 2 x syncLimit x     explained with syncLimit x tickTime, no restart
       tickTime, then resumed
=====  ==================================================  =====================================================
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
from kafka_lab.drill import HEALTH, RESPONSE, DrillFailed, detect_until_finding, say, say_mitigation

INCIDENTS = ("000", "002a", "002b", "004")
NEEDS_APPROVAL = ("000", "002b")  # a restart is proposed; the others are explained
# 002a: a request of a newer client than the brokers (the seed: a 0.10 client's ApiVersions, key 18, to 0.9 brokers)
NEWER_API_KEY = {"2.3.0": (60, "DescribeCluster, Kafka 2.8"), "0.10.2.1": (32, "DescribeConfigs, Kafka 0.11, KIP-133")}


@dataclass
class DrillResult:
    incident: str
    incident_id: str
    fault_to_finding_s: float
    capture_s: float | None
    response_s: float
    run_state: str
    incident_status: str
    finding_kind: str
    ok: bool


def inject(lab, incident: str) -> None:
    """The incident's fault (004's stall is over when this returns)."""
    if incident == "000":
        say("fault: broker 3 isolated -- its request handling held and its log appenders blocked; it stays registered, its process lives")
        lab.isolate(3)
    elif incident == "002a":
        key, what = NEWER_API_KEY[lab.kafka]
        say(f"fault: a client at the lab's bad-client address sends API key {key} ({what}, unknown to Kafka {lab.kafka}) "
            "to broker 2 every 3 s")
        lab.start_bad_client(2, api_key=key, interval_s=3)
    elif incident == "002b":
        say("fault: broker 1's kafka-log-cleaner-thread-0 killed (log-cleaner.log: 'Error due to')")
        lab.kill_cleaner(1)
    elif incident == "004":
        from kafka_lab.zookeeper import SYNC_LIMIT, TICK_TIME_MS, quorum_modes

        follower = min(z for z, m in quorum_modes().items() if m == "follower")
        seconds = 2 * SYNC_LIMIT * TICK_TIME_MS / 1000
        say(f"fault: ZooKeeper follower zk{follower} stopped (SIGSTOP) for {seconds:.0f} s = 2 x syncLimit {SYNC_LIMIT} x "
            f"tickTime {TICK_TIME_MS} ms, then resumed; no health check runs during the stall: the next scheduled one "
            "finds it after the fact")
        lab.zk_stall(follower, seconds)
    else:
        raise ValueError(f"unknown incident {incident!r}; one of {INCIDENTS}")


def run_incident(lab, dags, incident: str, option: str = "Approve", finding_timeout_s: float = 600) -> DrillResult:
    """One incident on a running, healthy lab (Airflow prepared): fault → finding → response. Timings in seconds."""
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore

    take_triggered_confs(RESPONSE)
    t_fault = time.monotonic()
    inject(lab, incident)
    health = dags.get_dag(HEALTH)
    confs = detect_until_finding(health, "lab", timeout_s=finding_timeout_s)
    t_found = time.monotonic() - t_fault
    conf = confs[0]
    opened = incident_of(conf)  # the conf names the incident; its finding is on the record
    trigger = opened.get("trigger") or {}
    details = trigger.get("details") or {}
    zk = details.get("subject") if details.get("problem") == "zookeeper_member" else None
    say(f"fault → incident in {t_found:.1f}s: {trigger.get('kind')} on brokers {opened.get('broker_ids')}"
        + (f", ZooKeeper {zk}" if zk else "") + f": {str(opened.get('reason') or '')[:300]}")

    t0 = time.monotonic()
    if incident in NEEDS_APPROVAL:
        say(f"the approvals will be answered by this drill as user 'drill-bot': moving leadership off the broker first "
            f"(asked only for a broker that does not serve): {option}; the restart: {option}")
        answers = incident_answers(option, option, user="drill-bot", timeout_s=900)
    else:
        say("no restart applies to this incident: the response captures, analyses and explains it (a move of leadership, "
            "asked only for a broker that does not serve, would be answered Reject)")
        answers = incident_answers("Reject", "Reject", user="drill-bot", timeout_s=900)
    with answers:
        run = dags.get_dag(RESPONSE).test(run_conf=conf)
    if answers.error:
        raise answers.error
    say_mitigation(run)
    response_s = time.monotonic() - t0
    capture_s = next((ti.duration for ti in run.get_task_instances() if ti.task_id == "capture"), None)

    store = IncidentStore(load_cluster("lab"))
    inc = store.get(conf["incident_id"])
    say(f"incident-response run: {run.state} in {response_s:.1f}s (capture {capture_s or 0:.1f}s)")
    say(f"incident {inc['id']}: {inc['status']}")
    for f in inc.get("findings", []):
        if f["severity"] in ("critical", "warning"):
            say(f"finding: {f['kind']}: {f['summary'][:300]}")
    if inc.get("explanation"):
        ex = inc["explanation"]
        say(f"why no restart: {ex.get('why_no_restart')}")
        say(f"advice: {ex.get('advice')}")
        say(f"runbook: {ex.get('runbook')}")
    for entry in store.audit_trail(inc["id"]):
        say(f"audit {entry['at']} {entry['actor']}: {entry['action']} → {entry['outcome']}" + (f" on {entry['host']}" if entry.get("host") else ""))
    say(f"evidence bundle: {inc.get('bundle_dir')}")
    expected = ("closed" if option == "Approve" else "needs_person") if incident in NEEDS_APPROVAL else "needs_person"
    ok = run.state == "success" and inc["status"] == expected
    if not ok:
        say(f"DRILL FAILED: expected run success and incident {expected}")
    return DrillResult(incident, inc["id"], t_found, capture_s, response_s, str(run.state), inc["status"], trigger.get("kind"), ok)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafka_lab.drill", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("incident", choices=INCIDENTS)
    p.add_argument("--state-dir", type=Path, default=REPO / "var" / "drill")
    p.add_argument("--reject", action="store_true", help="000/002b: answer Reject instead of Approve")
    p.add_argument("--keep-lab", action="store_true")
    p.add_argument("--verbose", action="store_true", help="show Airflow's INFO logs of every task")
    args = p.parse_args(argv)
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO" if args.verbose else "WARNING")
    from kafka_lab import Lab

    state = args.state_dir.resolve()
    lab = Lab(state)
    t0 = time.monotonic()
    say(f"starting the lab in {state} (3-node ZooKeeper, 3 sshd hosts, 3 Apache Kafka {lab.kafka} brokers, client load)")
    lab.up()
    try:
        say(f"lab up in {time.monotonic() - t0:.1f}s")
        prepare(state / "airflow", lab.airflow_env())
        result = run_incident(lab, load_dags(), args.incident, "Reject" if args.reject else "Approve")
        return 0 if result.ok else 1
    except DrillFailed as exc:
        say(f"DRILL FAILED: {exc}")
        return 1
    finally:
        if args.keep_lab:
            say("lab left running (--keep-lab); stop it with: python -m kafka_lab down")
        else:
            lab.down()
            say("lab torn down")


if __name__ == "__main__":
    sys.exit(main())
