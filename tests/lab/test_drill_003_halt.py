"""Drill 003 on Kafka 0.10.2.1 (2026-11-25 12:54, slot 9): broker 3, re-registered after its session loss, refused to
truncate orders-5 to its new leader's end (unclean.leader.election.enable=false, before KIP-101) and exited -- its JVM
then hung in its own shutdown -- and the drill waited 180 s for it to lead again. Now every wait of the rebalance phase
on broker 3 ends at once with the FATAL line read from its server.log, and the truncation refusal is handled as that
era's documented behaviour: the broker is restarted (killed first if it hangs) and the phase goes on, counted.
Pure: a fake lab, real server.log lines (tests/analyze/fixtures/), real processes standing in for the JVM."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from kafka_lab import drill_003
from kafka_lab.drill_003 import ReturningWatch, TruncationHalt, fatal_reason
from kafka_lab.procs import LabError, alive

FIXTURES = Path(__file__).resolve().parents[1] / "analyze" / "fixtures"
HALT = (FIXTURES / "real0102" / "broker3.server.log.truncation-halt").read_text()
BIND = (FIXTURES / "real010" / "fatal-startup-bind.server.log").read_text()
FIRST = "[2026-11-25 12:58:01,000] INFO Registered kafka:type=kafka.Log4jController MBean (kafka.utils.Log4jControllerRegistration$)\n"


class FakeLab:
    def __init__(self, tmp: Path, log_text: str, hung: bool = True) -> None:
        self.log = tmp / "server.log"
        self.log.write_text(log_text)
        self.proc = subprocess.Popen(["sleep", "60"])
        if not hung:
            self.proc.kill()
            self.proc.wait()
        self.killed = self.started = 0

    def broker_pid(self, b: int) -> int:
        return self.proc.pid

    def server_log(self, b: int) -> Path:
        return self.log

    def kill(self, b: int) -> str:
        self.killed += 1
        self.proc.kill()
        self.proc.wait()
        return ""

    def start(self, b: int) -> str:
        self.started += 1
        self.proc = subprocess.Popen(["sleep", "60"])
        self.log.write_text(FIRST)  # the new JVM's server.log: no FATAL line
        return ""

    def wait_started(self, b: int) -> None:
        pass

    def close(self) -> None:
        if alive(self.proc.pid):
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def make_lab(tmp_path):
    labs = []

    def make(text: str, hung: bool = True) -> FakeLab:
        labs.append(FakeLab(tmp_path, text, hung))
        return labs[-1]
    yield make
    for lab in labs:
        lab.close()


def test_the_fatal_line_and_the_truncation_refusal_are_read_from_server_log():
    line, attrs = fatal_reason(HALT)
    assert line.startswith("[2026-11-25 12:54:34,533] FATAL [ReplicaFetcherThread-0-2], Exiting because log truncation")
    assert (attrs["topic"], attrs["partition"], attrs["leader"], attrs["leader_offset"], attrs["broker"], attrs["replica_offset"]) == (
        "orders", "5", "2", "1102", "3", "1103")
    line, attrs = fatal_reason(BIND)
    assert "FATAL [Kafka Server 9], Fatal error during KafkaServer startup" in line and attrs is None
    assert fatal_reason(FIRST) == (None, None)


def test_an_exited_broker_ends_the_wait_at_once_with_its_fatal_line(make_lab):
    lab = make_lab(BIND, hung=False)
    watch = ReturningWatch(lab)
    t0 = time.monotonic()
    with pytest.raises(LabError, match="exited during the phase: .*Fatal error during KafkaServer startup"):
        watch.wait(lambda: False, 180, "broker 3 to lead its preferred partitions again")
    assert time.monotonic() - t0 < 5


def test_a_truncation_refusal_restarts_the_hung_broker_and_the_phase_goes_on(make_lab, monkeypatch):
    monkeypatch.setattr(drill_003, "HUNG_SHUTDOWN_S", 0.5)
    lab = make_lab(HALT, hung=True)  # 0.10.2.1's JVM did not exit: its shutdown hook hung
    hung_pid = lab.proc.pid
    watch = ReturningWatch(lab)
    with pytest.raises(TruncationHalt):
        watch.wait(lambda: False, 180, "x")
    rounds = []

    def step():
        rounds.append(lab.proc.pid)
        return watch.wait(lambda: lab.started > 0, 180, "broker 3 to lead its preferred partitions again")
    t0 = time.monotonic()
    assert watch.through_halts(step) is True
    assert time.monotonic() - t0 < 20
    assert (lab.killed, lab.started) == (1, 1) and not alive(hung_pid) and rounds == [hung_pid, lab.proc.pid]
    (h,) = watch.halts
    assert (h["partition"], h["leader"], h["leader_end_offset"], h["replica_end_offset"]) == ("orders-5", "2", "1102", "1103")


def test_a_step_that_fails_because_of_the_refusal_is_explained_and_run_again(make_lab, monkeypatch):
    monkeypatch.setattr(drill_003, "HUNG_SHUTDOWN_S", 0.5)
    lab = make_lab(HALT, hung=True)
    watch = ReturningWatch(lab)
    calls = []

    def flap():  # lab.flap failing on a broker that is gone
        calls.append(1)
        if lab.started == 0:
            raise LabError("broker 3 did not re-register")
        return "flapped"
    assert watch.through_halts(flap) == "flapped" and len(calls) == 2 and len(watch.halts) == 1


def test_refusals_without_end_fail_the_phase(make_lab, monkeypatch):
    monkeypatch.setattr(drill_003, "HUNG_SHUTDOWN_S", 0.5)
    lab = make_lab(HALT, hung=True)
    monkeypatch.setattr(FakeLab, "start", lambda self, b: (setattr(self, "proc", subprocess.Popen(["sleep", "60"])), "")[1])
    watch = ReturningWatch(lab)
    with pytest.raises(LabError, match="refused to truncate 4 times"):
        watch.through_halts(lambda: watch.wait(lambda: False, 180, "x"))
    assert len(watch.halts) == drill_003.MAX_TRUNCATION_HALTS + 1
