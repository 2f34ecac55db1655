"""The serving watch (issue 30): when it fires (pure: detect/serving_watch.py), and the trigger itself
(triggers/serving.py) against a real ZooKeeper holding the registrations 0.9.0.1 writes and protocol-level 0.9
stand-ins (tests/kafka09_server.py: what they stand for is in its docstring): it fires for a broker that accepts
connections and never answers, never for brokers that answer, and sends a may-be-0.9 broker Metadata v0 only
(never ApiVersions, seed 002). The same against the lab's real Kafka 2.3: tests/lab/test_serving_watch_lab.py."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from kafka_runbooks.detect.serving_watch import Answer, ServingWatch

pytestmark = pytest.mark.timeout(120)

_spec = importlib.util.spec_from_file_location("kafka_runbooks_tests_kafka09", Path(__file__).parents[1] / "kafka09_server.py")
kafka09 = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
if _spec.name not in sys.modules:
    sys.modules[_spec.name] = kafka09
    _spec.loader.exec_module(kafka09)


def _round(watch, now, ok=(), failed=()):
    return watch.observe([Answer(b, True) for b in ok] + [Answer(b, False, f"h{b}:9092", "no answer within 3 s") for b in failed],
                         now, f"t={now}")


# ------------------------------------------------------------------------------------------------ pure: the decision
def test_fires_after_n_failed_rounds_in_a_row_once_per_outage():
    w = ServingWatch(failures=3, debounce_s=0)
    assert _round(w, 0, ok=(1, 2, 3)) is None
    assert _round(w, 5, ok=(1, 2), failed=(3,)) is None
    assert _round(w, 10, ok=(1, 2), failed=(3,)) is None
    fire = _round(w, 15, ok=(1, 2), failed=(3,))
    assert fire is not None and list(fire.brokers) == [3]
    assert fire.brokers[3] == {"failures": 3, "since": "t=5", "error": "no answer within 3 s", "endpoint": "h3:9092"}
    assert "broker 3 did not answer 3 round(s) in a row" in fire.summary()
    # still not answering: no second event for the same outage
    assert all(_round(w, t, ok=(1, 2), failed=(3,)) is None for t in (20, 25, 30, 100, 1000))
    assert w.not_answering() == [3]


def test_an_answer_between_failures_starts_the_count_again():
    w = ServingWatch(failures=2, debounce_s=0)
    for t in range(0, 100, 10):  # fails one round in two: never two in a row
        assert _round(w, t, failed=(3,) if t % 20 == 0 else (), ok=(1, 2) if t % 20 == 0 else (1, 2, 3)) is None


def test_a_new_outage_after_an_answer_fires_again():
    w = ServingWatch(failures=2, debounce_s=0)
    _round(w, 0, failed=(3,))
    assert _round(w, 1, failed=(3,)) is not None
    assert _round(w, 2, ok=(3,)) is None
    _round(w, 3, failed=(3,))
    assert _round(w, 4, failed=(3,)) is not None


def test_a_flapping_broker_fires_at_most_once_per_debounce():
    w = ServingWatch(failures=2, debounce_s=60)
    fired = []
    for t in range(0, 300, 5):  # two rounds failed, one answered, again and again: an outage every 15 s
        phase = (t // 5) % 3
        if _round(w, t, ok=(1,) + ((3,) if phase == 2 else ()), failed=(3,) if phase < 2 else ()) is not None:
            fired.append(t)
    assert fired and all(b - a >= 60 for a, b in zip(fired, fired[1:])), fired
    assert len(fired) == 5, fired  # 300 s / 60 s: the storm is cut to one event per debounce


def test_another_brokers_first_outage_is_not_held_back_by_an_event_for_the_first():
    # seen on the deployment (bench detect_deployed): broker 3's restart fired; a deadlock of broker 2 twenty seconds
    # later waited for the cluster's debounce to end (26 s from fault to event)
    w = ServingWatch(failures=1, debounce_s=30)
    assert list(_round(w, 0, ok=(1,), failed=(3,)).brokers) == [3]
    fire = _round(w, 10, ok=(1,), failed=(2, 3))
    assert fire is not None and list(fire.brokers) == [2]  # 3 was already reported in this outage
    assert _round(w, 12, ok=(1,), failed=(2, 3)) is None


def test_brokers_that_stop_in_one_round_go_out_in_one_event_and_each_keeps_its_debounce():
    w = ServingWatch(failures=1, debounce_s=30)
    fire = _round(w, 0, ok=(1,), failed=(2, 3))
    assert fire is not None and list(fire.brokers) == [2, 3]
    assert _round(w, 5, ok=(1, 2, 3)) is None
    assert _round(w, 10, ok=(1, 2), failed=(3,)) is None  # a new outage of 3 within its debounce: held
    assert list(_round(w, 30, ok=(1, 2), failed=(3,)).brokers) == [3]  # and goes out when it ends


def test_a_broker_no_longer_registered_is_forgotten():
    w = ServingWatch(failures=2, debounce_s=0)
    _round(w, 0, ok=(1,), failed=(3,))
    assert _round(w, 1, ok=(1,)) is None  # 3 deregistered: ZooKeeper's own watch says so
    assert _round(w, 2, ok=(1,), failed=(3,)) is None  # registered again and failing: counted from one
    assert _round(w, 3, ok=(1,), failed=(3,)) is not None


def test_a_refused_connection_fires_after_one_round_a_silence_needs_n():
    w = ServingWatch(failures=3, debounce_s=0)
    assert _round(w, 0, ok=(1, 2, 3)) is None
    refused = Answer(3, False, "h3:9092", "connection refused: [Errno 111]", refused=True)
    fire = w.observe([Answer(1, True), Answer(2, True), refused], 1, "t=1")
    assert fire is not None and fire.brokers[3]["failures"] == 1 and w.not_answering() == [3]
    assert w.observe([Answer(1, True), Answer(2, True), refused], 2, "t=2") is None  # one event per outage
    # a broker that answers slowly (busy) still needs failures rounds in a row
    assert _round(w, 3, ok=(1, 3), failed=(2,)) is None and _round(w, 4, ok=(1, 3), failed=(2,)) is None
    assert w.not_answering() == []
    assert _round(w, 5, ok=(1, 3), failed=(2,)) is not None


async def _ask_closed_port():
    import socket

    from kafka_runbooks.model import Broker
    from kafka_runbooks.triggers.serving import ask

    with socket.socket() as s:  # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        return await ask(Broker(3, "127.0.0.1", port), None, 2.0, {}, "2.3.0")


def test_the_trigger_tells_a_refused_connection_from_a_silence():
    answer = asyncio.run(_ask_closed_port())
    assert not answer.ok and answer.refused and answer.error.startswith("connection refused"), answer


def test_settings_are_checked():
    from kafka_runbooks.config import ClusterConfig, ConfigError

    base = {"zk_conn_id": "zk", "hosts": {"1": "h1"}}
    h = ClusterConfig.from_dict("c", base).health
    assert (h.serving_interval_s, h.serving_timeout_s, h.serving_failures, h.serving_debounce_s) == (2.0, 2.0, 2, 60.0)
    for bad in ({"serving_failures": 0}, {"serving_timeout_s": 0}, {"serving_interval_s": -1}, {"watch_serving": "yes"}):
        with pytest.raises(ConfigError):
            ClusterConfig.from_dict("c", {**base, "health": bad})


# ---------------------------------------------------------------------- the trigger: real ZooKeeper, 0.9 stand-ins
IDS = (1, 2, 3)
QUIET_ROUNDS_S = 3.0  # the watch must stay silent this long while every broker answers (a bound, not a speed claim)
FIRE_BOUND_S = 20.0  # failures x (interval + timeout) is 2 s here; generous for a loaded machine


@pytest.fixture
def watched09(zk, zookeeper, monkeypatch):
    servers = {b: kafka09.Kafka09Server(b).start() for b in IDS}
    for s in servers.values():
        s.set_cluster({b: x.address for b, x in servers.items()}, {"orders": {0: (1, [1, 2, 3], [1, 2, 3])}})
    session = zookeeper.client(zk.chroot_path)
    try:
        for b, s in servers.items():
            session.create(f"/brokers/ids/{b}", s.registration(), ephemeral=True, makepath=True)
        monkeypatch.setenv("AIRFLOW_CONN_KR_ZK_WATCH", json.dumps(
            {"conn_type": "generic", "host": zookeeper.hosts, "extra": {"chroot": zk.chroot_path}}))
        monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps({"c09": {
            "zk_conn_id": "kr_zk_watch", "hosts": {str(b): f"ssh_b{b}" for b in IDS},
            "health": {"serving_interval_s": 0.5, "serving_timeout_s": 0.5, "serving_failures": 2, "serving_debounce_s": 0}}}))
        yield servers
    finally:
        session.stop()
        session.close()
        for s in servers.values():
            s.stop()


def test_the_trigger_fires_for_a_0_9_broker_that_stops_answering_and_sends_it_metadata_v0_only(watched09):
    from kafka_runbooks.triggers.serving import ServingWatchTrigger

    servers = watched09
    trigger = ServingWatchTrigger(cluster="c09")
    assert trigger.serialize() == ("kafka_runbooks.triggers.serving.ServingWatchTrigger", {"cluster": "c09", "zk_conn_id": None})

    async def scenario():
        agen = trigger.run()
        pending = asyncio.ensure_future(agen.__anext__())
        try:
            await asyncio.sleep(QUIET_ROUNDS_S)  # every broker answers: silence
            assert not pending.done(), pending.result().payload if pending.done() else None
            servers[3].hang()  # accepts connections, reads requests, never answers (a stuck request path)
            event = await asyncio.wait_for(pending, FIRE_BOUND_S)
            return event.payload
        finally:
            pending.cancel()
            await asyncio.gather(pending, return_exceptions=True)
            await agen.aclose()

    payload = asyncio.run(scenario())
    assert payload["cluster"] == "c09" and payload["changed"] == ["serving"], payload
    assert list(payload["not_answering"]) == ["3"], payload
    assert payload["not_answering"]["3"]["failures"] >= 2 and "no answer within 0.5 s" in payload["not_answering"]["3"]["error"]
    # schema-2 registrations may be 0.9: Metadata (key 3) only, never ApiVersions (18) or any other key
    assert {b: s.keys() for b, s in servers.items()} == {1: {3}, 2: {3}, 3: {3}}
    assert all(not s.errors for s in servers.values())


# --------------------------------------------------- pure: the watch's rounds count as one check in the health run
def _finding(kind, b=3):
    from kafka_runbooks.model import Finding, Severity

    return Finding(kind, Severity.WARNING if kind == "broker_check_failed" else Severity.CRITICAL, kind, broker_ids=(b,),
                   details={"problem": "broker_not_serving"})


def test_the_watch_counts_as_one_check_so_the_first_corroborated_finding_opens():
    from kafka_runbooks.config import HealthSettings
    from kafka_runbooks.incidents.lifecycle import count_watch, pending, step

    s = HealthSettings(consecutive_checks=2)
    other = _finding("broker_unresponsive", 2)
    state, _ = step({}, [other], {}, (), s, "2026-11-29T09:00:00.000Z")  # broker 2's streak: one check so far
    state, counted = count_watch(state, {3: "2026-11-29T09:00:05.000Z"}, s)
    assert counted == ["broker_not_serving:3"]
    assert state["streaks"]["broker_not_serving:2"]["count"] == 1  # the watch looked at nothing else
    again, counted = count_watch(state, {3: "2026-11-29T09:00:05.000Z"}, s)
    assert counted == [] and again == state  # the same event is counted once (a retried task)
    # the health check's own corroborated finding is the second check: the incident opens, no re-check wait
    new, actions = step(state, [_finding("broker_unresponsive"), other], {}, (), s, "2026-11-29T09:00:12.000Z")
    assert [(a.kind, a.key) for a in actions] == [("open", "broker_not_serving:3"), ("open", "broker_not_serving:2")]
    # nothing corroborates it yet: no incident (a warning never opens), but a re-check is pending for it
    new, actions = step(state, [_finding("broker_check_failed")], {}, (), s, "2026-11-29T09:00:12.000Z")
    assert actions == [] and pending(new, s) == ["broker_not_serving:3"]


def test_without_the_watch_the_first_check_does_not_open():
    from kafka_runbooks.config import HealthSettings
    from kafka_runbooks.incidents.lifecycle import pending, step

    s = HealthSettings(consecutive_checks=2)
    new, actions = step({}, [_finding("broker_unresponsive")], {}, (), s, "2026-11-29T09:00:12.000Z")
    assert actions == [] and pending(new, s) == ["broker_not_serving:3"]


class _Event:
    def __init__(self, payload):
        self.extra = {"from_trigger": True, "payload": payload}


def test_only_fresh_serving_events_of_this_cluster_count():
    from kafka_runbooks.operators.glue import asset_payloads
    from kafka_runbooks.runbook.detect import watch_observations

    now = "2026-11-29T09:05:00.000Z"
    events = {"asset": [
        _Event({"cluster": "lab", "changed": ["serving"], "at": "2026-11-29T09:04:55.000Z", "not_answering": {"3": {}}}),
        _Event({"cluster": "lab", "changed": ["serving"], "at": "2026-11-29T09:01:00.000Z", "not_answering": {"1": {}}}),  # old
        _Event({"cluster": "other", "changed": ["serving"], "at": "2026-11-29T09:04:58.000Z", "not_answering": {"2": {}}}),
        _Event({"cluster": "lab", "changed": ["brokers"], "at": "2026-11-29T09:04:58.000Z"}),  # the ZooKeeper watch's
    ]}
    assert watch_observations(asset_payloads({"triggering_asset_events": events}), "lab", now) == {3: "2026-11-29T09:04:55.000Z"}
    assert watch_observations(asset_payloads({}), "lab", now) == {}  # a cron run


def test_brokers_that_did_not_answer_the_version_probe_get_no_jmx_read():
    from kafka_runbooks import versions
    from kafka_runbooks.detect.observe import unanswered
    from kafka_runbooks.hooks.kafka import KafkaHook
    from kafka_runbooks.model import Broker

    brokers = [Broker(b, f"h{b}", 9092, schema_version=4) for b in (1, 2, 3)] + [Broker(4, "h4", 9092, schema_version=2)]
    seen = {1: [versions.from_api_versions(1, {3: (0, 7), 18: (0, 2)})], 2: [versions.from_api_versions(2, {3: (0, 7), 18: (0, 2)})],
            3: [versions.from_znode(3, 4)], 4: [versions.from_znode(4, 2)]}
    kv = versions.cluster_version(seen)
    kv = versions.KafkaVersion(kv.brokers, None, kv.notes + ("broker 3: no ApiVersions answer (TimeoutError: timed out)",))
    # broker 3 was asked and did not answer; broker 4 may be 0.9 and was never asked: not in it
    assert unanswered(KafkaHook(), brokers, kv) == {3: "broker 3: no ApiVersions answer (TimeoutError: timed out)"}


def test_a_check_without_jmx_neither_counts_nor_clears_a_follower_stuck_streak():
    from kafka_runbooks.config import HealthSettings
    from kafka_runbooks.incidents.lifecycle import step
    from kafka_runbooks.model import Finding, Severity

    s = HealthSettings(consecutive_checks=2, clear_checks=1)
    stuck = Finding("follower_stuck", Severity.CRITICAL, "stuck", broker_ids=(2,), details={"problem": "follower_stuck"})
    state, _ = step({}, [stuck], {}, (), s, "2026-11-29T09:00:00.000Z")
    kept, actions = step(state, [], {}, (), s, "2026-11-29T09:00:10.000Z", unobserved=("follower_stuck",))  # the watch's run
    assert actions == [] and kept["streaks"]["follower_stuck:2"]["count"] == 1
    _, actions = step(kept, [stuck], {}, (), s, "2026-11-29T09:00:20.000Z")
    assert [a.kind for a in actions] == ["open"]  # the next check with JMX continues the streak
    cleared, _ = step(state, [], {}, (), s, "2026-11-29T09:00:10.000Z")  # a check that did look: absent
    assert "follower_stuck:2" not in cleared["streaks"]


class _Host:
    """The SSH runner's interface (``run(argv, timeout)``), recording every command: `date` answers, the rest fail."""

    def __init__(self):
        self.calls = []

    def run(self, argv, timeout):
        from kafka_runbooks.hooks.ssh import CommandResult

        a = tuple(argv)
        self.calls.append(a)
        ok = a[0] == "date"
        return CommandResult(a, " ".join(a), b"1795900000.000 +0000\n" if ok else b"", b"" if ok else b"no\n", 0 if ok else 1,
                             "2026-11-29T00:00:00+00:00", 0.01)


def test_no_jmxtool_jvm_is_started_for_a_broker_known_not_to_answer():
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.leadership_observe import read_host
    from kafka_runbooks.model import Broker

    config = ClusterConfig.from_dict("c", {"zk_conn_id": "zk", "hosts": {"3": "h3"}, "kafka_home": "/opt/kafka"})
    broker = Broker(3, "h3", 9092, jmx_port=9999)
    asked = _Host()
    read_host(config, broker, True, asked)
    assert any("kafka.tools.JmxTool" in " ".join(c) for c in asked.calls), asked.calls  # the usual read
    skipped = _Host()
    out = read_host(config, broker, True, skipped, silent="the broker did not answer Kafka requests (timed out)")
    assert not any("JmxTool" in " ".join(c) for c in skipped.calls), skipped.calls
    assert not out.metrics.ok and out.metrics.error == "JmxTool not run: the broker did not answer Kafka requests (timed out)"


def test_a_sasl_cluster_is_not_watched_rather_than_every_broker_counted_as_silent():
    from kafka_runbooks.triggers.serving import unsupported

    assert unsupported({}) is None and unsupported({"security.protocol": "ssl"}) is None
    assert "SASL_SSL" in unsupported({"security.protocol": "SASL_SSL"})
