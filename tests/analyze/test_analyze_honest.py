"""Honest findings on real logs: a broker's own stall or controlled shutdown is not its peers' fault, fetch
failures are attributed to the leader the line names and windowed to the incident, and what a finding
cannot tell it says (ambiguity)."""

import datetime as dt

from kafka_runbooks.analyze.diagnosis import ParsedFile, Window, diagnose
from kafka_runbooks.analyze.parsers import parse_log, parse_sockets

from analyze_helpers import fixture_bytes, fixture_text

UTC = dt.timezone.utc


def _log(path, name, broker, kind="server_log", text=None):
    return ParsedFile(path, kind, broker, result=parse_log(text if text is not None else fixture_bytes(name)))


def _kinds(fs):
    return {f.kind for f in fs}


def test_a_paused_broker_and_a_leadership_move_are_not_peer_fetch_failures():
    """Real 2.3 run: broker 3 SIGSTOPped 45 s. Brokers 1 and 2 stopped their fetchers to 3 when its session
    expired ("Client was shutdown"); broker 3, resumed, logged fetch errors naming 1 and 2 right after its own
    46.6 s silence. None of it is "peers report fetch failures from broker N"."""
    files = [_log("hosts/1/server.log", "real23/broker1.server.log.pause", 1), _log("hosts/3/server.log", "real23/broker3.server.log", 3)]
    fs = diagnose(files, window=Window(dt.datetime(2026, 11, 22, 13, 50, tzinfo=UTC), dt.datetime(2026, 11, 22, 14, 10, tzinfo=UTC)))
    assert "peer_fetch_failures" not in _kinds(fs)
    own = {f.broker_ids: f for f in fs if f.kind == "fetch_failures_own_doing"}
    assert "stopped this fetcher itself" in own[(1,)].summary and "leaders named: 3" in own[(1,)].summary
    assert "46618 ms" in own[(3,)].summary and "leaders named: 1, 2" in own[(3,)].summary
    zk = next(f for f in fs if f.kind == "zk_session_expired" and f.broker_ids == (3,))
    assert "46618 ms" in zk.summary


def test_own_controlled_shutdown_is_said_as_such():
    files = [_log("hosts/2/server.log", "real23/broker2.server.log.shutdown", 2)]
    fs = diagnose(files)
    assert "peer_fetch_failures" not in _kinds(fs)
    assert next(f for f in fs if f.kind == "own_controlled_shutdown").broker_ids == (2,)
    assert next(f for f in fs if f.kind == "fetch_failures_own_doing").broker_ids == (2,)


def test_seed000_peers_name_broker_0_and_broker_0_is_quiet():
    files = [_log(f"hosts/{b}/server.log", f"seed000_broker{b}_server.log", b) for b in (0, 1, 2)]
    window = Window(dt.datetime(2018, 10, 30, 6, 50, tzinfo=UTC), dt.datetime(2018, 10, 30, 9, 0, tzinfo=UTC))
    f = next(x for x in diagnose(files, window=window) if x.kind == "peer_fetch_failures")
    assert f.broker_ids == (0,) and f.details["reporters"] == [1, 2] and f.details["count"] == 2
    assert f.details["causes"] == {"disconnected": 2} and f.details["ambiguity"] is None
    assert {e.source for e in f.evidence} == {"hosts/1/server.log", "hosts/2/server.log"}
    assert all(e.lines[:2] == (1, 2) for e in f.evidence)  # the WARN line and its exception line


def test_earlier_episode_that_ended_is_not_counted():
    """The same seed 000 logs analysed for a later incident: the 07:00 errors stopped while both reporters
    kept logging for another 38-70 minutes; they are an earlier episode, listed apart, not counted."""
    files = [_log(f"hosts/{b}/server.log", f"seed000_broker{b}_server.log", b) for b in (1, 2)]
    later = Window(dt.datetime(2018, 10, 30, 9, 0, tzinfo=UTC), dt.datetime(2018, 10, 30, 9, 30, tzinfo=UTC))
    fs = diagnose(files, window=later)
    assert "peer_fetch_failures" not in _kinds(fs)
    e = next(f for f in fs if f.kind == "earlier_fetch_failures")
    assert e.broker_ids == (0,) and e.details["earlier_episodes"][0]["count"] == 2


