"""Per-cluster settings.

Credentials never live here: ZooKeeper and every broker host are Airflow connections, named by id.
The settings themselves come from the Airflow Variable ``kafka_runbooks_clusters`` (a JSON object
keyed by cluster name), or from a JSON file named by ``KAFKA_RUNBOOKS_CLUSTERS_FILE`` for tools
that run outside Airflow.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

VARIABLE_NAME = "kafka_runbooks_clusters"
FILE_ENV = "KAFKA_RUNBOOKS_CLUSTERS_FILE"


class ConfigError(ValueError):
    """A cluster's settings are missing or wrong; the message says which and why."""


@dataclass(frozen=True)
class CaptureSettings:
    jstack_count: int = 3
    jstack_interval_s: float = 5.0
    command_timeout_s: float = 60.0
    connect_timeout_s: float = 10.0
    log_tail_lines: int = 2000
    heap_dump: bool = True
    heap_dump_fetch_limit_bytes: int = 1 << 30  # larger dumps stay on the host; the manifest says where
    remote_work_dir: str = "/tmp"  # where a heap dump is written on the broker host
    # argv prefix for JVM tools, e.g. ["sudo", "-n", "-u", "kafka"] when SSH logs in as another user
    jvm_tool_prefix: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CaptureSettings":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        unknown = set(d) - set(known)
        if unknown:
            raise ConfigError(f"unknown capture settings: {sorted(unknown)}")
        if "jvm_tool_prefix" in known:
            known["jvm_tool_prefix"] = tuple(known["jvm_tool_prefix"])
        s = cls(**known)
        if s.jstack_count < 1 or s.jstack_interval_s < 0 or s.command_timeout_s <= 0:
            raise ConfigError("capture: jstack_count >= 1, jstack_interval_s >= 0, command_timeout_s > 0")
        return s


@dataclass(frozen=True)
class ClusterConfig:
    name: str
    zk_conn_id: str  # Airflow connection: host "h1:p1,h2:p2", extra {"chroot": "/kafka"}
    hosts: Mapping[int, str]  # broker id -> Airflow SSH connection id of its host
    broker_port: int = 9092  # fallback when a registration carries no port
    # argv run over SSH on the broker's host; "{broker_id}" is the only placeholder.
    restart_command: tuple[str, ...] = ("sudo", "-n", "systemctl", "restart", "kafka")
    server_log_path: str = "/var/log/kafka/server.log"  # "{broker_id}" allowed
    kafka_version: str | None = None
    min_insync_replicas: int | None = None  # cluster default; topic overrides are read from ZooKeeper
    bundle_base: str = "/var/lib/kafka-runbooks/bundles"
    incident_base: str = "/var/lib/kafka-runbooks/incidents"
    recovery_timeout_s: float = 300.0
    approval_timeout_s: float = 3600.0
    spark_conn_id: str = "spark_default"
    capture: CaptureSettings = field(default_factory=CaptureSettings)

    def ssh_conn_id(self, broker_id: int) -> str:
        try:
            return self.hosts[int(broker_id)]
        except KeyError:
            raise ConfigError(f"cluster {self.name!r} has no SSH connection for broker {broker_id}") from None

    def restart_argv(self, broker_id: int) -> tuple[str, ...]:
        return tuple(part.replace("{broker_id}", str(int(broker_id))) for part in self.restart_command)

    def server_log(self, broker_id: int) -> str:
        return self.server_log_path.replace("{broker_id}", str(int(broker_id)))

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any]) -> "ClusterConfig":
        try:
            hosts = {int(k): str(v) for k, v in dict(d["hosts"]).items()}
            restart = d.get("restart_command", cls.restart_command)
            if isinstance(restart, str):
                raise ConfigError(f"cluster {name!r}: restart_command must be an argv list, not a shell string")
            known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__ and k not in ("hosts", "capture", "name")}
            unknown = set(d) - set(cls.__dataclass_fields__)
            if unknown:
                raise ConfigError(f"cluster {name!r}: unknown settings {sorted(unknown)}")
            known["restart_command"] = tuple(str(x) for x in restart)
            return cls(
                name=name,
                hosts=hosts,
                capture=CaptureSettings.from_dict(d.get("capture") or {}),
                **known,
            )
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"cluster {name!r}: bad settings: {exc!r}") from exc


def _raw_clusters() -> Mapping[str, Any]:
    path = os.environ.get(FILE_ENV)
    if path:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    from airflow.sdk import Variable  # imported late: nothing slow at DAG parse time

    return Variable.get(VARIABLE_NAME, deserialize_json=True)


def load_cluster(name: str, raw: Mapping[str, Any] | None = None) -> ClusterConfig:
    clusters = raw if raw is not None else _raw_clusters()
    if name not in clusters:
        raise ConfigError(f"unknown cluster {name!r}; configured: {sorted(clusters)}")
    return ClusterConfig.from_dict(name, clusters[name])
