"""The blast radius as a person reads it first: per step, per topic, how many partitions lose an in-sync replica,
whose leadership moves, whose group / transaction coordinator moves, which would be left AT (or below) their
min.insync.replicas, and which go offline. Pure: ``safety.blast_radius`` lines and the min ISR per topic in, rows out.

At any cluster size the plan that travels (XCom, the approval) stays small (:func:`compact_step`): each step keeps
the first ``SHOWN_PER_KIND`` lines of each kind, the count of every kind and the fingerprint of its whole list
(:func:`lines_sha256`); the plan keeps the per-topic totals (:func:`by_topic`) of the first ``PLAN_TOPICS`` topics.
The whole list and the per (step, topic) rows are the plan's ``detail``, kept in the state database
(``state/plans.py``) and shown on the incident page.
"""

from __future__ import annotations

import functools
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

import hashlib

from kafka_runbooks.model import Plan

SHOWN_PER_KIND = 5  # blast radius lines a step carries per kind of effect
SHOWN_OFFLINE = 40  # ... but the partitions a step takes OFFLINE: these the approval names (briefing.py)
SHOWN_REFUSALS = 20  # refusals a step carries (every one is counted, and kept in the plan's detail)
PLAN_TOPICS = 50  # per-topic totals a plan carries (the worst first)
KINDS = ("losing_replica", "leaderships_moving", "coordinators_moving", "at_min_isr", "offline")
_ID_LIST = re.compile(r"\[([0-9,]*)\]")
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
    at_min_isr: int  # left with exactly min.insync.replicas in-sync replicas, or fewer (but not offline)
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


def kinds_of(line: str, min_isr: Mapping[str, int | None]) -> tuple[str, tuple[str, ...]]:
    """(topic, the kinds of effect) of one ``safety.blast_radius`` line."""
    topic, _, effects = split_line(line)
    before, left, after = _effect_kinds(effects)
    need = min_isr.get(topic)
    if need is not None and left is not None and left <= need and not after:
        return topic, before + ("at_min_isr",) + after  # an offline partition is offline, not "at min ISR"
    return topic, before + after


@functools.lru_cache(maxsize=4096)  # a plan's lines have few distinct texts (300 in 300,000 lines at 100 brokers)
def _effect_kinds(effects: str) -> tuple[tuple[str, ...], int | None, tuple[str, ...]]:
    """What a line's text says but at_min_isr (that depends on its topic): (the kinds before at_min_isr, how many
    in-sync replicas are left when it loses one (None: it does not say), the kinds after)."""
    before = []
    m = _LOSES.search(effects)
    if m:
        before.append("losing_replica")
    if "coordinator and leadership move" in effects:
        before += ["leaderships_moving", "coordinators_moving"]
    elif "leadership moves" in effects:
        before.append("leaderships_moving")
    left = len([x for x in m["after"].split(",") if x]) if m and m["after"] is not None else None
    after = ("offline",) if "partition offline" in effects or "offline until" in effects else ()
    return tuple(before), left, after


def offline_names(lines: Iterable[str]) -> list[str]:
    """The partitions ("orders-5") of the lines that say the partition goes offline while the step's broker is down."""
    return [line.partition(": ")[0] for line in lines if "offline" in _effect_kinds(split_line(line)[2])[2]]


def _no_counts() -> dict[str, int]:
    return dict.fromkeys(("partitions", *KINDS), 0)


def step_rows(broker_id: int, lines: Iterable[str], min_isr: Mapping[str, int | None] | None = None) -> list[TopicBlast]:
    """One row per topic of one step's lines, internal topics first then by name."""
    min_isr = min_isr or {}
    per: dict[str, dict[str, int]] = {}
    for line in lines:
        topic, kinds = kinds_of(line, min_isr)
        c = per.get(topic) or per.setdefault(topic, _no_counts())
        c["partitions"] += 1
        for k in kinds:
            c[k] += 1
    return [TopicBlast(broker_id, topic, min_isr=min_isr.get(topic), **per[topic])
            for topic in sorted(per, key=lambda t: (t not in INTERNAL, t))]


@functools.lru_cache(maxsize=4096)  # a cluster has few distinct ISR lists, a big plan 300,000 lines
def _sorted_id_list(ids: str) -> str:
    """"3,1,2" -> "[1,2,3]"."""
    return "[" + ",".join(sorted(ids.split(","), key=lambda x: (len(x), x))) + "]"


def _sorted_ids(m: re.Match) -> str:
    return _sorted_id_list(m.group(1))


@functools.lru_cache(maxsize=4096)
def _normalized_effects(effects: str) -> str:
    return _ID_LIST.sub(_sorted_ids, effects)


def normalized(line: str) -> str:
    """A line with its id lists sorted (an ISR listed in another order is the same). Its text after the partition's
    name is normalized once per distinct text (no id list spans the ": " between them)."""
    if "[" not in line:
        return line
    name, sep, effects = line.partition(": ")
    return (_ID_LIST.sub(_sorted_ids, name) if "[" in name else name) + sep + _normalized_effects(effects)


def lines_sha256(lines: Iterable[str]) -> str:
    """The fingerprint of a whole blast radius list (order and id-list order do not matter): sha256 of the sorted,
    normalized lines, each followed by a newline."""
    ordered = sorted(normalized(x) for x in lines)
    return hashlib.sha256(("\n".join(ordered) + "\n" if ordered else "").encode("utf-8", "replace")).hexdigest()