def test_errors_before_the_window_with_no_evidence_they_ended_are_counted_and_the_doubt_said():
    files = [_log("hosts/217/server.log", "seed001_217_server.log", 217), _log("hosts/218/server.log", "seed001_218_server.log", 218)]
    w = Window(dt.datetime(2020, 4, 22, 16, 50, tzinfo=UTC), dt.datetime(2020, 4, 22, 17, 21, tzinfo=UTC))
    f = next(x for x in diagnose(files, window=w) if x.kind == "peer_fetch_failures")
    assert f.broker_ids == (219,) and f.details["count"] == 2 and "nothing shows the episode ended" in f.details["ambiguity"]


def test_a_single_reporter_of_many_leaders_is_ambiguous():
    text = fixture_text("real23/broker3.server.log").replace("Client session timed out", "Client session notice")
    fs = diagnose([_log("hosts/3/server.log", None, 3, text=text)])
    f = [x for x in fs if x.kind == "peer_fetch_failures"]
    assert {x.broker_ids for x in f} == {(1,), (2,)}
    assert all("only broker 3 reports it" in x.summary and "the reporter itself may be the problem" in x.summary for x in f)


def test_unknown_api_key_names_the_key_the_version_and_the_client():
    seed = ParsedFile("hosts/3/server.log", "server_log", 3, result=parse_log(fixture_bytes("seed002_processor.log")))
    f = next(x for x in diagnose([seed], broker_versions={3: "0.9.0.1"}) if x.kind == "unknown_api_requests")
    assert "API key 18 (ApiVersions, added in Kafka 0.10.0)" in f.summary and "drops every request selected in the same poll" in f.summary
    assert f.severity.value == "critical" and f.details["no_restart"] is True
    real = _log("hosts/1/server.log", "real23/broker1.server.log.badrequest", 1)
    table = parse_sockets("State Recv-Q Send-Q Local Address:Port Peer Address:Port Process\n"
                          "ESTAB 0 0 127.102.1.1:9092 127.0.0.1:48908 users:((\"java\",pid=29181,fd=140))\n")
    fs = diagnose([real, ParsedFile("hosts/1/ss.out", "sockets_ss", 1, result=table)])
    f = next(x for x in fs if x.kind == "unknown_api_requests")
    assert "API key 99 (unknown to Kafka's API list)" in f.summary and "127.0.0.1:48908 x1" in f.summary
    assert f.details["socket_table_matches"] == ["hosts/1/ss.out:2 ESTABLISHED 127.102.1.1:9092 <- 127.0.0.1:48908 (pid 29181)"]


def test_restart_too_soon_and_offsets_load_without_finish():
    fs = diagnose([_log("hosts/1/server.log", "real23/broker1.server.log.restart", 1)])
    r = next(f for f in fs if f.kind == "registration_conflict")
    assert r.severity.value == "critical" and r.evidence[0].lines
    pasted = "Loading offsets and group metadata from [__consumer_offsets,19] (kafka.coordinator.GroupMetadataManager)\n"
    g = next(f for f in diagnose([_log("hosts/3/server.log", None, 3, text=pasted)]) if f.kind == "offsets_load_slow")
    assert g.partitions == ("__consumer_offsets-19",)


def test_fetch_errors_one_per_failure_every_cause_cited_by_its_first_line():
    """The pure API the detectors call on log tails: Kafka 2.3 logs one failed fetch twice (FetchSessionHandler's
    INFO, then the fetcher's WARN with the exception under it): one FetchError, cited by the first line. A fetcher
    being stopped logs the INFO only ("Client was shutdown"): returned too, for the caller to filter with
    UNREACHABLE_CAUSES. Fixture: real 2.3.0 lines recorded by the detect helper (tests/detect/fixtures)."""
    from pathlib import Path

    from kafka_runbooks.analyze.parsers.kafka_log import UNREACHABLE_CAUSES, fetch_errors

    text = (Path(__file__).parents[1] / "detect" / "fixtures" / "kafka23_server_fetch_errors.log").read_text()
    errs = fetch_errors(text)
    assert [(e.line_no, e.cause, e.fetcher_broker_id, e.leader_broker_id) for e in errs] == [
        (4, "client_shutdown", 1, 2), (11, "client_shutdown", 1, 2), (24, "disconnected", 2, 1)]
    e = errs[-1]
    assert e.at == dt.datetime(2026, 11, 22, 14, 21, 9, 593000, tzinfo=UTC) and e.exception_line_no == 26
    assert "lines 24 and 25" in e.note and "Connection to 1 was disconnected" in e.excerpt
    assert [x.line_no for x in errs if x.cause in UNREACHABLE_CAUSES] == [24]
    # windowed in UTC, the host's offset applied
    assert fetch_errors(text, since=dt.datetime(2026, 11, 22, 14, 21, 10)) == []
    (late,) = fetch_errors(text, since=dt.datetime(2026, 11, 22, 12, 10), until=dt.datetime(2026, 11, 22, 12, 30),
                           utc_offset=dt.timedelta(hours=2))
    assert late.at == dt.datetime(2026, 11, 22, 12, 21, 9, 593000, tzinfo=UTC)
    # 0.10 wording (seed 001): the leader from the thread name, the fetcher from the caller
    (old,) = fetch_errors(fixture_text("seed001_217_server.log"), broker_id=217)
    assert (old.fetcher_broker_id, old.leader_broker_id, old.cause) == (217, 219, "disconnected")
    # NetworkClientUtils' "Connection to <node> failed." (real wording) is connection_failed
    line = ("[2026-11-22 14:30:00,000] WARN [ReplicaFetcher replicaId=2, leaderId=3, fetcherId=0] Error in response for fetch "
            "request (type=FetchRequest, replicaId=2, maxWait=500) (kafka.server.ReplicaFetcherThread)\n"
            "java.io.IOException: Connection to 127.0.0.1:9093 (id: 3 rack: null) failed.\n")
    assert [x.cause for x in fetch_errors(line)] == ["connection_failed"]


