"""Detectors on built snapshots and histories: no I/O. Each case is a shape measured on real
Kafka 2.3 (ENVIRONMENT.md, issue 5): a stuck broker keeps its ISRs, its peers' fetchers log
disconnects naming it, its CLOSE_WAIT grows; SIGSTOP deregisters it after the session timeout
while the process and its port stay."""

from __future__ import annotations

import dataclasses
import json

from detect_builders import at, broker, check, fetch_error, history, partitions, probe, snapshot, with_close_wait
from kafka_runbooks.config import HealthSettings
from kafka_runbooks.detect.detectors import detect
from kafka_runbooks.detect.isr import blame, broken_links
from kafka_runbooks.model import Finding, HostProbe, Severity


def kinds(findings):
    return sorted(f.kind for f in findings)


def only(findings, kind):
    (f,) = [f for f in findings if f.kind == kind]
    return f


def assert_serialisable(findings):
    for f in findings:
        d = f.to_dict()
        assert Finding.from_dict(json.loads(json.dumps(d, allow_nan=False))) == Finding.from_dict(d)


def test_healthy_cluster_has_no_finding():
    s = snapshot()
    assert detect(s, history=history(s)) == []


def hung_3(errors_at=(-40, -10), close_wait=(2, 9, 25, 60)):
    """A hung broker 3 on real 2.3: ISRs full, its check times out, peers log disconnects naming it,
    CLOSE_WAIT grows between probes."""
    snaps = []
    for i, cw in enumerate(close_wait):
        t = -30 * (len(close_wait) - 1 - i)
        probes = [probe(1, errors=[fetch_error(1, 3, e) for e in errors_at]), probe(2, errors=[fetch_error(2, 3, errors_at[-1])]),
                  probe(3, close_wait=cw, recv_q=40 * i)]
        snaps.append(with_close_wait(snapshot(checks=[check(1), check(2), check(3, ok=False)], probes=probes), 3, cw, t))
    return snaps


def test_hung_broker_with_full_isrs_is_found_by_its_check_and_corroborated():
    snaps = hung_3()
    findings = detect(snaps[-1], history=history(*snaps))
    f = only(findings, "broker_unresponsive")
    assert f.severity is Severity.CRITICAL and f.broker_ids == (3,)
    assert f.details["problem"] == "broker_not_serving" and f.details["check"]["error_code"] == "_TIMED_OUT"
    assert f.details["peer_fetch_errors"] == {"1": 2, "2": 1}
    # the trend finding cites its samples: time and value of each
    (cw,) = [t for t in f.details["trends"] if t["key"] == "close_wait"]
    assert cw["points"] == [[at(-90), 2.0], [at(-60), 9.0], [at(-30), 25.0], [at(0), 60.0]]
    sources = [e.source for e in f.evidence]
    assert sources[0] == "kafka:check/broker/3"
    assert "probe:broker/1/server.log" in sources and "history:broker-3/close_wait" in sources
    assert any("was disconnected before the response was read" in e.excerpt for e in f.evidence)
    assert "1 peer" not in f.summary and "2 peer(s) [1, 2]" in f.summary
    assert kinds(findings) == ["broker_unresponsive"]  # ISRs are full: no ISR warning, nothing about 1 or 2
    assert_serialisable(findings)


def test_fetch_errors_from_an_earlier_episode_do_not_count():
    # broker 3 re-registered 60 s ago (restarted after an earlier hang); the peers' errors are older
    old = [fetch_error(1, 3, -120), fetch_error(2, 3, -100)]
    s = snapshot(brokers=[broker(1), broker(2), broker(3, registered_at=at(-300))],
                 checks=[check(1), check(2), check(3, ok=False)], probes=[probe(1, errors=old[:1]), probe(2, errors=old[1:]), probe(3)])
    s = dataclasses.replace(s, brokers=(broker(1), broker(2), broker(3, registered_at=at(-60))))
    f = only(detect(s, settings=HealthSettings(startup_grace_s=30)), "broker_check_failed")
    assert f.severity is Severity.WARNING and f.details["peer_fetch_errors"] == {}
    # the same errors, after its registration, do count
    s2 = dataclasses.replace(s, brokers=(broker(1), broker(2), broker(3, registered_at=at(-200))))
    assert only(detect(s2, settings=HealthSettings(startup_grace_s=30)), "broker_unresponsive").details["peer_fetch_errors"] == {"1": 1, "2": 1}


