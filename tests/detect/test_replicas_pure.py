"""A follower out of its ISR: catching up (with when it will be in sync) or stuck (issue 16: no progress, no fetcher),
from the figures the health check reads per check. Pure; the lab half is tests/e2e/test_stuck_follower_lab.py."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

from kafka_runbooks.detect import replicas as R
from kafka_runbooks.detect.broker_log import lines_of_interest
from kafka_runbooks.detect.detectors import OPENS_INCIDENT, detect
from kafka_runbooks.detect.history import Sample
from kafka_runbooks.host.jmxtool import REQUEST_QUEUE, fetcher_lag, log_end_offset
from kafka_runbooks.model import Broker, ClusterSnapshot, HostProbe, LogLineSeen, Partition, RequestMetrics

T0 = dt.datetime(2026, 11, 24, 21, 0, tzinfo=dt.timezone.utc)


def at(s: float) -> str:
    return (T0 + dt.timedelta(seconds=s)).isoformat().replace("+00:00", "Z")


def pt(s, f, l, lag=None, read=True):
    return R.Point(at(s), f, l, lag, 1, read)


def test_a_follower_whose_log_end_does_not_move_without_a_fetcher_is_stuck():
    pts = [pt(0, 16, 100), pt(60, 16, 250), pt(130, 16, 400)]
    v = R.classify(pts, 120)
    assert v.kind == R.STUCK and v.since == at(0) and v.behind == 384 and v.no_fetcher is True
    assert "stayed 16 for 130 s while the leader's went 100 -> 400" in v.reason and "no ReplicaFetcherThread fetches it" in v.reason
    assert R.classify(pts[:2], 120).kind == R.UNKNOWN  # 60 s: too early to say


def test_caught_up_yet_out_of_the_isr_is_stuck_the_failed_drill():
    # the failed 003 drill: log end 0 on both sides, out of the ISR for 15 minutes, the partition dropped by its fetcher
    fenced = [LogLineSeen("leader_and_isr_ignored", at(5), 10, "Ignoring LeaderAndIsr ...", {"partition_name": "__consumer_offsets-0"})]
    pts = [pt(0, 0, 0), pt(300, 0, 0), pt(900, 0, 0)]
    v = R.classify(pts, 120, fenced)
    assert v.kind == R.STUCK and "as far, yet it does not rejoin the ISR" in v.reason and "leader_and_isr_ignored" in v.reason
    # a fetcher still holding it (its gauge reads 0) and no line: not called stuck
    assert R.classify([pt(0, 0, 0, lag=0.0), pt(300, 0, 0, lag=0.0)], 120).kind == R.UNKNOWN


def test_catching_up_says_when_it_will_be_in_sync():
    v = R.classify([pt(0, 100, 1100, lag=1000), pt(10, 400, 1150, lag=750), pt(20, 700, 1200, lag=500)], 120)
    assert v.kind == R.CATCHING_UP and v.behind == 500 and v.rate == 25.0 and v.eta_s == 20.0
    assert "in sync in about 20 s" in v.reason
    # caught up between the ISR's read and the log end offsets' (the lab: 6808, 4874, 2940, then 0 behind, still out of
    # the ISR in ZooKeeper): not "0 offsets behind ... in sync in about 0 s"
    done = R.classify([pt(0, 100, 1100, lag=1000), pt(10, 1200, 1200, lag=0)], 120)
    assert done.kind == R.CATCHING_UP and done.behind == 0 and done.eta_s == 0.0
    assert done.reason == "caught up: as far as its leader (1200) after catching up; it rejoins the ISR on its next fetch"
    slow = R.classify([pt(0, 100, 1100, lag=1000), pt(10, 200, 1300, lag=1100)], 120)
    assert slow.kind == R.CATCHING_UP and slow.eta_s is None and "not closing the gap" in slow.reason


def test_a_fetcher_that_cannot_fetch_is_not_the_followers_fault():
    v = R.classify([pt(0, 16, 100, lag=84), pt(200, 16, 300, lag=84)], 120)
    assert v.kind == R.NOT_PROGRESSING and "leader 1 unreachable" in v.reason


def test_no_jmx_is_unknown_never_catching_up():
    v = R.classify([pt(0, None, None, read=False), pt(300, None, None, read=False)], 120)
    assert v.kind == R.UNKNOWN and "could not be read (JMX)" in v.reason


def snapshot(t: float, follower_leo, leader_leo, lag=None) -> ClusterSnapshot:
    brokers = tuple(Broker(b, f"h{b}", 9092, registered_at=at(-3600), session_id=b) for b in (1, 2, 3))
    parts = (Partition("orders", 0, (3, 1, 2), 1, (1, 2), leader_epoch=4), Partition("orders", 1, (1, 2, 3), 1, (1, 2, 3)))
    m3 = {f"{REQUEST_QUEUE}:Value": 0.0, f"{log_end_offset('orders', 0)}:Value": follower_leo}
    if lag is not None:
        m3[f"{fetcher_lag(0, 1, 'orders', 0)}:Value"] = lag
    m1 = {f"{REQUEST_QUEUE}:Value": 0.0, f"{log_end_offset('orders', 0)}:Value": leader_leo}
    return ClusterSnapshot("lab", at(t), brokers, 1, parts,
                           request_metrics=(RequestMetrics(1, True, at(t), m1), RequestMetrics(3, True, at(t), m3)))


def test_the_detector_over_the_history_opens_an_incident_naming_the_follower():
    assert "follower_stuck" in OPENS_INCIDENT
    s0, s1 = snapshot(0, 16, 100), snapshot(150, 16, 400)
    assert R.jmx_names(s1) == {3: (log_end_offset("orders", 0), fetcher_lag(0, 1, "orders", 0)), 1: (log_end_offset("orders", 0),)}
    history = {R.REPLICAS: [Sample(s.taken_at, R.replica_sample(s)) for s in (s0, s1)]}
    (f,) = [f for f in detect(s1, history=history) if f.kind == "follower_stuck"]
    assert f.broker_ids == (3,) and f.partitions == ("orders-0",) and f.details["problem"] == "follower_stuck"
    assert "restart broker 3 through the engine" in f.summary and f.evidence[0].source == "history:replicas/3:orders-0"
    # the same broker catching up: info, with the estimate, no incident
    c0, c1 = snapshot(0, 100, 1100, lag=1000), snapshot(20, 700, 1200, lag=500)
    history = {R.REPLICAS: [Sample(s.taken_at, R.replica_sample(s)) for s in (c0, c1)]}
    found = {f.kind: f for f in detect(c1, history=history)}
    assert "follower_stuck" not in found and found["follower_catching_up"].details["eta_s"] == 20.0
    # back in the ISR: its episode ends, nothing is said
    healthy = ClusterSnapshot("lab", at(200), s1.brokers, 1, (Partition("orders", 0, (3, 1, 2), 1, (1, 2, 3)),))
    assert R.out_of_isr(healthy) == [] and R.replica_sample(healthy) == {}


# ---------------------------------------------------------------- the follower's own lines, in each version's words

REAL = Path(__file__).resolve().parents[1] / "analyze" / "fixtures"


def test_a_leader_and_isr_the_follower_failed_to_handle_counts_only_for_its_current_registration():
    """Real Kafka 2.3.0 (drill 003's broker 3, tests/analyze/fixtures/real23/drill003.broker3.server.log): its ZooKeeper
    session expired while it applied the controller's LeaderAndIsr ("Error when handling request: ... api=LEADER_AND_ISR"
    over a SessionExpiredException). The controller does not send a failed request again, but sends new ones for each
    new registration of the broker: the line is evidence while the request's broker epoch is the current registration."""
    lines = lines_of_interest((REAL / "real23/drill003.broker3.server.log").read_text(encoding="utf-8"), source="server.log")
    # the two UpdateMetadata refused with "Epoch 4294968040 larger than current broker epoch 4294968034" feed no fetcher
    (failed,) = [x for x in lines if x.what == "leader_and_isr_failed"]
    assert failed.attrs["request_broker_epoch"] == "4294968836" and failed.attrs["controller"] == "1"
    assert failed.attrs["cause"] == "org.apache.zookeeper.KeeperException$SessionExpiredException"
    followed = failed.attrs["partitions"].split(",")
    assert len(followed) == 59 and "orders-0" in followed and "__consumer_offsets-49" in followed
    assert "api=LEADER_AND_ISR (broker epoch 4294968836) / org.apache.zookeeper.KeeperException$SessionExpiredException" in failed.excerpt
    assert R.fence_lines_of(lines, 3, "orders-0", None, 4294968836) == [failed]
    # the same log: broker 3 registered again (czxid 4294968840, 4294968844): the controller sent that registration's
    # requests -- not evidence; nor when the registration is unknown
    assert R.fence_lines_of(lines, 3, "orders-0", None, 4294968840) == []
    assert R.fence_lines_of(lines, 3, "orders-0", None, None) == []
    assert R.fence_lines_of(lines, 3, "orders-9", None, 4294968836) == []  # not in that request
    # as far as its leader, its fetcher-lag gauge still there: stuck only with the line
    pts = [pt(0, 0, 0, lag=0.0), pt(300, 0, 0, lag=0.0)]
    v = R.classify(pts, 120, R.fence_lines_of(lines, 3, "orders-0", None, 4294968836))
    assert v.kind == R.STUCK and "leader_and_isr_failed" in v.reason
    assert R.classify(pts, 120, R.fence_lines_of(lines, 3, "orders-0", None, 4294968840)).kind == R.UNKNOWN


