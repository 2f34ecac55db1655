"""The healthy lab: real Kafka 2.3.0 brokers registered with both listeners, the lab's topics, hosts, logs, load.

No skips: a missing component (java, Kafka, ZooKeeper server jars, sshd) fails the session's lab fixture.
"""

from __future__ import annotations

import json
import os
import pwd
import socket
import stat

import paramiko
import pytest

from kafka_lab import BROKER_IDS, broker_ip, host_name, host_user
from kafka_lab.topics import CANARY, OFFSETS, ORDERS
from kafka_lab.zookeeper import ZK_IDS, quorum_modes
from kafka_lab.net import zk_ip

from .lab_helpers import jstack, led_by, thread_blocks

pytestmark = pytest.mark.lab


def test_registrations_carry_both_listeners_replication_by_host_name(healthy_lab):
    regs = healthy_lab.registered_brokers()
    assert sorted(regs) == list(BROKER_IDS)
    for b, r in regs.items():
        assert r["version"] == 4
        assert r["endpoints"] == [f"CLIENT://{broker_ip(b)}:9092", f"REPLICATION://{host_name(b)}:9093"]
        assert r["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "REPLICATION": "PLAINTEXT"}
        assert r["jmx_port"] == 9999 and r["host"] == broker_ip(b) and r["port"] == 9092
        # the replication host name resolves (the lab's /etc/hosts entry) to the broker's own address
        assert socket.gethostbyname(host_name(b)) == broker_ip(b)
    assert healthy_lab.controller()["brokerid"] in BROKER_IDS
    assert quorum_modes() is not None and sorted(quorum_modes()) == list(ZK_IDS)


def test_topics_and_preferred_leaders(healthy_lab):
    parts = healthy_lab.partitions()
    by_topic = {t: [p for (tt, p) in parts if tt == t] for t in (ORDERS, CANARY, OFFSETS)}
    assert (len(by_topic[ORDERS]), len(by_topic[CANARY]), len(by_topic[OFFSETS])) == (6, 3, 50)
    for s in parts.values():
        assert len(s["replicas"]) == 3 and sorted(s["isr"]) == [1, 2, 3] and s["leader"] == s["replicas"][0]
    for b in BROKER_IDS:
        assert len(led_by({k: v for k, v in parts.items() if k[0] == ORDERS}, b)) == 2
        assert len(led_by({k: v for k, v in parts.items() if k[0] == CANARY}, b)) == 1
        assert 15 <= len(led_by({k: v for k, v in parts.items() if k[0] == OFFSETS}, b)) <= 18
    cfg = json.loads(healthy_lab.kazoo().get(f"/config/topics/{ORDERS}")[0])["config"]
    assert cfg["min.insync.replicas"] == "2"
    offsets_cfg = json.loads(healthy_lab.kazoo().get(f"/config/topics/{OFFSETS}")[0])["config"]
    assert offsets_cfg["cleanup.policy"] == "compact"  # created by Kafka itself, not by the lab


def test_brokers_run_as_host_users_with_real_logs_and_dirs(healthy_lab):
    for b in BROKER_IDS:
        pid = healthy_lab.broker_pid(b)
        with open(f"/proc/{pid}/status") as fh:
            uid = int(next(ln for ln in fh if ln.startswith("Uid:")).split()[1])
        assert pwd.getpwuid(uid).pw_name == host_user(b)
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        assert b"kafka.Kafka" in cmd and b"-Dzookeeper.sasl.client=false" in cmd
        for name in ("server.log", "controller.log", "state-change.log", "log-cleaner.log", "kafkaServer.out", "kafkaServer-gc.log"):
            assert healthy_lab.log_text(b, name), name
        assert f"[KafkaServer id={b}] started (kafka.server.KafkaServer)" in healthy_lab.log_text(b)
        assert "INFO [kafka-log-cleaner-thread-0]: Starting (kafka.log.LogCleaner)" in healthy_lab.log_text(b, "log-cleaner.log")
        assert (healthy_lab.host_dir(b) / "data" / "orders-0").is_dir() and (healthy_lab.host_dir(b) / "data" / "meta.properties").is_file()
        tmp = healthy_lab.host_dir(b) / "tmp"
        st = tmp.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and pwd.getpwuid(st.st_uid).pw_name == host_user(b)
        props = (healthy_lab.host_dir(b) / "config" / "server.properties").read_text()
        assert "inter.broker.listener.name=REPLICATION\n" in props and "zookeeper.session.timeout.ms=10000\n" in props


def test_state_dir_is_reachable_by_the_host_users(healthy_lab):
    for b in BROKER_IDS:
        for argv in (["test", "-r", str(healthy_lab.host_dir(b) / "config" / "server.properties")],
                     ["test", "-x", str(healthy_lab.script(b, "kafka-start"))],
                     ["test", "-w", str(healthy_lab.run_dir(b))],
                     ["test", "-r", str(healthy_lab.server_log(b))]):
            rc, _, err = healthy_lab.ssh(b, argv)
            assert rc == 0, (argv, err)


def test_ssh_pinned_host_keys_jstack_and_jmxtool_as_host_user(healthy_lab):
    lab = healthy_lab
    for b in BROKER_IDS:
        rc, out, err = lab.ssh(b, ["id", "-un"])
        assert (rc, out.strip()) == (0, host_user(b)), err
        threads = thread_blocks(jstack(lab, b))
        for name in ("data-plane-kafka-request-handler-0", "kafka-log-cleaner-thread-0", "controller-event-thread",
                     "lab-fault-agent", f"data-plane-kafka-network-thread-{b}-ListenerName(REPLICATION)-PLAINTEXT-2"):
            assert name in threads, name
        assert {f"ReplicaFetcherThread-0-{o}" for o in BROKER_IDS if o != b} <= set(threads)
    # Kafka's own JmxTool reads the broker's JMX port on its own address
    rc, out, err = lab.ssh(1, ["env", "-u", "JMX_PORT", "KAFKA_OPTS=-Dzookeeper.sasl.client=false",
                               f"{lab.kafka_home}/bin/kafka-run-class.sh", "kafka.tools.JmxTool", "--one-time", "true",
                               "--jmx-url", f"service:jmx:rmi:///jndi/rmi://{broker_ip(1)}:9999/jmxrmi",
                               "--object-name", "kafka.network:type=RequestChannel,name=RequestQueueSize"], timeout=90)
    assert rc == 0, err
    assert '"kafka.network:type=RequestChannel,name=RequestQueueSize:Value"' in out
    # a host whose key is not pinned is refused
    c = paramiko.SSHClient()
    c.set_missing_host_key_policy(paramiko.RejectPolicy())
    with pytest.raises(paramiko.SSHException):
        c.connect(broker_ip(1), port=2222, username=host_user(1), key_filename=str(lab.key_file), look_for_keys=False,
                  allow_agent=False, timeout=10)
    c.close()


def test_load_commits_to_a_group_coordinated_by_every_broker(healthy_lab):
    s = healthy_lab.wait_load(60)
    assert s["produced_ok"] > 0 and s["consumed"] > 0 and s["commits_ok"] > 0
    assert set(s["groups"]) == set(healthy_lab.groups.values())
    # each broker's own group coordinator stabilized the group meant for it (Kafka's partitionFor rule)
    for b, g in healthy_lab.groups.items():
        assert f"INFO [GroupCoordinator {b}]: Stabilized group {g} generation" in healthy_lab.log_text(b)
    for g in s["groups"].values():
        assert g["assigned"] == [0, 1, 2, 3, 4, 5] and g["commits_ok"] > 0


def test_cluster_settings_and_airflow_env(healthy_lab):
    lab = healthy_lab
    c = lab.cluster_settings()["lab"]
    for key in ("zk_conn_id", "hosts", "listener", "stop_command", "start_command", "kill_command", "server_log_path",
                "server_properties_path", "kafka_home", "kafka_version", "bundle_base", "incident_base",
                "approvals", "gates", "capture"):
        assert key in c, key
    for retired in ("restart_command", "recovery_timeout_s", "approval_timeout_s"):
        assert retired not in c, retired
    from kafka_runbooks.config import ClusterConfig

    config = ClusterConfig.from_dict("lab", c)  # the settings are what the product accepts
    assert "drill-bot" in config.approvals.approvers and config.kill_command
    assert c["listener"] == "REPLICATION" and c["kafka_version"] == "2.3.0"
    for name in ("stop_command", "start_command", "kill_command"):
        argv = [a.replace("{broker_id}", "2") for a in c[name]]
        assert isinstance(c[name], list) and os.access(argv[0], os.X_OK), argv
    assert os.path.isfile(c["server_properties_path"].replace("{broker_id}", "3"))
    env = lab.airflow_env()
    zk = json.loads(env["AIRFLOW_CONN_KAFKA_LAB_ZK"])
    assert zk["host"] == ",".join(f"{zk_ip(z)}:2181" for z in ZK_IDS) and zk["extra"]["chroot"] == "/kafka"
    for b in BROKER_IDS:
        conn = json.loads(env[f"AIRFLOW_CONN_KAFKA_LAB_HOST_{b}"])
        assert (conn["host"], conn["port"], conn["login"]) == (broker_ip(b), 2222, host_user(b))
        assert conn["extra"]["host_key"] == lab.host_key(b) and conn["extra"]["no_host_key_check"] is False
    assert json.loads(env["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"]) == lab.cluster_settings()
