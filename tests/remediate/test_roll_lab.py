"""The remediation engine on the lab's real Kafka 2.3.0 brokers (issue 6).

* a full roll of the three brokers under a canary load: zero produces failed after the client's
  retries, every record read, no committed offset lost, the controller restarted last, and -- seen by
  a ZooKeeper watcher of our own during the roll, not read from the plan -- never two holders of any
  ``__consumer_offsets`` partition down at once and never an offsets partition without a registered
  in-sync holder;
* the coordinator gate holding while a large ``__consumer_offsets`` partition loads;
* a broker that does not come back halts the roll and pages on-call; resume completes it without
  restarting the broker that was already done;
* lock contention: a roll refused while another holds the cluster's maintenance lock;
* a hung broker that ignores SIGTERM: killed after ``gates.stop_s``, its old registration waited out,
  started with a new session.
"""

from __future__ import annotations

import datetime
import json
import os
import threading
import time
import uuid

import pytest

from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder
from kafka_lab.rollwatch import CanaryLoad, ZooKeeperWatcher
from webhook_receiver import WebhookReceiver
from kafka_runbooks.config import ClusterConfig

pytestmark = [pytest.mark.lab, pytest.mark.airflow, pytest.mark.timeout(1200)]

DAG_ID = "kafka_rolling_restart"
APPROVER = "oncall-carol"


@pytest.fixture
def roll_env(healthy_lab, airflow_db, monkeypatch):
    """The lab, its Airflow connections and Variable, and on-call's webhook pointing at a local receiver."""
    lab = healthy_lab
    with WebhookReceiver() as webhook:
        env = lab.airflow_env()
        clusters = json.loads(env["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
        clusters["lab"]["approvals"]["oncall_conn_id"] = "lab_oncall"
        env["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"] = json.dumps(clusters)
        env["AIRFLOW_CONN_LAB_ONCALL"] = webhook.connection()
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        yield lab, clusters["lab"], webhook


def _set_settings(monkeypatch, settings):
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"] = settings
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))


def roll(form: dict, approve: bool = True):
    """Runs the rolling-restart DAG as on-call would: the form, then an approver's Approve."""
    form = {"cluster": "lab", "brokers": [], "reason": f"lab roll {uuid.uuid4().hex[:8]}", "mode": "execute", "canary": True, **form}
    dag = load_dags().get_dag(DAG_ID)
    if not approve:
        return dag.test(run_conf=form)
    with Responder(DAG_ID, "approve", "Approve", user=APPROVER, timeout_s=600) as responder:
        run = dag.test(run_conf=form)
    assert responder.error is None and responder.answered_run_ids == [run.run_id], (
        responder.error, responder.answered_run_ids, states(run), _plan_outcome(run))
    return run


def _plan_outcome(run):
    """What the plan task said, for a run that never asked for the approval (its refusals are in the audit)."""
    try:
        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.incidents.store import IncidentStore

        store = IncidentStore(load_cluster("lab"))
        for record in reversed(store.records("lab")):
            audit = store.audit_trail(record["id"])
            if any((e.get("details") or {}).get("run_id") == run.run_id for e in audit):
                return [(e["action"], e["outcome"], (e.get("details") or {}).get("refusals")) for e in audit if e["action"].startswith("plan")]
    except Exception as exc:  # noqa: BLE001 -- a diagnostic only
        return f"(audit unreadable: {exc})"
    return "(no record of this run)"


def states(run):
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def xcom(run, task_id, key="return_value"):
    return next(ti for ti in run.get_task_instances() if ti.task_id == task_id).xcom_pull(task_ids=task_id, key=key)


def audit_of(settings, run):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    record_id = xcom(run, "plan")["plan"]["roll_id"]
    return record_id, IncidentStore(ClusterConfig.from_dict("lab", settings)).audit_trail(record_id)

def recorded_plan(settings, plan_output):
    """The plan the plan task recorded in the state database, as a dict: its XCom names it (record and digest)."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.runbook.plans import load

    return load(plan_output, "", lambda name: ClusterConfig.from_dict(name, settings)).plan.to_dict()


def audit_of_record(settings, run):
    """The audit of the record a run's plan task opened (also when the plan task failed: found by its run id)."""
    from kafka_runbooks.incidents.store import IncidentStore

    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    for record in reversed(store.records("lab")):
        audit = store.audit_trail(record["id"])
        if any((e.get("details") or {}).get("run_id") == run.run_id for e in audit):
            return record["id"], audit
    raise AssertionError(f"no record of run {run.run_id}")


