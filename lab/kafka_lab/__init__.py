"""kafka_lab: the local practice cluster (ZooKeeper ensemble, SSH hosts, real Apache Kafka 2.3.0 brokers, load)."""

from .hosts import BROKER_IDS, host_name, host_user
from .kafka_home import KAFKA_VERSION
from .lab import CHROOT, Lab, default_state_dir, host_conn_id, zk_connect
from .net import broker_ip
from .procs import LabError, port_open, wait_until

__all__ = ["Lab", "LabError", "wait_until", "default_state_dir", "broker_ip", "host_name", "host_user", "host_conn_id",
           "port_open", "zk_connect", "BROKER_IDS", "CHROOT", "KAFKA_VERSION"]
