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
    assert not [f for f in fs if f.kind == "group_load_unfinished" and "__consumer_offsets-16" in f.partitions]
