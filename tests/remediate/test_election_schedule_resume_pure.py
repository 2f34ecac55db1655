"""The scheduled election and the resume of a halted one (issue 7), pure: when a cluster's election.schedule is due,
why a due cluster is skipped (nothing to move, imbalance within Kafka's rule), the ledger's converged batches (the
engine's one resume mechanism), the plan that leaves them out, the admin method's version gate; the DAGs' shape."""

import dataclasses
import datetime as dt

import pytest

from kafka_runbooks.config import ClusterConfig, ConfigError
from kafka_runbooks.incidents.store import IncidentStore
from kafka_runbooks.remediate import election as E
from kafka_runbooks.remediate import ledger as L
from kafka_runbooks.remediate.election_schedule import skip_reason
from kafka_runbooks.schedules import due_at, schedule_error
from snapshot_builders import P, snap

UTC = dt.timezone.utc


def t(s):
    return dt.datetime.fromisoformat(s).replace(tzinfo=UTC)


def config(**election):
    return ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}, "election": election})


def test_due_when_the_cron_fires_in_the_interval_in_its_timezone():
    assert due_at("0 2 * * *", "UTC", t("2026-01-10T01:55:00"), t("2026-01-10T02:00:00")) == t("2026-01-10T02:00:00")
    assert due_at("0 2 * * *", "UTC", t("2026-01-10T02:00:00"), t("2026-01-10T02:05:00")) is None  # start excluded
    assert due_at("0 2 * * *", "UTC", t("2026-01-10T02:05:00"), t("2026-01-10T02:10:00")) is None
    # 02:00 in Berlin is 01:00 UTC in winter, 00:00 UTC in summer
    assert due_at("0 2 * * *", "Europe/Berlin", t("2026-01-10T00:55:00"), t("2026-01-10T01:00:00")) == t("2026-01-10T01:00:00")
    assert due_at("0 2 * * *", "Europe/Berlin", t("2026-07-10T23:55:00"), t("2026-07-11T00:00:00")) == t("2026-07-11T00:00:00")
    assert due_at("0 2 * * *", "UTC", t("2026-01-10T02:05:00"), t("2026-01-10T02:05:00")) is None


def test_due_in_an_interval_that_is_not_on_whole_seconds():
    """A manual run's data interval ends when it was triggered (``dag.test(logical_date=now)``, the UI's trigger):
    ending in the second before a cron time, the interval still holds the previous one. The old code looked from
    ``end`` + 1 s (14:30:00.5 here), found 14:30 and, that being after ``end``, returned None: the dispatcher
    started nothing and audited nothing (the lab test's run for 14:24:59.x..14:29:59.x)."""
    assert due_at("*/5 * * * *", "UTC", t("2026-11-29T14:24:59.500"), t("2026-11-29T14:29:59.500")) == t("2026-11-29T14:25:00")
    assert due_at("*/5 * * * *", "UTC", t("2026-11-29T14:25:00.000001"), t("2026-11-29T14:30:00.000001")) == t("2026-11-29T14:30:00")
    assert due_at("*/5 * * * *", "UTC", t("2026-11-29T14:25:00.5"), t("2026-11-29T14:29:59.999999")) is None  # 14:25 < start
    assert due_at("0 2 * * *", "Europe/Berlin", t("2026-01-10T00:55:00.250"), t("2026-01-10T00:59:59.250")) is None
    assert due_at("0 2 * * *", "Europe/Berlin", t("2026-01-10T00:59:59.250"), t("2026-01-10T01:04:59.250")) == t("2026-01-10T01:00:00")
    # every 5-minute interval, wherever it ends, holds exactly one time of a */5 cron
    end = t("2026-11-29T14:20:00")
    for step in range(0, 10 * 60 * 4):
        at = end + dt.timedelta(milliseconds=250 * step + 123)
        fire = due_at("*/5 * * * *", "UTC", at - dt.timedelta(minutes=5), at)
        assert fire is not None and at - dt.timedelta(minutes=5) < fire <= at and fire.minute % 5 == 0 and fire.second == 0, at


def test_schedule_setting_is_validated_and_off_by_default():
    assert config().election.schedule is None
    assert config(schedule="30 3 * * 6", schedule_timezone="Europe/Berlin").election.schedule == "30 3 * * 6"
    assert "not a 5-field cron" in schedule_error("every night", "UTC")
    assert "not a 5-field cron" in schedule_error("0 2 * * * *", "UTC")
    assert "unknown timezone" in schedule_error("0 2 * * *", "Mars/Olympus")
    with pytest.raises(ConfigError, match="election.schedule"):
        config(schedule="61 2 * * *")


def moved(n_not_led, n=20):
    """Broker 3 prefers n partitions and leads all but n_not_led of them; brokers 1 and 2 lead theirs."""
    return ([P("orders", i, (3, 1, 2), 1 if i < n_not_led else 3, (3, 1, 2)) for i in range(n)]
            + [P("payments", i, (1, 2, 3), 1, (1, 2, 3)) for i in range(5)])


def test_due_cluster_skipped_when_nothing_moves_or_within_kafkas_rule():
    assert "nothing to elect" in skip_reason(snap(moved(0)))
    why = skip_reason(snap(moved(2)))  # 10 %: Kafka's rule is "more than" leader.imbalance.per.broker.percentage
    assert "within Kafka's own rule" in why and "broker 3 10.0 % (2 of 20)" in why
    assert skip_reason(snap(moved(3))) is None  # 15 % > 10 %
    # the controller's own setting (server.properties, read over SSH) is the rule
    strict = snap(moved(1), static_configs={"1": {"leader.imbalance.per.broker.percentage": "2"}})
    assert skip_reason(strict) is None
    lax = snap(moved(3), static_configs={"1": {"leader.imbalance.per.broker.percentage": "50"}})
    assert "50 %" in skip_reason(lax)