def zk_client():
    from kafka_lab.lab import CHROOT, zk_connect
    from kafka_runbooks.zookeeper import kazoo_client

    zk = kazoo_client(zk_connect(), CHROOT, timeout_s=10.0)
    zk.start(timeout=15)
    return zk


def delete_topic(lab, name: str) -> None:
    """Tests leave no topic behind: the next test's safety checks read every partition."""
    from kafka_lab.procs import wait_until
    from kafka_lab.topics import delete_topic as delete

    delete(name)
    wait_until(lambda: lab.kazoo().exists(f"/brokers/topics/{name}") is None, 120, f"topic {name} deleted")


# ------------------------------------------------------------------ a full roll under load

def test_full_roll_under_canary_load(roll_env, request):
    lab, settings, webhook = roll_env
    from kafka_lab.topics import bootstrap_all

    controller = lab.controller()["brokerid"]
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    zk = zk_client()
    watcher = ZooKeeperWatcher(zk)
    name = CanaryLoad.create_topic(bootstrap_all(), f"roll-test-{uuid.uuid4().hex[:6]}")
    request.addfinalizer(lambda: delete_topic(lab, name))
    lab.wait_full_isr(60)
    load = CanaryLoad(bootstrap_all(), name, f"{name}-group").start()
    time.sleep(3)  # the load is flowing before the roll starts (the figures below are about the roll)
    try:
        run = roll({})
    finally:
        stats = load.stop()
        watcher.stop()
    try:
        committed_now = load.broker_committed()
    finally:
        zk.stop()
        zk.close()

    assert states(run) == {"plan": "success", "approve": "success", "execute": "success", "close": "success"}, (
        states(run), [(e["action"], e["outcome"], e["details"]) for e in audit_of_record(settings, run)[1] if e["outcome"] != "ok"])
    result = xcom(run, "execute")
    order = result["restarted"]
    assert sorted(order) == [1, 2, 3] and order[-1] == controller, (order, controller)
    assert all(lab.broker_pid(b) != pids[b] for b in (1, 2, 3))

    # what a ZooKeeper watcher saw during the roll
    seen = watcher.registrations()
    assert watcher.down_order() == order, seen
    assert watcher.most_holders_down() == 1, seen
    assert watcher.offsets_partitions_without_a_registered_in_sync_holder() == [], (seen, watcher.isr_changes())

    # the canary load, with the client's retries
    assert stats["sent"] > 0 and stats["failed"] == {} and stats["delivered"] == stats["sent"], stats
    assert stats["never_read"] == [], stats
    assert all(committed_now[p] >= o for p, o in stats["commits"].items()), (committed_now, stats["commits"])

    # the engine's own record of it
    record_id, audit = audit_of(settings, run)
    done = [e for e in audit if e["action"] == "restart_broker" and e["outcome"] == "ok"]
    trail = [(e["action"], e["outcome"], e["details"].get("broker_id")) for e in audit]
    assert [e["details"]["broker_id"] for e in done] == order and {e["actor"] for e in done} == {APPROVER}, trail
    assert all(e["details"]["report"]["controlled_shutdown"] == "succeeded" for e in done), [e["details"]["report"] for e in done]
    assert all(e["details"]["report"]["new_registration"]["session_id"] != e["details"]["report"]["old_registration"]["session_id"] for e in done)
    assert [e["details"]["broker_id"] for e in audit if e["action"] == "gate_coordinator"] == order, trail
    assert [e["details"]["broker_id"] for e in audit if e["action"] == "gate_canary"] == order, trail
    assert [e["outcome"] for e in audit if e["action"] == "maintenance_lock"] == ["acquired", "released"], trail
    assert webhook.wait_for(lambda m: m["event"] == "approval_waiting")
    assert not [m for m in webhook.received if m["event"] == "halted"]
    print("ROLL FIGURES", json.dumps({"timings": result["timings"], "canary_load": stats}))


# ------------------------------------------------------------------ the coordinator gate

