"""Telling on-call: notifiers in Airflow's convention (``airflow.sdk.bases.notifier.BaseNotifier``)."""
