"""Validation of names and ids that reach paths, SQL keys and remote argv: the whole value must match, never a prefix.

Python's ``re.match(r"^...$")`` accepts a value with a trailing newline (``$`` matches before a final ``\\n``), so
``"lab-1\\n"`` passed ``validate_id``. Every validator uses ``fullmatch`` (or says why ``$`` is safe). Pure."""

from __future__ import annotations

import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_runbooks.incidents.request import parse_request
from kafka_runbooks.incidents.store import IncidentError, validate_id
from kafka_runbooks.schedules import parse_window

CI = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
_GOOD = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,100}", fullmatch=True).filter(lambda s: ".." not in s)
_TAIL = st.sampled_from(["\n", "\r\n", "\r", "\x00", " ", "\t", "\n\n", "/..", "\u2028"])


@settings(max_examples=500, **CI)
@given(good=_GOOD, tail=_TAIL)
def test_an_id_with_anything_after_it_is_refused(good, tail):
    assert validate_id(good) == good
    with pytest.raises(IncidentError):
        validate_id(good + tail)
    with pytest.raises(IncidentError):
        validate_id(good + tail, "cluster name")


@settings(max_examples=300, **CI)
@given(good=_GOOD, tail=st.sampled_from(["\n", "\r\n"]))
def test_a_request_with_a_newline_in_its_cluster_or_incident_id_is_refused(good, tail):
    with pytest.raises(IncidentError):
        parse_request({"cluster": good + tail, "broker_ids": [1]})
    with pytest.raises(IncidentError):
        parse_request({"cluster": "lab", "broker_ids": [1], "incident_id": good + tail})


@given(text=st.text(alphabet=string.printable, max_size=30))
@settings(max_examples=500, **CI)
def test_validate_id_accepts_exactly_its_alphabet(text):
    ok = (bool(text) and len(text) <= 128 and text[0].isascii() and text[0].isalnum() and ".." not in text
          and all(c.isascii() and (c.isalnum() or c in "_.-") for c in text))
    try:
        validate_id(text)
        accepted = True
    except IncidentError:
        accepted = False
    assert accepted == ok, repr(text)


def test_the_cluster_param_of_the_trigger_form_refuses_a_trailing_newline():
    """Airflow checks a param against its JSON schema with jsonschema, whose ``pattern`` is Python's ``re.search``."""
    from airflow.sdk.definitions.param import Param
    from airflow.exceptions import ParamValidationError

    from kafka_runbooks.operators.params import cluster_param

    p = cluster_param()
    assert Param(**{**p.dump(), "default": None}).resolve("lab") == "lab"
    with pytest.raises(ParamValidationError):
        Param(**{**p.dump(), "default": None}).resolve("lab\n")


def test_a_window_with_a_trailing_newline_still_parses_but_nothing_after_it():
    assert parse_window("22:00-06:00\n") == (22 * 60, 6 * 60)  # "\s*" at its end: whitespace is part of the form
    with pytest.raises(ValueError):
        parse_window("22:00-06:00\nx")
