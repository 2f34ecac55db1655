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


DATE_ARGV = ("date", "+%s.%N %z")  # the host's clock and UTC offset, read by host_clock


def host_clock_or_ours(date_text: str) -> tuple[dt.datetime, dt.timedelta, bool]:
    """(now, the host's UTC offset, whether the host said): this worker's clock and UTC when it did not."""
    got = host_clock(date_text)
    return (*got, True) if got is not None else (clock.now(), dt.timedelta(0), False)


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


def meminfo_available(text: str) -> int | None:
    """``/proc/meminfo`` -> MemAvailable in bytes."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def status_rss(text: str) -> int | None:
    """``/proc/<pid>/status`` -> VmRSS in bytes."""
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def thread_names(text: str) -> dict[int, str]:
    """``/proc/<pid>/task/*/stat`` lines (``tid (name) S ...``) -> {tid: name}. The name (comm, at most 15
    characters) may hold spaces and parentheses: it ends at the LAST ')' of the line."""
    out = {}
    for line in text.splitlines():
        head, sep, _ = line.rpartition(")")
        tid, _, name = head.partition(" (")
        if sep and tid.strip().isdigit():
            out[int(tid)] = name
    return out


def io_rchar_total(text: str) -> int | None:
    """One or more ``/proc/<pid>/task/<tid>/io`` -> the sum of their ``rchar`` (bytes read through read
    syscalls, page cache or not)."""
    values = [int(line.split()[1]) for line in text.splitlines() if line.startswith("rchar:") and line.split()[1:2] and line.split()[1].isdigit()]
    return sum(values) if values else None


def offsets_dirs(text: str, log_dir: str):
    """``find <log dir> ... -printf '%h %f %s\\n'`` over ``__consumer_offsets-*/*.log`` -> one
    OffsetsPartitionDir per partition directory (segments, bytes, oldest and newest segment)."""
    from kafka_runbooks.model import CONSUMER_OFFSETS, OffsetsPartitionDir

    acc: dict[int, list[tuple[str, int]]] = {}
    for line in text.splitlines():
        parts = line.rsplit(" ", 2)
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        directory, name, size = parts
        base = directory.rstrip("/").rsplit("/", 1)[-1]
        prefix = CONSUMER_OFFSETS + "-"
        if not base.startswith(prefix) or not base[len(prefix):].isdigit() or not name.endswith(".log"):
            continue
        acc.setdefault(int(base[len(prefix):]), []).append((name, int(size)))
    return [OffsetsPartitionDir(p, len(segs), sum(s for _, s in segs), min(n for n, _ in segs), max(n for n, _ in segs), log_dir,
                                sum(1 for _, s in segs if s == 0))
            for p, segs in sorted(acc.items())]
