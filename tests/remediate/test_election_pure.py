"""The deferred preferred election's decisions (pure): the batches, when it may run, when a batch converged, the
znode payload, the approval text; the DAG's shape (the election is gated by the approval and the deferred wait)."""

import dataclasses
import datetime as dt
import json
import time

import pytest

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Broker, MetadataView, Plan, RequestMetrics
from kafka_runbooks.remediate import election as E
from kafka_runbooks.remediate.briefing import approval_body
from kafka_runbooks.remediate.digest import plan_digest
from snapshot_builders import P, snap

NOW = clock.parse("2024-01-01T12:00:00Z")


def config(**election):
    return ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}, "election": election})


def moved_away(n_plain=23, n_offsets=7, isr3=True):
    """Broker 3 is the preferred replica of everything here but leads nothing (incident 003 after its return)."""
    isr = (3, 1, 2) if isr3 else (1, 2)
    return ([P("orders", i, (3, 1, 2), 1, isr) for i in range(n_plain)]
            + [P("__consumer_offsets", i, (3, 2, 1), 2, isr) for i in range(n_offsets)]
            + [P("payments", 0, (1, 2, 3), 1, (1, 2, 3))])


def with_brokers(s, registered_3_s=3600, session=0x33):
    brokers = tuple(Broker(b, f"kafka{b}", 9092, registered_at=clock.iso(NOW - dt.timedelta(seconds=registered_3_s if b == 3 else 86400)),
                           session_id=session if b == 3 else b) for b in (1, 2, 3))
    return dataclasses.replace(s, brokers=brokers)


def test_batches_per_target_broker_offsets_last_in_smaller_batches():
    plan = E.plan_election(snap(moved_away()), config(batch_size=10, offsets_batch_size=3), deadline_at="2024-01-02T12:00:00Z")
    assert not plan.refused and plan.kind == E.KIND
    assert plan.steps == ()  # an election restarts nothing: its batches are not Steps
    sizes = [(s.target, len(s.partitions), s.partitions[0].startswith("__consumer_offsets")) for s in plan.batches]
    assert sizes == [(3, 10, False), (3, 10, False), (3, 3, False), (3, 3, True), (3, 3, True), (3, 1, True)]
    assert "group coordinators" in plan.batches[3].reason and plan.batches[0].reason.startswith("batch 1 of 6")
    assert "payments-0" not in [n for s in plan.batches for n in s.partitions]  # already preferred
    assert plan.conditions["brokers"] == [3] and plan.conditions["deadline_at"] == "2024-01-02T12:00:00Z"
    assert plan.conditions["method"] == "zookeeper"
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan  # through XCom unchanged (the digest holds)


def test_one_election_moves_at_most_max_partitions_and_says_what_it_left():
    both = [P("orders", i, (3, 1, 2), 1, (3, 1, 2)) for i in range(23)] + [P("events", i, (2, 1, 3), 1, (2, 1, 3)) for i in range(4)]
    plan = E.plan_election(snap(both), config(batch_size=10, max_partitions=12))
    assert not plan.refused
    assert [(b.target, len(b.partitions)) for b in plan.batches] == [(2, 4), (3, 8)]  # the last batch is cut
    assert plan.batches[1].reason.startswith("batch 2 of 2: move leadership of 8 partition(s)")
    assert plan.conditions["brokers"] == [2, 3]
    (left,) = [w for w in plan.warnings if "max_partitions" in w]
    assert left.startswith("15 more partition(s) are not led by their preferred replica")
    cut = E.plan_election(snap(both), config(batch_size=10, max_partitions=4))
    assert cut.conditions["brokers"] == [2]  # readiness waits only on brokers this election moves leadership to
    whole = E.plan_election(snap(both), config(batch_size=10))
    assert sum(len(b.partitions) for b in whole.batches) == 27 and not [w for w in whole.warnings if "max_partitions" in w]
    with pytest.raises(Exception, match="max_partitions"):
        config(max_partitions=0)


