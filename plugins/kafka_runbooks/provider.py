"""The provider's metadata, read by Airflow's ProvidersManager through the ``apache_airflow_provider`` entry point
(pyproject.toml): the connection types (a cluster's ZooKeeper ensemble, its Kafka clients) with their hooks, the
operator extra links to the incidents view, and the plugin that serves that view in the api-server. Nothing here
imports Airflow or the package's heavy modules: Airflow reads this in every process."""

from __future__ import annotations

from importlib import metadata
from typing import Any

PACKAGE_NAME = "kafka-runbooks"
ZOOKEEPER_CONN_TYPE = "kafka_runbooks_zookeeper"
KAFKA_CONN_TYPE = "kafka_runbooks_kafka"


def _version() -> str:
    try:
        return metadata.version(PACKAGE_NAME)
    except metadata.PackageNotFoundError:  # a checkout on sys.path without the distribution installed
        return "0.0.0"


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": PACKAGE_NAME,
        "name": "Kafka runbooks",
        "description": "Automated runbooks for ZooKeeper-mode Kafka clusters: detect, capture over SSH, analyze with "
                       "PySpark, remediate through a gated engine (rolling restart, preferred election).",
        "versions": [_version()],
        "connection-types": [
            {"connection-type": ZOOKEEPER_CONN_TYPE, "hook-class-name": "kafka_runbooks.hooks.zookeeper.ZooKeeperHook",
             "hook-name": "ZooKeeper (kafka-runbooks)"},
            {"connection-type": KAFKA_CONN_TYPE, "hook-class-name": "kafka_runbooks.hooks.kafka.KafkaHook",
             "hook-name": "Kafka clients (kafka-runbooks)"},
        ],
        "hook-class-names": ["kafka_runbooks.hooks.zookeeper.ZooKeeperHook", "kafka_runbooks.hooks.kafka.KafkaHook"],
        "extra-links": ["kafka_runbooks.operators.links.IncidentLink", "kafka_runbooks.operators.links.ReportLink"],
        "plugins": [{"name": "kafka_runbooks", "plugin-class": "kafka_runbooks.web.plugin.KafkaRunbooksPlugin"}],
    }
