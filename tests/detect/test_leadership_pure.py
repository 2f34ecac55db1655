"""Issue 7's detectors on hand-built snapshots and histories (pure): Kafka's imbalance rule, the automatic-rebalance
hazard, the election storm, metadata divergence, request saturation, connection storms, JmxTool's answer and the
controller's log lines -- each wired into the health check's ``detect``."""

import dataclasses
import datetime as dt

from kafka_runbooks import clock
from kafka_runbooks.config import LeadershipSettings
from kafka_runbooks.detect.controller_log import controller_events
from kafka_runbooks.detect.detectors import OPENS_INCIDENT, detect
from kafka_runbooks.detect.history import Sample, broker_series
from kafka_runbooks.host.jmxtool import FAILED_PRODUCE, REQUEST_QUEUE, request_metric
from kafka_runbooks.detect.leadership import RUNBOOK, imbalance
from kafka_runbooks.detect.leadership_state import LEADERSHIP, leadership_sample
from kafka_runbooks.model import Broker, CanaryResult, MetadataView, RequestMetrics
from snapshot_builders import P, snap

NOW = "2024-01-01T00:00:00Z"


def at(seconds_before: float) -> str:
    return clock.iso(clock.parse(NOW) - dt.timedelta(seconds=seconds_before))


def kinds(findings):
    return [f.kind for f in findings]


def of(findings, kind):
    return [f for f in findings if f.kind == kind]


def brokers(registered_3=None, session_3=0x33):
    return tuple(Broker(b, f"kafka{b}", 9092, registered_at=registered_3 if b == 3 else at(86400),
                        session_id=session_3 if b == 3 else b) for b in (1, 2, 3))


def parts(leaders_of_3=1, isr3=True, n=4):
    """Four partitions preferring broker 3 (led by ``leaders_of_3``), four preferring 1 (led by 1)."""
    out = [P("orders", i, (3, 1, 2), leaders_of_3, (3, 1, 2) if isr3 else (1, 2)) for i in range(n)]
    out += [P("orders", n + i, (1, 2, 3), 1, (1, 2, 3)) for i in range(n)]
    return out


def settings_static(on: str | None = "true", **more):
    cfg = {} if on is None else {"auto.leader.rebalance.enable": on}
    cfg.update(more)
    return {str(b): dict(cfg) for b in (1, 2, 3)}


# --------------------------------------------------------------------------- imbalance

def test_imbalance_follows_kafkas_rule_and_threshold():
    s = snap(parts(leaders_of_3=1), static_configs=settings_static("false"))
    table = imbalance(s)
    assert table[3]["preferred"] == 4 and len(table[3]["not_led"]) == 4 and table[3]["ratio"] == 1.0
    assert table[1]["ratio"] == 0.0
    found = of(detect(s), "leadership_imbalance")
    assert [f.broker_ids for f in found] == [(3,)]
    assert "kafka_preferred_election" in found[0].summary and found[0].details["runbook"] == RUNBOOK
    # 1 of 4 not led is 25 %: above 10 % but below a 30 % setting
    one_off = [P("orders", 0, (3, 1, 2), 1, (3, 1, 2))] + [P("orders", i, (3, 1, 2), 3, (3, 1, 2)) for i in range(1, 4)]
    assert of(detect(snap(one_off)), "leadership_imbalance")
    assert not of(detect(snap(one_off, static_configs=settings_static("false", **{"leader.imbalance.per.broker.percentage": "30"}))),
                  "leadership_imbalance")


def test_balanced_cluster_has_no_leadership_findings():
    s = snap(parts(leaders_of_3=3), brokers=(1, 2, 3), static_configs=settings_static("true"))
    assert not [f for f in detect(s) if f.details.get("problem") == "leadership"]


# --------------------------------------------------------------------------- the hazard

def test_hazard_when_rebalance_on_and_broker_3_just_returned_not_in_isr():
    s = snap(parts(leaders_of_3=1, isr3=False), static_configs=settings_static("true"))
    s = dataclasses.replace(s, brokers=brokers(registered_3=at(60)))
    found = of(detect(s), "rebalance_hazard")
    assert len(found) == 1 and found[0].broker_ids == (3,)
    f = found[0]
    assert "not in the ISR of 4" in f.summary and "auto.leader.rebalance.enable=false" in f.summary
    assert f.details["config_change"]["set"] == {"auto.leader.rebalance.enable": "false"}
    assert any(e.source == "zookeeper:/brokers/ids/3" for e in f.evidence)


