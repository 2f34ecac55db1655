"""A ``__consumer_offsets`` load that ended with an exception (issue 32's "what a person reads is true"; found by a
./run test run of 2026-11-30 on the lab's real Kafka 2.3.0): broker 3 stopped and started, broker 2 became the
coordinator of ``__consumer_offsets-16`` and its load threw ``java.util.NoSuchElementException`` from
``GroupCoordinator.tryCompleteHeartbeat``. Kafka's ``loadGroupsAndOffsets`` logs "Error loading offsets from" and then,
in its ``finally``, counts the partition as owned: the groups the load had not reached are missing from the coordinator.
The old rules read that as a load "started more than N s ago with no Finished loading" (``offsets_load_slow``: "waiting
is safe") -- untrue -- and the coordinator gate passed on it. The log here is the real one
(tests/analyze/fixtures/real23/broker2.server.log.load-failed)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from kafka_runbooks import clock
from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose
from kafka_runbooks.analyze.parsers import parse_log
from kafka_runbooks.config import HealthSettings
from kafka_runbooks.detect.broker_log import lines_of_interest
from kafka_runbooks.detect.detectors import detect
from kafka_runbooks.model import Partition
from kafka_runbooks.remediate.gates import GateFailed, failed_loading, refuse_failed_loads

from detect_builders import probe, snapshot

REAL = Path(__file__).resolve().parents[1] / "analyze" / "fixtures" / "real23" / "broker2.server.log.load-failed"
FAILED_AT = dt.datetime(2026, 11, 30, 2, 30, 16, 856000, tzinfo=clock.UTC)
HEALTH = HealthSettings(offsets_load_expected_s=5.0, bad_request_window_s=3600.0)


def offsets(leader_of_16: int) -> list[Partition]:
    return [Partition("__consumer_offsets", 16, (2, 3, 1), leader_of_16, (2, 3, 1)),
            Partition("__consumer_offsets", 40, (2, 1, 3), 2, (2, 1, 3))]


def judged(leader_of_16: int, seconds_after: float = 60.0, text: str | None = None):
    lines = tuple(lines_of_interest(REAL.read_text() if text is None else text))
    s = snapshot(parts=offsets(leader_of_16), probes=[probe(1), dataclasses.replace(probe(2), log_lines=lines), probe(3)])
    s = dataclasses.replace(s, taken_at=clock.iso(FAILED_AT + dt.timedelta(seconds=seconds_after)))
    return detect(s, HEALTH)


def test_the_real_failure_line_is_read_with_its_exception():
    (x,) = [x for x in lines_of_interest(REAL.read_text()) if x.what == "group_load_failed"]
    assert x.attrs["partition"] == "16"
    assert x.attrs["cause"].startswith("java.util.NoSuchElementException: key not found: kafka-lab-load-")


def test_a_failed_load_on_the_partitions_coordinator_is_said_as_failed_never_as_slow():
    fs = judged(leader_of_16=2)
    (f,) = [f for f in fs if f.kind == "offsets_load_failed"]
    assert f.broker_ids == (2,) and f.partitions == ("__consumer_offsets-16",)
    assert "NoSuchElementException" in f.summary and "counts a failed load as done" in f.summary
    assert "Error loading offsets from __consumer_offsets-16" in f.evidence[0].excerpt
    assert not [f for f in fs if f.kind == "offsets_load_slow"]  # the old rule: "has been loading ... waiting is safe"


def test_no_finding_once_the_broker_no_longer_leads_the_partition_or_a_later_load_finished():
    assert not [f for f in judged(leader_of_16=3) if f.kind == "offsets_load_failed"]
    again = REAL.read_text() + (
        "[2026-11-30 02:31:00,000] INFO [GroupMetadataManager brokerId=2] Scheduling loading of offsets and group metadata "
        "from __consumer_offsets-16 (kafka.coordinator.group.GroupMetadataManager)\n"
        "[2026-11-30 02:31:00,010] INFO [GroupMetadataManager brokerId=2] Finished loading offsets and group metadata from "
        "__consumer_offsets-16 in 10 milliseconds. (kafka.coordinator.group.GroupMetadataManager)\n")
    fs = judged(leader_of_16=2, seconds_after=90.0, text=again)
    assert not [f for f in fs if f.kind in ("offsets_load_failed", "offsets_load_slow")]


def test_the_coordinator_gate_does_not_pass_a_failed_load_of_a_partition_the_broker_leads():
    text = REAL.read_text()
    assert list(failed_loading(text)) == [16]
    with pytest.raises(GateFailed) as e:
        refuse_failed_loads(text, [16, 40])
    assert "__consumer_offsets-16" in e.value.reason and "NoSuchElementException" in e.value.reason
    refuse_failed_loads(text, [40])  # loaded: "Finished loading ... __consumer_offsets-40 in 1 milliseconds"


def test_the_analysis_says_the_load_failed_not_that_it_never_finished():
    fs = diagnose([ParsedFile("hosts/2/server.log", "server_log", 2, result=parse_log(REAL.read_bytes()))])
    (f,) = [f for f in fs if f.kind == "offsets_load_failed"]
    assert f.partitions == ("__consumer_offsets-16",) and "NoSuchElementException" in f.summary
    assert not [f for f in fs if f.kind == "offsets_load_slow" and "__consumer_offsets-16" in f.partitions]


def test_the_gate_reads_the_other_leaders_logs_where_the_stopped_brokers_coordinators_moved():
    """ci19's case: broker 3 was the one restarted; the failed load was broker 2's. The gate's probes all answer (a
    failed load still answers OffsetFetch), so only the new leader's log tells."""
    from kafka_runbooks.remediate.gates import coordinator_gate

    def gate(others):
        return coordinator_gate(lambda group: {}, [], 50, timeout_s=1.0, poll_s=0.1, request_timeout_s=1.0,
                                broker_log=lambda: "", led_by_broker=[], other_logs=lambda: others)

    with pytest.raises(GateFailed) as e:
        gate({2: ([16], REAL.read_text())})
    assert "__consumer_offsets-16 on broker 2 ended with an exception" in e.value.reason
    assert gate({2: ([40], REAL.read_text())}).gate == "coordinator"  # partition 40's load finished there


