"""The deferred preferred election on the lab's real Kafka 2.3.0 (issue 7), automatic rebalance off (the lab's
default profile): broker 3 restarted, so it leads none of the partitions it is the preferred replica of.

* the DAG, approved, whose quiet window never opens: the wait gives up at its deadline saying why, nothing moves;
* the DAG again, window open: it waits until broker 3 is ready, then restores preferred leadership in batches through
  /admin/preferred_replica_election, every batch converged (ZooKeeper, every broker's own view) with zero failed
  canary produces, all of it audited;
* broker 3 not catching up (its replica fetchers held: they exist, make no progress): the trigger keeps waiting, naming
  the partitions and never calling it "catching up", and gives up at the deadline; once released, it is ready.
"""

from __future__ import annotations

import asyncio
import time
import json
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.timeout(600)]

DAG_ID = "kafka_preferred_election"
APPROVER = "oncall-carol"


@pytest.fixture
def election_env(healthy_lab, airflow_db, monkeypatch):
    lab = healthy_lab
    env = lab.airflow_env()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return lab


def _settings(monkeypatch, **election):
    clusters = json.loads(__import__("os").environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"]["election"] = {"batch_size": 8, "offsets_batch_size": 10, "stable_s": 5.0, "poll_s": 1.0,
                                   "convergence_s": 60.0, "znode_timeout_s": 60.0, **election}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    return clusters["lab"]


def _run(form):
    dag = load_dags().get_dag(DAG_ID)
    with Responder(DAG_ID, "approve", "Approve", user=APPROVER, timeout_s=300) as responder:
        run = dag.test(run_conf={"cluster": "lab", "brokers": [3], "reason": f"lab election {uuid.uuid4().hex[:8]}",
                                 "mode": "execute", **form})
    assert responder.error is None
    return run


def _states(run):
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def _xcom(run, task_id):
    return next(ti for ti in run.get_task_instances() if ti.task_id == task_id).xcom_pull(task_ids=task_id)


def _audit(settings, run):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    record_id = _xcom(run, "plan")["plan"]["roll_id"]
    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    return store.get(record_id), store.audit_trail(record_id)