def test_an_uncorroborated_failed_check_is_a_warning_that_opens_nothing():
    s = snapshot(checks=[check(1), check(2), check(3, ok=False)])
    f = only(detect(s), "broker_check_failed")
    assert f.severity is Severity.WARNING and f.details["corroborated_by"] == []


def test_paused_broker_still_registered_is_unresponsive_with_its_stopped_process():
    s = snapshot(checks=[check(1), check(2), check(3, ok=False)], probes=[probe(1), probe(2), probe(3, state="stopped")])
    f = only(detect(s), "broker_unresponsive")
    assert f.details["process_state"] == "stopped" and "is stopped" in f.summary


def test_paused_broker_after_its_session_expired_is_alive_but_unregistered():
    before = snapshot(taken=-30)
    s = snapshot(brokers=[broker(1), broker(2)], probes=[probe(1), probe(2), probe(3, state="stopped")],
                 checks=[check(1), check(2), check(3, ok=False, registered=False)])
    findings = detect(s, history=history(before, s))
    f = only(findings, "broker_unregistered_alive")
    assert f.severity is Severity.CRITICAL and f.broker_ids == (3,)
    assert f.details["process_state"] == "stopped" and f.details["listening"] is True and f.details["ports"] == [9093, 9092]
    assert f.details["problem"] == "broker_not_serving"
    assert f.details["last_registered_sample"]["at"] == at(-30) and f"last seen registered at {at(-30)}" in f.summary
    assert "zookeeper:/brokers/ids" in [e.source for e in f.evidence]


def test_killed_broker_is_absent_and_an_unreachable_unregistered_host_too():
    s = snapshot(brokers=[broker(1), broker(2)], probes=[probe(1), probe(2), probe(3, pid=None)])
    f = only(detect(s), "broker_absent")
    assert f.broker_ids == (3,) and "no process listens on its ports [9093, 9092]" in f.summary
    s = snapshot(brokers=[broker(1), broker(2)], probes=[probe(1), probe(2), probe(3, reachable=False)])
    f = only(detect(s), "broker_absent")
    assert f.details["host_reachable"] is False and "could not be probed" in f.summary


def test_killed_broker_still_registered_until_its_session_expires():
    s = snapshot(checks=[check(1), check(2), check(3, ok=False)], probes=[probe(1), probe(2), probe(3, pid=None)])
    f = only(detect(s), "broker_unresponsive")
    assert "no process listens on its ports" in f.summary


def test_a_broker_catching_up_after_a_restart_is_not_accused():
    fresh = broker(3, registered_at=at(-20), session=0x2000)
    behind = partitions(isr_without=(3,))
    # answering already: only the (true) under-replication warning, saying it is catching up
    s = snapshot(brokers=[broker(1), broker(2), fresh], parts=behind)
    findings = detect(s)
    assert kinds(findings) == ["under_replicated_partitions"]
    assert only(findings, "under_replicated_partitions").details["catching_up"] == [3]
    # not answering yet (loading), process running: info only
    s = snapshot(brokers=[broker(1), broker(2), fresh], parts=behind, checks=[check(1), check(2), check(3, ok=False)])
    findings = detect(s)
    assert kinds(findings) == ["broker_starting", "under_replicated_partitions"]
    assert not [f for f in findings if f.severity is Severity.CRITICAL]
    # past the grace, but still rejoining ISRs sample after sample: still starting
    settings = HealthSettings(startup_grace_s=30)
    steps = []
    for i, missing in enumerate(((3,), (3,), ())):
        parts = partitions(isr_without=missing) if missing else partitions()
        parts = parts[: 3 + i]  # more partitions with 3 in their ISR each time
        steps.append(snapshot(brokers=[broker(1), broker(2), broker(3, registered_at=at(-45))], parts=parts,
                              checks=[check(1), check(2), check(3, ok=False)], taken=-30 * (2 - i)))
    assert only(detect(steps[-1], settings, history(*steps)), "broker_starting")
    # a stopped process gets no grace
    s = snapshot(brokers=[broker(1), broker(2), fresh], checks=[check(1), check(2), check(3, ok=False)],
                 probes=[probe(1), probe(2), probe(3, state="stopped")])
    assert only(detect(s), "broker_unresponsive")


