"""Pure parts of the engine: probe group hashing, log reading, host parsing, halt description,
controller-order check, approvals (seal, four eyes, replay) and the ledger's progress."""

from __future__ import annotations

import json

import pytest

from kafka_runbooks.model import Plan, Step
from kafka_runbooks.remediate import approvals as A
from kafka_runbooks.remediate.executor import describe_state, order_refusals, plan_changed
from kafka_runbooks.remediate.gates import (
    canary_coverage,
    canary_leaders,
    finished_loading,
    java_string_hash,
    log_recovery_progress,
    offsets_partition_for,
    partitions_to_probe,
    probe_groups,
)
from kafka_runbooks.remediate.host import parse_properties, parse_ps
from kafka_runbooks.remediate.ledger import Ledger, progress
from kafka_runbooks.remediate.steps import controlled_shutdown_outcome, fatal_start_lines

from snapshot_builders import P, snap


# ------------------------------------------------------------------ coordinator probes

def test_java_string_hash_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("polygenelubricants") == -2**31  # Integer.MIN_VALUE
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogate pair, as Java sees it
    # Kafka's Utils.abs is Math.abs with MIN_VALUE mapped to 0 (values printed by Kafka 2.3.0's own Utils.abs)
    assert offsets_partition_for("polygenelubricants", 50) == 0
    assert offsets_partition_for("kafka-runbooks-probe-0", 50) == 26  # hashCode -1809687476
    assert offsets_partition_for("kafka-runbooks-probe-4", 50) == 22
    assert offsets_partition_for("big-5", 10) == 4


def test_probe_groups_cover_every_partition_and_map_back():
    groups = probe_groups(50)
    assert sorted(groups) == list(range(50))
    assert all(offsets_partition_for(g, 50) == p for p, g in groups.items())
    assert probe_groups(50) == groups  # stable across runs


def test_partitions_to_probe_led_now_or_moved():
    before = {0: 1, 1: 2, 2: 3, 3: 3}
    after = {0: 1, 1: 2, 2: 1, 3: 3}
    assert partitions_to_probe(before, after, 3) == [2, 3]
    assert partitions_to_probe(before, after, 1) == [0, 2]


KAFKA_23_LOG = """\
[2026-11-22 14:17:35,237] INFO [GroupMetadataManager brokerId=1] Finished loading offsets and group metadata from __consumer_offsets-4 in 385 milliseconds. (kafka.coordinator.group.GroupMetadataManager)
[2026-11-22 14:17:35,240] INFO [GroupMetadataManager brokerId=1] Finished loading offsets and group metadata from __consumer_offsets-7 in 0 milliseconds. (kafka.coordinator.group.GroupMetadataManager)
[2026-11-22 14:16:30,001] INFO [Log partition=orders-0, dir=/d] Completed load of log with 1 segments, log start offset 0 and log end offset 5 in 3 ms (kafka.log.Log)
[2026-11-22 14:16:30,101] INFO Logs loading complete in 120 ms. (kafka.log.LogManager)
"""


def test_finished_loading_and_log_recovery_lines():
    assert finished_loading(KAFKA_23_LOG) == {4: 385, 7: 0}
    assert log_recovery_progress(KAFKA_23_LOG) == {"Completed load of log": 1, "Logs loading complete": 1}


def test_canary_coverage():
    s = snap([P("canary", 0, [1, 2], 1, [1, 2]), P("canary", 1, [2, 1], 2, [2, 1])])
    assert canary_coverage(s, "canary") == ["canary topic 'canary' has no replica on brokers [3]"]
    assert "does not exist" in canary_coverage(s, "other")[0]
    assert canary_coverage(snap([P("canary", 0, [1, 2, 3], 1, [1, 2, 3])]), "canary") == []
    s = snap([P("canary", 0, [1, 2, 3], 1, [1, 2, 3]), P("canary", 1, [2, 3, 1], 1, [1, 2, 3]),
              P("canary", 2, [3, 1, 2], 3, [3, 1, 2]), P("canary", 3, [2, 1, 3], -1, [2])])
    assert canary_leaders(s, "canary") == {1: 0, 3: 2}  # one partition per leader; an offline one is skipped


# ------------------------------------------------------------------ the broker's own lines

