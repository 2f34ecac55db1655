"""Approvals through the REAL REST API: ``airflow api-server`` on loopback with real users, the
rolling-restart DAG parked in ``awaiting_input`` under ``dag.test()`` in this process (same
metadata DB).

* the person who started the run (``dag.test()`` starts runs as user ``dag_test``; here that user
  exists, has the role to answer HITL requests and is even listed as an approver) is refused: 403;
* an outsider with the Admin role is refused: 403;
* a configured approver is accepted, and the executor uses that approval -- once: it verifies it,
  takes the cluster's maintenance lock, and halts when the broker's host cannot be reached, paging
  on-call through the webhook;
* the execute task, cleared through the REST API and run again, is refused: the approval was used.

The cluster is a ZooKeeper-only stand-in (registrations written by this test into the tests' real
ZooKeeper); no Kafka behaviour is claimed here -- the lab tests do that.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from airflow_runs import ApiServer, continue_run, q
from kafka_lab.airflow_home import load_dags

pytestmark = [pytest.mark.airflow, pytest.mark.timeout(900)]

DAG_ID = "kafka_rolling_restart"
USERS = {"dag_test": "user", "carol": "user", "mallory": "admin", "alice": "user"}


@pytest.fixture(scope="module")
def api_server(airflow_db, tmp_path_factory):
    server = ApiServer(tmp_path_factory.mktemp("api"), USERS).start()
    try:
        yield server
    finally:
        server.stop()


class People(threading.Thread):
    """The humans: once the approval waits, the starter, an outsider and an approver answer through REST."""

    def __init__(self, api: ApiServer, reason: str, answering=("dag_test", "mallory", "carol")):
        super().__init__(daemon=True)
        self.api, self.reason, self.answering = api, reason, answering
        self.status: dict[str, int] = {}
        self.bodies: dict[str, str] = {}
        self.run_id: str | None = None
        self.hitl: dict | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                runs = self.api.call("carol", "GET", f"/api/v2/dags/{DAG_ID}/dagRuns", params={"limit": 100}).json().get("dag_runs", [])
                mine = [r for r in runs if (r.get("conf") or {}).get("reason") == self.reason]
                if mine:
                    self.run_id = mine[0]["dag_run_id"]
                    ti = self.api.call("carol", "GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{q(self.run_id)}/taskInstances/approve").json()
                    if ti.get("state") == "awaiting_input":
                        break
                time.sleep(0.5)
            else:
                raise TimeoutError("the approval never waited")
            path = f"/api/v2/dags/{DAG_ID}/dagRuns/{q(self.run_id)}/taskInstances/approve/-1/hitlDetails"
            self.hitl = self.api.call("carol", "GET", path).json()
            for user in self.answering:
                r = self.api.call(user, "PATCH", path, json={"chosen_options": ["Approve"], "params_input": {}})
                self.status[user], self.bodies[user] = r.status_code, r.text
        except BaseException as exc:  # surfaced by the test
            self.error = exc


def _ledger(settings, record_id):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.remediate.ledger import Ledger

    return Ledger(ClusterConfig.from_dict("resttest", settings), record_id)


def test_four_eyes_through_rest_then_one_use_of_the_approval(api_server, cluster_env):
    settings, webhook = cluster_env
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    dag = load_dags().get_dag(DAG_ID)
    reason = f"rest approval test {uuid.uuid4().hex[:8]}"
    people = People(api_server, reason)
    people.start()
    run = dag.test(run_conf={"cluster": "resttest", "brokers": [2], "reason": reason, "mode": "execute", "canary": False})
    people.join(30)
    assert people.error is None, people.error
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}

    # --- who may answer, as the REST API and the HITL assignment decide
    assert people.status == {"dag_test": 403, "mallory": 403, "carol": 200}, people.bodies
    assert "not a respondent" in people.bodies["dag_test"] and "not a respondent" in people.bodies["mallory"]
    assert [u["id"] for u in people.hitl["assigned_users"]] == ["carol"]  # the starter is never assigned
    assert "plan digest" in people.hitl["body"] and "broker 2" in people.hitl["body"]

    # --- the approval was used by the executor, which halted at the unreachable host and paged
    assert states["plan"] == "success" and states["approve"] == "success"
    assert states["execute"] == "failed" and states["close"] == "failed", states
    plan = next(ti for ti in run.get_task_instances() if ti.task_id == "plan").xcom_pull(task_ids="plan")["plan"]
    record_id = plan["roll_id"]
    entries = _ledger(settings, record_id).entries()
    approval = [e for e in entries if e["event"] == "approval"]
    assert [(a["decision"]["user_id"], a["decision"]["chosen"], a["decision"]["starter"]) for a in approval] == [("carol", "Approve", "dag_test")]
    assert [e["by_try"] for e in entries if e["event"] == "approval_used"] == [1]
    assert [e["event"] for e in entries][-1] == "halted"
    audit = IncidentStore(ClusterConfig.from_dict("resttest", settings)).audit_trail(record_id)
    assert [(e["actor"], e["outcome"]) for e in audit if e["action"] == "approval"] == [("carol", "approve")]
    assert [(e["actor"], e["outcome"]) for e in audit if e["action"] == "approval_verified"] == [("carol", "ok")]
    assert [e["outcome"] for e in audit if e["action"] == "maintenance_lock"] == ["acquired", "released"]
    halt = [e for e in audit if e["action"] == "halt"]
    assert len(halt) == 1 and halt[0]["details"]["broker_id"] == 2 and halt[0]["actor"] == "carol"
    waiting = webhook.wait_for(lambda m: m["event"] == "approval_waiting")
    assert waiting["cluster"] == "resttest" and waiting["task_id"] == "approve"
    paged = webhook.wait_for(lambda m: m["event"] == "halted" and m["task_id"] == "execute")
    assert "HALTED at broker 2" in paged["text"] and "registered brokers: [1, 2, 3]" in paged["text"]

    # --- a cleared execute task is refused: the approval was already used
    r = api_server.call("mallory", "POST", f"/api/v2/dags/{DAG_ID}/clearTaskInstances",
                        json={"dag_run_id": run.run_id, "task_ids": ["execute"], "only_failed": False, "dry_run": False})
    assert r.status_code == 200, r.text
    rerun = continue_run(dag, run.run_id)
    states = {ti.task_id: ti.state for ti in rerun.get_task_instances()}
    assert states["execute"] == "failed", states
    audit = IncidentStore(ClusterConfig.from_dict("resttest", settings)).audit_trail(record_id)
    refused = [e for e in audit if e["action"] == "execute_plan" and e["outcome"] == "refused"]
    assert len(refused) == 1 and any("was already used" in r for r in refused[0]["details"]["refusals"])
    # nothing was attempted the second time: one lock, one halt
    assert [e["outcome"] for e in audit if e["action"] == "maintenance_lock"] == ["acquired", "released"]
    assert len([e for e in audit if e["action"] == "halt"]) == 1


def _sync_dags() -> None:
    """The DAG files into the metadata DB, as the DAG processor would (the REST API triggers serialized DAGs)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        sync_bag_to_db(BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name), bundle.name, bundle.version)


