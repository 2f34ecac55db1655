"""JMX is read (issue 16 §3), on the lab's real Kafka 2.3.0 brokers with Kafka's own JmxTool over SSH, as the health
check and the preferred election read it. Before the fix every reading was "JmxTool printed a header but no values"
and the election's queue check passed on no data."""

from __future__ import annotations

import dataclasses
import os

import pytest

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.host.jmxtool import REQUEST_QUEUE
from kafka_runbooks.detect.observe import check_once
from kafka_runbooks.detect.snapshot import read_snapshot
from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
from kafka_runbooks.remediate import election as E
from kafka_runbooks.remediate.election_run import read_metrics

pytestmark = [pytest.mark.lab, pytest.mark.timeout(600)]


def lab_config(lab, tmp_path, **leadership) -> ClusterConfig:
    os.environ.update(lab.airflow_env())
    raw = dict(lab.cluster_settings()["lab"])
    raw["incident_base"] = str(tmp_path / "incidents")
    # JmxTool is a JVM start on a shared 2-core machine (load average 29 seen): the reading, not its speed, is tested
    raw["leadership"] = {**raw.get("leadership", {}), "jmx_timeout_s": 120.0, **leadership}
    return ClusterConfig.from_dict("lab", raw)


def snapshot_of(config):
    with ZooKeeperHook(config.zk_conn_id).session() as zk:
        return read_snapshot(zk, config.name)


def views_of(config, snapshot):
    from kafka_runbooks.hooks.kafka import KafkaHook

    return KafkaHook(config.kafka_conn_id, listener=config.listener).metadata_views(snapshot.brokers, 10.0)


def test_the_request_queues_are_read_from_the_real_jmxtool(healthy_lab, tmp_path):
    config = lab_config(healthy_lab, tmp_path)
    snapshot = snapshot_of(config)
    metrics, _, notes, _ = read_metrics(config, snapshot)
    assert sorted(m.broker_id for m in metrics) == [1, 2, 3], notes
    for m in metrics:
        assert m.ok, m.error
        assert m.get(REQUEST_QUEUE, "Value") is not None and m.get(REQUEST_QUEUE, "Value") >= 0
        assert len(m.values) > 20  # every attribute of incident 003's list that the broker has
    assert E.convergence(snapshot, [], views=views_of(config, snapshot), metrics=metrics) == []
    # the health check keeps the figures and says nothing is unknown
    snap, findings = check_once(config)
    assert not [f for f in findings if f.kind == "request_metrics_unknown"], [f.summary for f in findings]
    assert all(snap.metrics_of(b).ok for b in (1, 2, 3))


def test_a_jmx_port_that_does_not_answer_is_unknown_never_a_pass(healthy_lab, tmp_path):
    # JMX asked where nothing listens: JmxTool retries its connection for 10 s and exits 1
    config = lab_config(healthy_lab, tmp_path, jmx_host="127.0.0.9", jmx_timeout_s=40.0)
    snapshot = snapshot_of(config)
    metrics, _, _, _ = read_metrics(config, snapshot)
    assert metrics and all(not m.ok for m in metrics)
    assert all("JmxTool exit 1" in m.error and "Could not connect" in m.error for m in metrics), [m.error for m in metrics]
    why = E.convergence(snapshot, [], views=views_of(config, snapshot), metrics=metrics)
    assert len(why) == 3 and all("request queue is unknown" in w for w in why), why
    _, findings = check_once(dataclasses.replace(config, canary=dataclasses.replace(config.canary, enabled=False)))
    (f,) = [f for f in findings if f.kind == "request_metrics_unknown"]
    assert f.broker_ids == (1, 2, 3) and "Could not connect" in f.summary
