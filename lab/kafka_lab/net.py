"""Loopback addresses of everything the lab and the tests start, by slot.

Several labs (and test runs) may run side by side on one machine: each takes a *slot*
(``KAFKA_RUNBOOKS_SLOT``, default 0) and owns the loopback network 127.(100+slot).0.0/16, so two
slots never share an address or a port. Linux answers for all of 127.0.0.0/8 on ``lo``, no setup.

    127.S.0.z   ZooKeeper node z of the lab ensemble (client 2181, quorum 2888, election 3888)
    127.S.1.b   broker host b: sshd 2222, Kafka client listener 9092, replication listener 9093, JMX 9999
    127.S.2.n   single servers the tests start (ZooKeeper, capture sshd, api-server, webhook, Spark, ...)
"""

from __future__ import annotations

import os

SLOT_ENV = "KAFKA_RUNBOOKS_SLOT"
MAX_SLOT = 99

ZK_CLIENT_PORT = 2181
ZK_QUORUM_PORT = 2888
ZK_ELECTION_PORT = 3888
SSH_PORT = 2222
KAFKA_CLIENT_PORT = 9092
KAFKA_REPLICATION_PORT = 9093
JMX_PORT = 9999

# the third octet's uses
_ZK, _BROKER, _SERVICE = 0, 1, 2

# fixed host numbers inside 127.S.2.0/24, one per kind of test server
SERVICE_HOSTS = {
    "zookeeper": 1,
    "capture_ssh": 21,
    "capture_ssh_down": 22,  # nothing listens there: an unreachable host
    "api_server": 30,
    "webhook": 31,
    "spark_master": 40,
    "spark_worker": 41,
    "lab_bad_client": 50,  # the lab's bad-request fault sends from here
    "kafka_archive": 51,  # a local stand-in for the Apache archive (kafka_home download test)
    "postgres": 60,  # servers.Postgres: the product's state database, the deployed Airflow's metadata database
    "redis": 61,  # servers.Redis: the deployed Airflow's Celery broker
    # deployment.py: a real Airflow deployment, one address per "machine" (each serves its own logs on it)
    "deploy_control": 70,  # api-server, scheduler, dag-processor, triggerer
    "deploy_worker_1": 71,  # Celery worker 1
    "deploy_worker_2": 72,  # Celery worker 2
    "deploy_oncall": 73,  # the on-call webhook the deployment's pages go to
}


def slot() -> int:
    raw = os.environ.get(SLOT_ENV, "0").strip() or "0"
    if not raw.isdigit() or int(raw) > MAX_SLOT:
        raise ValueError(f"{SLOT_ENV}={raw!r}: expected an integer 0..{MAX_SLOT}")
    return int(raw)


def _ip(third: int, host: int, s: int | None) -> str:
    s = slot() if s is None else s
    if not 0 <= s <= MAX_SLOT or not 1 <= host <= 254:
        raise ValueError(f"no lab address for slot {s}, host {host}")
    return f"127.{100 + s}.{third}.{host}"


def zk_ip(z: int, s: int | None = None) -> str:
    return _ip(_ZK, int(z), s)


def broker_ip(b: int, s: int | None = None) -> str:
    return _ip(_BROKER, int(b), s)


def service_ip(kind: str, s: int | None = None) -> str:
    return _ip(_SERVICE, SERVICE_HOSTS[kind], s)