def recorded_plan(settings, plan_output):
    """The plan the plan task recorded in the state database, as a dict: its XCom names it (record and digest)."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.runbook.plans import load

    return load(plan_output, "", lambda name: ClusterConfig.from_dict(name, settings)).plan.to_dict()


def test_election_gives_up_outside_the_window_then_restores_preferred_leadership(election_env, monkeypatch):
    lab = election_env
    lab.bounce(3)
    mine = [f"{t}-{p}" for t, p in lab.preferred_of(3)]

    # 1. the quiet window never opens before the deadline: gives up, says why, changes nothing
    import datetime as dt

    hour = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)).hour
    settings = _settings(monkeypatch, window=[f"{hour:02d}:00-{hour:02d}:30"], deadline_s=8.0)
    run = _run({})
    states = _states(run)
    assert states["approve"] == "success" and states["wait"] == "failed" and states["elect"] == "upstream_failed"
    record, trail = _audit(settings, run)
    wait = [e for e in trail if e["action"] == "election_wait"]
    assert wait and wait[-1]["outcome"] == "gave_up"
    assert "outside the quiet window" in wait[-1]["details"]["reason"] and "gave up at the deadline" in wait[-1]["details"]["reason"]
    assert record["status"] == "closed" and "gave up" in record["resolution"]
    assert not [e for e in trail if e["action"] == "elect_batch"]
    assert not any(lab.partitions()[k]["leader"] == 3 for k in lab.preferred_of(3))

    # 2. window open (no window), broker 3 ready: batches through the znode, each converged, canary clean
    settings = _settings(monkeypatch, deadline_s=300.0)
    load_before = lab.load_stats()
    run = _run({})
    states = _states(run)
    assert states == {"plan": "success", "approve": "success", "wait": "success", "elect": "success", "close": "success"}, states
    result = _xcom(run, "elect")
    assert sorted(result["elected"]) == sorted(mine)
    assert result["canary_failures"] == 0 and all(t["canary_rounds"] >= 1 and t["queue_checks"] >= 1 for t in result["timings"])
    plan = recorded_plan(settings, _xcom(run, "plan"))
    assert len(plan["batches"]) == result["batches"] >= 2 and plan["steps"] == []
    assert lab.leads_preferred(3)
    views = lab.views()
    for b, view in views.items():
        assert "error" not in view, (b, view)
        assert all(view[k][0] == 3 for k in lab.preferred_of(3)), b
    assert lab.kazoo().exists("/admin/preferred_replica_election") is None
    record, trail = _audit(settings, run)
    actions = [e["action"] for e in trail]
    assert actions.count("elect_batch") == result["batches"] and actions.count("convergence") == result["batches"]
    assert "approval_verified" in actions and ("maintenance_lock" in actions) and record["status"] == "closed"
    batch = next(e for e in trail if e["action"] == "elect_batch")
    assert batch["details"]["method"] == "zookeeper" and batch["actor"] == APPROVER
    # the lab's own load (no retries) is reported, not asserted: a client with a stale leader sees NOT_LEADER once
    load_after = lab.load_stats()
    print("lab load produce failures during the election:", load_after["produced_failed"] - load_before["produced_failed"])


def test_still_catching_up_waits_then_gives_up_with_the_reason(election_env, monkeypatch):
    from kafka_runbooks import clock
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.remediate.election_run import check_ready
    from kafka_runbooks.triggers.election import ElectionReadyTrigger

    from kafka_lab.procs import LabError, wait_until

    lab = election_env
    lab.stop(3)
    lab.start(3)
    lab.wait_started(3)

    def held():
        try:
            return lab.hold_fetchers(3)
        except LabError:  # its fetcher threads start once the controller told it what to follow
            return None

    wait_until(held, 60, "broker 3's replica fetchers to exist and be held", interval=0.5)
    # the partitions the load writes to leave broker 3's ISR after replica.lag.time.max.ms (5 s in the lab)
    wait_until(lambda: any(3 in st["replicas"] and 3 not in st["isr"] for st in lab.partitions().values()), 60,
               "a partition without broker 3 in its ISR", interval=0.5)
    _settings(monkeypatch)
    config = load_cluster("lab")
    conditions = {"brokers": [3], "stable_s": 5.0, "window": []}
    t0 = time.monotonic()
    why, seen = check_ready(config, conditions)
    one_check_s = time.monotonic() - t0  # a JmxTool run (a JVM start) reads the followers: seconds on a loaded machine
    conditions["deadline_at"] = clock.iso(clock.now() + __import__("datetime").timedelta(seconds=max(6.0, 2.5 * one_check_s)))
    # issue 16: never "catching up" for a follower nobody saw progress; its fetchers are held, not gone: not "stuck"
    assert any("not yet in the ISR" in w and "not yet known whether it catches up" in w for w in why), why
    assert seen["stuck"] is None

    async def first_event():
        async for event in ElectionReadyTrigger("lab", conditions, poll_s=1.0).run():
            return event.payload

    event = asyncio.run(asyncio.wait_for(first_event(), 120 + 5 * one_check_s))
    assert event["status"] == "gave_up" and event["checks"] >= 2
    assert "not yet known whether it catches up" in event["reason"] and "Nothing was changed" in event["reason"]

    lab.release_fetchers(3)
    lab.wait_full_isr(120)
    wait_until(lambda: check_ready(config, conditions)[0] == [], 60, "broker 3 ready for the election", interval=1.0)


def test_divergence_that_persists_halts_the_election(election_env, monkeypatch):
    """The controller's requests to broker 3 held (its own metadata goes stale, as broker 3's did in incident 003):
    the batch is elected in ZooKeeper, broker 3 never agrees, the run halts after ``convergence_s`` -- audited, the
    lock released, nothing further elected."""
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate import election_run as R
    from kafka_runbooks.remediate.ledger import Ledger
    from kafka_runbooks.remediate.lock import holders

    lab = election_env
    lab.bounce(3)
    settings = _settings(monkeypatch, convergence_s=10.0, batch_size=4)
    time.sleep(float(settings["election"]["stable_s"]) + 1)  # no deferred wait here: the executor re-checks before each batch that the returning broker's session is older than stable_s
    config = load_cluster("lab")
    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    record = store.open(cluster="lab", broker_ids=[3], reason="halt test", trigger={"kind": E.KIND}, opened_by="test")
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        plan = E.plan_election(read_snapshot(zk, "lab"), config, brokers=[3], roll_id=record["id"])
    assert len(plan.batches) >= 2
    lab.hold_controller_requests(3)
    ex = R.Execution(config=config, plan=plan, record_id=record["id"], dag_id="test", run_id=f"halt-{uuid.uuid4().hex[:6]}",
                     task_id="elect", try_number=1, approver="oncall-carol", starter="test", canary=True)
    with pytest.raises(R.Halted) as halted:
        R.run(ex)
    text = str(halted.value)
    assert "HALTED at batch 1" in text and "did not converge within 10 s" in text
    assert "broker 3's own metadata disagrees with ZooKeeper" in text
    trail = store.audit_trail(record["id"])
    assert [e["action"] for e in trail if e["action"] in ("elect_batch", "halt")] == ["elect_batch", "halt"]
    assert Ledger(ClusterConfig.from_dict("lab", settings), record["id"]).progress().halted is not None
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        assert holders(zk, "lab") == []
        after = read_snapshot(zk, "lab")
    # batch 2 was never written: its partitions are still led by someone else
    second = set(plan.batches[1].partitions)
    assert all(p.leader != 3 for p in after.partitions if p.name in second)
