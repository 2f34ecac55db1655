"""Open an incident from a request, and close it (or leave it open, saying why) at the end of a run."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowFailException
from kafka_runbooks import metrics
from kafka_runbooks.operators.links import LINKS

APPROVE = "Approve"


def approval_decision(approval: Any) -> tuple[str | None, str]:
    """(chosen option, who) from the ApprovalOperator's XCom; (None, ...) when no answer exists."""
    if not isinstance(approval, dict) or not approval.get("chosen_options"):
        return None, "nobody"
    if approval.get("timedout"):
        return str(approval["chosen_options"][0]), "nobody (approval timed out)"
    user = approval.get("responded_by_user")
    who = (user.get("name") or user.get("id")) if isinstance(user, dict) else None
    return str(approval["chosen_options"][0]), str(who or "unknown user")


def needs_person(store, config, context, incident_id: str, *, actor: str, reason: str, page: bool = True, **details: Any) -> dict[str, Any]:
    """The incident needs a person: marked so (it stands out on the incidents page) and, unless ``page`` is False (the
    person who rejected the plan is the one it needs), on-call is paged with the reason and the incident's page."""
    from kafka_runbooks.notify.webhook import page_needs_person
    from kafka_runbooks.operators.links import incident_url

    record = store.needs_person(incident_id, actor=actor, reason=reason, **details)
    if page:
        page_needs_person(store, config.approvals.oncall_conn_id, config.name, incident_id, reason, actor=actor,
                          run_id=context.get("run_id"), url=incident_url(config.name, incident_id))
    return record


def _run_active(context, run_id: str | None) -> bool:
    """Whether the response run ``run_id`` is queued or running in Airflow (unknown to it: not, as the health check
    judges a stale response: ``detect.lifecycle.stale_responses``)."""
    if not run_id or run_id == context.get("run_id"):
        return False
    try:
        state = context["ti"].get_dagrun_state(context["dag"].dag_id, run_id)
    except Exception:  # noqa: BLE001 - the run does not exist (deleted)
        return False
    return str(getattr(state, "value", state)) in ("queued", "running")