def test_no_hazard_when_rebalance_off_or_unknown_or_nobody_returned():
    base = snap(parts(leaders_of_3=1, isr3=False))
    fresh = brokers(registered_3=at(60))
    off = dataclasses.replace(base, brokers=fresh, static_configs=settings_static("false"))
    unknown = dataclasses.replace(base, brokers=fresh)  # server.properties not read: nothing claimed
    old = dataclasses.replace(base, brokers=brokers(registered_3=at(86400)), static_configs=settings_static("true"))
    for s in (off, unknown):
        assert not of(detect(s), "rebalance_hazard")
    # registered a day ago, a single session: not returning (the ISR gap alone is isr's finding, not this one)
    assert not of(detect(old), "rebalance_hazard")


def test_default_true_when_server_properties_read_without_the_key():
    s = snap(parts(leaders_of_3=1, isr3=False), static_configs=settings_static(None, **{"num.io.threads": "8"}))
    s = dataclasses.replace(s, brokers=brokers(registered_3=at(60)))
    f = of(detect(s), "rebalance_hazard")[0]
    assert "Kafka's default, true" in f.details["auto_rebalance_source"]


def test_flapping_sessions_in_history_are_the_hazard_too():
    s = snap(parts(leaders_of_3=3), static_configs=settings_static("true"))
    s = dataclasses.replace(s, brokers=brokers(registered_3=at(3600), session_3=0x35))
    history = {broker_series(3): [Sample(at(600), {"session_id": 0x33, "registered_at": at(700)}),
                                  Sample(at(300), {"session_id": 0x34, "registered_at": at(320)}),
                                  Sample(NOW, {"session_id": 0x35})]}
    f = of(detect(s, history=history), "rebalance_hazard")
    assert len(f) == 1 and len(f[0].details["sessions"]) == 3
    assert any(e.source == "history:broker-3/session_id" for e in f[0].evidence)


# --------------------------------------------------------------------------- storm and divergence

def _leader_history(moves):
    """moves: [(seconds before, leader before, epoch before, leader after, epoch after)] of orders-0."""
    return {LEADERSHIP: [Sample(at(t), {"changes": {"orders-0": [a, b, c, d]}}) for t, a, b, c, d in moves]}


def test_election_storm_from_epoch_churn_and_canary_not_leader():
    s = snap(parts(leaders_of_3=3),
             canary=(CanaryResult(3, "canary", 0, ok=False, error_code="NOT_LEADER_FOR_PARTITION", at=NOW),))
    h = _leader_history([(900, 1, 426, 3, 427), (600, 3, 427, 1, 428), (300, 1, 428, 3, 429)])
    f = of(detect(s, history=h), "election_storm")
    assert len(f) == 1 and f[0].severity.value == "critical" and f[0].partitions[0] == "orders-0"
    assert "3@427 (unexplained) -> 1@428 (unexplained) -> 3@429 (unexplained)" in f[0].summary
    assert f[0].details["canary_not_leader"] == [3]
    assert "election_storm" in OPENS_INCIDENT
    # the same churn older than the window is no storm; two changes are below storm_epoch_changes
    assert not of(detect(s, history=_leader_history([(4000, 1, 426, 3, 427), (3900, 3, 427, 1, 428), (3800, 1, 428, 3, 429)])),
                  "election_storm")
    assert not of(detect(snap(parts(3)), history=_leader_history([(600, 3, 427, 1, 428), (300, 1, 428, 3, 429)])),
                  "election_storm")


def _checks_with(moves, sessions=None, every=60, oldest=1800):
    """A leadership sample every ``every`` s from ``oldest`` s ago (default: the last 30 min; the moves at theirs), and
    each broker's series with its session per check (``sessions``: {broker: [(seconds before, session or None when
    unregistered)]})."""
    times = list(range(oldest, -1, -every))
    h = {LEADERSHIP: [Sample(at(t), {"changes": {"orders-0": [a, b, c, d] for tt, a, b, c, d in moves if tt == t}}) for t in times]}
    for b in (1, 2, 3):
        changes = sorted((sessions or {}).get(b, []), reverse=True)
        series = []
        for t in times:
            sid = b
            for tt, v in changes:
                if t <= tt:
                    sid = v
            series.append(Sample(at(t), {"registered": sid is not None, "session_id": sid}))
        h[broker_series(b)] = series
    return h