def test_kafka_server_out_repeating_server_log_counts_once():
    """Kafka's default log4j sends the root logger to server.log AND stdout (kafkaServer.out): a real capture has
    both tails, byte for byte the same records. Counted once, and the file table says why."""
    from kafka_runbooks.analyze.diagnosis import file_table

    text = fixture_bytes("seed000_broker1_server.log")
    window = Window(dt.datetime(2018, 10, 30, 6, 50, tzinfo=UTC), dt.datetime(2018, 10, 30, 9, 0, tzinfo=UTC))
    one = next(x for x in diagnose([_log("hosts/1/server-log.out", None, 1, text=text)], window=window)
               if x.kind == "peer_fetch_failures")
    files = [_log("hosts/1/server-log.out", None, 1, text=text),
             _log("hosts/1/log-kafkaServer.out", None, 1, kind="kafka_stdout", text=text)]
    both = next(x for x in diagnose(files, window=window) if x.kind == "peer_fetch_failures")
    assert both.details["count"] == one.details["count"] == 1
    assert {e.source for e in both.evidence} == {"hosts/1/server-log.out"}
    row = next(r for r in file_table(files) if r["path"] == "hosts/1/log-kafkaServer.out")
    assert "repeat hosts/1/server-log.out" in row["notes"]
    # a stdout with records of its own is not a duplicate
    other = fixture_bytes("seed000_broker2_server.log")
    files[1] = _log("hosts/1/log-kafkaServer.out", None, 1, kind="kafka_stdout", text=other)
    diagnose(files, window=window)
    assert files[1].duplicate_of is None


def test_the_stall_explaining_a_fetch_error_is_found_by_time_as_by_a_full_scan():
    """_stall_explaining looks only at the stalls near the error's time: it picks the same stall as trying every
    stall in order (thousands in a long log), for errors before, after and between stalls and shutdowns."""
    import datetime as dt
    import random

    from kafka_runbooks.analyze.diagnosis.replication import SELF_STALL_AFTER_S, by_time as _by_time, stall_explaining as _stall_explaining

    def full_scan(stalls, t):
        for st, reason, *_ in stalls:
            d = (t - st).total_seconds()
            if 0 <= d <= SELF_STALL_AFTER_S or ("shutdown" in reason and abs(d) <= SELF_STALL_AFTER_S):
                return (st, reason, *_)
        return None

    rnd = random.Random(9)
    t0 = dt.datetime(2026, 11, 23, tzinfo=dt.timezone.utc)
    found = 0
    for _ in range(300):
        stalls = [(t0 + dt.timedelta(seconds=rnd.randrange(0, 3600)), rnd.choice(["its own shutdown", "a GC pause"]),
                   None, k) for k in range(rnd.randrange(0, 30))]
        index = _by_time(stalls) if stalls else None
        for _ in range(20):
            t = t0 + dt.timedelta(seconds=rnd.randrange(-300, 3900))
            assert _stall_explaining(index, t) == full_scan(stalls, t)
            found += full_scan(stalls, t) is not None
    assert 1000 < found < 5000  # both outcomes were exercised
