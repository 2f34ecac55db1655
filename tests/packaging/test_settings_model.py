"""The settings as one typed model (issue 31): strict types, every error naming the cluster, the path and what was
expected; every section checked when the DAG file is parsed; the published JSON Schema kept up to date; and
``kafka-runbooks validate``. Pure: no lab."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_runbooks.cli import main
from kafka_runbooks.config import ClusterConfig, ConfigError, health_schedules
from kafka_runbooks.config import ClusterConfig, all_errors
from kafka_runbooks.settings_model import json_schema

REPO = Path(__file__).resolve().parents[2]
OK = {"zk_conn_id": "prod_zk", "hosts": {"1": "prod_kafka_1", "2": "prod_kafka_2"}}


def _errors(raw: dict) -> list[str]:
    return all_errors({"prod": raw}).get("prod", [])


@pytest.mark.parametrize("raw, expected", [
    ({**OK, "health": {"watch_zookeeper": "false"}}, "cluster 'prod': health.watch_zookeeper: expected true or false, got 'false'"),
    ({**OK, "capture": {"jstack_count": "2"}}, "cluster 'prod': capture.jstack_count: expected an integer, got '2'"),
    ({**OK, "gates": {"stop_s": "2"}}, "cluster 'prod': gates.stop_s: expected a number, got '2'"),
    ({**OK, "canary": {"enabled": 1}}, "cluster 'prod': canary.enabled: expected true or false, got 1"),
    ({**OK, "hosts": {}}, "cluster 'prod': hosts: expected at least one entry, got {}"),
    ({**OK, "hosts": {"1": None}}, "cluster 'prod': hosts.1: expected a string, got None"),
    ({**OK, "hosts": {"1": ""}}, "cluster 'prod': hosts.1: expected a non-empty string, got ''"),
    ({**OK, "hosts": {"one": "h1"}}, "cluster 'prod': hosts.one: expected a broker id (a number, as a string in JSON), got 'one'"),
    ({"zk_conn_id": "prod_zk"}, "cluster 'prod': hosts: missing: a required setting"),
    ({**OK, "stop_command": "systemctl stop kafka"}, "cluster 'prod': stop_command must be an argv list, not a shell string"),
    ({**OK, "election": {"window": "01:00-02:00"}}, "cluster 'prod': election.window: expected a list, got '01:00-02:00'"),
    ({**OK, "capture": {"stop_comand": ["x"]}}, "cluster 'prod': capture.stop_comand: unknown setting"),
    ({**OK, "stop_comand": ["x"]}, "cluster 'prod': stop_comand: unknown setting"),
    ({**OK, "zookeeper": {"servers": {"1": {"address": 2181}}}}, "cluster 'prod': zookeeper.servers.1.address: expected a string, got 2181"),
    ({**OK, "approvals": {"approvers": ["alice", 7]}}, "cluster 'prod': approvals.approvers.1: expected a string, got 7"),
])
def test_each_bad_setting_is_refused_with_a_sentence_naming_the_cluster_the_path_and_the_expectation(raw, expected):
    assert _errors(raw) == [expected]
    with pytest.raises(ConfigError) as exc:
        ClusterConfig.from_dict("prod", raw)
    assert expected in str(exc.value)


@pytest.mark.parametrize("key", ["restart_command", "recovery_timeout_s", "approval_timeout_s", "stdout_log_path"])
def test_retired_keys_stay_refused_by_name(key):
    (err,) = _errors({**OK, key: 1})
    assert err.startswith(f"cluster 'prod': {key} is retired: ")


def test_range_checks_run_after_the_types_and_name_the_cluster():
    assert _errors({**OK, "capture": {"jstack_count": 0}}) == [
        "cluster 'prod': capture: jstack_count >= 1, jstack_interval_s >= 0, command_timeout_s > 0"]
    assert _errors({**OK, "election": {"method": "magic"}}) == [
        "cluster 'prod': election.method must be one of ['auto', 'zookeeper', 'admin'], not 'magic'"]


def test_valid_settings_load_as_before():
    raw = {**OK, "hosts": {"1": "h1", 2: "h2"}, "stop_command": ["sudo", "-n", "systemctl", "stop", "kafka"],
           "capture": {"jstack_interval_s": 5, "jvm_tool_prefix": ["sudo"]}, "health": {"watch_zookeeper": False},
           "zookeeper": {"servers": {"1": "zk1:2181", "2": {"address": "zk2:2181", "zone": "b"}}}, "capture_": None}
    raw.pop("capture_")
    assert _errors(raw) == []
    cfg = ClusterConfig.from_dict("prod", raw)
    assert cfg.hosts == {1: "h1", 2: "h2"} and cfg.capture.jstack_interval_s == 5 and cfg.capture.jvm_tool_prefix == ("sudo",)
    assert cfg.zookeeper.servers["2"].zone == "b" and cfg.zookeeper.servers["1"].address == "zk1:2181"


def test_every_section_is_checked_when_the_dag_file_is_parsed():
    """A cluster whose bad key is outside ``health`` gets no health-check DAG, with the key named; the others do."""
    raw = {"good": OK, "bad": {**OK, "stop_command": ["x"], "capture": {"bogus": 1}}, "typed": {**OK, "kill_command": "kill"}}
    schedules, errors = health_schedules(raw)
    assert [s.cluster for s in schedules] == ["good"]
    assert errors == {"bad": "cluster 'bad': capture.bogus: unknown setting",
                      "typed": "cluster 'typed': kill_command must be an argv list, not a shell string"}


def test_the_health_check_dags_skip_a_bad_cluster_and_warn_naming_the_key():
    from kafka_runbooks.config import ClusterSettingsWarning
    from kafka_runbooks.dags.health_check import health_check_dags

    with pytest.warns(ClusterSettingsWarning, match=r"cluster 'bad' gets no health-check DAG: cluster 'bad': hosts\.1: expected a string"):
        dags = health_check_dags({"good": OK, "bad": {**OK, "hosts": {"1": None}}})
    assert list(dags) == ["kafka_health_check_good"]


def test_the_published_json_schema_is_up_to_date_and_describes_the_settings():
    published = json.loads((REPO / "docs" / "settings.schema.json").read_text())
    assert published == json_schema(ClusterConfig), "docs/settings.schema.json is stale: run `kafka-runbooks schema -o docs/settings.schema.json`"
    import jsonschema

    validator = jsonschema.Draft202012Validator(published)
    assert not list(validator.iter_errors({"prod": OK}))
    for bad in ({"prod": {**OK, "health": {"watch_zookeeper": "false"}}}, {"prod": {**OK, "hosts": {}}},
                {"prod": {**OK, "hosts": {"1": None}}}, {"prod": {**OK, "surprise": 1}}, {"bad name!": OK}):
        assert list(validator.iter_errors(bad)), bad
    capture = published["$defs"]["CaptureSettingsModel"]["properties"]
    assert capture["jstack_count"]["type"] == "integer" and capture["jstack_count"]["default"] == 3
    assert "thread dumps" in capture["jstack_count"]["description"]


def test_validate_prints_one_sentence_per_problem_and_exits_1(tmp_path, capsys):
    path = tmp_path / "clusters.json"
    path.write_text(json.dumps({"east": OK, "west": {**OK, "hosts": {}, "canary": {"enabled": "yes"}}}))
    assert main(["validate", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["cluster 'west': hosts: expected at least one entry, got {}",
                                "cluster 'west': canary.enabled: expected true or false, got 'yes'"]
    assert err.strip() == f"{path}: 1 of 2 cluster(s) valid: east"
    path.write_text(json.dumps({"east": OK}))
    assert main(["validate", str(path)]) == 0
    path.write_text("{not json")
    assert main(["validate", str(path)]) == 2


def test_validate_reads_the_airflow_variable(monkeypatch, capsys):
    monkeypatch.delenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", raising=False)
    monkeypatch.setenv("AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS", json.dumps({"lab": {**OK, "gates": {"poll_s": True}}}))
    assert main(["validate", "--variable"]) == 1
    assert capsys.readouterr().out.splitlines() == ["cluster 'lab': gates.poll_s: expected a number, got True"]