def test_the_stuck_finding_cites_the_failed_leader_and_isr_of_the_current_registration():
    lines = tuple(x for x in lines_of_interest((REAL / "real23/drill003.broker3.server.log").read_text(encoding="utf-8"))
                  if x.what == "leader_and_isr_failed")

    def found(registration: int) -> list:
        s0, s1 = snapshot(-530, 0, 0, lag=0.0), snapshot(-130, 0, 0, lag=0.0)  # 20:51:10, 20:57:50: the line is 20:51:36
        brokers = tuple(dataclasses.replace(b, registration_zxid=registration) if b.id == 3 else b for b in s1.brokers)
        s1 = dataclasses.replace(s1, brokers=brokers, probes=(HostProbe(3, True, log_lines=lines),))
        history = {R.REPLICAS: [Sample(s.taken_at, R.replica_sample(s)) for s in (s0, s1)]}
        return [f for f in detect(s1, history=history) if f.kind == "follower_stuck"]

    (f,) = found(4294968836)
    assert f.broker_ids == (3,) and any("api=LEADER_AND_ISR (broker epoch 4294968836)" in e.excerpt for e in f.evidence)
    assert found(4294968844) == []  # a later registration: no evidence, and a follower as far as its leader with its gauge is not called stuck


def test_0_10_ignoring_a_leader_and_isr_of_the_same_epoch_is_evidence_an_older_one_is_not():
    """0.10.2.1's WARN (ReplicaManager.becomeLeaderOrFollower, state-change.log) names the partition [topic,p] and both
    epochs: equal -- the follower keeps a state no fetcher serves; lower -- an old request, the newer state applied."""
    text = (REAL / "real0102/broker2.state-change.log.fence").read_text(encoding="utf-8")
    (x,) = [x for x in lines_of_interest(text, source="state-change.log", only=("leader_and_isr_ignored",))]
    assert x.attrs["partition_name"] == "orders-0" and x.attrs["epoch"] == "0" and x.attrs["controller"] == "1"
    assert x.at == "2026-11-25T12:28:52.661Z" and "is not higher than the current leader epoch 0" in x.excerpt
    assert R.fence_lines_of([x], 2, "orders-0", None) == [x]
    v = R.classify([pt(0, 0, 0, lag=0.0), pt(300, 0, 0, lag=0.0)], 120, [x])
    assert v.kind == R.STUCK and "leader_and_isr_ignored" in v.reason
    # built from the source's format (no real line of a lower epoch recorded): the request's epoch 1 < the current 2
    older = ("[2026-11-25 12:00:00,000] WARN Broker 1 ignoring LeaderAndIsr request from controller 3 with correlation id 9 "
             "epoch 1 for partition [orders,0] since its associated leader epoch 1 is not higher than the current leader "
             "epoch 2 (state.change.logger)\n")
    assert lines_of_interest(older, source="state-change.log") == []
