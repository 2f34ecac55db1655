"""The DAG files: they import cleanly and fast, and the approval gate cannot be bypassed by structure."""

import json
import subprocess
import sys

import pytest

from kafka_lab.airflow_home import REPO, load_dags
from kafka_runbooks.operators.approval import RemediationApprovalOperator

pytestmark = pytest.mark.usefixtures("airflow_db")


def test_dags_import_without_errors_and_have_the_stages(monkeypatch):
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps({"lab": {"zk_conn_id": "zk", "hosts": {"1": "h1"}}}))
    bag = load_dags()
    assert set(bag.dag_ids) >= {"kafka_health_check_lab", "kafka_incident_response", "kafka_rolling_restart"}
    response = bag.get_dag("kafka_incident_response")
    order = ["open_incident", "capture", "analyze", "report", "choose_remediation", "plan", "approve", "restart", "verify_recovery",
             "follow_up_peers", "close_incident"]
    mitigation = ["open_incident", "plan_mitigation", "approve_mitigation", "mitigate", "capture"]
    assert set(order) | set(mitigation) | {"explain", "restore_order"} == set(response.task_ids)
    for chain in (order, mitigation, ["verify_recovery", "restore_order", "close_incident"]):
        for upstream, downstream in zip(chain, chain[1:]):
            assert upstream in response.get_task(downstream).upstream_task_ids, (upstream, downstream)
    # mitigate first, then capture whatever the mitigation did; the move is approved like every change
    assert response.get_task("capture").trigger_rule == "all_done"
    assert isinstance(response.get_task("approve_mitigation"), RemediationApprovalOperator)
    assert response.get_task("mitigate").retries == 0
    # the other branch: explained, nothing restarted (incidents 002a, 004), then the close-out
    assert "choose_remediation" in response.get_task("explain").upstream_task_ids
    assert "explain" in response.get_task("close_incident").upstream_task_ids


def test_restart_is_gated_by_the_approval_and_defaults_to_reject():
    response = load_dags().get_dag("kafka_incident_response")
    approve = response.get_task("approve")
    assert isinstance(approve, RemediationApprovalOperator)
    assert approve.defaults == ["Reject"] and approve.response_timeout is not None
    # every path to the restart goes through the approval
    assert "approve" in response.get_task("restart").get_flat_relative_ids(upstream=True)
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    assert isinstance(response.get_task("analyze"), SparkSubmitOperator)


def test_rolling_restart_shape_form_and_side_effect_task():
    from kafka_runbooks.operators.remediate import POOL, ExecutePlanOperator

    roll = load_dags().get_dag("kafka_rolling_restart")
    assert roll.max_active_runs == 1
    for upstream, downstream in zip(["plan", "approve", "execute", "close"], ["approve", "execute", "close"]):
        assert upstream in roll.get_task(downstream).upstream_task_ids
    assert set(roll.params.keys()) == {"cluster", "brokers", "reason", "mode", "canary", "resume"}
    assert roll.params["mode"] == "dry-run"  # the form defaults to showing the plan only
    for dag, task in ((roll, "execute"), (load_dags().get_dag("kafka_incident_response"), "restart")):
        op = dag.get_task(task)
        assert isinstance(op, ExecutePlanOperator) and op.retries == 0 and op.pool == POOL
        assert "approve" in op.upstream_task_ids
    with pytest.raises(ValueError, match="never retries"):
        ExecutePlanOperator(task_id="x", plan_output={}, retries=2)


def test_approval_cannot_default_to_approve():
    import pytest

    with pytest.raises(ValueError):
        RemediationApprovalOperator(task_id="x", subject="s", defaults="Approve")


def test_dag_files_import_nothing_slow():
    """Parsing the DAG folder must not import kazoo, paramiko, pyspark or confluent_kafka."""
    code = (
        "import sys, json\n"
        f"sys.path[:0] = [{str(REPO / 'dags')!r}]\n"
        "import kafka_health_check, kafka_incident_response, kafka_rolling_restart\n"
        "print(json.dumps(sorted(m for m in ('kazoo', 'paramiko', 'pyspark', 'confluent_kafka') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_parsing_the_dags_leaves_a_pending_alarm_armed():
    """pytest-timeout's alarm must survive dag.test()'s in-process parse, or a hung test hangs the suite."""
    import signal

    armed, _ = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's own (signal method), if any
    if not armed:
        signal.setitimer(signal.ITIMER_REAL, 300)
    try:
        load_dags()
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
    finally:
        if not armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
    assert remaining > 0
