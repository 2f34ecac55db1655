"""The restart's tasks -- plan (always shown) -> approval (``operators/approval.py``) -> execute -> close -- as glue
over ``runbook/restart.py``: each reads its arguments, calls the service, returns what it returns. Every restart in
the product -- the incident response's one-step plan and the rolling restart -- runs these operators. Side effects
only in the execute task, which never retries."""

from __future__ import annotations

from typing import Any, Sequence

from airflow.sdk import BaseOperator, BaseSensorOperator, PokeReturnValue, TriggerRule

from kafka_runbooks.operators.glue import as_dict, service
from kafka_runbooks.operators.links import LINKS
from kafka_runbooks.policies import POOL  # per cluster at run time: kafka_runbooks/policies.py
from kafka_runbooks.runbook.restart import INCIDENT_RESTART, ROLLING_RESTART
from kafka_runbooks.runbook.task import terminating

__all__ = ["INCIDENT_RESTART", "POOL", "ROLLING_RESTART", "ClusterChangingOperator", "ClusterRecoveredSensor",
           "CloseRollOperator", "ExecutePlanOperator", "PlanRemediationOperator"]


class PlanRemediationOperator(BaseOperator):
    """Computes the plan on fresh state, records it, shows it, and returns the reference to it (``runbook.restart.plan``).

    Rolling restart: ``broker_ids`` empty = every configured broker; ``resume`` continues the
    latest halted roll of the cluster (its requested brokers, minus those already done).
    Incident restart: ``incident`` (the open_incident output) and ``report`` (this run's analysis)
    give the brokers and the evidence for the not-serving waiver. A refused plan fails here (nothing
    is asked, nothing changes) unless it is a dry run."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("cluster", "broker_ids", "reason", "mode", "canary", "resume", "incident", "report")

    def __init__(self, *, kind: str, cluster: str = "{{ params.cluster }}", broker_ids: Any = None, reason: Any = "",
                 mode: Any = "execute", canary: Any = None, resume: Any = False, incident: Any = None, report: Any = None,
                 **kwargs: Any) -> None:
        if kind not in (ROLLING_RESTART, INCIDENT_RESTART):
            raise ValueError(f"unknown remediation kind {kind!r}")
        super().__init__(**kwargs)
        self.kind, self.cluster, self.broker_ids, self.reason, self.mode = kind, cluster, broker_ids, reason, mode
        self.canary, self.resume, self.incident, self.report = canary, resume, incident, report

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import restart  # keeps DAG parsing fast: the clients load when the task runs

        request = restart.Request(kind=self.kind, cluster=self.cluster, broker_ids=self.broker_ids or (), reason=self.reason,
                                  mode=self.mode, canary=self.canary, resume=self.resume, incident=as_dict(self.incident),
                                  report=as_dict(self.report))
        with service(context, self.log) as task:
            return restart.plan(request, task)


class ClusterChangingOperator(BaseOperator):
    """Base of every task that changes a cluster: never retries, runs in the remediation pool, and acts only on the
    plan its plan task recorded, with a sealed Approve of THIS plan in THIS run that has not been used."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("plan_output",)

    def __init__(self, *, plan_output: Any, **kwargs: Any) -> None:
        if kwargs.get("retries"):
            raise ValueError("a task that changes a cluster never retries (retries must be 0)")
        kwargs["retries"] = 0
        kwargs.setdefault("pool", POOL)
        super().__init__(**kwargs)
        self.plan_output = plan_output

    def on_kill(self) -> None:
        """Airflow's SIGTERM (its task runner calls this in the main thread and returns; SIGKILL follows ~5 s later):
        noted for the engine, which begins nothing new and starts a broker it stopped (``runbook.task.terminating``)."""
        terminating(self.task_id)


def secret_of(conn_id: str) -> bytes:
    """The approvals' seal key (``operators/approval.py``)."""
    from kafka_runbooks.operators import approval  # keeps DAG parsing fast: the HITL operator loads when a task runs

    return approval.approval_secret(conn_id)


class ExecutePlanOperator(ClusterChangingOperator):
    """Runs the approved restart plan through the engine, after checking it against fresh state
    (``runbook.restart.execute``)."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import restart  # keeps DAG parsing fast: the engine loads when the task runs

        with service(context, self.log) as task:
            return restart.execute(self.plan_output, task, secret_of)


class CloseRollOperator(BaseOperator):
    """Last task of a rolling restart (runs whatever happened): closes the roll's record when every step is done;
    otherwise leaves it saying why (``runbook.restart.close``)."""

    operator_extra_links = LINKS  # operators/links.py: the run's incident and its report

    template_fields: Sequence[str] = ("plan_output", "decision", "result")

    def __init__(self, *, plan_output: Any, decision: Any, result: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.plan_output, self.decision, self.result = plan_output, decision, result

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.operators.summary import refused_plan  # keeps DAG parsing fast: loaded when the task runs
        from kafka_runbooks.runbook import restart  # keeps DAG parsing fast: loaded when the task runs

        outcome = restart.Outcome(as_dict(self.plan_output), as_dict(self.decision), as_dict(self.result), refused_plan(context))
        with service(context, self.log) as task:
            return restart.close(outcome, task)


class ClusterRecoveredSensor(BaseSensorOperator):
    """Verifies the whole cluster is back: restarted brokers registered, no under-replicated or offline partition
    (``runbook.restart.recovered``)."""

    template_fields: Sequence[str] = ("incident",)

    def __init__(self, *, incident: Any, **kwargs: Any) -> None:
        kwargs.setdefault("poke_interval", 2)
        kwargs.setdefault("mode", "poke")
        super().__init__(**kwargs)
        self.incident = incident

    def poke(self, context) -> PokeReturnValue:
        from kafka_runbooks.runbook import restart  # keeps DAG parsing fast: the clients load when the task runs

        with service(context, self.log) as task:
            verified = restart.recovered(self.incident, task)
        return PokeReturnValue(is_done=verified is not None, xcom_value=verified)
