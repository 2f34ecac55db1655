"""An incident response's first and last word, as the application says them: open an incident from a request (or
take over the one the health check opened: one response per cluster at a time), and close it -- or leave it to a
person, saying why -- at the end of the run. And ``needs_person``, shared with detection."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from kafka_runbooks import metrics
from kafka_runbooks.runbook import finding_records, plans
from kafka_runbooks.runbook.errors import Stop
from kafka_runbooks.runbook.task import Task
from kafka_runbooks.urls import incident_url

APPROVE = "Approve"
RESPONSE_DAG = "kafka_incident_response"


def approval_decision(approval: Any) -> tuple[str | None, str]:
    """(chosen option, who) from the approval's decision; (None, ...) when no answer exists."""
    if not isinstance(approval, dict) or not approval.get("chosen_options"):
        return None, "nobody"
    if approval.get("timedout"):
        return str(approval["chosen_options"][0]), "nobody (approval timed out)"
    user = approval.get("responded_by_user")
    who = (user.get("name") or user.get("id")) if isinstance(user, dict) else None
    return str(approval["chosen_options"][0]), str(who or "unknown user")


def needs_person(store, config, task: Task, incident_id: str, *, actor: str, reason: str, page: bool = True,
                 **details: Any) -> dict[str, Any]:
    """The incident needs a person: marked so (it stands out on the incidents page) and, unless ``page`` is False (the
    person who rejected the plan is the one it needs), on-call is paged with the reason and the incident's page."""
    from kafka_runbooks.notify.webhook import page_needs_person  # keeps DAG parsing fast: loaded when a task runs

    record = store.needs_person(incident_id, actor=actor, reason=reason, **details)
    if page:
        page_needs_person(store, config.approvals.oncall_conn_id, config.name, incident_id, reason, actor=actor,
                          run_id=task.run_id, url=incident_url(config.name, incident_id))
    return record


def run_active(task: Task, run_id: str | None) -> bool:
    """Whether the response run ``run_id`` is queued or running in Airflow (unknown to it: not, as the health check
    judges a stale response: ``incidents.lifecycle.stale_responses``)."""
    if not run_id or run_id == task.run_id:
        return False
    return task.run_state(task.dag_id, run_id) in ("queued", "running")


def _record_of(store, config, request, actor: str, opened_by: str) -> dict[str, Any]:
    from kafka_runbooks.incidents.store import IncidentError, IncidentMismatch  # keeps DAG parsing fast

    if not request.incident_id:
        return store.open(cluster=config.name, broker_ids=request.broker_ids, reason=request.reason, opened_by=opened_by)
    try:
        return store.get(request.incident_id, cluster=config.name, broker_ids=request.broker_ids)
    except IncidentMismatch as exc:  # another cluster's (or brokers') incident is never taken over
        raise Stop(f"refused: {exc}") from exc
    except IncidentError:
        if not request.broker_ids and not request.zookeeper_servers:
            raise Stop(f"bad incident request: incident {request.incident_id} does not exist and the request names no "
                       "broker and no ZooKeeper member") from None
        return store.open(cluster=config.name, broker_ids=request.broker_ids, reason=request.reason, opened_by=opened_by,
                          incident_id=request.incident_id)


def _scope(request, record: Mapping[str, Any]):
    """The request with what it leaves to the incident's record filled in from it: the health check's conf names the
    incident (and its brokers), never a copy of its finding, so the reason and the ZooKeeper members a ZooKeeper
    incident captures are the recorded ones -- those of the finding that opened it (``finding_records.trigger_of``,
    ``remediate.choice.first_response``). ZooKeeper members a request names that are not the recorded finding's are
    refused (Stop): what the response captures is the incident's, not what a conf says."""
    from kafka_runbooks.remediate.choice import first_response  # keeps DAG parsing fast: loaded when a task runs

    trigger = finding_records.trigger_of(record)
    recorded_zk = tuple(sorted(set(first_response(trigger).zookeeper_servers))) if trigger is not None else ()
    if request.zookeeper_servers and recorded_zk and set(request.zookeeper_servers) != set(recorded_zk):
        raise Stop(f"refused: the request names ZooKeeper members {list(request.zookeeper_servers)}, incident "
                   f"{record.get('id')} was opened for {list(recorded_zk)}")
    scoped = replace(request, broker_ids=request.broker_ids or tuple(sorted(int(b) for b in record.get("broker_ids") or ())),
                     zookeeper_servers=request.zookeeper_servers or recorded_zk,
                     reason=request.reason or str(record.get("reason") or ""))
    if not scoped.broker_ids and not scoped.zookeeper_servers:
        raise Stop(f"bad incident request: incident {record.get('id')} names no broker and no ZooKeeper member")
    return scoped