def test_moves_of_a_roll_a_controlled_shutdown_or_failovers_are_no_storm():
    """Issue 16 §3: after the product's own roll every check called it a storm ("79 partitions changed leader 3+ times in
    30 min"), and two real failovers four minutes apart opened an incident. Each old leader re-registered (a new
    session) or deregistered around its move: those moves are explained; epoch-only changes are ISR changes."""
    s = snap(parts(leaders_of_3=3))
    roll = [(1500, 1, 5, 2, 6), (1200, 2, 6, 3, 7), (900, 3, 7, 1, 8), (600, 1, 8, 1, 9), (300, 1, 9, 1, 10)]
    h = _checks_with(roll, {1: [(1500, 11)], 2: [(1200, 22)], 3: [(900, None), (840, 33)]})
    assert not of(detect(s, history=h), "election_storm")
    failovers = [(600, 1, 5, 2, 6), (360, 2, 6, 3, 7)]  # two failovers four minutes apart
    assert not of(detect(s, history=_checks_with(failovers, {1: [(600, None)], 2: [(360, None)]})), "election_storm")
    # the same moves with no broker's session changing and nothing else explaining them: a storm
    bare = of(detect(s, history=_checks_with(roll[:3] + [(600, 1, 8, 2, 9)])), "election_storm")
    assert bare and bare[0].details["partitions"]["orders-0"]["why"] == ["unexplained"] * 4


def test_a_failover_in_the_first_check_of_the_window_is_still_a_failover():
    """The window's first check holds the moves since the check before it, which has aged out of the window: that check
    is still the one to compare with. (Before: a failover there was "unexplained", one counted move for as long as it
    stayed the window's first check -- with two more unexplained moves, a storm.)"""
    s = snap(parts(leaders_of_3=3))
    moves = [(1800, 3, 5, 1, 6), (1200, 1, 6, 3, 7), (600, 3, 7, 1, 8)]  # broker 3's failover 30 min ago, then two moves
    h = _checks_with(moves, {3: [(1800, None), (1740, 33)]}, every=120, oldest=2400)
    assert [x.at for x in h[LEADERSHIP]][:6:5] == [at(2400), at(1800)]  # the check before the failover: out of the window
    assert not of(detect(s, history=h), "election_storm")
    # the same moves with broker 3's session unchanged: three unexplained moves, a storm
    (f,) = of(detect(s, history=_checks_with(moves, every=120, oldest=2400)), "election_storm")
    assert f.details["partitions"]["orders-0"]["why"] == ["unexplained"] * 3


def test_moves_inside_the_products_own_plan_are_no_storm_and_its_findings_are_annotated():
    from kafka_runbooks.detect.activity import Activity

    s = snap(parts(leaders_of_3=3))
    moves = [(1500, 1, 5, 2, 6), (1200, 2, 6, 3, 7), (900, 3, 7, 1, 8), (600, 1, 8, 3, 9)]
    h = _checks_with(moves)
    roll = Activity("lab-roll-1", "rolling_restart", (1, 2, 3), started=at(1560), ended=at(560), run="manual__1")
    assert of(detect(s, history=h), "election_storm")
    f = detect(s, history=h, activity=[roll])
    assert not of(f, "election_storm")
    # a running plan: its brokers' findings are annotated, and leadership findings of any running plan
    running = Activity("lab-roll-2", "rolling_restart", (3,), started=at(100), ended=None, run="manual__2", holds_lock=True)
    found = detect(s, history=h, activity=[running])
    storm = of(found, "election_storm")[0]  # moves before the plan started still count
    assert storm.details["during_plan"][0]["record"] == "lab-roll-2" and "during the product's own rolling_restart" in storm.summary