def test_coordinator_gate_holds_while_a_large_offsets_partition_loads(roll_env, request):
    """A __consumer_offsets partition made large (its cleaners stopped), then its leadership moved to a
    replica that has to load it: the gate keeps answering "not yet" until Kafka finished loading."""
    lab, settings, _ = roll_env
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from kazoo.recipe.watchers import DataWatch

    from kafka_lab.topics import bootstrap_all
    from kafka_runbooks.hooks.kafka import client_config
    from kafka_runbooks.remediate.gates import coordinator_gate, offsets_partition_for

    for b in (1, 2, 3):
        lab.kill_cleaner(b)  # compaction stopped, as in incident 002
    admin = AdminClient({"bootstrap.servers": bootstrap_all()})
    fill = f"fill-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(fill, 100, 3)])[fill].result(60)
    request.addfinalizer(lambda: delete_topic(lab, fill))
    group = next(g for g in (f"big-{i}" for i in range(10000)) if offsets_partition_for(g, 50) == 7)
    meta = "x" * 3000
    for n in range(1, 1201):  # ~1200 x 100 offsets x 3 KB: a few hundred MB in __consumer_offsets-7
        tps = [TopicPartition(fill, p, n, metadata=meta) for p in range(100)]
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, tps)])[group].result(60)
    state = lab.partitions(["__consumer_offsets"])[("__consumer_offsets", 7)]
    leader = state["leader"]
    # the leader dies (SIGKILL: it can answer nothing afterwards); when its session expires the controller
    # makes a follower leader, which has to load the partition before it can answer for any group of it.
    # The gate starts the moment ZooKeeper shows the new leader.
    zk = zk_client()
    moved = threading.Event()
    new_leader: dict = {}

    def on_state(data, stat):
        if data and json.loads(data)["leader"] not in (leader, -1):
            new_leader["id"] = json.loads(data)["leader"]
            moved.set()
            return False
        return None

    try:
        DataWatch(zk, "/brokers/topics/__consumer_offsets/partitions/7/state", on_state)
        lab.kill(leader)
        assert moved.wait(120), "leadership of __consumer_offsets-7 never moved"
        base = client_config({"api.version.request": True}, bootstrap_all(), 10.0)  # the lab's 2.3.0 brokers
        result = coordinator_gate(
            lambda g: {**base, "group.id": g, "enable.auto.commit": False}, [7], 50,
            timeout_s=120, poll_s=0.05, request_timeout_s=0.5,
            broker_log=lambda: lab.server_log(new_leader["id"]).read_text(errors="replace"), led_by_broker=[7],
        )
    finally:
        zk.stop()
        zk.close()
    lab.start(leader)
    finished = result.details["finished_loading_lines"]
    assert "7" in finished and finished["7"] > 0, result.details  # Kafka really loaded it (its own line)
    # the gate held (answers it did not accept) and passed only after Kafka's "Finished loading" line
    assert result.details["errors_seen"].get("7"), result.details
    from kafka_runbooks import clock
    from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log

    done = [e for e in parse_kafka_log(lab.server_log(new_leader["id"]).read_text(errors="replace")).signatures("group_load_done")
            if e.attrs["partition"] == "7"][-1]
    finished_at = datetime.datetime.fromisoformat(done.timestamp.replace(",", ".")).astimezone()  # the broker logs local time
    assert clock.parse(result.details["loaded_at"]["7"]) >= finished_at, (done.timestamp, result.details)
    print("COORDINATOR GATE", json.dumps(result.to_dict()))


# ------------------------------------------------------------------ halt, page, resume