STOP_OK = "[2026-11-22 14:17:37,100] INFO [KafkaServer id=2] Controlled shutdown succeeded (kafka.server.KafkaServer)\n"
STOP_FAILED = "[2026-11-22 14:17:37,100] WARN [KafkaServer id=2] Retrying controlled shutdown after the previous attempt failed... (kafka.server.KafkaServer)\n"
START_FATAL = (
    "[2026-11-22 14:20:01,000] ERROR Error while creating ephemeral at /brokers/ids/3, node already exists and owner "
    "'72057779271024641' does not match current session '72057779271024645' (kafka.zk.KafkaZkClient$CheckedEphemeral)\n"
    "[2026-11-22 14:20:01,005] ERROR [KafkaServer id=3] Fatal error during KafkaServer startup. Prepare to shutdown (kafka.server.KafkaServer)\n"
)


def test_controlled_shutdown_and_fatal_start_lines():
    assert controlled_shutdown_outcome(STOP_OK) == "succeeded"
    assert controlled_shutdown_outcome(STOP_FAILED) == "failed"
    assert controlled_shutdown_outcome("[2026-11-22 14:17:37,100] INFO shutting down (x)\n") == "not logged"
    assert len(fatal_start_lines(START_FATAL)) == 2 and "does not match current session" in fatal_start_lines(START_FATAL)[0]


def test_parse_ps_and_properties():
    procs = parse_ps(" 4242 Sl   Sun Nov 22 14:16:20 2026\n 77 T Sun Nov 22 14:00:00 2026\nbogus\n")
    assert [(p.pid, p.running) for p in procs] == [(4242, True), (77, False)]
    assert procs[0].started == "Sun Nov 22 14:16:20 2026"
    props = parse_properties("# c\nbroker.id=3\nmin.insync.replicas = 2\n! c\nunclean.leader.election.enable: true\n\nlog.dirs /d\n")
    assert props == {"broker.id": "3", "min.insync.replicas": "2", "unclean.leader.election.enable": "true", "log.dirs": "/d"}


# ------------------------------------------------------------------ halting and order

def test_describe_state_names_the_down_broker_and_affected_partitions():
    s = snap([P("orders", 0, [1, 2, 3], 1, [1, 2]), P("__consumer_offsets", 3, [3, 1, 2], 1, [1, 2]), P("solo", 0, [3], -1, [3])],
             brokers=(1, 2), controller=1, controller_epoch=7)
    lines = describe_state(s, [1, 2, 3], focus=3)
    assert lines[0] == "registered brokers: [1, 2]; down (configured, not registered): [3]"
    assert lines[1] == "controller: 1 (epoch 7)"
    assert "broker 3 is NOT registered; partitions without it in their ISR: 2 (__consumer_offsets-3, orders-0)" in lines
    assert "offline partitions: 1 (solo-0)" in lines
    assert describe_state(None, [1]) == ["cluster state unknown: ZooKeeper could not be read"]


def _plan(order, **kw):
    return Plan(cluster="c1", steps=tuple(Step("restart_broker", b, "r") for b in order), **kw)


def test_controller_moving_into_the_middle_of_the_plan_halts():
    plan = _plan([1, 2, 3])
    assert order_refusals(plan, snap([], controller=3), [1, 2, 3]) == []
    assert "controller is now broker 2" in order_refusals(plan, snap([], controller=2), [1, 2, 3])[0]
    assert order_refusals(plan, snap([], controller=2), [2, 3]) != []
    assert order_refusals(plan, snap([], controller=1), [2, 3]) == []  # already restarted
    assert plan_changed(plan, _plan([1, 2, 3])) == [] and plan_changed(plan, _plan([1, 3, 2]))


# ------------------------------------------------------------------ approvals and the ledger

SECRET = b"0123456789abcdef0123456789abcdef"
APPROVERS = ("carol", "dave")


def _decision(**kw):
    d = dict(dag_id="kafka_rolling_restart", run_id="run-1", task_id="approve", try_number=1, plan_digest="d" * 64,
             chosen="Approve", user_id="carol", user_name="carol", responded_at="2026-11-22T14:00:00Z", timed_out=False,
             starter="alice")
    d.update(kw)
    return A.Decision(**d)


def _entries(decision, secret=SECRET, **extra):
    return [{"event": "approval", "run_id": decision.run_id, **A.entry_for(decision, secret), **extra}]


