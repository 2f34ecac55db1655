"""The one UTC clock of the product: every timestamp written anywhere comes from here.

Timestamps are ISO-8601 in UTC with milliseconds and a ``Z`` suffix (``2026-11-22T13:45:25.123Z``);
:func:`parse` reads them back (and the ``+00:00`` form older records carry).
"""

from __future__ import annotations

import datetime as _dt
import time as _time

UTC = _dt.timezone.utc


def now() -> _dt.datetime:
    return _dt.datetime.now(UTC)


def iso(at: _dt.datetime | None = None) -> str:
    at = (at or now()).astimezone(UTC)
    return at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_iso() -> str:
    return iso(now())


def stamp(at: _dt.datetime | None = None, *, micros: bool = False) -> str:
    """A compact stamp for ids and file names: ``20261122T134525Z`` (or with microseconds)."""
    return (at or now()).astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ" if micros else "%Y%m%dT%H%M%SZ")


def parse(text: str) -> _dt.datetime:
    """An ISO-8601 timestamp (``Z`` or offset); a naive one is taken as UTC."""
    at = _dt.datetime.fromisoformat(str(text).strip().replace("Z", "+00:00"))
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def from_millis(ms: int | float) -> _dt.datetime:
    return _dt.datetime.fromtimestamp(float(ms) / 1000.0, UTC)


def monotonic() -> float:
    return _time.monotonic()