def test_a_just_started_unregistered_process_is_starting():
    led_by_others = partitions(ids=(1, 2))
    s = snapshot(brokers=[broker(1), broker(2)], parts=led_by_others, probes=[probe(1), probe(2), probe(3, uptime=4)])
    assert kinds(detect(s)) == ["broker_starting"]


def test_close_wait_growing_on_an_answering_broker_is_a_warning_citing_samples():
    snaps = [with_close_wait(snapshot(), 2, cw, -30 * (3 - i)) for i, cw in enumerate((5, 30, 80, 150))]
    f = only(detect(snaps[-1], history=history(*snaps)), "broker_socket_pileup")
    assert f.severity is Severity.WARNING and f.broker_ids == (2,)
    assert f.details["trend"]["points"][0] == [at(-90), 5.0] and f.details["trend"]["points"][-1] == [at(0), 150.0]
    # a dip in between is not a steady rise
    snaps = [with_close_wait(snapshot(), 2, cw, -30 * (3 - i)) for i, cw in enumerate((5, 30, 10, 50))]
    assert detect(snaps[-1], history=history(*snaps)) == []


def test_isr_shape_alone_never_opens_an_incident():
    # seed 001's shape, read from ZooKeeper only (no direct checks): a warning, never critical
    parts = [dataclasses.replace(p, isr=(3,)) if p.leader == 3 else dataclasses.replace(p, isr=tuple(x for x in p.isr if x != 3))
             for p in partitions()]
    s = dataclasses.replace(snapshot(parts=parts), kafka_checks=())
    findings = detect(s)
    assert only(findings, "isr_shape_suspect").broker_ids == (3,)
    assert not [f for f in findings if f.severity is Severity.CRITICAL]
    # checked and answering: the ISR shape names nobody
    s = snapshot(parts=parts)
    assert "isr_shape_suspect" not in kinds(detect(s))
    # checked and failing: the shape corroborates
    s = snapshot(parts=parts, checks=[check(1), check(2), check(3, ok=False)])
    f = only(detect(s), "broker_unresponsive")
    assert f.details["isr"]["led_with_isr_only_itself"] and any(e.source.startswith("zookeeper:/brokers/topics/") for e in f.evidence)


def test_outlier_thresholds_are_per_cluster_settings():
    s = snapshot(checks=[check(1), check(2), check(3, ok=False)], probes=[probe(1, close_wait=2), probe(2, close_wait=3), probe(3, close_wait=60)])
    assert only(detect(s), "broker_check_failed")
    f = only(detect(s, HealthSettings(close_wait_min=50)), "broker_unresponsive")
    assert f.details["close_wait_outlier"]["value"] == 60


def test_offline_under_replicated_unparsable_unreachable():
    parts = partitions()
    parts[0] = dataclasses.replace(parts[0], leader=-1, isr=())
    parts[1] = dataclasses.replace(parts[1], isr=parts[1].isr[:1])
    s = dataclasses.replace(snapshot(parts=parts, probes=[probe(1), HostProbe(2, False, error="timed out"), probe(3)]),
                            unparsable=("/brokers/topics/x/partitions/0/state: invalid JSON: Expecting value",))
    findings = detect(s)
    assert kinds(findings) == ["host_unreachable", "offline_partitions", "under_replicated_partitions", "unparsable"]
    assert findings[0].kind == "offline_partitions"  # most severe first
    assert only(findings, "host_unreachable").broker_ids == (2,)
    assert only(findings, "unparsable").evidence[0].source == "zookeeper:/brokers/topics/x/partitions/0/state"
    assert_serialisable(findings)


def test_blame_prefers_the_common_broker_and_ties_go_to_suspects_then_follower():
    assert blame([(1, 3), (2, 3)]) == [3]
    assert blame([(3, 1), (3, 2)]) == [3]
    assert blame([(1, 3)]) == [3]
    assert blame([(1, 3)], suspects_first=[1]) == [1]
    parts = [dataclasses.replace(p, isr=(3,)) if p.leader == 3 else dataclasses.replace(p, isr=tuple(x for x in p.isr if x != 3))
             for p in partitions()]
    assert set(broken_links(snapshot(parts=parts))) == {(1, 3), (2, 3), (3, 1), (3, 2)}