def test_a_broker_that_does_not_come_back_halts_pages_and_resume_completes(roll_env, monkeypatch):
    lab, settings, webhook = roll_env
    controller = lab.controller()["brokerid"]
    first, second = [b for b in (1, 2, 3) if b != controller]
    props = lab.host_dir(second) / "config" / "server.properties"
    original = props.read_text()
    props.write_text(original + "num.io.threads=not-a-number\n")  # Kafka refuses this config at start and exits
    try:
        run = roll({"brokers": [first, second, controller]})
    finally:
        props.write_text(original)
    assert states(run)["execute"] == "failed" and states(run)["close"] == "failed", states(run)
    record_id, audit = audit_of(settings, run)
    halt = [e for e in audit if e["action"] == "halt"]
    assert len(halt) == 1 and halt[0]["details"]["broker_id"] == second and halt[0]["details"]["phase"] == "start"
    logs = "\n".join(halt[0]["details"]["logs"].values())
    assert "num.io.threads" in logs  # the broker's own last words
    assert any(f"down (configured, not registered): [{second}]" in line for line in halt[0]["details"]["state"])
    page = webhook.wait_for(lambda m: m["event"] == "halted" and m["task_id"] == "execute")
    assert f"HALTED at broker {second}" in page["text"] and "num.io.threads" in page["text"]
    assert [e["details"]["broker_id"] for e in audit if e["action"] == "restart_broker" and e["outcome"] == "ok"] == [first]
    first_pid, controller_pid = lab.broker_pid(first), lab.broker_pid(controller)

    resumed = roll({"resume": True})
    assert states(resumed)["execute"] == "success", states(resumed)
    plan = recorded_plan(settings, xcom(resumed, "plan"))
    assert plan["roll_id"] == record_id and plan["completed"] == [first]
    assert [s["broker_id"] for s in plan["steps"]] == [second, controller]
    assert lab.broker_pid(first) == first_pid, "resume restarted a broker that was already done"
    assert lab.broker_pid(controller) != controller_pid
    _, audit = audit_of(settings, resumed)
    assert [e["details"]["broker_id"] for e in audit if e["action"] == "restart_broker" and e["outcome"] == "ok"] == [first, second, controller]
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore

    assert IncidentStore(ClusterConfig.from_dict("lab", settings)).get(record_id)["status"] == "closed"


# ------------------------------------------------------------------ one lock per cluster

def test_a_roll_refuses_while_another_holds_the_clusters_lock(roll_env):
    lab, settings, _ = roll_env
    from kafka_runbooks.remediate.lock import MaintenanceLock

    zk = zk_client()
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    try:
        MaintenanceLock(zk, "lab", run="preferred-election-42", dag="kafka_preferred_election", user="oncall-dave",
                        purpose="preferred_election").acquire(0)
        run = roll({"brokers": [1]})
    finally:
        zk.stop()
        zk.close()
    assert states(run)["execute"] == "failed"
    _, audit = audit_of(settings, run)
    busy = [e for e in audit if e["action"] == "maintenance_lock"]
    assert [e["outcome"] for e in busy] == ["busy"]
    assert busy[0]["details"]["holders"][0]["run"] == "preferred-election-42"
    assert {b: lab.broker_pid(b) for b in (1, 2, 3)} == pids


# ------------------------------------------------------------------ a broker that ignores SIGTERM

def _wait_load_groups_empty(timeout_s: float = 90.0) -> None:
    """The lab load's consumer groups have no member left (they left, or their sessions expired on a healthy coordinator)."""
    from confluent_kafka.admin import AdminClient

    from kafka_lab.procs import wait_until
    from kafka_lab.topics import bootstrap_all

    admin = AdminClient({"bootstrap.servers": bootstrap_all()})
    groups = [g.group_id for g in admin.list_consumer_groups().result(30).valid if g.group_id.startswith("kafka-lab-load-")]

    def empty() -> bool:
        described = admin.describe_consumer_groups(groups)
        return all(not f.result(30).members for f in described.values())

    if groups:
        wait_until(empty, timeout_s, f"the load's groups {groups} to have no member")

def test_a_hung_broker_is_killed_after_stop_s_and_its_registration_waited_out(roll_env, monkeypatch):
    lab, settings, _ = roll_env
    controller = lab.controller()["brokerid"]
    b = next(x for x in (1, 2, 3) if x != controller)
    _set_settings(monkeypatch, {**settings, "gates": {**settings["gates"], "stop_s": 20.0}})
    old_registration = lab.registration(b)
    # no produce in flight when the lock is taken: a request a handler had already dequeued is appended, the followers
    # can no longer fetch it, and Kafka shrinks that partition's ISR to [b] (seen under load: "Shrinking ISR from
    # 2,3,1 to 1 ... endOffset: 2306", HW 2305) -- then b is its last in-sync replica and the roll is rightly refused
    # Nor a group member for b's coordinator to expire once b hangs: it would append to its __consumer_offsets
    # partition itself and Kafka would shrink that ISR to [b] too (seen: "__consumer_offsets-16 ... isr [1]").
    lab.stop_load()
    _wait_load_groups_empty()
    lab.hang(b)  # registered, alive, request handling stopped: its controlled shutdown cannot finish
    run = roll({"brokers": [b], "canary": False})
    assert states(run)["execute"] == "success", states(run)
    _, audit = audit_of(settings, run)
    kinds = [(e["action"], e["outcome"]) for e in audit if e.get("details", {}).get("broker_id") == b]
    assert ("kill_broker", "ok") in kinds
    stopped = next(e for e in audit if e["action"] == "broker_stopped")
    assert stopped["details"]["killed"] is True  # whether its controlled shutdown was logged is recorded there too
    # stop, then kill after stop_s, then (old session gone) start, then registered anew: in that order
    actions = [e["action"] for e in audit if e["action"] in ("stop_broker", "kill_broker", "broker_stopped", "start_broker", "broker_registered")]
    assert actions == ["stop_broker", "kill_broker", "broker_stopped", "start_broker", "broker_registered"]
    report = next(e for e in audit if e["action"] == "restart_broker" and e["outcome"] == "ok")["details"]["report"]
    assert report["killed"] and report["new_registration"]["session_id"] != report["old_registration"]["session_id"]
    (timing,) = xcom(run, "execute")["timings"]  # the result says it too, not only the audit (issue 19 §5)
    assert timing["broker_id"] == b and timing["killed"] is True, timing
    assert old_registration is not None and lab.registration(b) is not None


