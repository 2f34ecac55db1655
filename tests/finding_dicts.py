"""Where a finding sits, as a dict, inside a value a task hands to the next (an XCom, a run's conf): the test of issue
28's rule that findings cross task boundaries only as references (``runbook/finding_records.py``)."""

from __future__ import annotations

from typing import Any

FINDING_KEYS = {"kind", "severity", "summary"}  # what ``Finding.from_dict`` needs: a dict with these is a finding


def finding_dicts(value: Any, where: str = "") -> list[str]:
    """The paths (``[key][index]...``) of every dict in ``value`` that is a finding."""
    found = []
    if isinstance(value, dict):
        if FINDING_KEYS <= set(value):
            found.append(where or "(the value itself)")
        for k, v in value.items():
            found += finding_dicts(v, f"{where}[{k!r}]")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found += finding_dicts(v, f"{where}[{i}]")
    return found
