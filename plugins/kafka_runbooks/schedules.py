"""When things may run: daily time windows ("22:00-06:00", UTC) a deferred remediation may run in, and 5-field
cron expressions read in a timezone (health checks, scheduled elections). Pure; the settings validate with it, so it
sits below every layer that uses it."""

from __future__ import annotations

import datetime as dt
import re
from typing import Iterable

_WINDOW = re.compile(r"^\s*([01]\d|2[0-3]):([0-5]\d)\s*-\s*([01]\d|2[0-3]|24):([0-5]\d)\s*$")


def parse_window(text: str) -> tuple[int, int]:
    """"HH:MM-HH:MM" -> (start minute of the day, end minute); the end may be before the start (wraps
    midnight); "00:00-24:00" is the whole day. Raises ValueError naming the expected form."""
    m = _WINDOW.fullmatch(str(text))
    if not m:
        raise ValueError(f"window {text!r} is not 'HH:MM-HH:MM' (UTC)")
    start = int(m.group(1)) * 60 + int(m.group(2))
    end = int(m.group(3)) * 60 + int(m.group(4))
    if end > 24 * 60 or start == end:
        raise ValueError(f"window {text!r} is empty or ends after 24:00")
    return start, end


def _minute(t: dt.datetime) -> int:
    t = t.astimezone(dt.timezone.utc)
    return t.hour * 60 + t.minute


def in_window(now: dt.datetime, windows: Iterable[str]) -> bool:
    """No window configured: always open."""
    windows = list(windows)
    if not windows:
        return True
    m = _minute(now)
    for w in windows:
        start, end = parse_window(w)
        if (start <= m < end) if start < end else (m >= start or m < end):
            return True
    return False


def next_open(now: dt.datetime, windows: Iterable[str]) -> dt.datetime | None:
    """When the next window opens (``now`` if one is open; None without windows)."""
    windows = list(windows)
    if not windows:
        return None
    if in_window(now, windows):
        return now
    now = now.astimezone(dt.timezone.utc).replace(second=0, microsecond=0)
    best = None
    for w in windows:
        start, _ = parse_window(w)
        day = now.replace(hour=0, minute=0)
        candidate = day + dt.timedelta(minutes=start)
        if candidate <= now:
            candidate += dt.timedelta(days=1)
        best = candidate if best is None or candidate < best else best
    return best


def schedule_error(cron: str, timezone: str) -> str | None:
    """Why ``cron``/``timezone`` cannot be used; None when they can."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    from croniter import croniter

    if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
        return f"{cron!r} is not a 5-field cron expression (minute hour day month weekday)"
    try:
        ZoneInfo(str(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown timezone {timezone!r} (an IANA name such as 'UTC' or 'Europe/Berlin')"
    return None


def due_at(cron: str, timezone: str, start: dt.datetime, end: dt.datetime) -> dt.datetime | None:
    """The last time in (start, end] at which ``cron`` (read in ``timezone``) fires, in UTC; None if it does not.

    ``start``/``end`` may carry seconds and microseconds (a manual run's data interval ends at the moment it was
    triggered). A cron fires on whole minutes, so the last time <= ``end`` is the last one before the minute after
    ``end``'s own: croniter's ``get_prev`` returns the last time strictly before its base, to the microsecond."""
    from zoneinfo import ZoneInfo

    from croniter import croniter

    if end <= start:
        return None
    tz = ZoneInfo(timezone)
    after = end.astimezone(dt.timezone.utc).replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    last = croniter(cron, after.astimezone(tz)).get_prev(dt.datetime)
    last = last.astimezone(dt.timezone.utc)
    return last if start < last <= end else None
