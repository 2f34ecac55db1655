#!/bin/bash
# One-shot: migrates the metadata database, then sets the practice cluster's connections, the cluster Variable and the
# remediation pool in it (docker/airflow/configure.py) -- the way the lab's deployment does through the REST API.
set -euo pipefail
airflow db migrate
python /opt/kafka-runbooks/docker/airflow/configure.py
airflow pools set kafka_runbooks_remediation 1 "tasks that change a Kafka cluster"
