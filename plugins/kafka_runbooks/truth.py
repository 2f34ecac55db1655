"""The one truthiness rule: how a switch given as text (a templated DAG param, a connection's extra) is read.

Strict: only these words count, compared case-insensitively after stripping; any other word is an error, never
quietly False (a misspelt ``canary=ture`` would otherwise switch the canary gate off) nor quietly True. ``None`` and
the text ``"None"`` (how Airflow renders an unset templated value) are False.
"""

from __future__ import annotations

from typing import Any

TRUE_WORDS = ("true", "1", "yes")
FALSE_WORDS = ("false", "0", "no", "", "none")


def truthy(value: Any) -> bool:
    """True or False for a boolean, None or one of the words above; ValueError for anything else."""
    if value is True or value is False:
        return value
    if value is None:
        return False
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"not a yes/no value: {str(value)[:40]!r} (say one of {', '.join(TRUE_WORDS + FALSE_WORDS[:3])})")