def test_nothing_to_elect_and_unknown_broker_are_refused_with_reasons():
    balanced = [P("orders", 0, (3, 1, 2), 3, (3, 1, 2))]
    assert "nothing to elect" in E.plan_election(snap(balanced), config()).refusals[0]
    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2"}})
    refused = E.plan_election(snap(moved_away(2, 0)), cfg)
    assert refused.refused and "no SSH connection for broker 3" in refused.refusals[0]
    only_1 = E.plan_election(snap(moved_away()), config(), brokers=[1])
    assert "preferring brokers [1]" in only_1.refusals[0]


def test_znode_payload_is_kafkas_format():
    assert json.loads(E.znode_payload(["orders-0", "__consumer_offsets-12", "a-b-3"])) == {
        "version": 1, "partitions": [{"topic": "orders", "partition": 0}, {"topic": "__consumer_offsets", "partition": 12},
                                     {"topic": "a-b", "partition": 3}]}
    with pytest.raises(ValueError):
        E.znode_payload(["no_index"])


def conditions(**kw):
    return {"brokers": [3], "stable_s": 600, "window": [], "max_bytes_in_per_s": None, "max_requests_per_s": None,
            "deadline_at": "2024-01-01T13:00:00Z", **kw}


def test_ready_only_when_every_condition_holds():
    ready = with_brokers(snap(moved_away()), registered_3_s=3600)
    assert E.readiness(ready, conditions(), NOW) == []
    catching_up = with_brokers(snap(moved_away(isr3=False)), registered_3_s=3600)
    why = E.readiness(catching_up, conditions(), NOW)
    # issue 16: nobody saw it progress, so it is not called catching up
    assert len(why) == 1 and "not yet in the ISR of 30 partition(s)" in why[0] and "not yet known whether it catches up" in why[0]
    young = with_brokers(snap(moved_away()), registered_3_s=120)
    assert "is 120 s old, less than the 600 s" in E.readiness(young, conditions(), NOW)[0]
    gone = dataclasses.replace(ready, brokers=tuple(b for b in ready.brokers if b.id != 3))
    assert E.readiness(gone, conditions(), NOW)[0] == "broker 3 is not registered in ZooKeeper"
    closed = E.readiness(ready, conditions(window=["02:00-04:00"]), NOW)
    assert closed == ["outside the quiet window ['02:00-04:00'] (UTC); it opens next at 2024-01-02T02:00:00.000Z"]
    assert E.readiness(ready, conditions(window=["11:00-13:00"]), NOW) == []
    locked = E.readiness(ready, conditions(), NOW, lock_holders=[{"run": "r1", "dag": "kafka_rolling_restart", "purpose": "rolling_restart"}])
    assert "maintenance lock is held by run 'r1'" in locked[0]
    pending = dataclasses.replace(ready, preferred_election_pending=("orders-1",))
    assert "another preferred election is pending" in E.readiness(pending, conditions(), NOW)[0]


def test_traffic_thresholds_from_jmx():
    from kafka_runbooks.host.jmxtool import BYTES_IN

    ready = with_brokers(snap(moved_away()))

    def m(b, v):
        return RequestMetrics(b, True, values={f"{BYTES_IN}:OneMinuteRate": v})

    quiet = [m(1, 10.0), m(2, 5.0), m(3, 0.0)]
    assert E.readiness(ready, conditions(max_bytes_in_per_s=100), NOW, metrics=quiet) == []
    busy = E.readiness(ready, conditions(max_bytes_in_per_s=100), NOW, metrics=[m(1, 5000.0), m(2, 5.0), m(3, 0.0)])
    assert busy == ["traffic not quiet: bytes in/s broker 1 5000.0 above 100"]
    unknown = E.readiness(ready, conditions(max_bytes_in_per_s=100), NOW, metrics=[m(1, 1.0)])
    assert "brokers [2, 3] could not be read (JMX)" in unknown[0]


def test_deadline_and_give_up_reason():
    c = conditions()
    assert not E.past_deadline(c, NOW) and E.past_deadline(c, NOW + dt.timedelta(hours=1))
    text = E.give_up_reason(c, ["outside the quiet window"], 12)
    assert "gave up at the deadline 2024-01-01T13:00:00Z after 12 check(s)" in text and "outside the quiet window" in text
    assert "Nothing was changed" in text