def test_ledger_converged_batches_are_partitions_done_and_resumable(tmp_path):
    entries = [
        {"event": L.PLANNED, "run_id": "r1", "plan": {"requested": [3]}},
        {"event": L.STEP_STARTED, "run_id": "r1", "batch": 1, "broker_id": 3, "partitions": ["orders-2"]},
        {"event": L.STEP_DONE, "run_id": "r1", "batch": 1, "broker_id": 3, "partitions": ["orders-2", "orders-5"]},
        {"event": L.STEP_DONE, "run_id": "r1", "batch": 2, "broker_id": 3, "partitions": [], "skipped": True},
        {"event": L.STEP_STARTED, "run_id": "r1", "batch": 3, "broker_id": 3, "partitions": ["__consumer_offsets-2"]},
        {"event": L.HALTED, "run_id": "r1", "batch": 3, "reason": "did not converge"},
    ]
    p = L.progress(entries)
    assert p.partitions_done == ("orders-2", "orders-5") and p.completed == () and p.resumable and p.requested == (3,)
    # a restart's step_done (no partitions) still completes its broker
    assert L.progress([{"event": L.STEP_DONE, "run_id": "r", "broker_id": 2}]).completed == (2,)
    assert not L.progress(entries + [{"event": L.COMPLETED, "run_id": "r2"}]).resumable

    from kafka_runbooks.state import StateDb

    store = IncidentStore(StateDb.embedded(tmp_path))
    halted = store.open(cluster="c1", broker_ids=[3], reason="x", trigger={"kind": E.KIND}, opened_by="t")
    roll = store.open(cluster="c1", broker_ids=[1], reason="y", trigger={"kind": "rolling_restart"}, opened_by="t")
    for rid in (halted["id"], roll["id"]):
        for e in entries:
            L.Ledger(store.db, rid).append(e["event"], e["run_id"], **{k: v for k, v in e.items() if k not in ("event", "run_id")})
    found = L.find_resumable(store, "c1", E.KIND)
    assert found is not None and found[0]["id"] == halted["id"] and found[1].partitions_done == ("orders-2", "orders-5")
    assert L.find_resumable(store, "other", E.KIND) is None
    store.close(halted["id"], actor="t", resolution="done")
    assert L.find_resumable(store, "c1", E.KIND) is None


def test_resumed_plan_leaves_out_what_converged_even_if_it_moved_away_again():
    s = snap([P("orders", i, (3, 1, 2), 1, (3, 1, 2)) for i in range(6)])
    fresh = E.plan_election(s, config(batch_size=2))
    resumed = E.plan_election(s, config(batch_size=2), elected=["orders-0", "orders-1"])
    assert [n for st in fresh.batches for n in st.partitions] == [f"orders-{i}" for i in range(6)]
    assert [n for st in resumed.batches for n in st.partitions] == [f"orders-{i}" for i in range(2, 6)]
    assert resumed.conditions["already_elected"] == ["orders-0", "orders-1"] and "already_elected" not in fresh.conditions
    everything = E.plan_election(s, config(), elected=[f"orders-{i}" for i in range(6)])
    assert everything.refused and "elected by this election already (6)" in everything.refusals[0]


def test_admin_method_refused_before_kafka_2_2_and_auto_is_the_znode():
    s = snap([P("orders", 0, (3, 1, 2), 1, (3, 1, 2))])
    old = dataclasses.replace(config(method="admin"), kafka_version="2.1.1")
    refused = E.plan_election(s, old)
    assert refused.refused and "needs Kafka >= 2.2 (ElectLeaders, API key 43" in refused.refusals[0] and "2.1.1" in refused.refusals[0]
    ok = E.plan_election(s, dataclasses.replace(config(method="admin"), kafka_version="2.3.0"))
    assert not ok.refused and ok.conditions["method"] == "admin"
    # version unknown: refused, the branch that is safe for 0.9 too (ElectLeaders is API key 43: seed 002)
    unknown = E.plan_election(s, config(method="admin"))
    assert unknown.refused and "has no known version" in unknown.refusals[0]
    assert E.plan_election(s, dataclasses.replace(config(), kafka_version="2.1.1")).conditions["method"] == "zookeeper"
    assert E.election_method(config(method="auto")) == "zookeeper"


def test_schedule_dag_starts_the_approved_path_and_election_dag_can_resume(airflow_db):
    from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator

    from kafka_lab.airflow_home import load_dags
    from kafka_runbooks.operators.election import ScheduledElectionsOperator

    bag = load_dags()
    sched = bag.get_dag("kafka_preferred_election_schedule")
    assert sched.timetable.expression == "*/5 * * * *" and sched.timetable.interval == dt.timedelta(minutes=5) and sched.catchup is False and sched.max_active_runs == 1
    assert isinstance(sched.get_task("due_clusters"), ScheduledElectionsOperator)
    start = sched.get_task("start_election")
    assert start.operator_class is TriggerDagRunOperator and start.partial_kwargs["trigger_dag_id"] == "kafka_preferred_election"
    assert start.partial_kwargs["wait_for_completion"] is False and "due_clusters" in start.upstream_task_ids
    election = bag.get_dag("kafka_preferred_election")
    assert election.params["resume"] is False
    assert "approve" in election.get_task("elect").get_flat_relative_ids(upstream=True)