def combined_sha256(step_sha256: Mapping[int, str]) -> str:
    """The fingerprint of a plan's whole blast radius from its steps' (by broker)."""
    return hashlib.sha256("".join(f"{b}:{v}\n" for b, v in sorted(step_sha256.items())).encode()).hexdigest()


def plan_blast_sha256(effects: Mapping[int, Sequence[str]]) -> str:
    """The fingerprint of a plan's whole blast radius: every step's, by broker."""
    return combined_sha256({b: lines_sha256(v) for b, v in effects.items()})


def compact_step(broker_id: int, lines: Sequence[str], min_isr: Mapping[str, int | None] | None = None,
                 shown: int = SHOWN_PER_KIND) -> tuple[tuple[str, ...], dict[str, int], str, list[TopicBlast]]:
    """(the lines a step carries: the first ``shown`` of each kind in their order -- of the offline ones the first
    ``SHOWN_OFFLINE``, named on the approval --, the count of every kind, the whole list's fingerprint, the step's
    per-topic rows)."""
    min_isr = min_isr or {}
    per: dict[str, dict[str, int]] = {}
    taken = {k: 0 for k in KINDS}
    quota = {k: max(shown, SHOWN_OFFLINE) if k == "offline" else shown for k in KINDS}
    keep: list[str] = []
    for line in lines:
        topic, kinds = kinds_of(line, min_isr)
        c = per.get(topic) or per.setdefault(topic, _no_counts())
        c["partitions"] += 1
        for k in kinds:
            c[k] += 1
        if any(taken[k] < quota[k] for k in kinds) or (not kinds and len(keep) < shown):
            keep.append(line)
            for k in kinds:
                taken[k] += 1
    rows = [TopicBlast(broker_id, topic, min_isr=min_isr.get(topic), **per[topic])
            for topic in sorted(per, key=lambda t: (t not in INTERNAL, t))]
    counts = {"partitions": len(lines), **{k: sum(getattr(r, k) for r in rows) for k in KINDS}, "topics": len(rows)}
    return tuple(keep), counts, lines_sha256(lines), rows


def step_counts(step, min_isr: Mapping[str, int | None] | None = None) -> dict[str, int]:
    """A step's counts per kind: carried by a computed plan; counted from its lines otherwise (a hand-made plan)."""
    if step.blast_counts:
        return {"partitions": step.partitions_touched, **{k: int(step.blast_counts.get(k, 0)) for k in KINDS},
                "topics": int(step.blast_counts.get("topics", 0))}
    rows = step_rows(step.broker_id, step.blast_radius, min_isr)
    return {"partitions": len(step.blast_radius), **{k: sum(getattr(r, k) for r in rows) for k in KINDS}, "topics": len(rows)}


def summarize(plan: Plan, min_isr: Mapping[str, int | None] | None = None) -> list[TopicBlast]:
    """One row per (step, topic), steps in plan order, internal topics first then by name: from the plan's detail
    when it has it (as computed, or read back from the state database), else from the lines its steps carry."""
    if plan.detail is not None and plan.detail.topic_rows:
        return rows_from(plan.detail.topic_rows)
    rows: list[TopicBlast] = []
    for step in plan.steps:
        lines = plan.detail.effects.get(step.broker_id, step.blast_radius) if plan.detail is not None else step.blast_radius
        rows += step_rows(step.broker_id, lines, min_isr)
    return rows


def min_isr_by_topic(snapshot, plan_or_topics, settings) -> dict[str, int | None]:
    """min.insync.replicas of every topic the plan's steps touch, or of the topics given (the highest of its
    partitions'; None: unknown)."""
    from kafka_runbooks.remediate.safety import min_isr

    if isinstance(plan_or_topics, Plan):
        touched = {split_line(line)[0] for s in plan_or_topics.steps for line in s.blast_radius}
    else:
        touched = set(plan_or_topics)
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


def plan_counts(plan: Plan, min_isr: Mapping[str, int | None] | None = None) -> dict[str, int]:
    """Every step's counts per kind, summed (partition-stops)."""
    out = {"partitions": 0, **{k: 0 for k in KINDS}}
    for s in plan.steps:
        c = step_counts(s, min_isr)
        for k in out:
            out[k] += c[k]
    return out


def headline(rows: Sequence[TopicBlast] | Mapping[str, int]) -> str:
    """One sentence over the whole plan (its rows, or ``plan_counts``): partitions losing a replica, leaderships and
    coordinators moving, at min ISR."""
    t = dict(rows) if isinstance(rows, Mapping) else {k: sum(getattr(r, k) for r in rows) for k in KINDS}
    if not t.get("partitions", 1) or not any(t.get(k) for k in KINDS):
        return "no partition loses an in-sync replica"
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "TopicTotal":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


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


def plan_topics(plan: Plan, min_isr: Mapping[str, int | None] | None = None) -> tuple[list[TopicTotal], int]:
    """(per topic, the worst step: the ones the plan carries, or all from its detail; how many topics in all)."""
    if plan.detail is not None and plan.detail.topic_rows:
        totals = by_topic(rows_from(plan.detail.topic_rows))
        return totals, len(totals)
    if plan.blast_topics or plan.blast_topic_count:
        return [TopicTotal.from_dict(t) for t in plan.blast_topics], plan.blast_topic_count
    totals = by_topic(summarize(plan, min_isr))
    return totals, len(totals)
