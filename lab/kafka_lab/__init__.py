"""kafka_lab: the local practice cluster (ZooKeeper ensemble, SSH hosts, Kafka 0.10.1.0 broker stand-ins)."""

from .lab import (BROKER_IDS, CHROOT, KAFKA_VERSION, ZK_CONNECT, Lab, LabError, default_state_dir, host_address,
                  host_conn_id, host_user, port_open, wait_until)

__all__ = ["Lab", "LabError", "wait_until", "default_state_dir", "host_address", "host_user", "host_conn_id", "port_open",
           "BROKER_IDS", "ZK_CONNECT", "CHROOT", "KAFKA_VERSION"]