def test_storm_cites_automatic_elections_from_the_controller_log():
    log = ("[2024-01-01 23:55:00,000] INFO [Controller id=1] Processing automatic preferred replica leader election "
           "(kafka.controller.KafkaController)\n"
           "[2024-01-01 23:55:00,500] INFO [Controller id=1] Starting preferred replica leader election for partitions "
           "orders-0,orders-1 (kafka.controller.KafkaController)\n"
           "[2024-01-01 23:56:00,000] INFO [Controller id=1] Starting preferred replica leader election for partitions "
           "orders-2 (kafka.controller.KafkaController)\n"
           "[2024-01-01 23:57:00,000] WARN [Controller id=1] Partition orders-0 failed to complete preferred replica leader "
           "election to 3. Leader is still 1 (kafka.controller.KafkaController)\n")
    events = controller_events(log, broker_id=1)
    assert [(e.what, e.attrs.get("automatic")) for e in events] == [
        ("auto_preferred_election", None), ("preferred_election", "true"), ("preferred_election", "false"),
        ("preferred_election_failed", None)]
    assert events[1].attrs["partitions"] == "orders-0,orders-1" and events[1].line_no == 2
    s = dataclasses.replace(snap(parts(3), controller_log=tuple(events)), taken_at="2024-01-02T00:00:00Z")
    h = {LEADERSHIP: [Sample(t, {"changes": {"orders-0": [a, b, c, d]}}) for t, a, b, c, d in
                      (("2024-01-01T23:50:00Z", 1, 1, 3, 2), ("2024-01-01T23:52:00Z", 3, 2, 1, 3), ("2024-01-01T23:55:01Z", 1, 3, 3, 4))]}
    f = of(detect(s, history=h), "election_storm")[0]
    assert f.details["automatic_elections_count"] == 1 and f.details["failed_elections"] == 1
    assert any(e.lines == (2,) for e in f.evidence)



def test_0_10s_automatic_rebalance_elects_one_partition_a_line_and_every_line_is_automatic():
    """Kafka 0.10.2.1's own controller.log (tests/analyze/fixtures/real0102/broker1.controller.log.rebalance, drill 003):
    the imbalance check at TRACE, then one "Starting preferred replica leader election" line per partition over 2.1 s.
    Each pairs with the check or the automatic line before it; a lone election later is manual."""
    from pathlib import Path

    text = (Path(__file__).parents[1] / "analyze" / "fixtures" / "real0102" / "broker1.controller.log.rebalance").read_text()
    events = [e for e in controller_events(text, broker_id=1) if e.what == "preferred_election"]
    assert len(events) == 20 and events[-1].at == "2026-11-25T12:54:22.480Z"
    assert {(e.attrs["automatic"], e.attrs["controller"]) for e in events} == {("true", "1")}
    assert events[0].attrs["partitions"] == "__consumer_offsets-19"
    later = text + ("[2026-11-25 12:54:26,000] INFO [Controller 1]: Starting preferred replica leader election for partitions "
                    "[orders,1] (kafka.controller.KafkaController)\n")
    assert [e.attrs["automatic"] for e in controller_events(later) if e.what == "preferred_election"][-1] == "false"

def _views(stale_leader=1, stale_epoch=426):
    return (MetadataView(1, "kafka1:9092", True, NOW, {"orders-0": (3, 435)}),
            MetadataView(2, "kafka2:9092", True, NOW, {"orders-0": (3, 435)}),
            MetadataView(3, "kafka3:9092", True, NOW, {"orders-0": (stale_leader, stale_epoch)}))


def test_metadata_divergence_table_and_since_when():
    p0 = P("orders", 0, (3, 1, 2), 3, (3, 1, 2))
    p0 = dataclasses.replace(p0, leader_epoch=435)
    s = snap([p0], metadata_views=_views())
    # the history: agreed 5 min ago, diverged since 2 min ago
    previous = {LEADERSHIP: [Sample(at(300), {"diverged": {}}),
                             Sample(at(120), {"diverged": {"orders-0": {"zk": [3, 433], "views": {"1": [3, 433], "2": [3, 433], "3": [1, 426]}}}}),
                             Sample(at(60), {"diverged": {"orders-0": {"zk": [3, 435], "views": {"1": [3, 435], "2": [3, 435], "3": [1, 426]}}}})]}
    f = of(detect(s, history=previous), "metadata_divergence")
    assert len(f) == 1 and f[0].broker_ids == (3,) and f[0].severity.value == "critical"
    assert f[0].details["since"] == at(120) and f[0].details["lasted_s"] == 120.0
    table = f[0].details["table"]
    assert table["columns"] == "time | ZooKeeper leader@epoch | broker 1 | broker 2 | broker 3"
    assert [r["zk"] for r in table["rows"]] == [[3, 433], [3, 435], [3, 435]]
    assert "broker 3 says 1@426" in f[0].summary
    # a broker that has not heard of the partition diverges too; all agreeing is no finding
    assert of(detect(snap([p0], metadata_views=(MetadataView(3, "kafka3:9092", True, NOW, {}),))), "metadata_divergence")
    assert not of(detect(snap([p0], metadata_views=_views(3, 435))), "metadata_divergence")
    # failed views are not taken as disagreement
    assert not of(detect(snap([p0], metadata_views=(MetadataView(3, "kafka3:9092", False, NOW, error="timeout"),))),
                  "metadata_divergence")


