"""When the serving watch fires (pure): the decision of ``triggers/serving.py``, apart from its I/O.

Every round the watch asks each registered broker one tiny request (``hooks/kafka_wire.answers``) and hands the
answers here. A broker that failed ``failures`` rounds in a row is *not answering* -- or one round, when its
registered endpoint refused the connection (nothing listens there: a JVM that died or is shutting down still holds
its registration until its ZooKeeper session ends; a slow answer, by contrast, may be a busy broker, so a timeout
needs ``failures`` rounds); the watch fires once for it (the health check it starts looks at everything else), and
fires for that broker again only after it answered a round (a new outage). A broker fires at most once per
``debounce_s``: a broker that answers one round in two never starts more than one health check per ``debounce_s``;
its later outages within that gap wait and go out with the next event. Another broker's first outage is not held
back by an event for the first (a restart of broker 3, then a deadlock of broker 2 twenty seconds later: the
deadlock is seen at once, not 40 s later); brokers that stop answering in one round go out in one event, and Airflow
folds events that arrive while a check is queued into that one run (``max_active_runs=1``), so a cluster-wide outage
starts no storm either.

A broker that is no longer registered is forgotten (ZooKeeper's own watch reports the deregistration).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


@dataclass(frozen=True)
class Answer:
    """One round's answer (or not) of one broker."""

    broker_id: int
    ok: bool
    endpoint: str = ""
    error: str | None = None
    took_s: float | None = None
    refused: bool = False  # the connection was refused: nothing listens on the registered endpoint


@dataclass
class _Streak:
    failures: int = 0
    since: float | None = None  # when the first failure of this streak was seen (the caller's clock)
    since_iso: str | None = None
    error: str | None = None
    endpoint: str = ""
    refused: bool = False  # its last round's connection was refused
    fired: bool = False  # this streak is already in an event


@dataclass(frozen=True)
class Fire:
    """What one event reports: the brokers that stopped answering (``{id: what was seen}``)."""

    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)

    def summary(self) -> str:
        return "; ".join(f"broker {b} did not answer {d['failures']} round(s) in a row ({d['error']})"
                         for b, d in sorted(self.brokers.items()))


class ServingWatch:
    def __init__(self, failures: int, debounce_s: float) -> None:
        if int(failures) < 1 or float(debounce_s) < 0:
            raise ValueError("failures >= 1 and debounce_s >= 0")
        self.failures = int(failures)
        self.debounce_s = float(debounce_s)
        self.streaks: dict[int, _Streak] = {}
        self.last_fired: dict[int, float] = {}  # broker id -> when an event last named it

    def observe(self, answers: Iterable[Answer], now: float, now_iso: str | None = None) -> Fire | None:
        """One round (``answers``: every registered broker's; the others are forgotten). The event to send, or None."""
        answers = list(answers)
        seen = {a.broker_id for a in answers}
        for gone in set(self.streaks) - seen:
            del self.streaks[gone]
        for a in answers:
            st = self.streaks.setdefault(a.broker_id, _Streak())
            if a.ok:
                self.streaks[a.broker_id] = _Streak()  # answered: a later failure is a new outage
                continue
            if st.failures == 0:
                st.since, st.since_iso = now, now_iso
            st.failures += 1
            st.error, st.endpoint, st.refused = a.error, a.endpoint, a.refused
        due = {b: st for b, st in self.streaks.items() if (st.failures >= self.failures or st.refused) and not st.fired
               and (b not in self.last_fired or now - self.last_fired[b] >= self.debounce_s)}
        if not due:
            return None
        for b, st in due.items():
            st.fired = True
            self.last_fired[b] = now
        return Fire({b: {"failures": st.failures, "since": st.since_iso, "error": st.error, "endpoint": st.endpoint}
                     for b, st in sorted(due.items())})

    def not_answering(self) -> list[int]:
        return sorted(b for b, st in self.streaks.items() if st.failures >= self.failures or st.refused)