def _check(entries, **kw):
    args = dict(secret=SECRET, dag_id="kafka_rolling_restart", run_id="run-1", plan_digest="d" * 64, approvers=APPROVERS)
    args.update(kw)
    return A.usable_refusals(entries, **args)[0]


def test_a_sealed_approve_of_this_plan_in_this_run_is_usable():
    assert _check(_entries(_decision())) == []


@pytest.mark.parametrize("decision, kw, why", [
    (_decision(), {"plan_digest": "e" * 64}, "not what would run now"),
    (_decision(), {"run_id": "run-2"}, "no approval was recorded for run 'run-2'"),
    (_decision(chosen="Reject"), {}, "the answer was 'Reject'"),
    (_decision(chosen="Reject", timed_out=True, user_id=None, user_name=None), {}, "timed out"),
    (_decision(user_id="alice", user_name="alice"), {}, "started this run and cannot approve it"),
    (_decision(user_id="mallory", user_name="mallory"), {}, "is not one of the cluster's approvers"),
])
def test_unusable_approvals_are_refused_with_their_reason(decision, kw, why):
    refusals = _check(_entries(decision), **kw)
    assert any(why in r for r in refusals), refusals


def test_forged_or_edited_decision_is_refused():
    forged = _entries(_decision(), secret=b"not-the-real-key-not-the-real-key")
    assert "seal does not verify" in _check(forged)[0]
    edited = _entries(_decision(user_id="mallory", user_name="mallory"))
    edited[0]["decision"]["user_id"] = edited[0]["decision"]["user_name"] = "carol"
    assert "seal does not verify" in _check(edited)[0]
    # an XCom-like hand-written decision without a seal
    assert "seal does not verify" in _check([{"event": "approval", "decision": _decision().payload()}])[0]


def test_a_used_approval_cannot_be_used_again_but_a_new_try_of_the_approval_can():
    entries = _entries(_decision()) + [{"event": "approval_used", "run_id": "run-1", "dag_id": "kafka_rolling_restart",
                                        "approval_try": 1, "task_id": "execute", "by_try": 1, "at": "t"}]
    assert "already used" in _check(entries)[0]
    entries += _entries(_decision(try_number=2))  # the approval task was cleared too: a person answered again
    assert _check(entries) == []


def test_assigned_users_exclude_the_starter_and_secret_length():
    assert A.assigned_users(["alice", "carol"], "alice") == [{"id": "carol", "name": "carol"}]
    with pytest.raises(A.ApprovalError, match="at least 16 bytes"):
        A.check_secret("short", "kafka_runbooks_approvals")


def test_ledger_progress_resume_and_completion(tmp_path):
    from kafka_runbooks.state import StateDb

    ledger = Ledger(StateDb.embedded(tmp_path), "lab-roll-1")
    ledger.append("planned", "run-1", plan={"requested": [1, 2, 3]})
    ledger.append("step_done", "run-1", broker_id=3)
    ledger.append("step_failed", "run-1", broker_id=1, reason="not back")
    ledger.append("halted", "run-1", reason="not back")
    p = ledger.progress()
    assert p.completed == (3,) and p.failed["broker_id"] == 1 and p.resumable and p.requested == (1, 2, 3)
    ledger.append("step_done", "run-2", broker_id=1)
    ledger.append("step_done", "run-2", broker_id=2)
    ledger.append("completed", "run-2")
    p = ledger.progress()
    assert p.completed == (3, 1, 2) and p.done and not p.resumable and p.runs == ("run-1", "run-2")
    assert progress([]).completed == ()
    assert ledger.entries()[0]["event"] == "planned"


# ------------------------------------------------------------------ issue 17 §4: faults in the middle