# ------------------------------------------------------------------ issue 17 §1: a holder must be serving

def _plan_now(settings, brokers, record_reason):
    """A plan computed on the lab as it is now, with its own record (as the plan task makes it)."""
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.plan import plan_restart

    config = load_cluster("lab")
    record = IncidentStore(config).open(cluster="lab", broker_ids=brokers, reason=record_reason,
                                                      trigger={"kind": "rolling_restart"}, opened_by="test")
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        snapshot = read_snapshot(zk, "lab")
    return config, plan_restart(snapshot, brokers, config, roll_id=record["id"])


def test_a_hung_holder_refuses_the_roll_then_unhang_lets_it_proceed(roll_env):
    """hang broker 1 (registered, in every ISR, serving nothing), roll broker 2: refused at the plan, naming broker 1
    and its evidence, nothing stopped; unhang: the same roll proceeds."""
    lab, settings, _ = roll_env
    target = 2
    pid = lab.broker_pid(target)
    lab.hang(1)
    run = roll({"brokers": [target], "canary": False}, approve=False)
    assert states(run)["plan"] == "failed" and states(run)["execute"] != "success", states(run)
    record_id, audit = audit_of_record(settings, run)
    (planned,) = [e for e in audit if e["action"] == "plan_restart"]
    assert planned["outcome"] == "refused", planned
    refusals = "\n".join(planned["details"]["refusals"])
    assert "broker 1: did not answer a direct Kafka-protocol check" in refusals, refusals
    assert "a holder that does not answer is not a holder" in refusals or "are not serving" in refusals, refusals
    assert lab.broker_pid(target) == pid, "a broker was stopped although a holder of its partitions did not serve"

    lab.unhang(1)
    # broker 1 led partitions while it hung: it shrinks their ISR to itself on its first ISR-expiration tick after the
    # unhang, then expands it again (Kafka 2.3) -- a roll planned in between is refused, rightly (seen in ci17)
    lab.wait_full_isr(120, stable_s=2 * 5.0 + 2.5)
    from kafka_lab.procs import wait_until
    from kafka_lab.topics import list_topics_at

    wait_until(lambda: list_topics_at(1, timeout=5).brokers, 120, "broker 1 to answer a Metadata request again", interval=1.0)
    run = roll({"brokers": [target], "canary": False})
    assert states(run)["execute"] == "success", states(run)
    assert lab.broker_pid(target) != pid


def test_the_executor_refuses_a_stop_when_a_holder_stops_answering_after_the_plan(roll_env):
    """The plan was fine; broker 1 hangs before the step: the executor's check on fresh state (every holder checked
    directly, right before the stop) refuses, names broker 1, and stops nothing."""
    lab, settings, _ = roll_env
    from kafka_runbooks.remediate import executor as E

    target = 2
    pid = lab.broker_pid(target)
    config, plan = _plan_now(settings, [target], "issue 17 executor check")
    assert not plan.refused, plan.refusals
    lab.hang(1)
    ex = E.Execution(config=config, plan=plan, record_id=plan.roll_id, dag_id="test", run_id=f"t-{uuid.uuid4().hex[:6]}",
                     task_id="execute", try_number=1, approver="oncall-carol", starter="someone", canary=False)
    with pytest.raises(E.Refused) as halted:  # issue 29 §3: nothing was stopped: a refusal, not a halt
        E.run(ex)
    text = str(halted.value)
    assert f"refused at broker {target}" in text and "safety check on fresh state" in text, text
    assert "broker 1: did not answer a direct Kafka-protocol check" in text, text
    assert lab.broker_pid(target) == pid
    from kafka_runbooks.incidents.store import IncidentStore

    audit = IncidentStore(config).audit_trail(plan.roll_id)
    check = next(e for e in audit if e["action"] == "safety_check")
    assert check["outcome"] == "refused" and "1" in check["details"]["unresponsive"], check
    assert check["details"]["checked"]["1"].startswith("NO ANSWER") and check["details"]["checked"]["3"].startswith("ok")
    assert not [e for e in audit if e["action"] == "stop_broker"]


