"""Airflow DAG file: ``kafka_preferred_election`` (defined in ``kafka_runbooks.dags.preferred_election``; one file for every DAG instead:
kafka_runbooks/example_dags/kafka_runbooks_dags.py)."""

from kafka_runbooks.dags.preferred_election import build

dag = build()
