"""The incident response's choices after the analysis (remediate/choice.py): restart through the engine, or explain
and hand over to a person; and, after a restart, whether the restarted broker's peers need a rolling restart too."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import BaseBranchOperator, BaseOperator
from kafka_runbooks.operators.links import LINKS

ROLLING_RESTART_DAG = "kafka_rolling_restart"
FOLLOW_UP_KEY = "follow_up"


def _findings(report: Any):
    from kafka_runbooks.model import Finding

    return [Finding.from_dict(f) for f in ((report or {}).get("findings") or []) if isinstance(report, dict)]


class ChooseRemediationOperator(BaseBranchOperator):
    """Branches to ``restart_task`` (the engine's plan) or ``explain_task`` (no restart)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "report")

    def __init__(self, *, incident: Any, report: Any, restart_task: str = "plan", explain_task: str = "explain", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.report = report
        self.restart_task = restart_task
        self.explain_task = explain_task

    def choose_branch(self, context) -> str:
        from kafka_runbooks.remediate.choice import RESTART, remediation_for

        choice = remediation_for((self.incident or {}).get("trigger"), _findings(self.report))
        self.log.warning("remediation: %s (%s)", choice.kind, choice.reason)
        context["ti"].xcom_push(key="remediation", value=choice.to_dict())
        return self.restart_task if choice.kind == RESTART else self.explain_task


class ExplainIncidentOperator(BaseOperator):
    """No restart applies: records on the incident what was found, why nothing is restarted, what to do (the
    runbook), and returns it for the close-out."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("incident", "report", "remediation")

    def __init__(self, *, incident: Any, report: Any, remediation: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.report = report
        self.remediation = remediation

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.incidents.store import IncidentStore

        rem = self.remediation if isinstance(self.remediation, dict) else {}
        trigger = (self.incident or {}).get("trigger") or {}
        explanation = {
            "why_no_restart": rem.get("reason"),
            "advice": rem.get("advice") or (trigger.get("details") or {}).get("advice"),
            "runbook": rem.get("runbook"),
            "detected": trigger.get("summary"),
            "analysis": [{"kind": f["kind"], "summary": f["summary"]} for f in rem.get("findings") or []],
            "report": (self.report or {}).get("report") if isinstance(self.report, dict) else None,
        }
        store = IncidentStore(load_cluster(self.incident["cluster"]))
        store.update(self.incident["incident_id"], explanation=explanation)
        store.audit(self.incident["incident_id"], actor=f"dag:{context['dag'].dag_id}/run:{context['run_id']}", action="explain",
                    outcome="no_restart", details=explanation)
        for f in explanation["analysis"]:
            self.log.warning("analysis: %s: %s", f["kind"], f["summary"])
        self.log.warning("no restart: %s; see %s", explanation["why_no_restart"], explanation["runbook"])
        return explanation


class FollowUpPeersOperator(TriggerDagRunOperator):
    """After the restarted broker(s) came back: ``health.consecutive_checks`` health checks (``health.recheck_s``
    apart); peers that show a symptom in every one (not serving, CLOSE_WAIT climbing) get a rolling restart --
    ``kafka_rolling_restart`` is started for them, and asks for its own approval. Peers that look fine: nothing."""

    template_fields: Sequence[str] = (*TriggerDagRunOperator.template_fields, "incident", "restart", "remediation")

    def __init__(self, *, incident: Any, restart: Any, remediation: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_dag_id", ROLLING_RESTART_DAG)
        kwargs.setdefault("retries", 0)
        super().__init__(**kwargs)
        self.incident = incident
        self.restart = restart
        self.remediation = remediation

    def execute(self, context) -> Any:
        import time

        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.detect.observe import check_once
        from kafka_runbooks.incidents.store import IncidentStore
        from kafka_runbooks.remediate.choice import peers_needing_restart

        rem = self.remediation if isinstance(self.remediation, dict) else {}
        if not rem.get("follow_up_peers"):
            result = {"peers": [], "why": "this incident's remediation has no follow-up on the peers"}
            context["ti"].xcom_push(key=FOLLOW_UP_KEY, value=result)
            return result
        config = load_cluster(self.incident["cluster"])
        restarted = list((self.restart or {}).get("restarted") or self.incident["broker_ids"]) if isinstance(self.restart, dict) else list(self.incident["broker_ids"])
        observations, peers = [], set()
        for n in range(config.health.consecutive_checks):
            if n:
                time.sleep(config.health.recheck_s)
            snapshot, findings = check_once(config)
            peers = set(snapshot.live_broker_ids) | set(config.hosts)
            observations.append(findings)
        ids, why = peers_needing_restart(observations, restarted, peers)
        store = IncidentStore(config)
        actor = f"dag:{context['dag'].dag_id}/run:{context['run_id']}"
        result = {"restarted": restarted, "checks": len(observations), "peers": ids, "why": {str(k): v for k, v in why.items()}}
        context["ti"].xcom_push(key=FOLLOW_UP_KEY, value=result)  # also when the trigger below ends this task
        if not ids:
            store.audit(self.incident["incident_id"], actor=actor, action="follow_up_peers", outcome="peers healthy", details=result)
            self.log.info("peers of %s look healthy after %d checks: no rolling restart", restarted, len(observations))
            return result
        self.conf = {"cluster": config.name, "brokers": ids, "mode": "execute",
                     "reason": f"incident {self.incident['incident_id']}: after restarting {restarted}, peers {ids} still show the symptom: "
                               + "; ".join(f"{b}: {w}" for b, w in sorted(why.items()))[:1800],
                     "canary": config.canary.enabled, "resume": False}
        self.trigger_run_id = f"followup__{self.incident['incident_id']}"
        store.audit(self.incident["incident_id"], actor=actor, action="follow_up_peers", outcome="rolling restart proposed",
                    details={**result, "dag": ROLLING_RESTART_DAG, "run_id": self.trigger_run_id})
        store.update(self.incident["incident_id"], follow_up={"dag": ROLLING_RESTART_DAG, "run_id": self.trigger_run_id, "brokers": ids})
        self.log.warning("peers %s still show the symptom: starting %s (it asks for its own approval)", ids, ROLLING_RESTART_DAG)
        super().execute(context)
        return result
