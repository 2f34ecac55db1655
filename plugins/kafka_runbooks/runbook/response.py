"""The incident response's choices after the analysis (``remediate/choice.py``): restart through the engine, or
explain and hand over to a person; and, after a restart, whether the restarted broker's peers need a rolling restart
too."""

from __future__ import annotations

import time
from typing import Any, Callable

from kafka_runbooks.remediate.choice import RESTART
from kafka_runbooks.runbook import finding_records, plans
from kafka_runbooks.runbook.task import Task

ROLLING_RESTART_DAG = "kafka_rolling_restart"
FOLLOW_UP_KEY = "follow_up"
__all__ = ["FOLLOW_UP_KEY", "RESTART", "ROLLING_RESTART_DAG", "choose", "explain", "follow_up"]


def recorded_choice(incident: Any, config_of: Callable[[str], Any] = plans.load_config, report: Any = None):
    """(the incident's trigger, its remediation) from what the state database holds: the detection's finding that
    opened it and the analysis's findings the report task recorded on it (``finding_records``, their digest checked
    against the file and ``report``, the report task's reference) -- never from XCom."""
    from kafka_runbooks.remediate.choice import remediation_for  # keeps DAG parsing fast: loaded when a task runs

    record = finding_records.incident_record(config_of(incident["cluster"]), incident) if isinstance(incident, dict) else None
    trigger = finding_records.trigger_of(record)
    return trigger, remediation_for(trigger, finding_records.analysis_of(record, report))


def choose(incident: Any, report: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config):
    """The incident's remediation (``remediate.choice.remediation_for`` over the recorded findings: ``report`` is the
    report task's reference, which says only that they were recorded), logged and pushed under ``remediation`` --
    without its findings: their kinds only."""
    _, choice = recorded_choice(incident, config_of, report)
    task.log.warning("remediation: %s (%s)", choice.kind, choice.reason)
    task.push("remediation", choice.to_dict())
    return choice


def explain(incident: dict[str, Any], report: Any, remediation: Any, task: Task,
            config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """No restart applies: records on the incident what was found, why nothing is restarted, what to do (the
    runbook), and returns it for the close-out. The remediation is chosen again from the recorded findings
    (``recorded_choice``): ``remediation``, what the choice task pushed, is only told apart from it in the log."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    trigger, rem = recorded_choice(incident, config_of, report)
    if isinstance(remediation, dict) and remediation.get("kind") != rem.kind:
        task.log.warning("the choice task pushed %r; chosen again from the recorded findings: %r", remediation.get("kind"), rem.kind)
    explanation = {
        "why_no_restart": rem.reason,
        "advice": rem.advice or (trigger.details.get("advice") if trigger else None),
        "runbook": rem.runbook,
        "detected": trigger.summary if trigger else None,
        "analysis": [{"kind": f.kind, "summary": f.summary} for f in rem.findings],
        "report": report.get("report") if isinstance(report, dict) else None,
    }
    store = IncidentStore(config_of(incident["cluster"]))
    store.update(incident["incident_id"], explanation=explanation)
    store.audit(incident["incident_id"], actor=task.actor, action="explain", outcome="no_restart", details=explanation)
    for f in explanation["analysis"]:
        task.log.warning("analysis: %s: %s", f["kind"], f["summary"])
    task.log.warning("no restart: %s; see %s", explanation["why_no_restart"], explanation["runbook"])
    return explanation


def follow_up(incident: dict[str, Any], restart: Any, remediation: Any, task: Task,
              config_of: Callable[[str], Any] = plans.load_config, sleep=time.sleep) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """After the restarted broker(s) came back: ``health.consecutive_checks`` health checks (``health.recheck_s``
    apart); peers that show a symptom in every one get a rolling restart. Returns (the result, pushed under
    ``FOLLOW_UP_KEY``; the ``kafka_rolling_restart`` run to start -- its run id and conf -- or None)."""
    from kafka_runbooks.detect.observe import check_once  # keeps DAG parsing fast: the clients load when a task runs
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.choice import peers_needing_restart  # keeps DAG parsing fast: loaded when a task runs

    rem = remediation if isinstance(remediation, dict) else {}
    if not rem.get("follow_up_peers"):
        result = {"peers": [], "why": "this incident's remediation has no follow-up on the peers"}
        task.push(FOLLOW_UP_KEY, result)
        return result, None
    config = config_of(incident["cluster"])
    restarted = list((restart or {}).get("restarted") or incident["broker_ids"]) if isinstance(restart, dict) else list(incident["broker_ids"])
    observations, peers = [], set()
    for n in range(config.health.consecutive_checks):
        if n:
            sleep(config.health.recheck_s)
        snapshot, findings = check_once(config)
        peers = set(snapshot.live_broker_ids) | set(config.hosts)
        observations.append(findings)
    ids, why = peers_needing_restart(observations, restarted, peers)
    store = IncidentStore(config)
    result = {"restarted": restarted, "checks": len(observations), "peers": ids, "why": {str(k): v for k, v in why.items()}}
    task.push(FOLLOW_UP_KEY, result)  # also when the trigger that follows ends the task
    if not ids:
        store.audit(incident["incident_id"], actor=task.actor, action="follow_up_peers", outcome="peers healthy", details=result)
        task.log.info("peers of %s look healthy after %d checks: no rolling restart", restarted, len(observations))
        return result, None
    conf = {"cluster": config.name, "brokers": ids, "mode": "execute",
            "reason": f"incident {incident['incident_id']}: after restarting {restarted}, peers {ids} still show the symptom: "
                      + "; ".join(f"{b}: {w}" for b, w in sorted(why.items()))[:1800],
            "canary": config.canary.enabled, "resume": False}
    run_id = f"followup__{incident['incident_id']}"
    store.audit(incident["incident_id"], actor=task.actor, action="follow_up_peers", outcome="rolling restart proposed",
                details={**result, "dag": ROLLING_RESTART_DAG, "run_id": run_id})
    store.update(incident["incident_id"], follow_up={"dag": ROLLING_RESTART_DAG, "run_id": run_id, "brokers": ids})
    task.log.warning("peers %s still show the symptom: starting %s (it asks for its own approval)", ids, ROLLING_RESTART_DAG)
    return result, {"run_id": run_id, "conf": conf}
