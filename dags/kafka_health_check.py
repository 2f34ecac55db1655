"""Airflow DAG file: one ``kafka_health_check_<cluster>`` DAG per configured cluster (defined in
``kafka_runbooks.dags.health_check``; one file for every DAG instead: kafka_runbooks/example_dags/kafka_runbooks_dags.py)."""

from kafka_runbooks.dags.health_check import health_check_dags

globals().update(health_check_dags())
