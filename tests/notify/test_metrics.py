"""The product's metrics through Airflow's own Stats, read from a StatsD receiver on loopback (a UDP socket on the
slot's "webhook" address): Airflow's ``[metrics]`` configured by environment as a deployment would (statsd_on, host,
port, prefix), the metric functions run in a fresh process (Stats is set up once per process), and every packet that
arrives is checked by name, value and type."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap

import pytest

from kafka_lab.net import service_ip

pytestmark = pytest.mark.timeout(120)

SCRIPT = textwrap.dedent("""
    from kafka_runbooks import metrics
    metrics.finding("broker_unresponsive")
    metrics.finding("broker_unresponsive")
    metrics.finding("zookeeper unreachable")
    metrics.incident_opened({"opened_at": "2026-11-29T06:00:30+00:00",
                             "trigger": {"kind": "x", "details": {"since": "2026-11-29T06:00:00+00:00"}}})
    metrics.incident_opened({"opened_at": "2026-11-29T06:00:30+00:00", "trigger": {"kind": "x", "details": {}}})
    metrics.incident_closed({"opened_at": "2026-11-29T06:00:30+00:00", "closed_at": "2026-11-29T06:05:00Z"},
                            [{"action": "restart_broker", "outcome": "ok", "at": "2026-11-29T06:01:30+00:00"},
                             {"action": "restart_broker", "outcome": "ok", "at": "2026-11-29T06:02:30+00:00"},
                             {"action": "restart_broker", "outcome": "skipped", "at": "2026-11-29T06:04:00+00:00"}])
    metrics.roll_finished({"restarted": [1, 2, 3], "wall_s": 312.5})
    metrics.election_finished({"elected": [], "wall_s": 4.25})
    metrics.plan_refused(["broker 2: 3 partition(s) would go offline", "broker 3: 1 partition(s) would go offline",
                          "no broker to restart"])
    print("done")
""")


def _receive(sock: socket.socket) -> list[str]:
    lines: list[str] = []
    sock.settimeout(5.0)
    try:
        while True:
            data, _ = sock.recvfrom(65535)
            lines += data.decode().splitlines()
    except socket.timeout:
        return lines


def test_findings_incidents_durations_and_refusals_reach_statsd():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((service_ip("webhook"), 0))
    env = {**os.environ, "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": service_ip("webhook"),
           "AIRFLOW__METRICS__STATSD_PORT": str(sock.getsockname()[1]), "AIRFLOW__METRICS__STATSD_PREFIX": "krbtest"}
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=90)
        assert out.returncode == 0 and "done" in out.stdout, out.stderr[-3000:]
        lines = _receive(sock)
    finally:
        sock.close()
    got: dict[str, list[tuple[float, str]]] = {}
    for line in lines:
        name, _, rest = line.partition(":")
        value, _, kind = rest.partition("|")
        got.setdefault(name, []).append((float(value), kind))
    p = "krbtest.kafka_runbooks."
    assert {n[len(p):]: v for n, v in got.items() if n.startswith(p)} == {
        "findings.broker_unresponsive": [(1.0, "c"), (1.0, "c")],
        "findings.zookeeper_unreachable": [(1.0, "c")],
        "incidents.opened": [(1.0, "c"), (1.0, "c")],
        "incident.time_to_detect": [(30000.0, "ms")],  # only the one whose trigger says when the problem began
        "incidents.closed": [(1.0, "c")],
        "incident.time_to_mitigate": [(120000.0, "ms")],  # to the last broker restarted, not to a skipped one
        "incident.time_to_recover": [(270000.0, "ms")],
        "roll.duration": [(312500.0, "ms")],
        "election.duration": [(4250.0, "ms")],
        "refusals.partitions_would_go_offline": [(1.0, "c")],  # one count per distinct reason code
        "refusals.no_broker_to_restart": [(1.0, "c")],
    }


def test_no_metrics_backend_configured_sends_nothing_and_raises_nothing():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((service_ip("webhook"), 0))
    env = {**os.environ, "AIRFLOW__METRICS__STATSD_ON": "False", "AIRFLOW__METRICS__OTEL_ON": "False",
           "AIRFLOW__METRICS__STATSD_HOST": service_ip("webhook"), "AIRFLOW__METRICS__STATSD_PORT": str(sock.getsockname()[1])}
    try:
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=90)
        assert out.returncode == 0 and "done" in out.stdout, out.stderr[-3000:]
        sock.settimeout(2.0)
        with pytest.raises(socket.timeout):
            sock.recvfrom(65535)
    finally:
        sock.close()


GATES_ONLY_SCRIPT = textwrap.dedent("""
    from kafka_runbooks import metrics
    restarted = {"action": "restart_broker", "outcome": "ok", "at": "2026-11-29T06:01:30+00:00",
                 "details": {"broker_id": 1, "timing": {"broker_id": 1, "total_s": 40.0}}}
    # a resumed step that ran its gates only, as audited now and as audited before (restart_broker ok, timing saying so)
    gated = {"action": "gates_only", "outcome": "ok", "at": "2026-11-29T06:03:30+00:00",
             "details": {"broker_id": 2, "timing": {"broker_id": 2, "resumed": "gates only", "total_s": 5.0}}}
    gated_before = {**gated, "action": "restart_broker", "at": "2026-11-29T06:04:30+00:00"}
    metrics.incident_closed({"opened_at": "2026-11-29T06:00:30+00:00", "closed_at": "2026-11-29T06:05:00Z"},
                            [restarted, gated, gated_before])
    print("done")
""")


def test_a_gates_only_unit_is_no_restart_to_the_metrics():
    """Issue 28/29: one broker restarted (06:01:30) and one resumed step that ran its gates only (06:03:30, and the
    same as audited before the fix, 06:04:30): 1 restart, the time to mitigate runs to the real restart (60 s; red
    before: 240 s, to the gates-only unit)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((service_ip("webhook"), 0))
    env = {**os.environ, "AIRFLOW__METRICS__STATSD_ON": "True", "AIRFLOW__METRICS__STATSD_HOST": service_ip("webhook"),
           "AIRFLOW__METRICS__STATSD_PORT": str(sock.getsockname()[1]), "AIRFLOW__METRICS__STATSD_PREFIX": "krbtest"}
    try:
        out = subprocess.run([sys.executable, "-c", GATES_ONLY_SCRIPT], env=env, capture_output=True, text=True, timeout=90)
        assert out.returncode == 0 and "done" in out.stdout, out.stderr[-3000:]
        lines = _receive(sock)
    finally:
        sock.close()
    mitigated = [line.partition(":")[2] for line in lines if line.startswith("krbtest.kafka_runbooks.incident.time_to_mitigate:")]
    assert [(float(v.partition("|")[0]), v.partition("|")[2]) for v in mitigated] == [(60000.0, "ms")], lines
