"""Parsers for what the host probe reads from a broker host: ``/proc/<pid>/stat``, ``date`` and
``stat`` output. Pure."""

from __future__ import annotations

import datetime as dt
import re

from kafka_runbooks import clock
from kafka_runbooks.model import PROCESS_STATES

_OFFSET_RE = re.compile(r"^([+-])(\d\d)(\d\d)$")


def process_state(stat_text: str, pid: int) -> str | None:
    """The state word of ``/proc/<pid>/stat`` (``"stopped"`` for T, ...). The command name (field 2)
    is in parentheses and may itself contain spaces and parentheses: the state follows the LAST ')'."""
    text = stat_text.strip()
    if not text.startswith(f"{int(pid)} ("):
        return None
    rest = text[text.rfind(")") + 1:].split()
    if not rest:
        return None
    return PROCESS_STATES.get(rest[0], f"unknown:{rest[0][:3]}")


def host_clock(date_text: str) -> tuple[dt.datetime, dt.timedelta] | None:
    """``date +'%s.%N %z'`` -> (now in UTC, the host's UTC offset)."""
    parts = date_text.split()
    if len(parts) != 2:
        return None
    try:
        epoch = float(parts[0])
    except ValueError:
        return None
    m = _OFFSET_RE.match(parts[1])
    if not m:
        return None
    sign = -1 if m.group(1) == "-" else 1
    offset = sign * dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
    return dt.datetime.fromtimestamp(epoch, clock.UTC), offset


def mtime(stat_text: str) -> dt.datetime | None:
    """``stat -c %Y FILE`` -> the file's mtime (UTC)."""
    text = stat_text.strip()
    if not text.isdigit():
        return None
    return dt.datetime.fromtimestamp(int(text), clock.UTC)


def uptime_s(etimes_text: str) -> float | None:
    """``ps -o etimes= -p PID`` -> seconds since the process started."""
    text = etimes_text.strip()
    return float(text) if text.isdigit() else None
