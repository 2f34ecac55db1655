"""Airflow DAG file: ``kafka_preferred_election_schedule`` (defined in ``kafka_runbooks.dags.preferred_election_schedule``; one file for every DAG instead:
kafka_runbooks/example_dags/kafka_runbooks_dags.py)."""

from kafka_runbooks.dags.preferred_election_schedule import build

dag = build()
