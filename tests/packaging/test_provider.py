"""The provider's metadata and the DAG factory, in this checkout's venv (the clean install is test_clean_install.py):
the provider info is what Airflow's schema accepts and names classes that exist with matching connection types; the
one DAG file creates the same DAGs as the repository's dags/; the Spark applications are the package's files."""

from __future__ import annotations

import importlib
import json
import re
from importlib import metadata, resources
from pathlib import Path

import pytest

from kafka_runbooks.provider import get_provider_info

REPO = Path(__file__).resolve().parents[2]


def _import(dotted: str):
    module, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module), name)


def test_provider_info_is_valid_for_airflow_and_names_real_classes():
    import jsonschema
    import airflow

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    assert info["package-name"] == "kafka-runbooks" and info["versions"] == [metadata.version("kafka-runbooks")]
    for conn in info["connection-types"]:
        hook = _import(conn["hook-class-name"])
        # Airflow warns of an "Inconsistency" and registers the hook's own type when they differ
        assert hook.conn_type == conn["connection-type"], conn
    assert {c["connection-type"] for c in info["connection-types"]} == {"kafka_runbooks_zookeeper", "kafka_runbooks_kafka"}
    from airflow.sdk import BaseOperatorLink
    from airflow.plugins_manager import AirflowPlugin

    assert all(issubclass(_import(link), BaseOperatorLink) for link in info["extra-links"])
    (plugin,) = info["plugins"]
    cls = _import(plugin["plugin-class"])
    assert issubclass(cls, AirflowPlugin) and cls.name == plugin["name"]
    # the incidents view opens as a page of its own (no url_route: Airflow's framed plugin views block target=_top)
    assert any(v.get("href") == "/kafka-runbooks/incidents" and not v.get("url_route") for v in cls.external_views), cls.external_views


def test_the_distribution_declares_both_entry_points():
    # as Airflow looks them up: by group, across the installed distributions
    eps = {(group, ep.name): ep for group in ("apache_airflow_provider", "airflow.plugins", "console_scripts")
           for ep in metadata.entry_points(group=group) if ep.dist and ep.dist.name == "kafka-runbooks"}
    dist = eps[("apache_airflow_provider", "provider_info")].dist
    eps = {k: ep.value for k, ep in eps.items()}
    assert eps[("apache_airflow_provider", "provider_info")] == "kafka_runbooks.provider:get_provider_info"
    assert eps[("airflow.plugins", "kafka_runbooks")] == "kafka_runbooks.web.plugin:KafkaRunbooksPlugin"
    assert eps[("console_scripts", "kafka-runbooks")] == "kafka_runbooks.cli:main"
    assert not any(r.startswith(("pytest", "hypothesis", "playwright")) and "extra ==" not in r for r in dist.requires)
    assert not any(re.search(r"==\s*[0-9]", r) for r in dist.requires)  # ranges: the exact pins are constraints/ci.txt's


def test_the_spark_applications_are_package_data():
    from kafka_runbooks.operators.analyze import DEFAULT_APP, FLEET_APP

    for app, name in ((DEFAULT_APP, "analyze_bundle.py"), (FLEET_APP, "fleet_analytics.py")):
        assert app.is_file() and app.name == name
        assert app.read_bytes() == (REPO / "spark_apps" / name).read_bytes()
        assert resources.files("kafka_runbooks").joinpath("spark_apps", name).read_bytes() == app.read_bytes()


@pytest.mark.usefixtures("airflow_db")
def test_one_dag_file_creates_what_the_repository_dags_create(tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    monkeypatch.delenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", raising=False)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps(
        {"east": {"zk_conn_id": "zk", "hosts": {"1": "h1"}}, "west": {"zk_conn_id": "zk", "hosts": {"1": "h1"}}}))
    one = tmp_path / "dags"
    one.mkdir()
    example = resources.files("kafka_runbooks").joinpath("example_dags", "kafka_runbooks_dags.py").read_text()
    (one / "kafka_runbooks_dags.py").write_text(example)
    assert len(example.splitlines()) <= 12
    factory, repo = DagBag(str(one)), DagBag(str(REPO / "dags"))
    assert factory.import_errors == {} and repo.import_errors == {}
    assert sorted(factory.dag_ids) == sorted(repo.dag_ids)
    assert {"kafka_health_check_east", "kafka_health_check_west", "kafka_incident_response", "kafka_rolling_restart",
            "kafka_preferred_election", "kafka_preferred_election_schedule", "kafka_fleet_analytics"} == set(factory.dag_ids)
    for dag_id in factory.dag_ids:
        assert sorted(factory.get_dag(dag_id).task_ids) == sorted(repo.get_dag(dag_id).task_ids), dag_id
        assert factory.get_dag(dag_id).fileloc == str(one / "kafka_runbooks_dags.py")