def open_incident(raw_request: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Validates the request, opens (or takes over) the incident, claims the cluster's response and records the
    cluster's state at start; returns what the response's tasks need (the brokers to capture: suspects and peers)."""
    from kafka_runbooks.detect.observe import known_registrations, take_snapshot  # keeps DAG parsing fast: clients at run time
    from kafka_runbooks.incidents.request import parse_request  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.incidents.store import IncidentError, IncidentStore, ResponseRefused  # keeps DAG parsing fast

    try:
        request = parse_request(raw_request)
        config = config_of(request.cluster)
        request = parse_request(raw_request, known_brokers=set(config.hosts))
    except (IncidentError, ValueError) as exc:
        raise Stop(f"bad incident request: {exc}") from exc
    store = IncidentStore(config)
    actor = task.actor
    record = _record_of(store, config, request, actor, task.starter or actor)  # started by hand: the person opened it
    request = _scope(request, record)  # what the request leaves to the incident, read from its record
    try:
        # a health-check run already marked it (same run id); a run started by hand takes it over -- unless another
        # response is working on the cluster: one at a time
        record = store.claim_response(record["id"], cluster=config.name, actor=actor, run_id=task.run_id,
                                      active=lambda other: run_active(task, other.get("response_run")))
    except ResponseRefused as exc:
        needs_person(store, config, task, record["id"], actor=actor, reason=f"refused: {exc}", stage="open_incident")
        raise Stop(f"refused: {exc}") from exc
    unknown_zk = sorted(set(request.zookeeper_servers) - set(config.zookeeper.servers)) if config.zookeeper.servers else []
    if unknown_zk:
        raise Stop(f"bad incident request: ZooKeeper servers {unknown_zk} are not configured for {config.name!r}")
    # the cluster's shape, quickly: the mitigation is asked for only after this task, and a not-serving broker would
    # cost every direct check its whole bound (kafka_probe_timeout_s). No direct check, canary, leadership or JmxTool
    # read here: the health check's snapshot judged the brokers, the mitigation's plan checks its suspect again, the
    # capture checks and reads JMX itself; the bundle's snapshot.json is read for addresses and versions (and the
    # capture's choice of dump tool, from the version probe, which still runs)
    snapshot = take_snapshot(config, known=known_registrations(config), jmx=False, leadership=False, direct_checks=False)
    peers = sorted(snapshot.live_broker_ids - set(request.broker_ids))
    task.log.info("incident %s: brokers %s, ZooKeeper servers %s, peers %s", record["id"], list(request.broker_ids),
                  list(request.zookeeper_servers), peers)
    return {
        "incident_id": record["id"],
        "cluster": config.name,
        "broker_ids": list(request.broker_ids),
        "zookeeper_servers": list(request.zookeeper_servers),
        # peers are captured too: their server.log holds the fetch errors that accuse the suspect (and, for a
        # ZooKeeper incident, the brokers' own session expiries)
        "capture_broker_ids": sorted(set(request.broker_ids) | set(peers)),
        "kafka_version": config.kafka_version or "",
        # the finding that opened the incident is not passed on: the tasks that need it load it from the incident's
        # record (``finding_records.trigger_of``)
        "snapshot": snapshot.to_dict(),
    }


@dataclass(frozen=True)
class Run:
    """What the response run's tasks left for its close (each None when its task did not run)."""

    incident: Mapping[str, Any] | None
    approval: Any = None
    restart: Any = None
    verify: Any = None
    report: Any = None
    explanation: Any = None
    follow_up: Any = None
    refused: Mapping[str, Any] | None = None  # what the plan task pushed when its plan was refused


def close_incident(run: Run, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """The incident's outcome, at the end of its response run (whatever happened upstream):

    * explained (no restart applies): ``needs_person``, with the advice and the runbook;
    * approved, restarted and verified: ``closed``;
    * rejected (or the approval timed out): ``needs_person`` -- nothing was changed, the evidence is kept;
    * anything else (capture failed, plan refused, an answer that did not count, restart or recovery failed):
      ``needs_person`` with the stage it stopped at, and Stop so the run is marked failed.
    ``needs_person`` pages on-call, unless a person rejected the plan."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    if not isinstance(run.incident, Mapping):
        raise Stop("the incident was never opened (see open_incident)")
    config = config_of(run.incident["cluster"])
    store = IncidentStore(config)
    if isinstance(run.explanation, dict) and run.explanation:
        return _explained(run, task, config, store)
    choice, _ = approval_decision(run.approval)
    if choice == APPROVE and run.restart and run.verify:
        return _restarted(run, task, config, store)
    return _not_restarted(run, task, config, store)


def _explained(run: Run, task: Task, config, store) -> dict[str, Any]:
    """No restart applies (a client to fix, a ZooKeeper host to look at): explained, a person acts on it."""
    from kafka_runbooks.runbook.summary import incident_outcome  # keeps DAG parsing fast: loaded when a task runs

    incident_id, ex = run.incident["incident_id"], run.explanation
    report = run.report if isinstance(run.report, dict) else {}
    note = (f"explained, nothing restarted: {ex.get('why_no_restart')}"
            + (f"; advice: {ex['advice']}" if ex.get("advice") else "") + (f"; runbook: {ex['runbook']}" if ex.get("runbook") else "")
            + f"; evidence kept in {report.get('bundle_dir')}")
    record = needs_person(store, config, task, incident_id, actor=task.actor, reason=note[:2000], explained=True)
    incident_outcome(task, config, incident_id, record["status"], note)
    return {"status": record["status"], "incident_id": incident_id, "explained": True, "report": report.get("report")}


def _restarted(run: Run, task: Task, config, store) -> dict[str, Any]:
    from kafka_runbooks.notify.pagerduty import resolve  # the page about it, resolved (when on-call uses PagerDuty)
    from kafka_runbooks.runbook.summary import incident_outcome  # keeps DAG parsing fast: loaded when a task runs

    incident_id = run.incident["incident_id"]
    _, who = approval_decision(run.approval)
    report = run.report if isinstance(run.report, dict) else {}
    fu = run.follow_up if isinstance(run.follow_up, dict) else {}
    peers = ("; peers look healthy after the restart" if fu.get("checks") and not fu.get("peers") else
             f"; peers {fu['peers']} still showed the symptom: kafka_rolling_restart proposed for them (its own approval)"
             if fu.get("peers") else "")
    record = store.close(incident_id, actor=task.actor,
                         resolution=f"restarted {run.restart.get('restarted')} after approval by {who}; recovery verified{peers}")
    resolve(store, config, incident_id, actor=task.actor)
    metrics.incident_closed(record, store.audit_trail(incident_id))
    incident_outcome(task, config, incident_id, record["status"], record.get("resolution") or "",
                     run.restart if isinstance(run.restart, dict) else None)
    return {"status": record["status"], "incident_id": incident_id, "report": report.get("report"), "follow_up": fu or None}


def _not_restarted(run: Run, task: Task, config, store) -> dict[str, Any]:
    from kafka_runbooks.runbook.summary import incident_outcome  # keeps DAG parsing fast: loaded when a task runs

    incident_id, actor = run.incident["incident_id"], task.actor
    choice, who = approval_decision(run.approval)
    report = run.report if isinstance(run.report, dict) else {}
    refused = list(run.approval.get("refusals") or []) if isinstance(run.approval, dict) else []
    if choice == APPROVE and refused and not run.restart:
        # the answer did not count (four eyes, a changed plan): nothing was restarted; a person owns it, told why
        note = f"approval by {who} refused: {'; '.join(refused)}; no change was made; evidence kept in {report.get('bundle_dir')}"
        metrics.plan_refused(refused)
        needs_person(store, config, task, incident_id, actor=actor, reason=note[:2000], decision="refused")
        raise Stop(f"incident {incident_id} needs a person: {note}")
    if choice is not None and choice != APPROVE:
        # the approval task audited the decision itself (runbook/approval.py)
        note = f"{choice} by {who}: no change was made; evidence kept in {report.get('bundle_dir')}"
        store.update(incident_id, decision=choice)
        # a rejection is a person's answer: paged only when nobody answered (the approval timed out)
        record = needs_person(store, config, task, incident_id, actor=actor, reason=note, decision=choice,
                              page=who.startswith("nobody"))
        incident_outcome(task, config, incident_id, record["status"], note)
        return {"status": record["status"], "incident_id": incident_id, "decision": choice, "report": report.get("report")}
    stage = "before approval (capture, analysis or plan did not finish, or the plan was refused)" if choice is None \
        else "after approval (restart or recovery failed)"
    note = f"run halted {stage}; no further change made; see the task logs and the audit trail"
    if run.refused and choice is None:
        stage, note = "plan refused", f"refused; nothing changed. {run.refused.get('summary')}"
    store.audit(incident_id, actor=actor, action="halt", outcome="failed", details={"stage": stage})
    needs_person(store, config, task, incident_id, actor=actor, reason=note, stage=stage)
    incident_outcome(task, config, incident_id, "needs_person", note)
    raise Stop(f"incident {incident_id} needs a person: {note}")
