"""The deferred preferred-replica election's tasks (dags/kafka_preferred_election.py, issue 7): plan -> approval
(``operators/approval.py``) -> wait (deferred: the triggerer re-checks, no worker is held) -> elect -> close, and the
scheduled path's dispatcher -- glue over ``runbook/election.py``."""

from __future__ import annotations

import datetime as dt
from typing import Any, Sequence

from airflow.sdk import BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from kafka_runbooks.operators.glue import service
from kafka_runbooks.operators.remediate import ClusterChangingOperator, secret_of


class PlanElectionOperator(BaseOperator):
    """Reads the cluster fresh, computes the batches and the conditions, records them and shows them
    (``runbook.election.plan``). Dry run: shows and stops. A refused plan fails here, asking nobody.

    ``resume``: continues the cluster's latest halted election (``ledger.find_resumable``, as the rolling restart):
    its record and brokers; the partitions its converged batches elected are left out; the rest is planned on fresh
    state and needs a new approval (an approval is bound to the digest of the plan it approved and to its run)."""

    template_fields: Sequence[str] = ("cluster", "broker_ids", "reason", "mode", "resume")

    def __init__(self, *, cluster: str = "{{ params.cluster }}", broker_ids: Any = None, reason: Any = "", mode: Any = "execute",
                 resume: Any = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster, self.broker_ids, self.reason, self.mode, self.resume = cluster, broker_ids, reason, mode, resume

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import election  # keeps DAG parsing fast: the clients load when the task runs

        request = election.Request(cluster=self.cluster, broker_ids=self.broker_ids or (), reason=self.reason,
                                   mode=self.mode, resume=self.resume)
        with service(context, self.log) as task:
            return election.plan(request, task)


class WaitForElectionWindowOperator(BaseOperator):
    """Defers to ``ElectionReadyTrigger`` (the triggerer polls; no worker is held) until the conditions of the
    recorded plan hold, or its deadline passes: then fails, saying what it was still waiting for, and audits it."""

    template_fields: Sequence[str] = ("plan_output",)

    def __init__(self, *, plan_output: Any, **kwargs: Any) -> None:
        kwargs["retries"] = 0
        super().__init__(**kwargs)
        self.plan_output = plan_output

    def execute(self, context) -> Any:
        from kafka_runbooks.runbook import election  # keeps DAG parsing fast: loaded when the task runs
        from kafka_runbooks.triggers.election import ElectionReadyTrigger  # keeps DAG parsing fast: kazoo loads at run time

        with service(context, self.log):
            plan, conditions, poll_s, deadline_s = election.waiting_for(self.plan_output)
        self.log.info("waiting (deferred) for: %s", conditions)
        self.defer(trigger=ElectionReadyTrigger(plan.cluster, conditions, poll_s), method_name="execute_complete",
                   timeout=dt.timedelta(seconds=deadline_s))

    def execute_complete(self, context, event: dict[str, Any]) -> dict[str, Any]:
        from kafka_runbooks.runbook import election  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            return election.waited(self.plan_output, event, task)


class ExecuteElectionOperator(ClusterChangingOperator):
    """Uses the approval (sealed, this plan, this run, once), then runs the batches (``runbook.election.execute``)."""

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.runbook import election  # keeps DAG parsing fast: the engine loads when the task runs

        with service(context, self.log) as task:
            return election.execute(self.plan_output, task, secret_of)


class CloseElectionOperator(BaseOperator):
    """Last task (runs whatever happened): closes the election's record with what was done, or says why not."""

    template_fields: Sequence[str] = ("plan_output", "decision", "wait", "result")

    def __init__(self, *, plan_output: Any, decision: Any, wait: Any, result: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.plan_output, self.decision, self.wait, self.result = plan_output, decision, wait, result

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.operators.summary import refused_plan  # keeps DAG parsing fast: loaded when the task runs
        from kafka_runbooks.runbook import election  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            return election.close(self.plan_output, self.decision, self.result, refused_plan(context), task)


class ScheduledElectionsOperator(BaseOperator):
    """The scheduled path (``dags/kafka_preferred_election_schedule.py``): the ``kafka_preferred_election`` runs to
    start for the clusters whose ``election.schedule`` fires in this run's data interval (``runbook.election.scheduled``);
    the clusters that could not be checked are pushed under ``errors`` for ``ScheduleErrorsOperator``."""

    def execute(self, context) -> list[dict[str, Any]]:
        from kafka_runbooks.runbook import election  # keeps DAG parsing fast: loaded when the task runs

        with service(context, self.log) as task:
            starts, errors = election.scheduled(context["data_interval_start"], context["data_interval_end"], task)
            if errors:
                task.push("errors", errors)
                self.log.error("not checked: %s", errors)
            return starts


class ScheduleErrorsOperator(BaseOperator):
    """Last task of the scheduled path (runs whatever happened): fails naming every cluster that could not be checked."""

    template_fields: Sequence[str] = ("errors",)

    def __init__(self, *, errors: Any, **kwargs: Any) -> None:
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_DONE)
        super().__init__(**kwargs)
        self.errors = errors

    def execute(self, context) -> None:
        if self.errors:
            raise AirflowFailException("clusters not checked (audited in <cluster>-election-schedule):\n"
                                       + "\n".join(f"- {e}" for e in self.errors))
