"""What opens the intrusive phase (jmap -histo:live, jhsdb, a heap dump: they pause the JVM) -- issue 29 §4.

Only a direct check that found nobody answering (a time-out, a refused connection), corroborated by a not-serving
finding of that broker. Not an expired credential of the product's own client, not an answer as another broker id,
not a slow answer of a busy broker that nothing else accuses.

The decision is pure (``capture.commands.intrusive_evidence``); the gate (``runbook.capture.MaintenanceLockGate``)
is tried with the real KafkaHook (librdkafka) against loopback sockets of this slot: one that accepts and never
answers (a hung broker's listener), one where nothing listens (refused)."""

from __future__ import annotations

import socket
import threading

import pytest

from kafka_lab.net import broker_ip
from kafka_runbooks.capture.commands import intrusive_evidence
from kafka_runbooks.config import ClusterConfig, HealthSettings
from kafka_runbooks.model import Broker, Finding, KafkaCheck, Severity

AT = "2026-11-29T05:00:00.000Z"
UNRESPONSIVE = Finding("broker_unresponsive", Severity.CRITICAL, "broker 3 failed its direct check; peers' fetch errors name it",
                       broker_ids=(3,))


def check(code, error="x", ok=False, bid=3):
    return KafkaCheck(bid, "h:9092", ok=ok, error=error, error_code=code, at=AT)


@pytest.mark.parametrize("code", ["_TIMED_OUT", "_TRANSPORT", "ConnectionRefusedError", "TimeoutError", "_ALL_BROKERS_DOWN"])
def test_no_answer_corroborated_by_a_not_serving_finding_opens_it(code):
    evidence, why = intrusive_evidence(check(code, "no answer within 5s"), [UNRESPONSIVE])
    assert evidence and code in evidence and "broker_unresponsive" in evidence and why == ""
    assert intrusive_evidence(check(code), [UNRESPONSIVE.to_dict()])[0]  # the incident's trigger, as XCom carries it


@pytest.mark.parametrize("code, error", [
    ("_AUTHENTICATION", "SASL authentication error: Authentication failed: credential expired"),  # our own client's
    ("SASL_AUTHENTICATION_FAILED", "Authentication failed"),
    ("_SSL", "SSL handshake failed: certificate expired"),
    ("WRONG_BROKER", "h:9092 answered as broker 2, not 3"),
    ("VERSION_CONFLICT", "DescribeConfigs refused as unsupported"),
    ("NO_ENDPOINT", "no endpoint"),
    (None, "RuntimeError: something"),
])
def test_any_other_failed_check_does_not_open_it(code, error):
    evidence, why = intrusive_evidence(check(code, error), [UNRESPONSIVE])
    assert evidence is None and "not a time-out or a refused connection" in why, why


@pytest.mark.parametrize("findings", [[], [None], [Finding("broker_check_failed", Severity.WARNING, "failed once", broker_ids=(3,))],
                                      [Finding("broker_unresponsive", Severity.CRITICAL, "another broker", broker_ids=(2,))],
                                      [Finding("broker_starting", Severity.INFO, "starting", broker_ids=(3,))]])
def test_a_time_out_without_a_not_serving_finding_of_that_broker_does_not_open_it(findings):
    evidence, why = intrusive_evidence(check("_TIMED_OUT", "no answer within 5s"), findings)
    assert evidence is None and "no not-serving finding" in why, why


def test_an_answer_never_opens_it():
    assert intrusive_evidence(check(None, None, ok=True), [UNRESPONSIVE])[0] is None


# --- the gate, with the real KafkaHook


@pytest.fixture
def silent_listener():
    """A TCP listener that accepts connections and never answers: a broker whose request path is stuck."""
    srv = socket.socket()
    srv.bind((broker_ip(3), 0))
    srv.listen(16)
    held, stop = [], threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()
    stop.set()
    t.join()
    for c in held:
        c.close()
    srv.close()


def _gate(tmp_path, host, port, **kw):
    from kafka_runbooks.runbook.capture import MaintenanceLockGate

    config = ClusterConfig(name="c", zk_conn_id="zk", hosts={3: "ssh3"}, server_log_path="/var/log/kafka/{broker_id}.log",
                           bundle_base=str(tmp_path), health=HealthSettings(kafka_probe_timeout_s=2.0))
    return MaintenanceLockGate(config, {3: Broker(3, host, port)}, run_id="r", dag_id="d", **kw)


def test_the_gate_does_not_open_on_a_silent_broker_that_no_finding_accuses(tmp_path, silent_listener):
    gate = _gate(tmp_path, *silent_listener)
    assert gate.not_serving(3) is None
    assert "no not-serving finding" in gate.why_not[3], gate.why_not


def test_the_gate_opens_on_a_silent_or_refusing_broker_a_finding_accuses(tmp_path, silent_listener):
    evidence = _gate(tmp_path, *silent_listener, findings=[UNRESPONSIVE]).not_serving(3)
    assert evidence and evidence.startswith("direct check at") and "broker_unresponsive" in evidence, evidence
    with socket.socket() as s:  # a port of this slot's address that nothing listens on: refused
        s.bind((broker_ip(3), 0))
        free = s.getsockname()[1]
    refused = _gate(tmp_path, broker_ip(3), free, findings=[UNRESPONSIVE])
    assert refused.not_serving(3), refused.why_not


def test_lock_detail_only_for_a_suspect_a_deadlock_or_not_serving_finding_accuses():
    from kafka_runbooks.capture.commands import PEER, SUSPECT, lock_detail

    deadlock = Finding("jvm_deadlock", Severity.CRITICAL, "deadlock", broker_ids=(5,))
    cleaner = Finding("log_cleaner_not_running", Severity.WARNING, "cleaner", broker_ids=(3,))
    assert lock_detail(SUSPECT, 3, [UNRESPONSIVE]) and lock_detail(SUSPECT, 5, [deadlock.to_dict()])
    assert not lock_detail(PEER, 3, [UNRESPONSIVE])  # a peer: a plain dump, whatever accuses it
    assert not lock_detail(SUSPECT, 3, [cleaner]) and not lock_detail(SUSPECT, 3, [None]) and not lock_detail(SUSPECT, 2, [UNRESPONSIVE])