def test_convergence_needs_zookeeper_every_view_and_no_saturated_queue():
    from kafka_runbooks.host.jmxtool import REQUEST_QUEUE

    s = snap([P("orders", 0, (3, 1, 2), 3, (3, 1, 2)), P("orders", 1, (3, 1, 2), 1, (3, 1, 2))])
    agree = [MetadataView(b, f"kafka{b}:9092", True, leaders={"orders-0": (3, 1), "orders-1": (1, 0)}) for b in (1, 2, 3)]
    assert E.convergence(s, ["orders-0"], views=agree) == []
    assert "not led by the preferred replica: orders-1 (leader 1, preferred 3)" in E.convergence(s, ["orders-1"], views=agree)[0]
    stale = agree[:2] + [MetadataView(3, "kafka3:9092", True, leaders={"orders-0": (1, 0)})]
    assert E.convergence(s, ["orders-0"], views=stale) == ["broker 3's own metadata disagrees with ZooKeeper: orders-0 says 1"]
    assert E.convergence(s, ["orders-0"], views=agree[:2]) == ["brokers [3] did not answer for their own metadata"]
    quiet = {b: RequestMetrics(b, True, values={f"{REQUEST_QUEUE}:Value": 0.0}) for b in (1, 2, 3)}
    assert E.convergence(s, ["orders-0"], views=agree, metrics=list(quiet.values())) == []
    full = [quiet[1], RequestMetrics(2, True, values={f"{REQUEST_QUEUE}:Value": 450.0}), quiet[3]]
    assert E.convergence(s, ["orders-0"], views=agree, metrics=full) == ["broker 2's request queue is saturated: 450 of queued.max.requests 500"]


def test_convergence_never_passes_on_unknown_request_queues():
    """Issue 16 §3: JmxTool's answer was never read and the check passed batch after batch on no data. A broker whose
    queue was not read (JmxTool failed, answered without RequestQueueSize, or was not run) is unknown: not converged."""
    from kafka_runbooks.host.jmxtool import REQUEST_QUEUE

    s = snap([P("orders", 0, (3, 1, 2), 3, (3, 1, 2))])
    agree = [MetadataView(b, f"kafka{b}:9092", True, leaders={"orders-0": (3, 1)}) for b in (1, 2, 3)]
    read = [RequestMetrics(b, True, values={f"{REQUEST_QUEUE}:Value": 1.0}) for b in (1, 2)]
    failed = RequestMetrics(3, False, error="JmxTool printed nothing")
    assert E.convergence(s, ["orders-0"], views=agree, metrics=read + [failed]) == [
        "broker 3's request queue is unknown (JmxTool printed nothing): the queue check cannot pass on no data"]
    assert E.convergence(s, ["orders-0"], views=agree, metrics=read) == [
        "broker 3's request queue is unknown (not read): the queue check cannot pass on no data"]
    no_queue = RequestMetrics(3, True, values={"kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec:OneMinuteRate": 3.0})
    assert "broker 3's request queue is unknown" in E.convergence(s, ["orders-0"], views=agree, metrics=read + [no_queue])[0]
    assert E.convergence(s, ["orders-0"], views=agree) == []  # metrics None: the queue check is off (leadership.jmx false)


def test_approval_text_shows_batches_and_conditions_not_restarts():
    plan = E.plan_election(snap(moved_away(3, 1)), config(), roll_id="r1", deadline_at="2024-01-02T12:00:00Z")
    body = approval_body([], plan, report_path=None, approval_timeout="1:00:00", digest=plan_digest(plan), gates=["canary"])
    assert "then waits" in body and "`[3]`" in body and "orders-0" in body and "__consumer_offsets-0" in body
    assert "2024-01-02T12:00:00Z" in body and "is down" not in body