def test_leadership_sample_records_only_changes_and_the_divergence():
    s1 = dataclasses.replace(snap([P("orders", 0, (3, 1, 2), 1, (1, 2))]), taken_at=at(60))
    sample, state = leadership_sample({}, s1)
    assert sample.values["changes"] == {} and state["partitions"] == {"orders-0": [1, 0]}
    p = P("orders", 0, (3, 1, 2), 3, (3, 1, 2))
    s2 = snap([dataclasses.replace(p, leader_epoch=1)], metadata_views=_views(1, 0))
    sample, state = leadership_sample(state, s2)
    assert sample.values["changes"] == {"orders-0": [1, 0, 3, 1]}
    assert set(sample.values["diverged"]) == {"orders-0"}


# --------------------------------------------------------------------------- request path

def _metrics(queue=0.0, p99=1.0, failed=0.0):
    return RequestMetrics(3, True, NOW, {f"{REQUEST_QUEUE}:Value": queue,
                                         f"{request_metric('RequestQueueTimeMs', 'Produce')}:99thPercentile": p99,
                                         f"{FAILED_PRODUCE}:OneMinuteRate": failed})


def test_request_saturation_against_queued_max_requests_with_the_kip291_note():
    s = snap(parts(3), request_metrics=(_metrics(queue=450),))
    f = of(detect(s, kafka_version="1.1.0"), "request_queue_saturated")
    assert len(f) == 1 and "450 of queued.max.requests 500" in f[0].summary and "KIP-291" in f[0].details["kip_291"]
    assert f[0].details["runbook"] == RUNBOOK
    # raised queued.max.requests: 450 of 2000 is no saturation
    assert not of(detect(snap(parts(3), request_metrics=(_metrics(queue=450),),
                              static_configs={"3": {"queued.max.requests": "2000"}})), "request_queue_saturated")
    # queue-time histograms alone (a broker that hung earlier keeps its p99s for minutes) are no saturation ...
    assert not of(detect(snap(parts(3), request_metrics=(_metrics(p99=40735),))), "request_queue_saturated")
    # ... they are cited with a full queue
    slow = of(detect(snap(parts(3), request_metrics=(_metrics(queue=480, p99=2500),))), "request_queue_saturated")
    assert slow and "Produce RequestQueueTimeMs p99 2500 ms" in slow[0].summary
    failing = of(detect(snap(parts(3), request_metrics=(_metrics(failed=3.5),))), "requests_failing")
    assert failing and "failed produce requests 3.50/s" in failing[0].summary
    assert not [f for f in detect(snap(parts(3), request_metrics=(_metrics(),))) if f.kind in ("request_queue_saturated", "requests_failing")]


def test_connection_storm_against_the_brokers_own_median():
    def hist(values):
        return {broker_series(3): [Sample(at(60 * (len(values) - i)), {"established": v}) for i, v in enumerate(values)]}

    s = snap(parts(3))
    f = of(detect(s, history=hist([100, 110, 105, 120, 400])), "connection_storm")
    assert len(f) == 1 and f[0].details["median"] == 107.5 and f[0].details["established"] == 400
    assert not of(detect(s, history=hist([100, 110, 105, 120, 150])), "connection_storm")  # not 2x
    assert not of(detect(s, history=hist([10, 12, 11, 60])), "connection_storm")  # below connection_min
    assert not of(detect(s, history=hist([100, 400])), "connection_storm")  # too little history


def test_leadership_settings_reach_the_detectors():
    s = snap(parts(leaders_of_3=1, isr3=False), static_configs=settings_static("true"))
    s = dataclasses.replace(s, brokers=brokers(registered_3=at(600)))
    assert of(detect(s), "rebalance_hazard")
    assert not of(detect(s, leadership=LeadershipSettings(returned_s=300.0)), "rebalance_hazard")


