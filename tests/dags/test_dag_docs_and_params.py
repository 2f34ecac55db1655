"""Issue 19 §8: every DAG says what it is in the list (description) and on its page (doc_md); every parameter is
described, and what the trigger form lets through is what the DAG accepts -- a broker list the form cannot check
(items declared ``integer``: Airflow's form checks array items only when they are ``number``) is refused here."""

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
                assert (schema.get("items") or {}).get("type") in ("number", "string"), (dag_id, name)


@pytest.mark.parametrize("dag_id,key", [("kafka_rolling_restart", "brokers"), ("kafka_preferred_election", "brokers"),
                                        ("kafka_incident_response", "broker_ids")])
def test_broker_lists_accept_ids_and_refuse_anything_else(bag, dag_id, key):
    from airflow.sdk.exceptions import ParamValidationError

    param = bag.get_dag(dag_id).params.get_param(key)
    assert param.resolve([1, 2]) == [1, 2] and param.resolve([]) == []
    for bad in (["1"], [1.5], [-1], "1,2", [1, 1], [{"id": 1}]):
        with pytest.raises(ParamValidationError):
            param.resolve(bad)