def test_dag_shape_approval_then_deferred_wait_then_election(airflow_db):
    from kafka_lab.airflow_home import load_dags
    from kafka_runbooks.operators.approval import RemediationApprovalOperator
    from kafka_runbooks.operators.election import ExecuteElectionOperator, WaitForElectionWindowOperator

    dag = load_dags().get_dag("kafka_preferred_election")
    assert dag.max_active_runs == 1 and dag.params["mode"] == "dry-run"
    for up, down in zip(["plan", "approve", "wait", "elect"], ["approve", "wait", "elect", "close"]):
        assert up in dag.get_task(down).upstream_task_ids
    assert isinstance(dag.get_task("approve"), RemediationApprovalOperator)
    assert isinstance(dag.get_task("wait"), WaitForElectionWindowOperator)
    elect = dag.get_task("elect")
    assert isinstance(elect, ExecuteElectionOperator) and elect.retries == 0
    assert "approve" in elect.get_flat_relative_ids(upstream=True)


def test_trigger_serializes_round_trip():
    from kafka_runbooks.triggers.election import CLASSPATH, ElectionReadyTrigger

    path, kwargs = ElectionReadyTrigger("lab", conditions(), 5.0).serialize()
    assert path == CLASSPATH and ElectionReadyTrigger(**kwargs).serialize() == (path, kwargs)


def test_each_batch_is_checked_again_on_fresh_state_before_it_is_written():
    """Issue 17 §5: the wait said ready once, maybe hours ago; before every batch, on the state read just then."""
    from kafka_runbooks.model import KafkaCheck

    ready = with_brokers(snap(moved_away()))
    cond = {"brokers": [3], "stable_s": 600.0, "window": []}
    batch = ["orders-0", "orders-1"]
    ok = KafkaCheck(3, "kafka3:9092", True, 3.0, 3)
    assert E.batch_refusals(ready, cond, NOW, 3, batch, check=ok) == []
    assert E.batch_refusals(ready, {**cond, "window": ["02:00-04:00"]}, NOW, 3, batch, check=ok) == [
        "the quiet window ['02:00-04:00'] (UTC) closed"]
    flapped = with_brokers(snap(moved_away()), registered_3_s=30, session=0x99)
    assert "it re-registered since the wait" in E.batch_refusals(flapped, cond, NOW, 3, batch, check=ok)[0]
    left = with_brokers(snap(moved_away(isr3=False)))
    assert "not in the ISR of orders-0, orders-1 any more" in E.batch_refusals(left, cond, NOW, 3, batch, check=ok)[0]
    no_controller = dataclasses.replace(ready, controller_id=None)
    assert "no active controller" in E.batch_refusals(no_controller, cond, NOW, 3, batch, check=ok)[0]
    garbled = dataclasses.replace(ready, unparsable=("/brokers/topics/orders/partitions/0/state: not JSON",))
    assert "ZooKeeper metadata could not be read" in E.batch_refusals(garbled, cond, NOW, 3, batch, check=ok)[0]
    hung = KafkaCheck(3, "kafka3:9092", False, error="timed out", error_code="_TIMED_OUT")
    assert "does not answer a direct check now (timed out)" in E.batch_refusals(ready, cond, NOW, 3, batch, check=hung)[0]


def test_a_cluster_whose_metadata_views_cannot_be_read_is_refused_at_plan_time():
    """Issue 17 §5: a SASL listener (the direct metadata probe speaks PLAINTEXT and SSL) halted after batch 1."""
    s = with_brokers(snap(moved_away()))
    sasl = [MetadataView(b, f"kafka{b}:9094", False, error="WireError: security.protocol SASL_SSL is not supported by the direct "
                         "metadata probe (PLAINTEXT and SSL are)") for b in (1, 2, 3)]
    plan = E.plan_election(s, config(), deadline_at="2024-01-02T12:00:00Z", views=sasl)
    assert plan.refused and "the own metadata of brokers [1, 2, 3] cannot be read" in plan.refusals[0] and "SASL_SSL" in plan.refusals[0]
    good = [MetadataView(b, f"kafka{b}:9092", True) for b in (1, 2, 3)]
    assert not E.plan_election(s, config(), deadline_at="2024-01-02T12:00:00Z", views=good).refused
    assert "brokers [2]" in E.plan_election(s, config(), deadline_at="x", views=[good[0], good[2]]).refusals[0]


