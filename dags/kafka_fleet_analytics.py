"""Airflow DAG file: ``kafka_fleet_analytics`` (defined in ``kafka_runbooks.dags.fleet_analytics``; one file for every DAG instead:
kafka_runbooks/example_dags/kafka_runbooks_dags.py)."""

from kafka_runbooks.dags.fleet_analytics import build

dag = build()