def test_a_holder_that_goes_silent_between_the_first_check_and_the_stop_refuses_the_stop(roll_env, monkeypatch, request):
    """Issue 17 §1, "re-read the state right before the stop command": broker Y answers the step's first safety check;
    then -- inside the step, after that check passed and before the last check (``before_stop``) runs -- Y's request
    handling really stops (the lab's ``hang``, in Y's JVM). The last check probes Y again: the stop is refused, naming
    Y and its evidence, nothing is stopped (X's JVM and its registration unchanged), and the audit says so. Then Y is
    unhung and the same step, resumed, passes the last check and restarts X: the refusal was Y's silence.
    Incident 002's shape: a partition of replicas [X, Y] (min.insync.replicas 1), Y its only other in-sync replica."""
    lab, settings, _ = roll_env
    from confluent_kafka.admin import NewTopic

    from kafka_lab.procs import wait_until
    from kafka_lab.topics import admin, list_topics_at
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import executor as E
    from kafka_runbooks.remediate import ledger as L
    from kafka_runbooks.remediate import steps

    controller = lab.controller()["brokerid"]
    x, y = [b for b in (1, 2, 3) if b != controller]  # X stopped; Y (hung) and the controller hold X's partitions
    pair = f"silent-holder-{uuid.uuid4().hex[:6]}"
    client = admin()  # referenced until its future resolves
    client.create_topics([NewTopic(pair, num_partitions=1, replica_assignment=[[x, y]], config={"min.insync.replicas": "1"})])[pair].result(60)
    request.addfinalizer(lambda: delete_topic(lab, pair))
    lab.wait_full_isr(60)
    pid, registration = lab.broker_pid(x), lab.registration(x)
    config, plan = _plan_now(settings, [x], "issue 17 holder silent before the stop")
    assert not plan.refused, plan.refusals
    real_restart = steps.restart_broker
    seen: dict[str, object] = {}

    def restart_broker(*args, before_stop=None, **kwargs):
        """The engine's own step, its last check wrapped: Y hangs for real right before that check runs."""

        def last_check_with_y_silent():
            seen["first_check"] = [e for e in IncidentStore(config).audit_trail(plan.roll_id) if e["action"] == "safety_check"]
            if seen.get("hang", True):
                lab.hang(y)
                seen["hung"] = True
            before_stop()
            seen["last_check_passed"] = True
            if seen.get("hang", True):  # the old code's outcome: the stop would go out with Y silent; not sent here
                raise RuntimeError(f"the last check let broker {x}'s stop through while holder {y} did not answer")

        return real_restart(*args, before_stop=last_check_with_y_silent, **kwargs)

    monkeypatch.setattr(steps, "restart_broker", restart_broker)
    ex = E.Execution(config=config, plan=plan, record_id=plan.roll_id, dag_id="test", run_id=f"t-{uuid.uuid4().hex[:6]}",
                     task_id="execute", try_number=1, approver="oncall-carol", starter="someone", canary=False)
    try:
        with pytest.raises(E.Refused) as halted:  # issue 29 §3: nothing was stopped: a refusal, not a halt
            E.run(ex)
    finally:
        if seen.get("hung"):
            lab.unhang(y)
    text = str(halted.value)
    (first,) = seen["first_check"]  # the step's first safety check passed, Y answering it
    assert first["outcome"] == "ok" and first["details"]["checked"][str(y)].startswith("ok"), first
    assert "last_check_passed" not in seen, text
    assert f"refused at broker {x}" in text and "safety check right before the stop" in text, text
    assert f"broker {y}: did not answer a direct Kafka-protocol check" in text and "nothing was stopped" in text, text
    assert lab.broker_pid(x) == pid and lab.registration(x)[1].ephemeralOwner == registration[1].ephemeralOwner

    audit = IncidentStore(config).audit_trail(plan.roll_id)
    (last,) = [e for e in audit if e["action"] == "safety_check_before_stop"]
    assert last["outcome"] == "refused" and str(y) in last["details"]["unresponsive"], last
    assert last["details"]["checked"][str(y)].startswith("NO ANSWER"), last
    assert any(r.startswith(f"{pair}-0: the other in-sync replicas [{y}] are not serving; broker {x} is the last one that "
                            f"serves (broker {y}: did not answer a direct Kafka-protocol check") for r in last["details"]["refusals"]), last
    (halt,) = [e for e in audit if e["action"] == "refused"]
    assert halt["details"]["phase"] == "safety check right before the stop" and halt["details"]["broker_id"] == x, halt
    assert halt["details"]["code"] == "refused_before_stop" and not [e for e in audit if e["action"] == "halt"], audit
    assert not [e for e in audit if e["action"] in ("stop_broker", "kill_broker")], audit
    assert L.STEP_STARTED not in [e["event"] for e in L.Ledger(config, plan.roll_id).entries()]

    # Y serves again: the same step, resumed, passes the last check and restarts X
    wait_until(lambda: list_topics_at(y, timeout=5).brokers, 120, f"broker {y} to answer a Metadata request again", interval=1.0)
    lab.wait_full_isr(120)
    seen["hang"] = False
    ex = E.Execution(config=config, plan=plan, record_id=plan.roll_id, dag_id="test", run_id=f"t-{uuid.uuid4().hex[:6]}",
                     task_id="execute", try_number=1, approver="oncall-carol", starter="someone", canary=False)
    result = E.run(ex)
    assert seen.get("last_check_passed") and result["restarted"] == [x], (seen, result)
    assert lab.broker_pid(x) != pid
    last = [e for e in IncidentStore(config).audit_trail(plan.roll_id) if e["action"] == "safety_check_before_stop"][-1]
    assert last["outcome"] == "ok" and last["details"]["checked"][str(y)].startswith("ok"), last


