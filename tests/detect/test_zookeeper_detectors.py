"""ZooKeeper detectors (incident 004), pure: replayed on health checks recorded from the lab's real ZooKeeper
3.8 ensemble around a follower stalled past syncLimit x tickTime, and on the seed's own numbers and lines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from kafka_runbooks.config import HealthSettings, ZooKeeperHealthSettings
from kafka_runbooks.detect import zk_text
from kafka_runbooks.detect.detectors import detect
from kafka_runbooks.detect.history import Sample, zookeeper_samples
from kafka_runbooks.detect.zk_probe import Member, probe_from_words
from kafka_runbooks.incidents.lifecycle import link, step, streak_key
from kafka_runbooks.model import ClusterSnapshot, LogLineSeen, Severity

from detect_builders import at, snapshot

FIXTURES = Path(__file__).parent / "fixtures"
ZK = ZooKeeperHealthSettings(drop_window_s=300)


def replay(name="zk_stall", settings=ZK):
    rec = json.loads((FIXTURES / f"recorded_{name}.json").read_text())
    history = {k: [Sample.from_dict(x) for x in v] for k, v in rec["history"].items()}
    out = []
    for raw in rec["snapshots"]:
        snap = ClusterSnapshot.from_dict(raw)
        upto = {k: [s for s in v if s.at <= snap.taken_at] for k, v in history.items()}
        out.append((snap, detect(snap, HealthSettings(), upto, settings)))
    return rec["fault"], out


def zk_kinds(findings):
    return [(f.kind, f.details.get("subject")) for f in findings if f.kind.startswith("zookeeper")]


def test_recorded_stall_not_serving_then_dropped_and_only_that_server():
    fault, checks = replay()
    stalled = str(fault["zk"])
    # the recording's zk1 had already dropped once, at 15:54:52, 38 s before the first check (its log, the leader's
    # "closing socket to learner 1", election count 2, its ZooKeeperServer 35 s old against the leader's 93 s): no
    # check ran during that one, and the first check finds it after the fact (issue 16 §2)
    for snap, findings in checks[:2]:
        assert zk_kinds(findings) == [("zookeeper_follower_dropped", stalled)]
        (f,) = [f for f in findings if f.kind == "zookeeper_follower_dropped"]
        drop = f.details["drops"][0]
        assert drop["at"] == "2026-11-22T15:54:52.188Z" and drop["rejoined_at"].startswith("2026-11-22T15:54:5")
        assert "after the fact" not in f.summary and "the leader kept leading" in f.summary and "election count is 2" in f.summary
    during = checks[2]
    assert zk_kinds(during[1]) == [("zookeeper_server_not_serving", stalled)]
    after = [zk_kinds(fs) for _, fs in checks[3:]]
    assert all(k == [("zookeeper_follower_dropped", stalled)] for k in after), after


def test_recorded_drop_is_explained_with_its_real_evidence():
    fault, checks = replay()
    snap, findings = checks[-1]
    (f,) = [f for f in findings if f.kind == "zookeeper_follower_dropped"]
    assert f.severity is Severity.WARNING and f.broker_ids == ()
    d = f.details
    assert d["problem"] == "zookeeper_member" and d["subject"] == str(fault["zk"]) and d["zone"] == "lab-zone-a"
    assert d["no_ensemble_election"] is True and len(d["epochs"]) == 1
    # syncLimit x tickTime read from the server's own zoo.cfg over SSH, with the arithmetic shown
    assert d["sync_timeout"]["arithmetic"] == "syncLimit 5 x tickTime 500 ms = 2500 ms"
    assert fault["seconds"] * 1000 > d["sync_timeout"]["sync_timeout_ms"]
    (drop,) = d["drops"]
    assert drop["server"] == str(fault["zk"]) and drop["zone"] == "lab-zone-a" and drop["election_took_ms"] is not None
    # it was out between the leader dropping it and its ZooKeeperServer starting again; the stall was longer
    assert 0 < drop["duration_ms"] <= fault["seconds"] * 1000
    assert drop["at"] < drop["rejoined_at"]
    assert any("uptime" in sig or "not serving" in sig for sig in drop["signals"])
    # the leader's lines about this learner and the follower's own, cited with line numbers
    sources = {e.source for e in f.evidence}
    assert any(s.endswith("/zookeeper.log") and s.startswith(f"probe:zookeeper/{fault['zk']}/") for s in sources)
    excerpts = "\n".join(e.excerpt for e in f.evidence)
    assert "Exception when following the leader" in excerpts and "LEADER ELECTION TOOK" in excerpts
    assert f"Synchronously closing socket to learner {fault['zk']}." in excerpts
    assert any(e.source.startswith("history:zookeeper-") and "uptime_ms" in e.source for e in f.evidence)
    assert "syncLimit 5 x tickTime 500 ms = 2500 ms" in f.summary and "did not elect" in f.summary


def test_the_drop_is_one_streak_and_one_incident_after_two_checks():
    _, checks = replay()
    state, opened, incidents = {}, [], {}
    for snap, findings in checks:
        state, actions = step(state, findings, incidents, set(), HealthSettings(consecutive_checks=2), snap.taken_at)
        for a in actions:
            if a.kind == "open":
                opened.append(a)
                incidents["i1"] = {"id": "i1", "status": "needs_person", "trigger": a.finding.to_dict(), "broker_ids": []}
                state = link(state, a.key, "i1")
    assert len(opened) == 1 and opened[0].finding.kind == "zookeeper_follower_dropped"
    assert streak_key(opened[0].finding) == "zookeeper_member:@1"
    # the stalled check ("not serving") and the drops after it are one problem of one server: one streak
    assert list(state["streaks"]) == ["zookeeper_member:@1"]


def test_a_drop_is_reported_at_the_check_that_sees_it_and_for_the_window_after():
    fault, checks = replay(settings=ZooKeeperHealthSettings(drop_window_s=1))
    seen = [[f.kind for f in fs if f.kind == "zookeeper_follower_dropped"] for _, fs in checks]
    assert seen[3] == ["zookeeper_follower_dropped"] and not any(seen[4:]), seen


# ------------------------------------------------------------------ the seed's numbers and lines

SEED_SRVR = "Zookeeper version: 3.6.3\nLatency min/avg/max: 0/1.2/80\nReceived: {rx}\nSent: {tx}\nConnections: {c}\nOutstanding: 0\nZxid: 0x5c10c6626f\nMode: {mode}\nNode count: 5000\n"
SEED_MNTR = "zk_version\t3.6.3\nzk_server_state\t{mode}\nzk_num_alive_connections\t{c}\nzk_packets_received\t{rx}\nzk_packets_sent\t{tx}\nzk_uptime\t{up}\nzk_cnt_election_time\t{el}\n"


def seed_probe(server, mode, conns, rx, up, el, lines=(), taken=0.0):
    words = {"srvr": SEED_SRVR.format(rx=rx, tx=rx, c=conns + 1, mode=mode),
             "mntr": SEED_MNTR.format(rx=rx, tx=rx, c=conns + 1, mode=mode, up=up, el=el), "cons": ""}
    p = probe_from_words(Member(server, f"10.14.6.{server}", 2181, zone="az-2" if server == "13" else "az-1"), words, at(taken))
    return dataclasses.replace(p, tick_time_ms=2000, sync_limit=5, init_limit=10, load_1m=0.4, cpus=8, log_lines=tuple(lines))


def seed_lines(name, server):
    return [LogLineSeen(x.what, x.at.isoformat().replace("+00:00", "Z"), x.line_no, x.excerpt, x.attrs, "zookeeper.log")
            for x in zk_text.log_lines((FIXTURES / name).read_text())]


def seed_history(n_before=4, n_after=3, shift_lines_to=None):
    """Follower 13 serves ~1200 clients, drops out and rejoins with single-digit connections; leader 37 unchanged."""
    snaps = []
    follower_lines = seed_lines("seed004_zk13_follower.log", "13")
    leader_lines = seed_lines("seed004_zk37_leader.log", "37")
    if shift_lines_to is not None:  # the seed's lines moved to the drop's time in this synthetic history
        import datetime as dt

        from kafka_runbooks import clock

        delta = clock.parse(shift_lines_to) - clock.parse(leader_lines[0].at)
        move = lambda xs: [dataclasses.replace(x, at=clock.iso(clock.parse(x.at) + delta)) for x in xs]  # noqa: E731
        follower_lines, leader_lines = move(follower_lines), move(leader_lines)
    for i in range(n_before + n_after):
        t = -30.0 * (n_before + n_after - 1 - i)
        after = i >= n_before
        z13 = seed_probe("13", "follower", 3 if after else 1200 + i, 2 + i if after else 900_000 + i * 1000,
                         5_000 + 30_000 * (i - n_before) if after else 316_796_607 + 30_000 * i, 2 if after else 1,
                         follower_lines if after else (), t)
        z37 = seed_probe("37", "leader", 1100, 2_000_000 + i, 400_000_000 + 30_000 * i, 1, leader_lines if after else (), t)
        z14 = seed_probe("14", "follower", 1150 + (600 if after else 0), 1_500_000 + i, 400_000_000 + 30_000 * i, 1, (), t)
        snaps.append(dataclasses.replace(snapshot(taken=t), zookeeper=(z13, z14, z37)))
    history: dict[str, list[Sample]] = {}
    for s in snaps:
        for k, v in zookeeper_samples(s).items():
            history.setdefault(k, []).append(v)
    return snaps, history


def test_seed_004_pattern_connections_drop_to_single_digits_and_stay():
    snaps, history = seed_history()
    drop_time = snaps[4].taken_at
    snaps, history = seed_history(shift_lines_to=snaps[3].taken_at)
    findings = detect(snaps[-1], HealthSettings(), history, ZooKeeperHealthSettings())
    (f,) = [f for f in findings if f.kind == "zookeeper_follower_dropped"]
    d = f.details
    assert d["subject"] == "13" and d["zone"] == "az-2" and d["no_ensemble_election"] is True
    assert d["connections"]["stayed_low"] is True and d["connections"]["median_before"] > 1000
    assert [c for _, c in d["connections"]["after"]] == [3, 3, 3]
    assert "fell from" in f.summary and "stayed there" in f.summary
    assert d["sync_timeout"]["arithmetic"] == "syncLimit 5 x tickTime 2000 ms = 10000 ms"
    # the seed's own lines: Connection reset, looking, 104 MS; the leader's transaction timeout and learner 13
    assert "java.net.SocketException: Connection reset" in f.summary and "104 MS" in f.summary
    assert "Synchronously closing socket to learner 13." in "\n".join(e.excerpt for e in f.evidence)
    assert any("transaction timeout" in e.excerpt for e in f.evidence)
    assert d["drops"][0]["election_took_ms"] == 104 and drop_time
    # the other members are not accused
    assert {x.details.get("subject") for x in findings if x.kind.startswith("zookeeper")} == {"13"}


def test_a_process_restart_is_not_a_drop():
    snaps, _ = seed_history()
    history: dict[str, list[Sample]] = {}
    for i, s in enumerate(snaps):
        zs = tuple(dataclasses.replace(z, pid=100 if i < 4 else 200, elections=1 if i < 4 else 1, host_reachable=True)
                   if z.server == "13" else z for z in s.zookeeper)
        snaps[i] = dataclasses.replace(s, zookeeper=zs)
        for k, v in zookeeper_samples(snaps[i]).items():
            history.setdefault(k, []).append(v)
    findings = detect(snaps[-1], HealthSettings(), history, ZooKeeperHealthSettings())
    assert [f.kind for f in findings if f.kind.startswith("zookeeper")] == ["zookeeper_server_restarted"]
    assert findings[-1].severity is Severity.INFO


def test_an_election_of_the_whole_ensemble_is_said_so():
    snaps, history = seed_history()
    last = snaps[-1]
    moved = tuple(dataclasses.replace(z, mode="leader" if z.server == "14" else ("follower" if z.server == "37" else z.mode))
                  for z in last.zookeeper)
    last = dataclasses.replace(last, zookeeper=moved)
    for k, v in zookeeper_samples(last).items():
        history[k][-1] = v
    (f,) = [f for f in detect(last, HealthSettings(), history, ZooKeeperHealthSettings()) if f.kind == "zookeeper_follower_dropped"]
    assert f.details["no_ensemble_election"] is False and "an election of the whole ensemble" in f.summary


def test_quorum_lost_is_critical_and_ruok_is_never_asked():
    m = [Member(str(i), f"10.0.0.{i}", 2181) for i in (1, 2, 3)]
    asked = []

    def ask(host, port, word, timeout):
        asked.append(word)
        return zk_text.NOT_SERVING + "\n"

    from kafka_runbooks.detect.zk_probe import ask_words

    probes = tuple(probe_from_words(x, ask_words(x, 1.0, ask), at(0)) for x in m)
    assert set(asked) == {"srvr", "mntr", "cons"}
    s = dataclasses.replace(snapshot(), zookeeper=probes)
    fs = detect(s, HealthSettings(), {}, ZooKeeperHealthSettings())
    (f,) = [f for f in fs if f.kind == "zookeeper_quorum_lost"]
    assert f.severity is Severity.CRITICAL and f.details["not_serving"] == ["1", "2", "3"]
    assert all(p.reachable and not p.serving for p in probes)


def test_an_unreachable_member_with_a_quorum_is_a_warning_naming_it():
    def ask(host, port, word, timeout):
        if host.endswith(".2"):
            raise TimeoutError("timed out")
        return SEED_SRVR.format(rx=1, tx=1, c=2, mode="follower") if word == "srvr" else ""

    from kafka_runbooks.detect.zk_probe import ask_words

    probes = tuple(probe_from_words(x, ask_words(x, 1.0, ask), at(0)) for x in [Member(str(i), f"10.0.0.{i}", 2181) for i in (1, 2, 3)])
    fs = detect(dataclasses.replace(snapshot(), zookeeper=probes), HealthSettings(), {}, ZooKeeperHealthSettings())
    assert [(f.kind, f.details["subject"]) for f in fs if f.kind.startswith("zookeeper")] == [("zookeeper_server_not_serving", "2")]
    assert "TimeoutError" in fs[-1].summary


@pytest.mark.parametrize("text,expect", [
    (zk_text.NOT_SERVING, dict(serving=False)),
    ("garbage", dict(serving=False)),
])
def test_four_letter_answers_that_are_not_stats(text, expect):
    fields, problems = zk_text.stats(text, text, None)
    assert fields["serving"] is expect["serving"] and problems


def test_the_seeds_lines_are_read_verbatim():
    lines = zk_text.log_lines((FIXTURES / "seed004_zk13_follower.log").read_text())
    assert [x.what for x in lines] == ["zk_follow_exception", "zk_disconnected_from_leader", "zk_peer_state", "zk_election_took"]
    assert lines[0].attrs["cause"] == "java.net.SocketException: Connection reset"
    assert lines[1].attrs == {"leader": "/10.14.6.56:2888", "millis": "316796607", "sync": "true", "myid": "13"}
    assert lines[3].attrs["millis"] == "104"
    leader = zk_text.log_lines((FIXTURES / "seed004_zk37_leader.log").read_text())
    assert [(x.what, x.attrs.get("sid")) for x in leader] == [("zk_transaction_timeout", None), ("zk_learner_closed", "13")]


def test_the_first_check_after_a_stall_finds_it_with_no_check_during_it():
    """Issue 16 §2: no history from before or during the stall -- the next scheduled check alone, with what stays behind
    (mntr uptime and election count, the follower's and the leader's log lines)."""
    rec = json.loads((FIXTURES / "recorded_zk_stall.json").read_text())
    snap = ClusterSnapshot.from_dict(rec["snapshots"][3])  # the first check after the 5 s stall
    history = {k: [Sample.from_dict(x) for x in v if x["at"] == snap.taken_at] for k, v in rec["history"].items()}
    (f,) = [f for f in detect(snap, HealthSettings(), history, ZK) if f.kind == "zookeeper_follower_dropped"]
    stalled = str(rec["fault"]["zk"])
    assert f.details["subject"] == stalled and f.details["no_ensemble_election"] is True
    drop = f.details["drops"][0]
    assert drop["at"].startswith("2026-11-22T15:55:3") and drop["duration_ms"] <= rec["fault"]["seconds"] * 1000
    assert "the leader kept leading" in f.summary and "election count is 3" in f.summary
    assert "syncLimit 5 x tickTime 500 ms = 2500 ms" in f.summary
    excerpts = "\n".join(e.excerpt for e in f.evidence)
    assert f"Synchronously closing socket to learner {stalled}." in excerpts and "Exception when following the leader" in excerpts
    # a new process of the same server (its first election) is not a drop
    young = tuple(dataclasses.replace(z, elections=1) if z.server == stalled else z for z in snap.zookeeper)
    assert not [f for f in detect(dataclasses.replace(snap, zookeeper=young), HealthSettings(), history, ZK)
                if f.kind == "zookeeper_follower_dropped"]
    # the whole ensemble elected (the leader's server as young): not a follower's drop
    fresh = tuple(dataclasses.replace(z, uptime_ms=500) if z.mode == "leader" else z for z in snap.zookeeper)
    assert not [f for f in detect(dataclasses.replace(snap, zookeeper=fresh), HealthSettings(), history, ZK)
                if f.kind == "zookeeper_follower_dropped"]


def test_zookeeper_unreachable_is_one_critical_finding_naming_the_ensemble_and_since_when():
    from kafka_runbooks.detect.leadership_state import LEADERSHIP
    from kafka_runbooks.model import ZooKeeperProbe

    members = (ZooKeeperProbe("1", "zk1:2181", reachable=False, error="srvr: TimeoutError: timed out"),
               ZooKeeperProbe("2", "zk2:2181", reachable=True, serving=False, error="not currently serving requests"),
               ZooKeeperProbe("3", "zk3:2181", reachable=False, error="srvr: ConnectionRefusedError"))
    s = ClusterSnapshot("lab", "2026-11-24T22:10:00Z", (), None, (), configured_broker_ids=(1, 2, 3), zookeeper=members,
                        zookeeper_error="KazooTimeoutError: Connection time-out (ZooKeeper zk1:2181,zk2:2181,zk3:2181/kafka, connection 'prod_zk')")
    history = {LEADERSHIP: [Sample("2026-11-24T22:00:00Z", {"changes": {}}), Sample("2026-11-24T22:05:00Z", {"zookeeper_error": "x"}),
                            Sample("2026-11-24T22:10:00Z", {"zookeeper_error": "x"})]}
    findings = detect(s, HealthSettings(), history, ZK)
    assert [f.kind for f in findings] == ["zookeeper_unreachable", "zookeeper_quorum_lost"]  # nothing about brokers: unknown
    f = findings[0]
    assert f.severity is Severity.CRITICAL and f.details["page"] is True and f.details["since"] == "2026-11-24T22:05:00Z"
    assert f.details["last_read_at"] == "2026-11-24T22:00:00Z"
    assert "zk1:2181,zk2:2181,zk3:2181/kafka" in f.summary and "1 of 3 members answer their four-letter words, 0 serve" in f.summary
    from kafka_runbooks.detect.detectors import OPENS_INCIDENT

    assert "zookeeper_unreachable" in OPENS_INCIDENT