def test_the_roll_asks_each_other_leader_of_a_probed_partition_for_its_log(monkeypatch):
    from kafka_runbooks.hooks import ssh as ssh_mod
    from kafka_runbooks.remediate import executor, host as host_mod

    asked = []

    class Hook:
        def __init__(self, conn_id, connect_timeout=None):
            self.conn_id = conn_id

        def __enter__(self):
            if self.conn_id.endswith("3"):
                raise OSError("connection refused")
            return self

        def __exit__(self, *exc):
            return False

    class Host:
        def __init__(self, cfg, n, ssh):
            self.n = n

        def tail(self, path, lines):
            asked.append((self.n, path))
            return "log of %d" % self.n

    class Cfg:
        def ssh_conn_id(self, n):
            return f"kafka_lab_ssh_{n}"

        def server_log(self, n):
            return f"/logs/{n}/server.log"

        class capture:
            connect_timeout_s = 1.0

    monkeypatch.setattr(ssh_mod, "StrictSSHHook", Hook)
    monkeypatch.setattr(host_mod, "BrokerHost", Host)
    got = executor.other_leader_logs(Cfg(), {16: 2, 40: 2, 7: 1, 3: 3, 9: -1, 11: 1}, [16, 40, 3, 9, 11], 1)
    assert asked == [(2, "/logs/2/server.log")]
    assert got[2] == ([16, 40], "log of 2") and got[3][0] == [3] and "could not read broker 3" in got[3][1]
    assert set(got) == {2, 3}  # broker 1 is the restarted one (its own log is read as before); 9 is offline
