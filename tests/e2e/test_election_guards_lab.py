"""The preferred election respects what runs and fails closed (issue 17 §5), on the lab's real Kafka 2.3.0:

* a cluster whose brokers' own metadata cannot be read (a SASL client configuration: the direct metadata probe speaks
  PLAINTEXT and SSL) is refused at plan time -- nothing is asked, nothing is written -- instead of halting after batch 1;
* each batch is checked again on fresh state: a target broker that stopped serving since the wait (hung) is refused
  before anything of the batch is written;
* a batch the controller does not take (the controller paused) halts the election and removes the znode it wrote: no
  controller runs that election later;
* after a batch of ``__consumer_offsets`` partitions, the new coordinators' groups are loaded before the next batch.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_runbooks.config import ClusterConfig

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.timeout(900)]


@pytest.fixture
def election_env(healthy_lab, airflow_db, monkeypatch):
    for k, v in healthy_lab.airflow_env().items():
        monkeypatch.setenv(k, v)
    return healthy_lab


def _settings(monkeypatch, **election):
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"]["election"] = {"batch_size": 8, "offsets_batch_size": 10, "stable_s": 5.0, "poll_s": 1.0,
                                   "convergence_s": 60.0, "znode_timeout_s": 60.0, **election}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    return clusters["lab"]


def _execution(config, record_id, plan):
    from kafka_runbooks.remediate import election_run as R

    return R.Execution(config=config, plan=plan, record_id=record_id, dag_id="test", run_id=f"guard-{uuid.uuid4().hex[:6]}",
                       task_id="elect", try_number=1, approver="oncall-carol", starter="test", canary=True)


def _plan(config, settings, brokers=(3,)):
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import election as E

    time.sleep(float(settings["election"]["stable_s"]) + 1)  # no deferred wait here: the executor re-checks before each batch that the returning broker's session is older than stable_s
    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    record = store.open(cluster="lab", broker_ids=list(brokers), reason="guard test", trigger={"kind": E.KIND}, opened_by="test")
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        plan = E.plan_election(read_snapshot(zk, "lab"), config, brokers=list(brokers), roll_id=record["id"])
    return record["id"], plan


def test_a_cluster_whose_metadata_views_cannot_be_read_is_refused_at_plan_time(election_env, monkeypatch):
    lab = election_env
    lab.bounce(3)
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"]["kafka_conn_id"] = "lab_kafka_sasl"
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    monkeypatch.setenv("AIRFLOW_CONN_LAB_KAFKA_SASL", json.dumps({"conn_type": "generic", "extra": {
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}}))
    _settings(monkeypatch)
    run = load_dags().get_dag("kafka_preferred_election").test(run_conf={"cluster": "lab", "brokers": [3], "mode": "execute",
                                                                         "reason": f"sasl {uuid.uuid4().hex[:6]}"})
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert states["plan"] == "failed" and states["approve"] != "success", states
    plan_ti = next(ti for ti in run.get_task_instances() if ti.task_id == "plan")
    assert plan_ti.xcom_pull(task_ids="plan") is None
    # issue 19 problem 7: the close task says what was refused, not "the plan was never computed"
    assert states["close"] == "success", states
    closed = next(ti for ti in run.get_task_instances() if ti.task_id == "close").xcom_pull(task_ids="close")
    assert closed["status"] == "refused" and closed["summary"].startswith("refused; nothing changed. refused -- "), closed
    assert "own metadata of brokers" in closed["summary"], closed
    assert lab.kazoo().exists("/admin/preferred_replica_election") is None and not lab.leads_preferred(3)


def test_a_target_that_stopped_serving_is_refused_before_its_batch(election_env, monkeypatch):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.remediate import election_run as R

    lab = election_env
    lab.bounce(3)
    settings = _settings(monkeypatch)
    config = load_cluster("lab")
    record_id, plan = _plan(config, settings)
    lab.hang(3)  # registered, in every ISR (no writes wait on it), serving nothing
    try:
        with pytest.raises(R.Refused) as refused:  # issue 29 §3: nothing of the batch was written: a refusal, not a halt
            R.run(_execution(config, record_id, plan))
    finally:
        lab.unhang(3)
    text = str(refused.value)
    assert "refused at batch 1" in text and "refused on fresh state" in text and "does not answer a direct check now" in text
    assert "nothing of this batch was elected" in text and "HALTED" not in text
    from kafka_runbooks.remediate.ledger import Ledger

    entries = Ledger(config, record_id).entries()
    (end,) = [e for e in entries if e.get("event") in ("refused", "halted")]
    assert end["event"] == "refused" and end["code"] == "refused_on_fresh_state" and end["batch"] == 1, end
    assert [s["state"] for s in end["states"]] == ["planned", "checking", "refused"], end
    assert lab.kazoo().exists("/admin/preferred_replica_election") is None and not any(
        lab.partitions()[k]["leader"] == 3 for k in lab.preferred_of(3))


def test_a_batch_the_controller_does_not_take_is_removed_again(election_env, monkeypatch):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.remediate import election_run as R

    lab = election_env
    controller = (lab.controller() or {})["brokerid"]
    target = next(b for b in (1, 2, 3) if b != controller)
    lab.bounce(target)
    settings = _settings(monkeypatch, znode_timeout_s=4.0, stable_s=1.0)
    config = load_cluster("lab")
    record_id, plan = _plan(config, settings, brokers=(target,))
    lab.pause(controller)  # its ZooKeeper session lives on for zookeeper.session.timeout.ms: /controller still names it
    try:
        with pytest.raises(R.Halted) as halted:
            R.run(_execution(config, record_id, plan))
        assert lab.kazoo().exists("/admin/preferred_replica_election") is None, "the batch was left for a controller to run later"
    finally:
        lab.resume(controller)
    assert "removed again: no controller that reads it from now on runs it; a controller stuck while handling it" in str(halted.value)


def test_offsets_batches_wait_for_the_new_coordinators(election_env, monkeypatch):
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.remediate import election_run as R

    lab = election_env
    lab.bounce(3)
    settings = _settings(monkeypatch, batch_size=40, offsets_batch_size=40)
    config = load_cluster("lab")
    record_id, plan = _plan(config, settings)
    assert any(p.startswith("__consumer_offsets-") for st in plan.batches for p in st.partitions)
    result = R.run(_execution(config, record_id, plan))
    offsets = [t for t, st in zip(result["timings"], plan.batches) if any(p.startswith("__consumer_offsets-") for p in st.partitions)]
    assert offsets and all(t["coordinator"]["seconds"] >= 0 and t["coordinator"]["gate"] == "coordinator" for t in offsets), offsets
    assert lab.leads_preferred(3)
