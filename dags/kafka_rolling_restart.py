"""Airflow DAG file: ``kafka_rolling_restart`` (defined in ``kafka_runbooks.dags.rolling_restart``; one file for every DAG instead:
kafka_runbooks/example_dags/kafka_runbooks_dags.py)."""

from kafka_runbooks.dags.rolling_restart import build

dag = build()
