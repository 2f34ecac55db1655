"""Every kafka-runbooks DAG for every configured cluster (Airflow DAG file): copy this file into your DAG folder.

The clusters come from the Airflow Variable ``kafka_runbooks_clusters`` (``kafka-runbooks validate --variable``
checks it); a cluster added there gets its health-check DAG at the next parse.
"""

from kafka_runbooks.dags import create_dags

create_dags(globals())
