"""The end-to-end tests' lab: the session lab, healed, with this test's own incidents, history and bundles."""

from __future__ import annotations

import json
import os

import pytest


@pytest.fixture
def lab_settings(healthy_lab, airflow_db, tmp_path, monkeypatch):
    """(lab, the lab's cluster settings with this test's own incident_base and bundle_base), published to the DAGs
    through AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS; nothing queued by other tests' runs is left."""
    from kafka_lab.airflow_home import take_triggered_confs
    from kafka_lab.drill import RESPONSE

    os.environ.update(healthy_lab.airflow_env())
    clusters = healthy_lab.cluster_settings()
    clusters["lab"] = {**clusters["lab"], "incident_base": str(tmp_path / "incidents"), "bundle_base": str(tmp_path / "bundles")}
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(clusters))
    take_triggered_confs(RESPONSE)
    return healthy_lab, clusters["lab"]
