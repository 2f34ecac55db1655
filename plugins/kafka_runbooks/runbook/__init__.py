"""The application, as plain functions over hooks and the state store: what the operators (Airflow glue) call.

    cluster.py   the cluster's state now, for close-outs and summaries
"""
