"""Registers the kafka-runbooks Airflow plugin (its FastAPI app in the api-server: kafka_runbooks/web/) when plugins/
is Airflow's plugins folder. The package itself is imported normally (.airflowignore keeps it from being loaded
file by file)."""

from kafka_runbooks.web.plugin import KafkaRunbooksPlugin

__all__ = ["KafkaRunbooksPlugin"]
