"""Fixtures of the DAG tests: the real ZooKeeper of tests/detect, and a ZooKeeper-only stand-in
cluster ("resttest": registrations written by the test, no topic; broker hosts that
cannot be reached) with its Airflow Variable and connections, for tests about approvals -- no
Kafka behaviour is claimed with it."""

from __future__ import annotations

import json
import uuid

import pytest

from kafka_lab.net import service_ip
from webhook_receiver import WebhookReceiver

import importlib.util
import sys
from pathlib import Path

_name = "kafka_runbooks_tests_detect_conftest"
if _name not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_name, Path(__file__).parent.parent / "detect" / "conftest.py")
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _mod
    _spec.loader.exec_module(_mod)

zookeeper = sys.modules[_name].zookeeper
zk = sys.modules[_name].zk


def _reg(b: int) -> bytes:
    host = service_ip("capture_ssh_down")  # nothing listens there
    return json.dumps({"endpoints": [f"PLAINTEXT://{host}:9092"], "host": host, "port": 9092, "jmx_port": -1,
                       "timestamp": "1700000000000", "version": 4}).encode()


@pytest.fixture
def zk_cluster(zk, zookeeper):
    """Three registered 'brokers' (each its own ZooKeeper session), a controller, no topic: nothing listens at
    the brokers' endpoints, so a partition would make every stop wait for holders that cannot be proven serving
    (issue 17) -- these tests are about approvals, not about Kafka."""
    # 30 s sessions: with 5 s ones a CI lane under load 18 stalled the machine 16 s, the registrations expired mid-test
    # and the plan was refused for "controller 1 is not registered" (test_no_answer_before_the_timeout_is_a_reject)
    sessions = [zookeeper.client(zk.chroot_path, timeout_s=30.0) for _ in range(3)]
    zk.ensure_path("/brokers/ids")
    for b, s in enumerate(sessions, 1):
        s.create(f"/brokers/ids/{b}", _reg(b), ephemeral=True)
    zk.create("/controller", json.dumps({"version": 1, "brokerid": 1, "timestamp": "1"}).encode())
    zk.create("/controller_epoch", b"3")
    zk.ensure_path("/brokers/topics")
    try:
        yield zookeeper.hosts, zk.chroot_path
    finally:
        for s in sessions:
            s.stop()
            s.close()


@pytest.fixture
def cluster_env(zk_cluster, tmp_path, monkeypatch):
    hosts, chroot = zk_cluster
    with WebhookReceiver() as webhook:
        settings = {"resttest": {
            "zk_conn_id": "resttest_zk",
            "hosts": {str(b): f"resttest_host_{b}" for b in (1, 2, 3)},
            "kafka_version": "2.3.0",
            "incident_base": str(tmp_path / "incidents"),
            "approvals": {"approvers": ["dag_test", "carol"], "oncall_conn_id": "resttest_oncall", "timeout_s": 600},
            "gates": {"stop_s": 5, "deregister_s": 5, "register_s": 5, "poll_s": 0.5, "lock_wait_s": 2},
            "capture": {"connect_timeout_s": 2.0},
        }}
        monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(settings))
        monkeypatch.setenv("AIRFLOW_CONN_RESTTEST_ZK", json.dumps({"conn_type": "generic", "host": hosts, "extra": {"chroot": chroot}}))
        monkeypatch.setenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_APPROVALS", json.dumps({"conn_type": "generic", "password": uuid.uuid4().hex * 2}))
        monkeypatch.setenv("AIRFLOW_CONN_RESTTEST_ONCALL", webhook.connection())
        for b in (1, 2, 3):
            monkeypatch.setenv(f"AIRFLOW_CONN_RESTTEST_HOST_{b}", json.dumps({
                "conn_type": "ssh", "host": service_ip("capture_ssh_down"), "port": 2222, "login": "kafka",
                "extra": {"host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"},
            }))
        # the hosts are deliberately unreachable (nothing can be stopped); the plan-time refusal of an unreachable host
        # (tests/e2e/test_unreachable_host_lab.py) is kept out of these approval tests, whose executions halt there
        import kafka_runbooks.remediate.host as host

        monkeypatch.setattr(host, "unreachable_hosts", lambda config, broker_ids: {})
        yield settings["resttest"], webhook


@pytest.fixture(scope="module")
def bag():
    """The DAGs as Airflow parses them, for one one-cluster Variable (the DAG shape tests)."""
    import os

    from kafka_lab.airflow_home import load_dags

    os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"] = json.dumps({"lab": {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}}})
    try:
        yield load_dags()
    finally:
        os.environ.pop("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", None)
