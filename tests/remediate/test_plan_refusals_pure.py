"""A roll that includes a host the product cannot reach over SSH is refused at plan time, naming the host (issue 16 §3).
Pure half; the lab half is tests/e2e/test_unreachable_host_lab.py."""

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.remediate.plan import plan_restart
from snapshot_builders import P, snap


def test_an_unreachable_host_refuses_its_step_naming_the_host():
    config = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"}})
    s = snap([P("orders", 0, (1, 2, 3), 1, (1, 2, 3))])
    plan = plan_restart(s, [1, 2, 3], config, unreachable={2: "h2: SSHError: [Errno 111] Connection refused"})
    assert plan.refused
    assert plan.refusals == ("broker 2: its host cannot be reached over SSH now (h2: SSHError: [Errno 111] Connection refused): "
                             "its stop and start could not be run",)
    assert not plan_restart(s, [1, 3], config, unreachable={}).refused


def test_one_setting_for_the_brokers_stdout_the_retired_one_is_refused_with_its_replacement():
    import pytest

    from kafka_runbooks.config import ConfigError

    base = {"zk_conn_id": "zk", "hosts": {"1": "h1"}, "server_log_path": "/var/log/kafka/server.log"}
    assert ClusterConfig.from_dict("c1", base).stdout_log(1) == "/var/log/kafka/kafkaServer.out"
    moved = ClusterConfig.from_dict("c1", {**base, "capture": {"stdout_log": "kafka.out", "log_dir": "/logs/{broker_id}"}})
    assert moved.stdout_log(1) == "/logs/1/kafka.out"
    with pytest.raises(ConfigError, match=r"stdout_log_path is retired: replaced by capture.stdout_log"):
        ClusterConfig.from_dict("c1", {**base, "stdout_log_path": "/var/log/kafka/kafkaServer.out"})
    with pytest.raises(ConfigError, match="capture.stdout_log must be a file name"):
        ClusterConfig.from_dict("c1", {**base, "capture": {"stdout_log": "/var/log/kafka/kafkaServer.out"}})
