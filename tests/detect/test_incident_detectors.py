"""Detectors of incidents 000 (a broker silently drops out), 002a (a client's unknown API key) and 002b (the log
cleaner dead, __consumer_offsets grown, a slow load), pure: on health checks recorded from the lab's real Kafka
2.3.0 brokers, on real 2.3.0 log lines, and on the seeds' own lines."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

from kafka_runbooks import clock
from kafka_runbooks.config import HealthSettings
from kafka_runbooks.detect.broker_log import lines_of_interest
from kafka_runbooks.detect.detectors import OPENS_INCIDENT, detect
from kafka_runbooks.detect.history import Sample
from kafka_runbooks.model import ClusterSnapshot, OffsetsPartitionDir, Severity

from detect_builders import NOW, at, check, history, probe, snapshot

FIXTURES = Path(__file__).parent / "fixtures"
LAB_HEALTH = HealthSettings(log_silent_s=30.0, offsets_segments_max=100, offsets_load_expected_s=5.0)


def replay(name, settings):
    rec = json.loads((FIXTURES / f"recorded_{name}.json").read_text())
    hist = {k: [Sample.from_dict(x) for x in v] for k, v in rec["history"].items()}
    out = []
    for raw in rec["snapshots"]:
        snap = ClusterSnapshot.from_dict(raw)
        upto = {k: [s for s in v if s.at <= snap.taken_at] for k, v in hist.items()}
        out.append((snap, detect(snap, settings, upto)))
    return out


# ------------------------------------------------------------------ 000


def test_recorded_isolation_is_recognised_once_its_log_is_silent_and_only_for_that_broker():
    checks = replay("isolate", LAB_HEALTH)
    # recorded on the lab right after recorded_zk_stall.json: ZooKeeper server 1 had dropped out 5 minutes before (its
    # ZooKeeperServer 311 s old, the leader's 414 s, election count 3) -- found after the fact, and nothing else
    for _, findings in checks[:2]:
        assert [(f.kind, f.details.get("subject")) for f in findings] == [("zookeeper_follower_dropped", "1")]
    checks = [(snap, [f for f in findings if f.kind != "zookeeper_follower_dropped"]) for snap, findings in checks]
    patterns = []
    for snap, findings in checks[2:]:
        (f,) = [f for f in findings if f.kind == "broker_unresponsive"]
        assert f.broker_ids == (3,) and not [x for x in findings if x.broker_ids and x.broker_ids != (3,)]
        patterns.append(f.details.get("pattern"))
        if f.details.get("pattern"):
            silent = f.details["log_silent"]
            assert silent["age_s"] >= 30 and all(a < 30 for a in silent["peer_ages_s"].values())
            assert f.details["incident"] == "000" and f.details["runbook"] == "runbooks/broker-silently-isolated.md"
            assert "SILENTLY ISOLATED" in f.summary
            # from the outside: it did not need the broker's own log lines, only their absence
            assert f.details["traffic_near_zero"]["rate"] == 0 or f.details["peer_fetch_errors"]
    # silent only once 30 s passed without a line, then for every later check
    first = patterns.index("silently_isolated")
    assert first > 0 and all(p == "silently_isolated" for p in patterns[first:])


def test_recorded_isolation_cites_close_wait_and_traffic_samples():
    snap, findings = replay("isolate", LAB_HEALTH)[-1]
    (f,) = [f for f in findings if f.kind == "broker_unresponsive"]
    sources = [e.source for e in f.evidence]
    assert "history:broker-3/close_wait" in sources and "history:broker-3/bytes_acked" in sources
    trend = next(t for t in f.details["trends"] if t["key"] == "close_wait")
    assert len(trend["points"]) >= 3 and trend["points"][-1][1] > trend["points"][0][1]


def test_a_quiet_cluster_is_not_a_silent_broker():
    quiet = [dataclasses.replace(probe(b), server_log_age_s=600.0) for b in (1, 2, 3)]
    s = snapshot(probes=quiet, checks=[check(1), check(2), check(3, ok=False)])
    (f,) = [f for f in detect(s, LAB_HEALTH) if f.broker_ids == (3,)]
    assert "log_silent" not in f.details and "pattern" not in f.details


def test_a_silent_log_on_a_broker_that_answers_accuses_nothing():
    probes = [probe(1), probe(2), dataclasses.replace(probe(3), server_log_age_s=600.0)]
    assert detect(snapshot(probes=probes), LAB_HEALTH) == []


# ------------------------------------------------------------------ 002a


def probe_with_lines(b, text, source="server.log", **kw):
    lines = tuple(lines_of_interest(text, source=source))
    return dataclasses.replace(probe(b, **kw), log_lines=lines)


def test_unknown_api_key_on_kafka_2_3_names_the_key_the_client_and_why_old_brokers_dropped_batches():
    text = (FIXTURES / "kafka23_server_bad_request.log").read_text()
    p3 = probe_with_lines(3, text)
    assert [x.what for x in p3.log_lines] == ["unknown_api_key"]  # 2.3 logs each failure twice: counted once
    p3 = dataclasses.replace(p3, log_lines=(dataclasses.replace(p3.log_lines[0], attrs={
        **p3.log_lines[0].attrs, "client_sockets_now": "ESTAB 127.106.1.3:9092 <- 127.106.2.50:46801"}),))
    (f,) = [f for f in detect(snapshot(probes=[probe(1), probe(2), p3]), LAB_HEALTH) if f.kind == "unknown_api_requests"]
    assert f.severity is Severity.WARNING and f.broker_ids == (3,) and "unknown_api_requests" in OPENS_INCIDENT
    d = f.details
    assert d["api_keys"] == ["60"] and d["client"]["host"] == "127.106.2.50" and d["client"]["ports"] == ["46733"]
    assert d["client"]["sockets_now"] == ["ESTAB 127.106.1.3:9092 <- 127.106.2.50:46801"]
    assert d["no_restart"] is True and d["batch_dropped"] is False and d["subject"] == "127.106.2.50"
    assert "client id is not in the broker's log" in f.summary and "every request of the same batch" in f.summary
    assert f.evidence[0].excerpt.startswith("[2026-11-22 15:58:09,170] ERROR Closing socket for 127.106.1.3:9092-127.106.2.50:46733-4")


def test_seed_002_array_index_out_of_bounds_is_critical_batch_dropped():
    p1 = probe_with_lines(1, (FIXTURES / "seed002_processor.log").read_text())
    (x,) = p1.log_lines
    assert x.attrs == {"api_key": "18", "form": "processor_uncaught_exception"}
    (f,) = [f for f in detect(snapshot(probes=[p1, probe(2), probe(3)]), LAB_HEALTH) if f.kind == "unknown_api_requests"]
    assert f.severity is Severity.CRITICAL and f.details["batch_dropped"] is True and f.details["api_keys"] == ["18"]
    assert "aborts the network thread's pass" in f.summary and "no restart" in f.summary


# ------------------------------------------------------------------ 002b


def test_a_dead_log_cleaner_is_found_in_the_threads_and_its_log():
    died = probe_with_lines(2, (FIXTURES / "kafka23_log_cleaner_died.log").read_text(), source="log-cleaner.log")
    assert [x.what for x in died.log_lines] == ["log_cleaner_died"]
    died = dataclasses.replace(died, log_cleaner_threads=0, offsets_dirs=(OffsetsPartitionDir(7, 120, 130 << 20, "00000000000000000000.log",
                                                                                              "00000000000000123456.log", "/data"),))
    probes = [dataclasses.replace(probe(1), log_cleaner_threads=1), died, dataclasses.replace(probe(3), log_cleaner_threads=1)]
    findings = detect(snapshot(probes=probes), LAB_HEALTH)
    (f,) = [f for f in findings if f.kind == "log_cleaner_not_running"]
    assert f.broker_ids == (2,) and "log_cleaner_not_running" in OPENS_INCIDENT
    assert f.details["remediation"] == "rolling_restart" and f.details["never_delete_segments"] is True
    assert "Error due to" in f.summary and "__consumer_offsets-7 120 segments" in f.summary
    (big,) = [f for f in findings if f.kind == "offsets_partition_oversized"]
    assert big.partitions == ("__consumer_offsets-7",) and big.severity is Severity.WARNING


def test_no_cleaner_while_starting_or_unknown_accuses_nothing():
    starting = dataclasses.replace(probe(2, uptime=10.0), log_cleaner_threads=0)
    unknown = dataclasses.replace(probe(3), log_cleaner_threads=None)
    assert [f for f in detect(snapshot(probes=[probe(1), starting, unknown]), LAB_HEALTH) if f.kind == "log_cleaner_not_running"] == []


def load_lines(started_s_ago: float, finished: bool = False):
    start = at(-started_s_ago)
    t = clock.parse(start).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    text = f"[{t}] INFO [GroupMetadataManager brokerId=2] Scheduling loading of offsets and group metadata from __consumer_offsets-7 (kafka.coordinator.group.GroupMetadataManager)\n"
    if finished:
        text += f"[{t}] INFO [GroupMetadataManager brokerId=2] Finished loading offsets and group metadata from __consumer_offsets-7 in 9 milliseconds. (kafka.coordinator.group.GroupMetadataManager)\n"
    return tuple(lines_of_interest(text))


def test_a_slow_offsets_load_reports_its_progress_rate_from_the_loader_threads():
    big = (OffsetsPartitionDir(7, 300, 300 << 20, "00000000000000000000.log", "00000000000001000000.log", "/data"),)
    before = snapshot(taken=-30, probes=[probe(1), dataclasses.replace(probe(2), loader_read_bytes=1_000, offsets_dirs=big), probe(3)])
    loading = snapshot(taken=0, probes=[probe(1), dataclasses.replace(probe(2), loader_read_bytes=1_000 + (60 << 20), offsets_dirs=big,
                                                                      log_lines=load_lines(25)), probe(3)])
    (f,) = [f for f in detect(loading, LAB_HEALTH, history(before, loading)) if f.kind == "offsets_load_slow"]
    prog = f.details["progress"]
    assert prog["bytes_per_s"] == round((60 << 20) / 30, 1) and prog["partition_bytes"] == 300 << 20
    assert prog["state"].startswith("progressing") and "s left" in prog["state"]
    assert f.partitions == ("__consumer_offsets-7",) and f.details["never_delete_segments"] is True
    assert any(e.source == "history:broker-2/loader_read_bytes" for e in f.evidence)


def test_a_load_with_no_bytes_read_is_said_to_be_stuck_and_a_finished_one_is_not_reported():
    before = snapshot(taken=-30, probes=[probe(1), dataclasses.replace(probe(2), loader_read_bytes=5_000), probe(3)])
    stuck = snapshot(taken=0, probes=[probe(1), dataclasses.replace(probe(2), loader_read_bytes=5_000, log_lines=load_lines(25)), probe(3)])
    (f,) = [f for f in detect(stuck, LAB_HEALTH, history(before, stuck)) if f.kind == "offsets_load_slow"]
    assert f.details["progress"]["state"].startswith("NOT progressing")
    done = snapshot(taken=0, probes=[probe(1), dataclasses.replace(probe(2), log_lines=load_lines(25, finished=True)), probe(3)])
    assert not [f for f in detect(done, LAB_HEALTH) if f.kind == "offsets_load_slow"]
    young = snapshot(taken=0, probes=[probe(1), dataclasses.replace(probe(2), log_lines=load_lines(2)), probe(3)])
    assert not [f for f in detect(young, LAB_HEALTH) if f.kind == "offsets_load_slow"]


def test_seed_002_load_lines_are_read():
    xs = lines_of_interest((FIXTURES / "seed002_offsets_load.log").read_text())
    assert [(x.what, x.attrs) for x in xs] == [("group_load_start", {"partition": "19"}),
                                               ("group_load_done", {"partition": "27", "millis": "1205"})]
    assert NOW.tzinfo is dt.timezone.utc or NOW.utcoffset() == dt.timedelta(0)