def test_a_run_triggered_through_rest_by_a_cannot_be_approved_by_a_but_by_b(api_server, cluster_env, monkeypatch):
    """Issue 17 §3: user A triggers the run with ``POST /api/v2/dags/{id}/dagRuns`` (A is one of the approvers);
    A's Approve through REST is refused, B's accepted; the decision records A as the starter."""
    import json
    import os

    settings, _ = cluster_env
    from kafka_runbooks.incidents.store import IncidentStore

    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["resttest"]["approvals"]["approvers"] = ["alice", "carol"]
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    dag = load_dags().get_dag(DAG_ID)
    _sync_dags()
    reason = f"rest trigger test {uuid.uuid4().hex[:8]}"
    conf = {"cluster": "resttest", "brokers": [2], "reason": reason, "mode": "execute", "canary": False}
    r = api_server.call("alice", "POST", f"/api/v2/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": conf})
    assert r.status_code == 200, r.text
    run_id = r.json()["dag_run_id"]
    assert r.json().get("triggering_user_name") in ("alice", None)
    people = People(api_server, reason, answering=("alice", "carol"))
    people.start()
    run = continue_run(dag, run_id, timeout_s=600)
    people.join(30)
    assert people.error is None, people.error
    assert people.run_id == run_id
    assert people.status == {"alice": 403, "carol": 200}, people.bodies
    assert [u["id"] for u in people.hitl["assigned_users"]] == ["carol"]  # the starter is never asked
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states["approve"] == "success" and states["execute"] == "failed", states  # used; halted at the unreachable host
    plan = next(ti for ti in run.get_task_instances() if ti.task_id == "plan").xcom_pull(task_ids="plan")["plan"]
    entries = _ledger(settings, plan["roll_id"]).entries()
    (approval,) = [e for e in entries if e["event"] == "approval"]
    assert (approval["decision"]["user_id"], approval["decision"]["starter"], approval["decision"]["refusals"]) == ("carol", "alice", [])
    audit = IncidentStore(ClusterConfig.from_dict("lab", settings)).audit_trail(plan["roll_id"])
    verified = [e for e in audit if e["action"] == "approval_verified"]
    assert [(e["actor"], e["details"]["started_by"]) for e in verified] == [("carol", "alice")]