def test_a_step_started_and_never_ended_is_an_interrupted_step():
    from kafka_runbooks.remediate.executor import interrupted_step, interruption_report

    started = {"event": "step_started", "run_id": "r1", "broker_id": 2, "at": "2026-11-22T14:00:00Z"}
    assert interrupted_step([{"event": "planned"}, {"event": "step_started", "broker_id": 1}, {"event": "step_done", "broker_id": 1},
                             started]) == started
    assert interrupted_step([started, {"event": "step_done", "broker_id": 2}]) is None
    assert interrupted_step([started, {"event": "step_failed", "broker_id": 2}]) is None
    assert interrupted_step([started, {"event": "halted", "broker_id": 2}]) is None  # the close-out recorded it
    assert interrupted_step([{"event": "step_started", "broker_id": 3, "partitions": ["orders-0"]}]) is None  # an election batch
    lines = interruption_report(started, snap([P("orders", 0, [1, 2, 3], 1, [1, 3])], brokers=(1, 3)), [1, 2, 3])
    assert lines[0].startswith("the execute task stopped during the step of broker 2 (stop command sent at 2026-11-22T14:00:00Z")
    assert "registered brokers: [1, 3]; down (configured, not registered): [2]" in lines[1]
    assert any("broker 2 is NOT registered; partitions without it in their ISR: 1 (orders-0)" in l for l in lines)


class _Host:
    """A broker host over 'SSH': server.properties as given, meta.properties in its log dir."""

    def __init__(self, props: str | None, meta: str | None = None):
        self.props, self.meta, self.calls = props, meta, []

    def run(self, argv, timeout):
        from kafka_runbooks.hooks.ssh import CommandResult

        self.calls.append(tuple(argv))
        text = self.props if argv[-1].endswith("server.properties") else self.meta
        return CommandResult(tuple(argv), "", (text or "").encode(), b"" if text is not None else b"No such file", 0 if text is not None else 1, "t", 0.0)


def test_the_host_must_really_run_the_broker_it_is_mapped_to():
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.remediate.host import BrokerHost

    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2"})
    assert BrokerHost(cfg, 2, _Host("broker.id=2\nlog.dirs=/d\n")).identity_refusal() is None
    wrong = BrokerHost(cfg, 2, _Host("broker.id=1\nlog.dirs=/d\n")).identity_refusal()
    assert wrong == ("host ssh_b2 runs broker 1 (broker.id in /etc/kafka/server.properties), not broker 2: the cluster's host map "
                     "or server_properties_path is wrong; refusing to act on it")
    # generated ids: the meta.properties Kafka wrote in its first log dir
    assert BrokerHost(cfg, 2, _Host("log.dirs=/d1,/d2\n", "version=0\nbroker.id=2\n")).identity_refusal() is None
    host = _Host("log.dirs=/d1,/d2\n", "version=0\nbroker.id=1002\n")
    assert "runs broker 1002 (broker.id in /d1/meta.properties)" in BrokerHost(cfg, 2, host).identity_refusal()
    assert host.calls[-1] == ("cat", "--", "/d1/meta.properties")
    assert "cannot prove host ssh_b2 runs broker 2" in BrokerHost(cfg, 2, _Host(None)).identity_refusal()


def test_the_last_safety_check_runs_right_before_the_stop_command_and_a_refusal_sends_none():
    """Issue 17 §1: ``before_stop`` (the executor's re-read of the state, the rules applied once more) runs after the
    step's own reads of the host -- its processes, its log's size -- and immediately before the stop command; when it
    refuses, no stop, kill or start command is ever sent."""
    import logging
    from types import SimpleNamespace

    from kafka_runbooks.config import GateSettings
    from kafka_runbooks.remediate.host import ProcessInfo
    from kafka_runbooks.remediate.steps import StepFailed, restart_broker

    calls: list[str] = []

    class Host:
        broker_id = 2
        config = SimpleNamespace(server_log=lambda b: f"/var/log/kafka/{b}/server.log", kill_command=["kill"])

        def processes(self):
            calls.append("processes")
            return [ProcessInfo(4242, "Sl", "Mon Nov 23 10:00:00 2026")]

        def size(self, path):
            calls.append("size")
            return 100

        def run(self, which, timeout):
            calls.append(which)
            raise AssertionError(f"{which} was sent although the last safety check refused")

    class Zk:
        def exists(self, path, watch=None):
            calls.append("registration")
            return SimpleNamespace(ephemeralOwner=0x77, czxid=5)

    def refuse():
        calls.append("before_stop")
        raise StepFailed(2, "safety check right before the stop", "broker 1: did not answer a direct check; nothing was stopped")

    with pytest.raises(StepFailed, match="right before the stop"):
        restart_broker(Zk(), Host(), GateSettings(), lambda *a, **k: None, logging.getLogger("t"), before_stop=refuse)
    assert calls[-1] == "before_stop" and calls.index("before_stop") > max(calls.index("processes"), calls.index("size"))
    assert not {"stop_command", "kill_command", "start_command"} & set(calls)


