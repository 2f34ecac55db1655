"""Issue 19 §8: every DAG says what it is in the list (description) and on its page (doc_md); every parameter is
described, and what the trigger form lets through is what the DAG accepts -- a broker list the form cannot check
(items declared ``integer``: Airflow's form checks array items only when they are ``number``) is refused here.

Issue 32 point 8: with clusters configured, the brokers field offers exactly the configured broker ids (Airflow's
multi-select: an array param with ``examples``), so ``[1.5]`` or a broker that does not exist (``[9]``) cannot be
entered in the form, and the api-server refuses them from anywhere else."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("airflow_db")


def test_every_dag_has_a_description_and_doc_md(bag):
    assert len(bag.dag_ids) >= 6
    for dag_id in bag.dag_ids:
        dag = bag.get_dag(dag_id)
        assert dag.description and len(dag.description) > 20, dag_id
        assert dag.doc_md and len(dag.doc_md) > 20, dag_id


def test_every_param_is_described_and_array_items_are_checked_by_the_form(bag):
    for dag_id in bag.dag_ids:
        for name, param in bag.get_dag(dag_id).params.items():
            schema = param.schema
            assert param.description or schema.get("description"), (dag_id, name)
            if schema.get("type") == "array":
                # a multi-select of the allowed values, or a list whose items the form checks
                assert schema.get("examples") or (schema.get("items") or {}).get("type") in ("number", "string"), (dag_id, name)


@pytest.mark.parametrize("dag_id,key", [("kafka_rolling_restart", "brokers"), ("kafka_preferred_election", "brokers"),
                                        ("kafka_incident_response", "broker_ids")])
def test_broker_lists_offer_the_configured_brokers_and_refuse_anything_else(bag, dag_id, key):
    from airflow.sdk.exceptions import ParamValidationError

    param = bag.get_dag(dag_id).params.get_param(key)
    schema = param.schema
    # the form: a multi-select of the cluster's brokers (the bag's Variable: cluster lab, brokers 1, 2, 3), named in words
    assert schema["examples"] == [1, 2, 3] and schema["values_display"] == {"1": "broker 1", "2": "broker 2", "3": "broker 3"}
    assert "Choose from the configured brokers" in param.description
    # what the form sends (strings) and what REST sends (numbers)
    assert param.resolve([1, 2]) == [1, 2] and param.resolve(["1", "3"]) == ["1", "3"] and param.resolve([]) == []
    for bad in ([9], ["9"], [1.5], [-1], "1,2", [1, 1], [{"id": 1}], [True]):
        with pytest.raises(ParamValidationError):
            param.resolve(bad)


def test_without_configured_clusters_the_brokers_are_a_json_list_of_whole_numbers():
    from airflow.sdk.exceptions import ParamValidationError

    from kafka_runbooks.operators.params import broker_ids_param, configured_brokers

    param = broker_ids_param("Brokers.", brokers={})
    assert "examples" not in param.schema and param.schema["items"]["type"] == "number"
    assert param.resolve([1, 2]) == [1, 2]
    for bad in (["1"], [1.5], [-1], [1, 1]):
        with pytest.raises(ParamValidationError):
            param.resolve(bad)
    # several clusters: each broker id once, named with its clusters
    brokers = configured_brokers({"east": {"hosts": {"1": "a", "2": "b"}}, "west": {"hosts": {"2": "c", "x": "d"}}})
    assert brokers == {1: ["east"], 2: ["east", "west"]}
    shown = broker_ids_param("Brokers.", brokers=brokers).schema["values_display"]
    assert shown == {"1": "broker 1 (east)", "2": "broker 2 (east, west)"}
