"""The blast radius as a person reads it first: per step, per topic, how many partitions lose an in-sync replica,
whose leadership moves, whose group / transaction coordinator moves, which would be left AT (or below) their
min.insync.replicas, and which go offline. Pure: a plan (its steps' ``blast_radius`` lines, written by
``safety.blast_radius``) and the min ISR per topic in, rows out. The full list stays on the incident page.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from kafka_runbooks.model import Plan

_LOSES = re.compile(r"loses in-sync replica (?P<b>\d+)(?: \(isr \[(?P<before>[\d,]*)\] -> \[(?P<after>[\d,]*)\]\))?")
INTERNAL = ("__consumer_offsets", "__transaction_state")


@dataclass(frozen=True)
class TopicBlast:
    broker_id: int  # the step's broker (down while this holds)
    topic: str
    partitions: int  # partitions of the topic the stop touches
    losing_replica: int
    leaderships_moving: int
    coordinators_moving: int
    at_min_isr: int  # left with exactly min.insync.replicas in-sync replicas, or fewer
    offline: int
    min_isr: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TopicBlast":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


def split_line(line: str) -> tuple[str, str, str]:
    """("topic", "partition", "effects") of one ``safety.blast_radius`` line ("orders-3: loses ...")."""
    name, _, effects = line.partition(": ")
    topic, _, number = name.rpartition("-")
    return topic or name, number, effects


def summarize(plan: Plan, min_isr: Mapping[str, int | None] | None = None) -> list[TopicBlast]:
    """One row per (step, topic), steps in plan order, internal topics first then by name."""
    min_isr = min_isr or {}
    rows: list[TopicBlast] = []
    for step in plan.steps:
        per: dict[str, dict[str, int]] = {}
        for line in step.blast_radius:
            topic, _, effects = split_line(line)
            c = per.setdefault(topic, {"partitions": 0, "losing_replica": 0, "leaderships_moving": 0,
                                       "coordinators_moving": 0, "at_min_isr": 0, "offline": 0})
            c["partitions"] += 1
            m = _LOSES.search(effects)
            if m:
                c["losing_replica"] += 1
                need = min_isr.get(topic)
                after = [x for x in (m["after"] or "").split(",") if x]
                if need is not None and m["after"] is not None and len(after) <= need:
                    c["at_min_isr"] += 1
            if "coordinator and leadership move" in effects:
                c["coordinators_moving"] += 1
                c["leaderships_moving"] += 1
            elif "leadership moves" in effects:
                c["leaderships_moving"] += 1
            if "partition offline" in effects or "offline until" in effects:
                c["offline"] += 1
        for topic in sorted(per, key=lambda t: (t not in INTERNAL, t)):
            rows.append(TopicBlast(step.broker_id, topic, min_isr=min_isr.get(topic), **per[topic]))
    return rows


def min_isr_by_topic(snapshot, plan: Plan, settings) -> dict[str, int | None]:
    """min.insync.replicas of every topic the plan's steps touch (the highest of its partitions'; None: unknown)."""
    from kafka_runbooks.remediate.safety import min_isr

    touched = {split_line(line)[0] for s in plan.steps for line in s.blast_radius}
    out: dict[str, int | None] = {}
    for p in snapshot.partitions:
        if p.topic not in touched:
            continue
        value, _ = min_isr(p, snapshot, settings)
        if p.topic in out and (out[p.topic] is None or value is None):
            out[p.topic] = None
        else:
            out[p.topic] = max(value, out.get(p.topic) or 0) if value is not None else None
    return out


def headline(rows: Sequence[TopicBlast]) -> str:
    """One sentence over the whole plan: partitions losing a replica, leaderships and coordinators moving, at min ISR."""
    if not rows:
        return "no partition loses an in-sync replica"
    t = {k: sum(getattr(r, k) for r in rows) for k in ("losing_replica", "leaderships_moving", "coordinators_moving", "at_min_isr", "offline")}
    parts = [f"{t['losing_replica']} partition-stops lose an in-sync replica", f"{t['leaderships_moving']} leaderships move",
             f"{t['coordinators_moving']} coordinators move", f"{t['at_min_isr']} left at min ISR"]
    if t["offline"]:
        parts.append(f"{t['offline']} OFFLINE")
    return ", ".join(parts)


def rows_from(value: Iterable[Mapping[str, Any]] | None) -> list[TopicBlast]:
    return [TopicBlast.from_dict(d) for d in value or ()]


@dataclass(frozen=True)
class TopicTotal:
    """One topic over the whole plan: the worst single step (brokers are down one at a time) and where it is."""

    topic: str
    partitions: int
    losing_replica: int
    leaderships_moving: int
    coordinators_moving: int
    at_min_isr: int
    offline: int
    min_isr: int | None
    worst_broker: int  # the step whose stop touches most of the topic


def by_topic(rows: Sequence[TopicBlast]) -> list[TopicTotal]:
    """Per topic, the highest figures of any one step (internal topics first, then the topics with most at min ISR,
    most losing a replica)."""
    out: dict[str, TopicTotal] = {}
    for r in rows:
        t = out.get(r.topic)
        worst = r.broker_id if t is None or (r.at_min_isr, r.losing_replica) > (t.at_min_isr, t.losing_replica) else t.worst_broker
        out[r.topic] = TopicTotal(
            r.topic, *(max(getattr(r, k), getattr(t, k) if t else 0) for k in
                       ("partitions", "losing_replica", "leaderships_moving", "coordinators_moving", "at_min_isr", "offline")),
            min_isr=r.min_isr, worst_broker=worst)
    return sorted(out.values(), key=lambda t: (t.topic not in INTERNAL, -t.offline, -t.at_min_isr, -t.losing_replica, t.topic))
