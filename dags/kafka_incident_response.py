"""Airflow DAG file: ``kafka_incident_response`` (defined in ``kafka_runbooks.dags.incident_response``; one file for every DAG instead:
kafka_runbooks/example_dags/kafka_runbooks_dags.py)."""

from kafka_runbooks.dags.incident_response import build

dag = build()
