"""The Parquet tables' Arrow builder: the same table pa.array() would build, without importing pandas."""

import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_runbooks.analyze.tables import SCHEMAS, arrow_table

SCHEMA = pa.schema([("s", pa.string()), ("i", pa.int32()), ("l", pa.int64()), ("d", pa.float64()), ("b", pa.bool_()),
                    ("m", pa.map_(pa.string(), pa.string()))])


def reference(rows, schema):
    """What pa.array() builds from the same rows (a missing key null, a null map empty)."""
    cols = {}
    for f in schema:
        vals = [r.get(f.name) for r in rows]
        cols[f.name] = [list((v or {}).items()) for v in vals] if pa.types.is_map(f.type) else vals
    return pa.Table.from_pydict(cols, schema=schema)


text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
row = st.fixed_dictionaries({}, optional={
    "s": st.none() | text, "i": st.none() | st.integers(-2**31, 2**31 - 1), "l": st.none() | st.integers(-2**63, 2**63 - 1),
    "d": st.none() | st.floats(allow_nan=False) | st.integers(-2**53, 2**53), "b": st.none() | st.booleans(),
    "m": st.none() | st.dictionaries(text, text, max_size=3)})


@settings(max_examples=300, deadline=None)
@given(st.lists(row, max_size=20))
def test_the_table_equals_what_pa_array_builds(rows):
    built = arrow_table(rows, SCHEMA)
    built.validate(full=True)
    assert built.equals(reference(rows, SCHEMA))


def test_edge_cases_equal_pa_array():
    rows = [{"s": "", "m": {}}, {"s": "çé ünïcode ✓", "i": 0, "b": False}, {"s": None, "l": -1, "d": 1}, {},
            {"s": "a" * 1000, "m": {"k": "", "ü": "v"}, "d": 2.5}]
    for sample in (rows, rows[:1], rows[3:4], []):
        assert arrow_table(sample, SCHEMA).equals(reference(sample, SCHEMA))
    log = SCHEMAS["log_events"]
    one = {"path": "hosts/1/server.log", "broker_id": 1, "layout": "kafka", "line": 7, "ts": "2026-01-01 00:00:00,000",
           "level": "WARN", "signature": "fetch_error", "attrs": {"peer": "2"}, "raw": "[...] WARN x (y)"}
    assert arrow_table([one, dict(one, attrs=None, exception="E", exception_line=8)], log).equals(
        reference([one, dict(one, attrs=None, exception="E", exception_line=8)], log))


@pytest.mark.parametrize("column, value, error", [("i", "7", TypeError), ("i", 1.5, TypeError), ("i", True, TypeError),
                                                  ("i", 2**31, OverflowError), ("s", 7, TypeError), ("d", "1.5", TypeError),
                                                  ("b", 1, TypeError), ("m", {"k": 1}, TypeError),
                                                  ("d", 2**53 + 1, ValueError), ("l", 2**63, OverflowError)])
def test_a_value_of_the_wrong_type_or_range_is_an_error_not_a_conversion(column, value, error):
    with pytest.raises(error, match=f"column {column}"):
        arrow_table([{column: None}, {column: value}], SCHEMA)


def test_building_and_writing_a_table_does_not_import_pandas():
    code = ("import sys, tempfile, os, pyarrow.parquet as pq\n"
            "from kafka_runbooks.analyze.tables import SCHEMAS, arrow_table\n"
            "t = arrow_table([{'path': 'p', 'line': 1, 'attrs': {'a': 'b'}}, {'path': None}], SCHEMAS['log_events'])\n"
            "pq.write_table(t, os.path.join(tempfile.mkdtemp(), 'x.parquet'))\n"
            "print('pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