def test_a_broker_that_just_registered_gets_one_check_to_learn_the_leaders():
    p0 = P("orders", 0, (3, 1, 2), 1, (3, 1, 2))
    views = tuple(MetadataView(b, f"kafka{b}:9092", True, NOW, {"orders-0": (2 if b == 3 else 1, 0)}) for b in (1, 2, 3))
    s = snap([p0], metadata_views=views)
    s = dataclasses.replace(s, brokers=brokers(registered_3=at(10)))
    assert not of(detect(s), "metadata_divergence")  # first check after its start: not yet
    earlier = {LEADERSHIP: [Sample(at(30), {"diverged": {"orders-0": {"zk": [1, 0], "views": {"3": [2, 0]}}}})]}
    assert of(detect(s, history=earlier), "metadata_divergence")  # still diverging at the next check: reported
    old = dataclasses.replace(s, brokers=brokers(registered_3=at(3600)))
    assert of(detect(old), "metadata_divergence")  # a broker up for an hour: reported at once


def test_automatic_elections_between_two_checks_count_even_when_the_leader_looks_unchanged():
    """With a check every few minutes, a flap (away) and the controller's automatic election (back) fall between two
    checks: the leader is the same at both, the epoch two higher. The controller's lines say what happened."""
    line = ("[{t}] INFO [Controller id=1] Processing automatic preferred replica leader election (kafka.controller.KafkaController)\n"
            "[{t2}] INFO [Controller id=1] Starting preferred replica leader election for partitions orders-0 (kafka.controller.KafkaController)\n")
    times = ["23:51:00", "23:54:00", "23:57:00"]
    log = "".join(line.format(t=f"2024-01-01 {x},000", t2=f"2024-01-01 {x},500") for x in times)
    s = dataclasses.replace(snap(parts(3), controller_log=tuple(controller_events(log, broker_id=1))), taken_at="2024-01-02T00:00:00Z")
    h = {LEADERSHIP: [Sample(t, {"changes": ch}) for t, ch in (("2024-01-01T23:50:00Z", {}),
                                                               ("2024-01-01T23:55:00Z", {"orders-0": [3, 4, 3, 6]}),
                                                               ("2024-01-01T23:58:00Z", {"orders-0": [3, 6, 3, 8]}))]}
    (f,) = of(detect(s, history=h), "election_storm")
    assert f.details["partitions"]["orders-0"]["changes"] == 3
    assert f.details["partitions"]["orders-0"]["why"] == ["epoch (2 automatic election(s) between the checks)",
                                                          "epoch (1 automatic election(s) between the checks)"]
    quiet = dataclasses.replace(s, controller_log=())  # the same epochs without automatic elections: ISR changes
    assert not of(detect(quiet, history=h), "election_storm")


def test_the_products_preferred_election_explains_only_moves_onto_the_preferred_replica():
    """Seen on the lab (test_storm_and_catchup_lab): broker 3 crashed 19 s before the product's election started, within
    the election's slack; its move away was called the election's. A preferred election moves a leadership only onto
    the preferred replica: the move away is the failover, the move back the election's."""
    from kafka_runbooks.detect import leadership as L
    from kafka_runbooks.detect.activity import Activity
    from kafka_runbooks.detect.context import Context

    s = snap(parts(leaders_of_3=3))
    moves = [(900, 3, 5, 1, 6), (840, 1, 6, 3, 7)]  # orders-0 prefers 3: away at the crash, back by the election
    h = _checks_with(moves, {3: [(900, None), (880, 33)]}, every=60, oldest=1200)
    election = Activity("lab-el-1", "preferred_election", (3,), started=at(881), ended=at(850), run="manual__1")
    ctx = Context(snapshot=s, history=h, activity=(election,))
    samples = L._leadership_samples(ctx, ctx.leadership.window_s)
    previous = {smp.at: prev.at for prev, smp in zip(samples, samples[1:])}
    whys = [L.why_moved(ctx, "orders-0", m, previous.get(m[0]))[0] for m in L.epoch_churn(samples)["orders-0"]]
    assert whys == ["failover", "plan preferred_election lab-el-1"], whys
    # a rolling restart explains a move either way
    roll = dataclasses.replace(election, kind="rolling_restart")
    ctx = Context(snapshot=s, history=h, activity=(roll,))
    assert [L.why_moved(ctx, "orders-0", m, previous.get(m[0]))[0] for m in L.epoch_churn(samples)["orders-0"]] == \
        ["plan rolling_restart lab-el-1"] * 2