class OpenIncidentOperator(BaseOperator):
    """Validates the request, opens (or resumes) the incident and records the cluster state at start."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("request",)

    def __init__(self, *, request: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request = request

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.incidents.request import parse_request
        from kafka_runbooks.incidents.store import IncidentError, IncidentMismatch, IncidentStore, ResponseRefused
        from kafka_runbooks.detect.observe import known_registrations, take_snapshot

        try:
            request = parse_request(self.request)
            config = load_cluster(request.cluster)
            request = parse_request(self.request, known_brokers=set(config.hosts))
        except (IncidentError, ValueError) as exc:
            raise AirflowFailException(f"bad incident request: {exc}") from exc

        store = IncidentStore(config)
        actor = f"dag:{context['dag'].dag_id}/run:{context['run_id']}"
        opened_by = getattr(context.get("dag_run"), "triggering_user_name", None) or actor  # started by hand: the person
        if request.incident_id:
            try:
                record = store.get(request.incident_id, cluster=config.name, broker_ids=request.broker_ids)
            except IncidentMismatch as exc:  # another cluster's (or brokers') incident is never taken over
                raise AirflowFailException(f"refused: {exc}") from exc
            except IncidentError:
                record = store.open(
                    cluster=config.name,
                    broker_ids=request.broker_ids,
                    reason=request.reason,
                    opened_by=opened_by,
                    incident_id=request.incident_id,
                )
        else:
            record = store.open(cluster=config.name, broker_ids=request.broker_ids, reason=request.reason, opened_by=opened_by)
        try:
            # a health-check run already marked it (same run id); a run started by hand takes it over -- unless another
            # response is working on the cluster: one at a time
            record = store.claim_response(record["id"], cluster=config.name, actor=actor, run_id=context["run_id"],
                                          active=lambda other: _run_active(context, other.get("response_run")))
        except ResponseRefused as exc:
            needs_person(store, config, context, record["id"], actor=actor, reason=f"refused: {exc}", stage="open_incident")
            raise AirflowFailException(f"refused: {exc}") from exc

        unknown_zk = sorted(set(request.zookeeper_servers) - set(config.zookeeper.servers)) if config.zookeeper.servers else []
        if unknown_zk:
            raise AirflowFailException(f"bad incident request: ZooKeeper servers {unknown_zk} are not configured for {config.name!r}")
        snapshot = take_snapshot(config, known=known_registrations(config))
        peers = sorted(snapshot.live_broker_ids - set(request.broker_ids))
        self.log.info("incident %s: brokers %s, ZooKeeper servers %s, peers %s", record["id"], list(request.broker_ids),
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
            "trigger": record.get("trigger"),
            "snapshot": snapshot.to_dict(),
        }


class CloseIncidentOperator(BaseOperator):
    """Last task of a response run (runs whatever happened upstream), and the incident's outcome:

    * approved, restarted and verified: ``closed``;
    * rejected (or the approval timed out): ``needs_person`` -- nothing was changed, the evidence is
      kept, and the next detection of the problem is no longer held back by this incident;
    * anything else (capture failed, plan refused, restart or recovery failed): ``needs_person``
      with the stage it stopped at, and this task fails so the run is marked failed.
    A ``needs_person`` outcome pages on-call (``needs_person``), unless a person rejected the plan or this run's
    failure callback already paged about it.
    """

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "approval", "restart", "verify", "report", "explanation", "follow_up")

    def __init__(self, *, incident: Any, approval: Any, restart: Any, verify: Any, report: Any, explanation: Any = None,
                 follow_up: Any = None, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.incident = incident
        self.approval = approval
        self.restart = restart
        self.verify = verify
        self.report = report
        self.explanation = explanation
        self.follow_up = follow_up

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.incidents.store import IncidentStore

        if not isinstance(self.incident, dict):
            raise AirflowFailException("the incident was never opened (see open_incident)")
        from kafka_runbooks.operators import summary

        config = load_cluster(self.incident["cluster"])
        store = IncidentStore(config)
        incident_id = self.incident["incident_id"]
        actor = f"dag:{context['dag'].dag_id}/run:{context['run_id']}"
        report = self.report if isinstance(self.report, dict) else {}
        choice, who = approval_decision(self.approval)

        if isinstance(self.explanation, dict) and self.explanation:
            # no restart applies (a client to fix, a ZooKeeper host to look at): explained, a person acts on it
            ex = self.explanation
            note = (f"explained, nothing restarted: {ex.get('why_no_restart')}"
                    + (f"; advice: {ex['advice']}" if ex.get("advice") else "") + (f"; runbook: {ex['runbook']}" if ex.get("runbook") else "")
                    + f"; evidence kept in {report.get('bundle_dir')}")
            record = needs_person(store, config, context, incident_id, actor=actor, reason=note[:2000], explained=True)
            summary.incident_outcome(context, self.log, config, incident_id, record["status"], note)
            return {"status": record["status"], "incident_id": incident_id, "explained": True, "report": report.get("report")}

        if choice == APPROVE and self.restart and self.verify:
            fu = self.follow_up if isinstance(self.follow_up, dict) else {}
            peers = ("; peers look healthy after the restart" if fu.get("checks") and not fu.get("peers") else
                     f"; peers {fu['peers']} still showed the symptom: kafka_rolling_restart proposed for them (its own approval)" if fu.get("peers") else "")
            record = store.close(incident_id, actor=actor,
                                 resolution=f"restarted {self.restart.get('restarted')} after approval by {who}; recovery verified{peers}")
            from kafka_runbooks.notify.pagerduty import resolve  # the page about it, resolved (when on-call uses PagerDuty)
            resolve(store, config, incident_id, actor=actor)
            metrics.incident_closed(record, store.audit_trail(incident_id))
            summary.incident_outcome(context, self.log, config, incident_id, record["status"], record.get("resolution") or "",
                                     self.restart if isinstance(self.restart, dict) else None)
            return {"status": record["status"], "incident_id": incident_id, "report": report.get("report"), "follow_up": fu or None}

        refused = list(self.approval.get("refusals") or []) if isinstance(self.approval, dict) else []
        if choice == APPROVE and refused and not self.restart:
            # the answer did not count (four eyes, a changed plan): nothing was restarted; a person owns it, told why
            note = f"approval by {who} refused: {'; '.join(refused)}; no change was made; evidence kept in {report.get('bundle_dir')}"
            metrics.plan_refused(refused)
            record = needs_person(store, config, context, incident_id, actor=actor, reason=note[:2000], decision="refused")
            raise AirflowFailException(f"incident {incident_id} needs a person: {note}")

        if choice is not None and choice != APPROVE:
            # the approval task audited the decision itself (remediate: operators/approval.py)
            note = f"{choice} by {who}: no change was made; evidence kept in {report.get('bundle_dir')}"
            store.update(incident_id, decision=choice)
            # a rejection is a person's answer: paged only when nobody answered (the approval timed out)
            record = needs_person(store, config, context, incident_id, actor=actor, reason=note, decision=choice,
                                  page=who.startswith("nobody"))
            summary.incident_outcome(context, self.log, config, incident_id, record["status"], note)
            return {"status": record["status"], "incident_id": incident_id, "decision": choice, "report": report.get("report")}

        stage = "before approval (capture, analysis or plan did not finish, or the plan was refused)" if choice is None \
            else "after approval (restart or recovery failed)"
        note = f"run halted {stage}; no further change made; see the task logs and the audit trail"
        refused_plan = summary.refused_plan(context)
        if refused_plan and choice is None:
            stage, note = "plan refused", f"refused; nothing changed. {refused_plan.get('summary')}"
        store.audit(incident_id, actor=actor, action="halt", outcome="failed", details={"stage": stage})
        needs_person(store, config, context, incident_id, actor=actor, reason=note, stage=stage)
        summary.incident_outcome(context, self.log, config, incident_id, "needs_person", note)
        raise AirflowFailException(f"incident {incident_id} needs a person: {note}")