# ------------------------------------------------------------------ issue 17 §4: faults in the middle

def test_a_host_that_runs_another_broker_is_refused_before_anything_is_stopped(roll_env):
    """The configuration maps broker 1 to a server.properties whose broker.id is 3 (on these loopback hosts the
    process pattern would even find broker 3's JVM): the executor refuses at the host-identity check, stops nothing."""
    import dataclasses

    lab, settings, _ = roll_env
    from kafka_runbooks.remediate import executor as E

    config, plan = _plan_now(settings, [1], "issue 17 host identity")
    assert not plan.refused, plan.refusals
    wrong = dataclasses.replace(config, server_properties_path=str(lab.host_dir(3) / "config" / "server.properties"))
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    ex = E.Execution(config=wrong, plan=plan, record_id=plan.roll_id, dag_id="test", run_id=f"t-{uuid.uuid4().hex[:6]}",
                     task_id="execute", try_number=1, approver="oncall-carol", starter="someone", canary=False)
    with pytest.raises(E.Refused) as halted:  # issue 29 §3: nothing was stopped: a refusal, not a halt
        E.run(ex)
    text = str(halted.value)
    assert "host identity" in text and "runs broker 3 (broker.id in" in text and "not broker 1" in text, text
    assert {b: lab.broker_pid(b) for b in (1, 2, 3)} == pids


KILLED_ROLL = r"""
import json, sys
from kafka_lab.airflow_home import load_dags
from kafka_lab.approvals import Responder
form = json.loads(sys.argv[1])
dag = load_dags().get_dag("kafka_rolling_restart")
with Responder("kafka_rolling_restart", "approve", "Approve", user="oncall-carol", timeout_s=600):
    dag.test(run_conf=form)
"""


