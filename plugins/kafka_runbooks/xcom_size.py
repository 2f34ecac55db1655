"""How big a value is as it travels in XCom (and in an approval's request), and the budget it must fit
(issue 18 §4: no XCom over 1 MB anywhere in the loop -- findings, plans, snapshots). Pure.

The size is the value's JSON as Airflow's XCom serializer stores it (UTF-8, before any compression): the same bytes
the metadata database, the api-server and the UI move for every read of it.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

XCOM_BUDGET_BYTES = 1024 * 1024


class XComTooBig(AssertionError):
    """A value over the XCom budget; the message names it, its size and its biggest parts."""


def xcom_bytes(value: Any) -> int:
    return len(json.dumps(value, default=str, separators=(", ", ": ")).encode("utf-8"))


def biggest_parts(value: Any, n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` biggest top-level parts of a mapping (or items of a list) with their sizes: where the bytes are."""
    if isinstance(value, Mapping):
        parts = [(str(k), xcom_bytes(v)) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        parts = [(f"[{i}]", xcom_bytes(v)) for i, v in enumerate(value)]
    else:
        return []
    return sorted(parts, key=lambda kv: -kv[1])[:n]


def assert_xcom_fits(value: Any, what: str, budget: int = XCOM_BUDGET_BYTES) -> int:
    """The value's size in bytes; :class:`XComTooBig` naming ``what`` when it is over ``budget``."""
    size = xcom_bytes(value)
    if size > budget:
        where = ", ".join(f"{k} {v:,} B" for k, v in biggest_parts(value))
        raise XComTooBig(f"{what} is {size:,} bytes as XCom, over the budget of {budget:,}" + (f" (biggest: {where})" if where else ""))
    return size
