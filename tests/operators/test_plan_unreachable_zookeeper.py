"""Issue 29 §3: a wrong ZooKeeper address in a roll's plan task says which ensemble did not answer (servers,
connection, timeout), as the health check does -- not a bare KazooTimeoutError traceback. The address is a real
loopback port nothing listens on."""

from __future__ import annotations

import json
import socket

import pytest


def test_a_roll_planned_against_an_ensemble_that_does_not_answer_names_it(monkeypatch):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.runbook.errors import Stop
    from kafka_runbooks.runbook.restart import read_cluster

    with socket.socket() as s:  # a free port, closed again: connections are refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AIRFLOW_CONN_KRB_WRONG_ZK", json.dumps({"conn_type": "generic", "host": f"127.0.0.1:{port}",
                                                              "extra": {"chroot": "/kafka"}}))
    config = ClusterConfig.from_dict("c1", {"zk_conn_id": "krb_wrong_zk", "hosts": {"1": "ssh_b1"},
                                            "capture": {"connect_timeout_s": 1.0}})
    with pytest.raises(Stop) as failed:
        read_cluster(config, "nothing was planned or changed")
    text = str(failed.value)
    assert text.startswith(f"cluster 'c1': its ZooKeeper ensemble 127.0.0.1:{port}/kafka (connection 'krb_wrong_zk') "
                           "did not answer"), text
    assert text.endswith("; nothing was planned or changed")