def test_a_worker_killed_mid_stop_leaves_a_resumable_roll_and_says_what_it_left(roll_env, tmp_path, monkeypatch):
    """The process running the execute task is SIGKILLed while broker b's stop command runs (after step_started, its
    registration gone). The close-out says which step was cut short and the cluster's state (b down); resume sees
    b down and continues from that step: b is started again and the record closes."""
    import signal
    import subprocess
    import sys

    lab, settings, _ = roll_env
    # the stop command lingers 20 s after the broker is gone (as a slow service manager would): the kill lands inside
    # the step by design -- with the plain command the broker was down for ~2 s before the next start, and a loaded
    # CI run's polling missed that window (the roll completed under the test)
    settings = {**settings, "stop_command": ["sh", "-c", '"$0" && sleep 20', *settings["stop_command"]]}
    _set_settings(monkeypatch, settings)
    from kafka_lab.airflow_home import load_dags
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.ledger import Ledger

    from airflow_runs import continue_run

    controller = lab.controller()["brokerid"]
    b = next(x for x in (1, 2, 3) if x != controller)
    pid = lab.broker_pid(b)
    store = IncidentStore(ClusterConfig.from_dict("lab", settings))
    before = {r["id"] for r in store.records("lab")}
    form = {"cluster": "lab", "brokers": [b], "reason": f"killed worker {uuid.uuid4().hex[:6]}", "mode": "execute", "canary": False}
    with open(tmp_path / "worker.log", "wb") as out:
        worker = subprocess.Popen([sys.executable, "-c", KILLED_ROLL, json.dumps(form)], stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        record_id = None
        while time.monotonic() < deadline and worker.poll() is None:
            if record_id is None:
                fresh = [r["id"] for r in store.records("lab") if r["id"] not in before and r.get("reason") == form["reason"]]
                record_id = fresh[0] if fresh else None
            elif lab.registration(b) is None and any(
                    e["event"] == "step_started" for e in Ledger(ClusterConfig.from_dict("lab", settings), record_id).entries()):
                break  # the stop command runs: the broker deregistered in its controlled shutdown
            time.sleep(0.1)
        else:
            raise AssertionError(f"the roll never reached broker {b}'s stop:\n" + (tmp_path / "worker.log").read_text()[-3000:])
        os.killpg(worker.pid, signal.SIGKILL)  # the worker dies mid-step
        worker.wait(30)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
    lab.wait_unregistered(b, 60)
    from kafka_lab.procs import alive, wait_until

    wait_until(lambda: not alive(lab.broker_pid(b)), 120, f"broker {b}'s JVM to finish its shutdown")
    entries = Ledger(ClusterConfig.from_dict("lab", settings), record_id).entries()
    assert [e["event"] for e in entries if e["event"].startswith("step_")] == ["step_started"]
    run_id = next(e["run_id"] for e in entries if e["event"] == "planned")

    # the scheduler finds the task's worker gone and fails it; the close task then runs (trigger rule ALL_DONE)
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import TaskInstanceState
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalar(select(TaskInstance).where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id,
                                                       TaskInstance.task_id == "execute"))
        ti.state = TaskInstanceState.FAILED
    dag = load_dags().get_dag(DAG_ID)
    run = continue_run(dag, run_id, timeout_s=300)
    assert states(run)["close"] == "failed", states(run)
    record = store.get(record_id)
    assert record["status"] == "open"
    note = record["notes"][-1]["text"] if isinstance(record["notes"][-1], dict) else str(record["notes"][-1])
    assert f"the execute task stopped during the step of broker {b}" in note, note
    assert f"down (configured, not registered): [{b}]" in note and f"broker {b} is NOT registered" in note, note

    from kafka_runbooks.remediate.lock import holders

    zk = zk_client()
    try:  # the dead worker's maintenance lock goes with its ZooKeeper session
        wait_until(lambda: holders(zk, "lab") == [], 60, "the killed worker's lock to expire with its session")
    finally:
        zk.stop()
        zk.close()
    resumed = roll({"resume": True, "canary": False})
    assert states(resumed)["execute"] == "success", states(resumed)
    plan = recorded_plan(settings, xcom(resumed, "plan"))
    assert plan["roll_id"] == record_id and [s["broker_id"] for s in plan["steps"]] == [b]
    # the resume's plan says what will really happen to it (remediate/plan.py ``_resumed_reason``): started, not stopped
    reason = plan["steps"][0]["reason"]
    assert f"(resumed): broker {b} is not registered after " in reason and "it is started" in reason, reason
    assert "Started (a stop command only if a process of it still runs)" in reason, reason
    assert lab.broker_pid(b) not in (None, pid) and lab.registration(b) is not None
    assert store.get(record_id)["status"] == "closed"
