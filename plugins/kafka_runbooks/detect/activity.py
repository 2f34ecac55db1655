"""The product's own work on a cluster, as the detectors see it (issue 16 §3, issue 17 §5). Pure.

A rolling restart, an incident restart or a preferred election moves leaderships, restarts brokers (new sessions, new
registrations) and shrinks ISRs on purpose. The health check reads what ran and what runs (``remediate/activity.py``:
the maintenance lock's holder, the plans' ledgers in the incident store) and the detectors attribute to it what it
caused: leader moves inside a plan's window are never an election storm, and findings about the brokers of a plan that
is running, or was when the snapshot was taken, are annotated (``details.during_plan``) and open no competing incident,
capture or plan.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.model import Finding

# findings that a running plan's own steps cause and that must not start a competing response while it runs
CAUSED_BY_PLANS = ("broker_unresponsive", "broker_check_failed", "broker_unregistered_alive", "broker_absent", "broker_starting",
                   "under_replicated_partitions", "isr_shape_suspect", "offline_partitions", "rebalance_hazard",
                   "leadership_imbalance", "election_storm", "metadata_divergence", "follower_stuck", "follower_catching_up",
                   "host_unreachable", "log_cleaner_not_running", "broker_socket_pileup", "request_queue_saturated",
                   "requests_failing", "connection_storm")
LEADERSHIP_KINDS = ("election_storm", "metadata_divergence", "rebalance_hazard", "leadership_imbalance")
SLACK_S = 30.0  # a plan's effects (a controller's election, an ISR re-expanding) lag its ledger entries this much


@dataclass(frozen=True)
class Activity:
    """One remediation of the product on the cluster: its record in the incident store, its kind, the brokers it acts on,
    and when it acted (``ended`` None: it is running -- it holds the maintenance lock, or its ledger has no end)."""

    record: str
    kind: str  # "rolling_restart" | "incident_restart" | "preferred_election" | ...
    brokers: tuple[int, ...]
    started: str
    ended: str | None = None
    run: str | None = None
    holds_lock: bool = False

    @property
    def running(self) -> bool:
        return self.ended is None

    def covers(self, t0: str | None, t1: str, slack_s: float = SLACK_S) -> bool:
        """Did it act within (t0, t1] (widened by ``slack_s``)?"""
        start = clock.parse(self.started) - dt.timedelta(seconds=slack_s)
        end = clock.parse(self.ended) + dt.timedelta(seconds=slack_s) if self.ended else None
        lo = clock.parse(t0) if t0 else clock.parse(t1)
        return start <= clock.parse(t1) and (end is None or end >= lo)

    def describe(self) -> str:
        state = "running" if self.running else f"{self.started} .. {self.ended}"
        return f"{self.kind} {self.record} (brokers {list(self.brokers)}, {state}{', holds the maintenance lock' if self.holds_lock else ''})"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"brokers": list(self.brokers)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Activity":
        return cls(record=str(d["record"]), kind=str(d["kind"]), brokers=tuple(int(b) for b in d.get("brokers") or ()),
                   started=str(d["started"]), ended=d.get("ended"), run=d.get("run"), holds_lock=bool(d.get("holds_lock")))


def covering(activity: Iterable[Activity], t0: str | None, t1: str) -> list[Activity]:
    return [a for a in activity if a.covers(t0, t1)]


def annotate(findings: Iterable[Finding], activity: Iterable[Activity], observed_at: str | None = None) -> list[Finding]:
    """Findings about the brokers of a plan that runs -- or that ran when the snapshot was taken (``observed_at``,
    within ``SLACK_S``) -- (or, for leadership findings, any such plan) get ``details.during_plan``: what ran, and that
    no competing response starts for them. A snapshot taken while a roll had its broker down is the roll's even when
    the roll ended before the detectors ran on it (seen: the serving watch's run read broker 2 absent during the roll,
    the roll ended 0.5 s before its detect task, and an incident opened about the product's own restart)."""
    running = [a for a in activity if a.running or (observed_at and a.covers(observed_at, observed_at))]
    if not running:
        return list(findings)
    out = []
    for f in findings:
        hit = [a for a in running if f.kind in CAUSED_BY_PLANS and
               (f.kind in LEADERSHIP_KINDS or not f.broker_ids or set(f.broker_ids) <= set(a.brokers))]
        if hit:
            note = "; ".join(a.describe() for a in hit)
            tail = "no competing response while it runs" if any(a.running for a in hit) else "seen while it ran: no competing response"
            f = dataclasses.replace(f, summary=f"{f.summary} [during the product's own {note}: {tail}]",
                                    details={**f.details, "during_plan": [a.to_dict() for a in hit]})
        out.append(f)
    return out


def during_plan(f: Finding) -> bool:
    return bool(f.details.get("during_plan"))
