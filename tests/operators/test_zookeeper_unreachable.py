"""A wrong ZooKeeper address is a clear error naming the ensemble, the connection and the cluster, not kazoo's bare
``KazooTimeoutError: Connection time-out`` traceback (issue 29 §3: a roll's plan task opened ZooKeeper this way).
Real kazoo against a loopback address of this slot where nothing listens."""

from __future__ import annotations

import json

import pytest

from kafka_lab.net import broker_ip


def test_a_session_to_a_wrong_address_names_the_ensemble_connection_and_cluster(monkeypatch):
    from kazoo.handlers.threading import KazooTimeoutError

    from kafka_runbooks.detect.observe import zookeeper_unreachable
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook, ZooKeeperUnreachable

    wrong = f"{broker_ip(200)}:2181,{broker_ip(201)}:2182"
    monkeypatch.setenv("AIRFLOW_CONN_KR_ZK_WRONG", json.dumps({"conn_type": "generic", "host": wrong, "extra": {"chroot": "/kafka"}}))
    hook = ZooKeeperHook("kr_zk_wrong", timeout_s=2.0, tries=1, cluster="prod-east")
    with pytest.raises(ZooKeeperUnreachable) as err:
        with hook.session():
            pytest.fail("a session started against an address where nothing listens")
    text = str(err.value)
    assert f"ZooKeeper {wrong}/kafka" in text and "connection 'kr_zk_wrong'" in text and "cluster 'prod-east'" in text, text
    assert "KazooTimeoutError" in text and isinstance(err.value.__cause__, KazooTimeoutError), text
    assert zookeeper_unreachable(err.value)  # the health check still reads it as the ensemble unreachable
