"""The one .properties reader (``host/properties.py``), used by the engine (``remediate/host.py``), the leadership
probe and the analysis (``analyze/parsers/zookeeper.py``): the key ends at the first ``=``, ``:`` or blank, as
``java.util.Properties.load`` reads it (the analysis, telling prose from properties, takes no blank as the
separator). Before it, the analysis split at the first ``=`` only: ``a:b=c`` gave the key ``a:b``."""

from __future__ import annotations

from kafka_runbooks.analyze.parsers.zookeeper import parse_properties as analysis_properties
from kafka_runbooks.host.properties import parse_properties, property_line
from kafka_runbooks.remediate.host import parse_properties as engine_properties

TEXT = "# c\nbroker.id=3\nmin.insync.replicas = 2\n! c\nunclean.leader.election.enable: true\n\nlog.dirs /d\na:b=c\nbare\n"
EXPECTED = {"broker.id": "3", "min.insync.replicas": "2", "unclean.leader.election.enable": "true", "log.dirs": "/d",
            "a": "b=c"}


def test_one_reading_everywhere():
    assert parse_properties(TEXT) == EXPECTED
    assert engine_properties(TEXT) == EXPECTED
    p = analysis_properties(TEXT.encode())
    assert p.values == {k: v for k, v in EXPECTED.items() if k != "log.dirs"} and p.ok
    assert p.lines == {"broker.id": 2, "min.insync.replicas": 3, "unclean.leader.election.enable": 5, "a": 8}


def test_lines():
    assert property_line("  # x=1") is None and property_line("") is None and property_line("novalue") is None
    assert property_line("k=") == ("k", "") and property_line("k = v w ") == ("k", "v w")
    assert property_line("log.dirs /d") == ("log.dirs", "/d") and property_line("log.dirs /d", blank_separates=False) is None
    assert property_line("this is prose", blank_separates=False) is None
