"""Connections and the cluster Variable of docker-compose.yml's practice cluster, written into Airflow's metadata
database (``airflow connections import`` / ``variables import``): the SSH client key and each broker host's key come
from the shared keys volume (the broker containers publish theirs there), so nothing secret is in the compose file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = Path(os.environ.get("KAFKA_RUNBOOKS_KEYS", "/keys"))
BROKERS = {1: "kafka1", 2: "kafka2", 3: "kafka3"}
CLUSTER = "practice"


def host_key(host: str) -> str:
    kind, key, *_ = (KEYS / "hosts" / f"{host}.pub").read_text().split()
    return f"{kind} {key}"


def connections() -> dict:
    key = (KEYS / "id_ed25519").read_text()
    out = {"practice_zk": {"conn_type": "generic", "host": "zk1:2181,zk2:2181,zk3:2181", "extra": json.dumps({"chroot": "/kafka"})},
           "spark_default": {"conn_type": "spark", "host": "local[2]"},
           "kafka_runbooks_approvals": {"conn_type": "generic", "password": os.environ["KAFKA_RUNBOOKS_APPROVAL_KEY"]}}
    for b, host in BROKERS.items():
        out[f"practice_kafka_{b}"] = {"conn_type": "ssh", "host": host, "port": 22, "login": "kafka", "extra": json.dumps(
            {"private_key": key, "host_key": host_key(host), "no_host_key_check": False, "conn_timeout": 10, "cmd_timeout": 60})}
    return out


def cluster() -> dict:
    bin_dir = "/opt/kafka-host/bin"
    return {CLUSTER: {
        "zk_conn_id": "practice_zk",
        "hosts": {str(b): f"practice_kafka_{b}" for b in BROKERS},
        "listener": "REPLICATION",
        "broker_port": 9092,
        "stop_command": [f"{bin_dir}/kafka-stop"], "start_command": [f"{bin_dir}/kafka-start"], "kill_command": [f"{bin_dir}/kafka-kill"],
        "server_log_path": "/var/log/kafka/server.log",
        "server_properties_path": "/opt/kafka/config/server.properties",
        "kafka_home": "/opt/kafka",
        "kafka_version": "2.3.0",
        "bundle_base": "/var/lib/kafka-runbooks/bundles",
        "incident_base": "/var/lib/kafka-runbooks/incidents",
        "approvals": {"approvers": ["alice", "bob", "carol"]},
        "zookeeper": {"servers": {str(z): {"address": f"zk{z}:2181"} for z in (1, 2, 3)}},
    }}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        conns, variables = Path(tmp) / "connections.json", Path(tmp) / "variables.json"
        conns.write_text(json.dumps(connections()))
        variables.write_text(json.dumps({"kafka_runbooks_clusters": json.dumps(cluster())}))
        for argv in (["airflow", "connections", "import", "--overwrite", str(conns)], ["airflow", "variables", "import", str(variables)]):
            if subprocess.call(argv) != 0:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
