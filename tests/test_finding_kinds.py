"""One vocabulary of finding kinds (``kafka_runbooks/findings.py``): every kind the code makes or names is in the
registry, with one name per kind, and every kind in the registry has its meaning written down.

Read from the code with ``ast`` (every ``Finding(kind=...)`` of the product and the Spark apps, and comparisons of a
finding's kind), and from the collections of kinds the detectors, the incident lifecycle and the engine decide by.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from kafka_runbooks.findings import ALIASES, MEANING, FindingKind, canonical, is_kind
from kafka_runbooks.model import Finding, Severity

REPO = Path(__file__).resolve().parent.parent
SOURCES = sorted([*(REPO / "plugins" / "kafka_runbooks").rglob("*.py"), *(REPO / "spark_apps").glob("*.py")])

# module attributes that hold finding kinds the product decides by
KIND_COLLECTIONS = (
    ("kafka_runbooks.detect.serving", "OPENS_INCIDENT"), ("kafka_runbooks.detect.zookeeper", "OPENS_INCIDENT"),
    ("kafka_runbooks.detect.leadership", "OPENS_INCIDENT"), ("kafka_runbooks.detect.clients", "OPENS_INCIDENT"),
    ("kafka_runbooks.detect.offsets", "OPENS_INCIDENT"), ("kafka_runbooks.detect.replicas", "OPENS_INCIDENT"),
    ("kafka_runbooks.detect.detectors", "OPENS_INCIDENT"), ("kafka_runbooks.detect.activity", "CAUSED_BY_PLANS"),
    ("kafka_runbooks.detect.activity", "LEADERSHIP_KINDS"), ("kafka_runbooks.incidents.lifecycle", "STREAK_ONLY"),
    ("kafka_runbooks.remediate.choice", "PEER_SYMPTOMS"), ("kafka_runbooks.remediate.safety", "NOT_SERVING_FINDING_KINDS"),
    ("kafka_runbooks.remediate.safety", "INCIDENT_NOT_SERVING_KINDS"), ("kafka_runbooks.capture.collector", "OFFSETS_KINDS"),
)
# where ``<name>.kind`` is a finding's kind (elsewhere ``f`` is often a parsed file, ``a`` an action, ``plan`` a plan)
FINDING_NAMES = ("f", "finding", "x")
COMPARED_IN = ("detect", "remediate", "incidents", "operators", "capture", "runbook", "notify", "web")


def _kinds_in(node: ast.AST, where: str) -> list[tuple[str, str]]:
    """(kind, where) for every constant or FindingKind member an expression can evaluate to."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, where)]
    if isinstance(node, ast.IfExp):
        return _kinds_in(node.body, where) + _kinds_in(node.orelse, where)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [k for e in node.elts for k in _kinds_in(e, where)]
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("FindingKind", "K"):
        member = FindingKind.__members__.get(node.attr)
        return [(member.value if member else f"FindingKind.{node.attr}", where)]
    return []


def _is_finding_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "canonical" and node.args:
        return _is_finding_kind(node.args[0])
    return isinstance(node, ast.Attribute) and node.attr == "kind" and getattr(node.value, "id", None) in FINDING_NAMES


def kinds_in_code() -> tuple[list[tuple[str, str]], list[str]]:
    """(every kind named, with where) and the places that make a Finding of a kind the reader cannot see."""
    named: list[tuple[str, str]] = []
    unseen: list[str] = []
    for path in SOURCES:
        rel = path.relative_to(REPO).as_posix()
        if rel.endswith("kafka_runbooks/findings.py"):
            continue
        compared = any(f"/kafka_runbooks/{p}/" in f"/{rel}" for p in COMPARED_IN)
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            where = f"{rel}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Finding":
                arg = next((k.value for k in node.keywords if k.arg == "kind"), node.args[0] if node.args else None)
                found = _kinds_in(arg, where) if arg is not None else []
                if not found:
                    unseen.append(f"{where}: Finding(kind={ast.unparse(arg) if arg is not None else '?'})")
                named += found
            elif compared and isinstance(node, ast.Compare) and _is_finding_kind(node.left):
                named += [k for c in node.comparators for k in _kinds_in(c, where)]
    return named, unseen


# the one place a Finding's kind comes from a variable: the spec table right above it (members of FindingKind)
VARIABLE_KIND_OK = ("plugins/kafka_runbooks/analyze/diagnosis/signature_counts.py",)


def test_every_kind_the_code_names_is_in_the_registry():
    named, unseen = kinds_in_code()
    assert len(named) > 50  # the reader sees the code's findings
    assert [k for k in named if not is_kind(k[0])] == []
    assert [u for u in unseen if not u.startswith(VARIABLE_KIND_OK)] == []


def test_every_kind_the_product_decides_by_is_in_the_registry():
    bad = []
    for module, name in KIND_COLLECTIONS:
        for kind in getattr(importlib.import_module(module), name):
            if not is_kind(kind):
                bad.append(f"{module}.{name}: {kind}")
    assert bad == []


def test_one_name_per_kind():
    assert not set(ALIASES) & set(FindingKind._value2member_map_)
    old = re.compile(r"""["'](%s)["']""" % "|".join(map(re.escape, ALIASES)))
    spelled = [f"{p.relative_to(REPO)}:{i}" for p in SOURCES if not p.name == "findings.py"
               for i, line in enumerate(p.read_text().splitlines(), 1) if old.search(line)]
    assert spelled == []
    assert {canonical(a) for a in ALIASES} <= set(FindingKind)
    assert canonical("broker_absent") == "broker_absent" and canonical("no_such_thing") == "no_such_thing"


def test_the_offsets_load_kinds_old_spellings():
    """The analysis's load started without a finish is detection's offsets_load_slow; a load that finished late has its
    own name (``slow`` means one thing): reports written before read back as these."""
    assert canonical("group_load_unfinished") == "offsets_load_slow"
    assert canonical("group_load_slow") == "offsets_load_finished_late"
    assert not is_kind("group_load_unfinished") and not is_kind("group_load_slow")


def test_every_kind_has_its_meaning():
    assert [k for k in FindingKind if not MEANING.get(k, "").strip()] == []
    assert set(MEANING) == set(FindingKind)


def test_the_runbooks_name_only_registered_kinds():
    """The detection runbook's table of findings: its first column names kinds of the registry."""
    table = [ln for ln in (REPO / "runbooks" / "detection.md").read_text().splitlines() if ln.startswith("| `")]
    named = [k for ln in table for k in re.findall(r"`([a-z_]+)`", ln.split("|")[1])]
    assert named and [k for k in named if not is_kind(k)] == []


def test_a_finding_keeps_its_kind_as_a_plain_string():
    f = Finding(FindingKind.JVM_DEADLOCK, Severity.CRITICAL, "x")
    assert type(f.kind) is str and f.kind == "jvm_deadlock" and f.to_dict()["kind"] == "jvm_deadlock"
    assert Finding.from_dict(f.to_dict()) == f


@pytest.mark.parametrize("source, expected", [
    ('Finding(kind="no_such_kind", severity=S)', [("no_such_kind", "m.py:1")]),
    ('Finding(kind="a" if x else "b")', [("a", "m.py:1"), ("b", "m.py:1")]),
    ('Finding(kind=FindingKind.JVM_DEADLOCK)', [("jvm_deadlock", "m.py:1")]),
])
def test_the_reader(source, expected):
    call = ast.parse(source).body[0].value
    assert _kinds_in(call.keywords[0].value, "m.py:1") == expected
