"""The approval gate on its own: a timeout is a Reject, and the restart refuses to run without an Approve."""

from __future__ import annotations

from datetime import timedelta

import pendulum
import pytest
from airflow.sdk import DAG, BaseOperator, TriggerRule
from airflow.sdk.exceptions import AirflowFailException

from kafka_lab.approvals import Responder
from kafka_runbooks.operators.approval import DECISION_KEY, RemediationApprovalOperator
from kafka_runbooks.operators.remediate import RestartBrokersOperator

pytestmark = [pytest.mark.usefixtures("airflow_db"), pytest.mark.timeout(300)]


class Record(BaseOperator):
    template_fields = ("decision",)

    def __init__(self, *, decision, **kwargs):
        super().__init__(**kwargs)
        self.decision = decision

    def execute(self, context):
        return self.decision


def _gate_dag(dag_id: str, timeout_s: float) -> DAG:
    with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), render_template_as_native_obj=True) as dag:
        approve = RemediationApprovalOperator(task_id="approve", subject="restart?", body="b", response_timeout=timedelta(seconds=timeout_s))
        change = Record(task_id="change", decision="made a change")
        seen = Record(
            task_id="seen",
            decision="{{ ti.xcom_pull(task_ids='approve', key='" + DECISION_KEY + "') }}",
            trigger_rule=TriggerRule.ALL_DONE,
        )
        approve >> change >> seen
    return dag


def _serialized(dag: DAG) -> DAG:
    """dag.test() runs only serialized DAGs: register this test-only DAG as the DAG processor would."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()  # a fresh metadata DB has no bundle row yet
    bag = DagBag(dag_folder=__file__)
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)
    return dag


def _states(run):
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def test_no_answer_before_the_timeout_is_a_reject():
    dag = _serialized(_gate_dag("gate_timeout", timeout_s=2))
    # nobody answers: the scheduler's own AWAITING_INPUT timeout sweep resolves the task
    with Responder("gate_timeout", "approve", "Approve", sweep_timeouts=True, timeout_s=120) as sweeper:
        run = dag.test()
    assert sweeper.error is None and sweeper.answered_run_ids
    states = _states(run)
    assert states["change"] == "skipped", states
    decision = next(ti for ti in run.get_task_instances() if ti.task_id == "seen").xcom_pull(task_ids="seen")
    assert decision["chosen_options"] == ["Reject"] and decision["timedout"] is True


def test_approve_lets_the_change_run_and_records_who():
    dag = _serialized(_gate_dag("gate_approve", timeout_s=600))
    with Responder("gate_approve", "approve", "Approve", user="oncall-carol", timeout_s=120):
        run = dag.test()
    states = _states(run)
    assert states["change"] == "success", states
    decision = next(ti for ti in run.get_task_instances() if ti.task_id == "seen").xcom_pull(task_ids="seen")
    assert decision["chosen_options"] == ["Approve"] and decision["responded_by_user"]["name"] == "oncall-carol"


@pytest.mark.parametrize(
    "approval",
    [None, {}, {"chosen_options": ["Reject"]}, {"chosen_options": ["Approve"], "timedout": True, "responded_by_user": None}],
)
def test_restart_refuses_without_an_approve_in_this_run(approval):
    op = RestartBrokersOperator(task_id="restart", incident={"cluster": "nowhere", "incident_id": "x"}, plan={"plan": {}}, approval=approval)
    if approval and approval.get("timedout"):
        # a timed-out request can only ever carry the default, Reject; an Approve marked timed out is not trusted
        approval["chosen_options"] = ["Approve"]
    with pytest.raises(AirflowFailException, match="no approval by a person"):
        op.execute({"run_id": "r"})