def test_readiness_says_catching_up_with_its_eta_or_stuck_and_gives_up_on_stuck():
    from kafka_runbooks.detect.replicas import CATCHING_UP, STUCK, Verdict

    s = with_brokers(snap([P("orders", 0, (3, 1, 2), 1, (1, 2)), P("orders", 1, (3, 1, 2), 1, (1, 2))]))
    cond = {"brokers": [3], "stable_s": 60.0, "window": []}
    catching = {(3, "orders-0"): Verdict(CATCHING_UP, "catching up", eta_s=40.0), (3, "orders-1"): Verdict(CATCHING_UP, "catching up", eta_s=12.0)}
    (why,) = E.readiness(s, cond, NOW, followers=catching)
    assert why.endswith("catching up, in sync in about 40 s at the current pace")
    assert E.stuck_diagnosis(cond, catching) is None
    stuck = {**catching, (3, "orders-1"): Verdict(STUCK, "stuck: its log end offset stayed 16 for 130 s ...; no fetcher-lag gauge")}
    (why,) = E.readiness(s, cond, NOW, followers=stuck)
    assert "STUCK on orders-1: stuck: its log end offset stayed 16" in why
    text = E.stuck_diagnosis(cond, stuck)
    assert text.startswith("gave up early: broker(s) [3] are stuck out of the ISR of 1 partition(s) (orders-1)")
    assert "restart broker(s) [3] through the engine" in text and "Nothing was changed" in text
    assert E.stuck_diagnosis({**cond, "brokers": [2]}, stuck) is None  # only the brokers it waits for


def test_a_lock_lost_during_an_elections_long_waits_halts_at_the_next_poll(monkeypatch):
    """Issue 17 §4: a lost maintenance lock is noticed at the next poll of the election's waits too -- the controller
    taking the znode, the convergence wait (``election.convergence_s``), the coordinator gate -- not at their end."""
    from types import SimpleNamespace

    import kafka_runbooks.detect.snapshot as S
    import kafka_runbooks.hooks.kafka as K
    from kafka_runbooks.remediate import election_run as R
    from kafka_runbooks.remediate import gates as G
    from kafka_runbooks.remediate.lock import LockLost

    never = with_brokers(snap(moved_away()))  # broker 3 leads nothing: the batch never converges

    class Views:
        def __init__(self, *a, **k):
            pass

        def metadata_views(self, brokers, timeout_s):
            return [MetadataView(b.id, f"kafka{b.id}:9092", True) for b in brokers]

    monkeypatch.setattr(S, "read_snapshot", lambda zk, cluster: never)
    monkeypatch.setattr(K, "KafkaHook", Views)
    polls = []

    def guard():
        polls.append(1)
        if len(polls) >= 3:
            raise LockLost("the ZooKeeper session holding the maintenance lock of cluster 'c1' was suspended or lost")

    cfg = config(convergence_s=600.0, poll_s=0.01)
    t0 = time.monotonic()
    with pytest.raises(LockLost):
        R._converge(object(), SimpleNamespace(config=cfg, canary=False), ["orders-0"], guard=guard)
    assert len(polls) == 3 and time.monotonic() - t0 < 60

    class NeverTaken:  # a controller that never deletes the znode
        def create(self, path, data):
            pass

        def exists(self, path, watch=None):
            return True

    polls.clear()
    with pytest.raises(LockLost):
        R._elect_znode(NeverTaken(), ["orders-0"], timeout_s=600.0, guard=guard)
    assert len(polls) == 3

    seen = {}

    def gate(*a, guard=None, **k):
        seen["guard"] = guard
        raise G.GateFailed("coordinator", "not loaded")

    monkeypatch.setattr(G, "coordinator_gate", gate)

    class Host:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    import kafka_runbooks.hooks.ssh as SSH

    monkeypatch.setattr(SSH, "StrictSSHHook", Host)
    monkeypatch.setattr("kafka_runbooks.remediate.executor.probe_consumer_config", lambda ex, now: lambda group: {})
    with pytest.raises(R.Halted):
        R._coordinators_loaded(object(), SimpleNamespace(config=cfg), 3, [0], guard=guard)
    assert seen["guard"] is guard