def test_the_fresh_plan_differing_in_anything_the_approver_saw_refuses():
    """Issue 17 §3: not only the order -- a waived broker that answers again, a holder that stopped answering, a changed
    warning. The same evidence again is no change."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.remediate.plan import plan_restart

    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"}, kafka_version="2.3.0")
    s = snap([P("orders", 0, [2, 1, 3], 2, [2, 1, 3]), P("orders", 1, [1, 3, 2], 1, [1, 3, 2])], controller=3)
    waived = {2: "direct check failed (no answer within 5s) and jvm_deadlock: 'kafka-request-handler-1' <-> ..."}
    approved = plan_restart(s, [2], cfg, kind="incident_restart", not_serving=waived, roll_id="c1-1")
    assert plan_changed(approved, plan_restart(s, [2], cfg, kind="incident_restart", not_serving=waived, roll_id="c1-1")) == []
    answers = plan_changed(approved, plan_restart(s, [2], cfg, kind="incident_restart", roll_id="c1-1"))
    assert approved.broker_order == (2,) and any("broker 2 was approved for restart under the not-serving waiver" in c and
                                                  "the waiver no longer applies" in c for c in answers), answers
    assert answers[-1].startswith("the plan the approver saw no longer fits the cluster")
    silent = {1: "did not answer a direct Kafka-protocol check at 2024-01-01T00:00:01Z on kafka1:9092 (_TIMED_OUT)"}
    roll = plan_restart(s, [2], cfg, roll_id="c1-roll-1")
    now_silent = plan_changed(roll, plan_restart(s, [2], cfg, roll_id="c1-roll-1", unresponsive=silent))
    assert any("brokers that are no holder (no answer to a direct check, or an open incident): approved [], now [1]" in c
               for c in now_silent), now_silent


def test_the_last_check_probes_every_holder_again_and_refuses_a_holder_that_went_silent():
    """Issue 17 §1, "re-read the state right before the stop command": ``last_check`` (``before_stop``'s rules) takes a
    direct check of EVERY holder the stop depends on again, none reused from the safety check seconds earlier: broker 1,
    the other in-sync holder of ``__consumer_offsets-0``, answered the first check and stops answering before the stop
    of broker 2 -> refused, naming broker 1 and its evidence; all answering -> no refusal."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.model import KafkaCheck
    from kafka_runbooks.remediate.executor import FreshState, last_check
    from kafka_runbooks.remediate.safety import SafetySettings

    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"}, kafka_version="2.3.0")
    now = snap([P("__consumer_offsets", 0, [2, 1], 2, [2, 1], min_isr=1), P("orders", 0, [2, 3], 2, [2, 3], min_isr=1)], controller=3)
    earlier = {b: KafkaCheck(b, f"kafka{b}:9092", True, 3.0, b, at="2024-01-01T00:00:00Z") for b in (1, 3)}
    fresh = FreshState(now, SafetySettings(), {}, {}, [], checked=dict(earlier), records=[])
    asked: list[set[int]] = []

    def check(config, snapshot, broker_ids, silent=()):
        asked.append(set(broker_ids))
        return {b: KafkaCheck(b, f"kafka{b}:9092", b not in silent, None if b in silent else 2.0, None if b in silent else b,
                              error="no answer within 5.0s" if b in silent else None, at="2024-01-01T00:00:09Z",
                              error_code="_TIMED_OUT" if b in silent else None) for b in broker_ids}

    plan = _plan([2, 1, 3])
    why, unresponsive, checks = last_check(cfg, plan, now, 2, fresh, [2, 1, 3], check=lambda *a: check(*a, silent={1}))
    assert asked == [{1, 3}], "every holder is checked again, none of the earlier checks reused"
    assert 1 in unresponsive and "no answer within 5.0s" in unresponsive[1] and checks[1].ok is False
    assert len(why) == 1 and "__consumer_offsets-0" in why[0] and "broker 1: did not answer" in why[0], why

    why, unresponsive, checks = last_check(cfg, plan, now, 2, fresh, [2, 1, 3], check=check)
    assert why == [] and unresponsive == {} and all(c.ok for c in checks.values())
