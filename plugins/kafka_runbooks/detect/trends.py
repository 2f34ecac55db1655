"""Trends over a series' recent samples. Pure. Every trend carries the samples (time, value) that
show it, so a finding can cite them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kafka_runbooks import clock
from kafka_runbooks.detect.history import Sample


@dataclass(frozen=True)
class Trend:
    series: str
    key: str
    points: tuple[tuple[str, float], ...]  # (ISO time, value), oldest first
    change: float  # last - first (or the rate, for rates)
    unit: str = ""

    def excerpt(self) -> str:
        pts = " -> ".join(f"{_num(v)}{self.unit} at {at}" for at, v in self.points)
        return f"{self.series} {self.key}: {pts}"

    def to_dict(self) -> dict:
        return {"series": self.series, "key": self.key, "points": [list(p) for p in self.points],
                "change": self.change, "unit": self.unit}


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:.1f}"


def points(samples: Sequence[Sample], key: str, n: int) -> list[tuple[str, float]]:
    """The numeric values of ``key`` in the last ``n`` samples (samples without it are skipped)."""
    out = []
    for s in list(samples)[-n:]:
        v = s.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((s.at, float(v)))
    return out


def rising(series: str, samples: Sequence[Sample], key: str, min_growth: float, n: int) -> Trend | None:
    """``key`` never fell over the last ``n`` samples (at least 3 of them) and rose by ``min_growth``."""
    pts = points(samples, key, n)
    if len(pts) < min(3, n) or len(pts) < 2:
        return None
    values = [v for _, v in pts]
    if any(b < a for a, b in zip(values, values[1:])):
        return None
    change = values[-1] - values[0]
    if change < min_growth or change <= 0:
        return None
    return Trend(series, key, tuple(pts), change)


def falling(series: str, samples: Sequence[Sample], key: str, n: int, min_drop_ratio: float = 0.0) -> Trend | None:
    """``key`` never rose over the last ``n`` samples (at least 3) and fell (by more than ``min_drop_ratio`` of its first value)."""
    pts = points(samples, key, n)
    if len(pts) < 3:
        return None
    values = [v for _, v in pts]
    if any(b > a for a, b in zip(values, values[1:])) or values[-1] >= values[0] or values[0] - values[-1] <= min_drop_ratio * values[0]:
        return None
    return Trend(series, key, tuple(pts), values[-1] - values[0])


def rate(series: str, samples: Sequence[Sample], key: str) -> Trend | None:
    """Per-second increase of a (socket-churning) counter between the last two samples; a drop
    (sockets closed) counts as no traffic seen, not negative traffic."""
    pts = points(samples, key, 2)
    if len(pts) < 2:
        return None
    (t0, v0), (t1, v1) = pts
    seconds = (clock.parse(t1) - clock.parse(t0)).total_seconds()
    if seconds <= 0:
        return None
    return Trend(series, key, tuple(pts), round(max(0.0, v1 - v0) / seconds, 1), unit="")


def last_true(samples: Sequence[Sample], key: str) -> Sample | None:
    """The newest sample where ``key`` was true (e.g. the last one in which a broker was registered)."""
    for s in reversed(list(samples)):
        if s.get(key) is True:
            return s
    return None
