"""Remediate, gated: plan (or refuse), then — only with an Approve in this run — restart and verify."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, Sequence

from airflow.sdk import BaseOperator, BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks.operators.incident import APPROVE, approval_decision


def _store(cluster: str):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore

    config = load_cluster(cluster)
    return config, IncidentStore(config.incident_base)


class PlanRestartOperator(BaseOperator):
    """Builds the restart plan on a fresh snapshot; a refused plan fails here, naming every blocker."""

    template_fields: Sequence[str] = ("incident", "report")

    def __init__(self, *, incident: Any, report: Any, approval_timeout: timedelta, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.report = report
        self.approval_timeout = approval_timeout

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.detect.detectors import detect
        from kafka_runbooks.model import Finding
        from kafka_runbooks.operators.detect import take_snapshot
        from kafka_runbooks.remediate.briefing import approval_body
        from kafka_runbooks.remediate.planner import plan_restart
        from kafka_runbooks.remediate.safety import not_serving_from

        config, store = _store(self.incident["cluster"])
        incident_id = self.incident["incident_id"]
        snapshot = take_snapshot(config)
        not_serving = not_serving_from(detect(snapshot))
        plan = plan_restart(snapshot, self.incident["broker_ids"], config, not_serving=not_serving)
        store.update(incident_id, plan=plan.to_dict())
        actor = f"dag:{context['dag'].dag_id}/run:{context['run_id']}"
        if plan.refused:
            store.audit(incident_id, actor=actor, action="plan_restart", outcome="refused", details={"refusals": list(plan.refusals)})
            raise AirflowFailException("restart refused:\n" + "\n".join(f"- {r}" for r in plan.refusals))
        store.audit(incident_id, actor=actor, action="plan_restart", outcome="ok", details=plan.to_dict())
        findings = [Finding.from_dict(f) for f in (self.report or {}).get("findings", [])]
        body = approval_body(findings, plan, report_path=(self.report or {}).get("report"), approval_timeout=str(self.approval_timeout))
        return {"plan": plan.to_dict(), "approval_body": body}


class RestartBrokersOperator(BaseOperator):
    """Runs an approved plan one broker at a time, re-checking safety before each step.

    Refuses to run without an "Approve" recorded by this run's approval task: clearing or marking
    tasks by hand cannot get around the gate. After each restart it waits (polling ZooKeeper against
    a deadline) until the broker is registered and back in every ISR; a timeout fails the run and
    nothing further is restarted.
    """

    template_fields: Sequence[str] = ("incident", "plan", "approval")

    def __init__(self, *, incident: Any, plan: Any, approval: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.incident = incident
        self.plan = plan
        self.approval = approval

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.hooks.ssh import StrictSSHHook
        from kafka_runbooks.detect.detectors import detect
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
        from kafka_runbooks.model import Plan
        from kafka_runbooks.operators.detect import take_snapshot
        from kafka_runbooks.remediate.recovery import RecoveryTimeout, wait_for_recovery
        from kafka_runbooks.remediate.recovery import registration_id
        from kafka_runbooks.remediate.safety import not_serving_from, restart_refusals

        choice, who = approval_decision(self.approval)
        by_a_person = isinstance(self.approval, dict) and not self.approval.get("timedout") and self.approval.get("responded_by_user")
        if choice != APPROVE or not by_a_person:
            raise AirflowFailException(f"no approval by a person recorded for this run (got {choice!r}); nothing restarted")
        config, store = _store(self.incident["cluster"])
        incident_id = self.incident["incident_id"]
        plan = Plan.from_dict(self.plan["plan"])
        store.audit(
            incident_id,
            actor=who,
            action="approval",
            outcome="approve",
            details={"responded_at": self.approval.get("responded_at"), "plan": plan.to_dict(), "run_id": context["run_id"]},
        )
        restarted: list[int] = []
        for step in plan.steps:
            snapshot = take_snapshot(config)
            not_serving = not_serving_from(detect(snapshot)).get(step.broker_id)
            refusals = restart_refusals(
                snapshot, step.broker_id, default_min_isr=config.min_insync_replicas, not_serving=not_serving
            )
            if refusals:
                store.audit(incident_id, actor=who, action=step.action, outcome="refused", details={"broker_id": step.broker_id, "refusals": refusals})
                raise AirflowFailException(f"broker {step.broker_id}: restart refused at execution time: {refusals}")
            conn_id = config.ssh_conn_id(step.broker_id)
            expected = [p.name for p in snapshot.partitions_of(step.broker_id)]
            with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
                previous = registration_id(zk, step.broker_id)
            self.log.warning("restarting broker %s on %s: %s (approved by %s)", step.broker_id, conn_id, list(step.command), who)
            with StrictSSHHook(conn_id, connect_timeout=config.capture.connect_timeout_s) as runner:
                result = runner.run(step.command, timeout=config.recovery_timeout_s)
            outcome = "ok" if result.exit_code == 0 and not result.error else "failed"
            store.audit(
                incident_id,
                actor=who,
                action=step.action,
                outcome=outcome,
                host=conn_id,
                command=step.command,
                details={
                    "broker_id": step.broker_id,
                    "exit_code": result.exit_code,
                    "error": result.error,
                    "duration_s": result.duration_s,
                    "stderr_tail": result.stderr[-2000:].decode("utf-8", "replace"),
                    "run_id": context["run_id"],
                },
            )
            if outcome != "ok":
                raise AirflowFailException(f"restart of broker {step.broker_id} failed (exit {result.exit_code}, {result.error}); halting")
            started = time.monotonic()
            try:
                with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
                    wait_for_recovery(
                        zk,
                        config.name,
                        step.broker_id,
                        timeout_s=config.recovery_timeout_s,
                        expected_partitions=expected,
                        previous_registration=previous,
                    )
            except RecoveryTimeout as exc:
                store.audit(incident_id, actor=who, action="wait_for_recovery", outcome="timeout", details={"broker_id": step.broker_id, "error": str(exc)})
                raise AirflowFailException(f"broker {step.broker_id} did not recover: {exc}; halting, nothing further is done") from exc
            store.audit(incident_id, actor=who, action="wait_for_recovery", outcome="ok", details={"broker_id": step.broker_id, "seconds": round(time.monotonic() - started, 1)})
            restarted.append(step.broker_id)
        return {"restarted": restarted, "approved_by": who}


class ClusterRecoveredSensor(BaseSensorOperator):
    """Verifies the whole cluster is back: restarted brokers registered, no under-replicated or offline partition."""

    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", 2)
        kwargs.setdefault("mode", "poke")
        super().__init__(**kwargs)
        self.incident = incident

    def poke(self, context) -> PokeReturnValue:
        from kafka_runbooks.detect.detectors import detect
        from kafka_runbooks.operators.detect import take_snapshot

        config, _ = _store(self.incident["cluster"])
        snapshot = take_snapshot(config, probe_hosts=False)
        missing = sorted(set(self.incident["broker_ids"]) - snapshot.live_broker_ids)
        problems = [f for f in detect(snapshot) if f.kind in ("under_replicated_partitions", "offline_partitions")]
        if missing or problems:
            self.log.info("not yet recovered: unregistered brokers %s; %s", missing, [f.summary for f in problems])
            return PokeReturnValue(is_done=False)
        return PokeReturnValue(is_done=True, xcom_value={"verified_at": snapshot.taken_at, "brokers": sorted(snapshot.live_broker_ids)})