def test_a_broker_that_already_answered_in_this_session_is_never_starting():
    # registered 60 s ago (within the grace), answered the previous check, hangs now: accused
    reg = at(-60)
    brokers = [broker(1), broker(2), broker(3, registered_at=reg)]
    before = snapshot(brokers=brokers, taken=-30)
    now = snapshot(brokers=brokers, checks=[check(1), check(2), check(3, ok=False)],
                   probes=[probe(1), probe(2), probe(3, close_wait=30)])
    assert only(detect(now, history=history(now)), "broker_starting")  # no history: the grace applies
    f = only(detect(now, HealthSettings(close_wait_min=10), history(before, now)), "broker_unresponsive")
    assert "direct check" in f.summary
    # peers' fetch errors since its registration also say it had served
    now = snapshot(brokers=brokers, checks=[check(1), check(2), check(3, ok=False)],
                   probes=[probe(1, errors=[fetch_error(1, 3, -10)]), probe(2), probe(3)])
    assert only(detect(now, history=history(now)), "broker_unresponsive")


def test_traffic_near_zero_against_its_peers_corroborates():
    def step(taken, sent3):
        s = snapshot(checks=[check(1), check(2), check(3, ok=False)], taken=taken)
        probes = tuple(dataclasses.replace(p, bytes_acked=(sent3 if p.broker_id == 3 else 20_000 + 3000 * (taken + 30))) for p in s.probes)
        return dataclasses.replace(s, probes=probes)
    a, b = step(-30, 98_324), step(0, 98_324)
    f = only(detect(b, history=history(a, b)), "broker_unresponsive")
    (t,) = [t for t in f.details["trends"] if t["key"] == "bytes_acked"]
    assert t["change"] == 0 and t["points"] == [[at(-30), 98324.0], [at(0), 98324.0]]
    assert "sent 0 B/s since the last probe vs 3000 B/s at its peers" in f.summary


def test_fetch_errors_before_the_broker_last_answered_belong_to_a_fixed_episode():
    # an earlier hang (errors at -100 s) was healed without a restart: broker 3 answered at -30 s;
    # it hangs again now: only errors after -30 s count
    old, new = fetch_error(1, 3, -100), fetch_error(2, 3, -10)
    healed = snapshot(taken=-30)
    now = snapshot(checks=[check(1), check(2), check(3, ok=False)], probes=[probe(1, errors=[old]), probe(2, errors=[new]), probe(3)])
    f = only(detect(now, history=history(healed, now)), "broker_unresponsive")
    assert f.details["peer_fetch_errors"] == {"2": 1}
    only_old = snapshot(checks=[check(1), check(2), check(3, ok=False)], probes=[probe(1, errors=[old]), probe(2), probe(3)])
    assert only(detect(only_old, history=history(healed, only_old)), "broker_check_failed").details["peer_fetch_errors"] == {}


def test_a_snapshot_taken_during_the_products_own_roll_is_the_rolls_even_when_the_roll_ended_before_detection():
    """Seen in CI (deployed lane): the serving watch started a health check while the product's own roll had broker 2
    down; its snapshot read broker 2 absent, the roll ended 0.5 s before the detect task ran, and an incident opened
    about the product's own restart. What a snapshot saw is judged against what ran when it was taken."""
    from kafka_runbooks.detect.activity import Activity

    s = snapshot(brokers=[broker(1), broker(3)], probes=[probe(1), probe(2, pid=None), probe(3)], taken=-20)
    assert not only(detect(s), "broker_absent").details.get("during_plan")
    roll = Activity("lab-roll-1", "rolling_restart", (2,), started=at(-60), ended=at(-1), run="manual__1")
    f = only(detect(s, activity=[roll]), "broker_absent")
    assert f.details["during_plan"][0]["record"] == "lab-roll-1"
    assert "during the product's own rolling_restart" in f.summary and "seen while it ran" in f.summary
    # a snapshot taken well after the roll ended (past the slack for its effects) is judged on its own
    later = snapshot(brokers=[broker(1), broker(3)], probes=[probe(1), probe(2, pid=None), probe(3)], taken=60)
    assert not only(detect(later, activity=[roll]), "broker_absent").details.get("during_plan")
    # another broker's finding during that roll is not the roll's
    other = snapshot(brokers=[broker(1), broker(2)], probes=[probe(1), probe(2), probe(3, pid=None)], taken=-20)
    assert not only(detect(other, activity=[roll]), "broker_absent").details.get("during_plan")
