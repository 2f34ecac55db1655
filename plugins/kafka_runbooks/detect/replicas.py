"""Followers out of their ISR: catching up, or stuck (issue 16, the failed 003 drill). Pure.

A registered follower that hosts a partition and is out of its ISR is one of two things:

* **catching up** -- its log end offset grows between checks: how far behind the leader it is, how fast the gap
  closes, and when it will be in sync at that pace;
* **stuck** -- its log end offset does not move for ``health.follower_stuck_s`` while the leader's is ahead (or,
  equal to the leader's, it still does not rejoin: a follower that fetches rejoins on its next fetch), and nothing
  fetches the partition for it: its fetcher-lag gauge is gone (``FetcherLagMetrics`` is registered while a
  ``ReplicaFetcherThread`` fetches the partition), or it logged that its fetcher dropped the partition.

What Kafka 2.3 really did in the failed drill (``lab/README.md``, ``fence-fetcher``): the leader answered
FENCED_LEADER_EPOCH, the follower's fetcher dropped the partition ("Partition X has an older epoch (N) than the current
leader. Will await the new LeaderAndIsr state before resuming fetching." / "marked as failed") and waited for a
LeaderAndIsr with a higher leader epoch; the controller's LeaderAndIsr carried the epoch the follower already had and
was ignored ("Ignoring LeaderAndIsr request ... since its associated leader epoch 12 matches the current leader epoch",
state-change.log; 0.10: "Broker 3 ignoring LeaderAndIsr request ... since its associated leader epoch 12 is not higher
than the current leader epoch 12"). Nothing fetches that partition for it again: a restart of that follower (through
the engine, approved) is the fix; a new leader epoch (a leader change) would be another. A LeaderAndIsr the follower
failed to handle (2.x "Error when handling request: ... api=LEADER_AND_ISR", e.g. "Epoch N larger than current broker
epoch M", or its ZooKeeper session expiring mid-request) is the same evidence for the partitions it follows in that
request -- but only while the request's broker epoch is the broker's current registration (``Broker.registration_zxid``):
the controller does not send a failed request again, and sends new ones for each new registration (2.3.0).

What is read per check (``detect/leadership_observe.py``, one JmxTool run per broker, no extra JVM): for each such
replica, the follower's ``LogEndOffset`` and fetcher lag, and the leader's ``LogEndOffset``; the lines above from
the follower's ``server.log`` (host probe) and ``state-change.log``. The history keeps them per check in the
``replicas`` series: ``{"<broker>:<topic>-<p>": [follower LEO, leader LEO, fetcher lag (None: no gauge), leader]}``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from kafka_runbooks import clock
from kafka_runbooks.detect.broker_log import REPLICA_LINES
from kafka_runbooks.host.jmxtool import fetcher_lag, log_end_offset, replica_names
from kafka_runbooks.model import ClusterSnapshot, Evidence, Finding, LogLineSeen, Partition, Severity

REPLICAS = "replicas"  # the history series
PROBLEM = "follower_stuck"
OPENS_INCIDENT = ("follower_stuck",)
RUNBOOK = "runbooks/preferred-election.md"
MAX_READ = 100  # out-of-ISR replicas read per check (the newest state of a big cluster's worst moment is enough)
FENCE_LINES = REPLICA_LINES

STUCK = "stuck"
CATCHING_UP = "catching_up"
NOT_PROGRESSING = "not_progressing"  # no progress, but a fetcher holds the partition: its leader, not it
UNKNOWN = "unknown"


def key(broker: int, partition: str) -> str:
    return f"{int(broker)}:{partition}"


def out_of_isr(s: ClusterSnapshot) -> list[tuple[int, Partition]]:
    """(follower, partition) for every registered replica missing from the ISR of a partition whose leader is
    registered, ``__consumer_offsets`` first; at most MAX_READ."""
    live = s.live_broker_ids
    out = [(b, p) for p in sorted(s.partitions, key=lambda p: (p.topic != "__consumer_offsets", p.topic, p.index))
           if p.leader in live for b in p.replicas if b in live and b not in p.isr and b != p.leader]
    return out[:MAX_READ]


def fetchers(s: ClusterSnapshot, broker: int) -> int:
    try:
        return max(1, int(s.static_config("num.replica.fetchers", broker) or 1))
    except ValueError:
        return 1


def jmx_names(s: ClusterSnapshot) -> dict[int, tuple[str, ...]]:
    """{broker: extra JMX object names} for this check: each out-of-ISR follower's log end offset and fetcher lag,
    and its leader's log end offset."""
    out: dict[int, list[str]] = {}
    for b, p in out_of_isr(s):
        out.setdefault(b, []).extend(replica_names(p.topic, p.index, p.leader, fetchers(s, b)))
        out.setdefault(p.leader, []).append(log_end_offset(p.topic, p.index))
    return {b: tuple(dict.fromkeys(names)) for b, names in out.items()}


def _value(s: ClusterSnapshot, broker: int, name: str) -> float | None:
    m = s.metrics_of(broker)
    return None if m is None else m.values.get(f"{name}:Value")


def _jmx_answered(s: ClusterSnapshot, broker: int) -> bool:
    m = s.metrics_of(broker)
    return m is not None and bool(m.values)


def replica_sample(s: ClusterSnapshot) -> dict[str, Any]:
    """This check's ``replicas`` sample: {key: [follower LEO, leader LEO, fetcher lag, leader]} (None = not read;
    the fetcher lag is None also when JmxTool answered without the gauge: no fetcher holds the partition)."""
    out: dict[str, Any] = {}
    for b, p in out_of_isr(s):
        lag = None
        for f in range(fetchers(s, b)):
            v = _value(s, b, fetcher_lag(f, p.leader, p.topic, p.index))
            if v is not None:
                lag = v
        out[key(b, p.name)] = [_value(s, b, log_end_offset(p.topic, p.index)), _value(s, p.leader, log_end_offset(p.topic, p.index)),
                               lag, p.leader, _jmx_answered(s, b)]
    return out


# --------------------------------------------------------------------------- the verdict

@dataclass(frozen=True)
class Point:
    at: str
    follower_leo: float | None
    leader_leo: float | None
    lag_gauge: float | None  # None: no fetcher-lag gauge (or not read: see ``read``)
    leader: int | None
    read: bool  # the follower's JmxTool answered at all


@dataclass(frozen=True)
class Verdict:
    kind: str  # STUCK | CATCHING_UP | NOT_PROGRESSING | UNKNOWN
    reason: str
    since: str | None = None  # stuck: its log end has not moved since
    behind: float | None = None  # messages (offsets) behind the leader now
    eta_s: float | None = None  # catching up: seconds until in sync at the current pace
    rate: float | None = None  # catching up: offsets per second the gap closes by
    no_fetcher: bool | None = None
    points: tuple[Point, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "reason": self.reason, "since": self.since, "behind": self.behind, "eta_s": self.eta_s,
                "rate": self.rate, "no_fetcher": self.no_fetcher,
                "points": [[p.at, p.follower_leo, p.leader_leo, p.lag_gauge] for p in self.points[-8:]]}


def points_of(samples: Iterable[Any], k: str) -> list[Point]:
    """The points of one replica from ``replicas`` samples (history Samples: ``.at``, ``.values``)."""
    out = []
    for smp in samples:
        row = smp.values.get(k)
        if isinstance(row, (list, tuple)) and len(row) >= 5:
            out.append(Point(smp.at, row[0], row[1], row[2], row[3], bool(row[4])))
    return out


def _eta(pts: Sequence[Point]) -> tuple[float | None, float | None]:
    a, b = pts[0], pts[-1]
    span = (clock.parse(b.at) - clock.parse(a.at)).total_seconds()
    if span <= 0:
        return None, None
    closing = ((b.follower_leo - a.follower_leo) - (b.leader_leo - a.leader_leo)) / span
    behind = b.leader_leo - b.follower_leo
    return (behind / closing if closing > 0 else None), closing


def classify(points: Sequence[Point], stuck_after_s: float, fence_lines: Sequence[LogLineSeen] = ()) -> Verdict:
    """Catching up or stuck, from the points of one out-of-ISR replica (oldest first, the current one last; only the
    points of its current episode out of the ISR) and the follower's own lines about the partition."""
    pts = [p for p in points if p.follower_leo is not None and p.leader_leo is not None]
    if not pts:
        why = "its log end offset could not be read (JMX)" if not any(p.read for p in points) else \
            "its or its leader's log end offset is not among the JMX figures read"
        return Verdict(UNKNOWN, why, points=tuple(points))
    last = pts[-1]
    behind = last.leader_leo - last.follower_leo
    first_same = len(pts) - 1
    while first_same > 0 and pts[first_same - 1].follower_leo == last.follower_leo:
        first_same -= 1
    since = pts[first_same]
    still_s = (clock.parse(last.at) - clock.parse(since.at)).total_seconds()
    no_fetcher = (not last.lag_gauge and last.lag_gauge != 0) if last.read else None
    fenced = bool(fence_lines)
    if first_same > 0 or (len(pts) >= 2 and pts[0].follower_leo < last.follower_leo):
        eta, rate = _eta(pts[first_same - 1:] if first_same > 0 else pts)
        if still_s < stuck_after_s:
            if behind <= 0:  # seen on the lab: ZooKeeper's ISR read a few seconds before the log end offsets
                return Verdict(CATCHING_UP, f"caught up: as far as its leader ({last.follower_leo:g}) after catching up; it rejoins "
                               "the ISR on its next fetch", behind=behind, eta_s=0.0, rate=round(rate, 2) if rate is not None else None,
                               no_fetcher=no_fetcher, points=tuple(pts))
            if eta is not None:
                return Verdict(CATCHING_UP, f"catching up: {behind:g} offsets behind the leader, closing at {rate:.1f}/s: in sync in "
                               f"about {eta:.0f} s", behind=behind, eta_s=round(eta, 1), rate=round(rate, 2), no_fetcher=no_fetcher,
                               points=tuple(pts))
            return Verdict(CATCHING_UP, f"fetching but not closing the gap: {behind:g} offsets behind the leader, which writes as fast "
                           "as it fetches", behind=behind, rate=round(rate, 2) if rate is not None else None, no_fetcher=no_fetcher,
                           points=tuple(pts))
    if still_s < stuck_after_s:
        return Verdict(UNKNOWN, f"log end offset {last.follower_leo:g} unchanged for {still_s:.0f} s, less than the {stuck_after_s:g} s "
                       f"after which a follower is called stuck ({behind:g} behind the leader)", since=since.at, behind=behind,
                       no_fetcher=no_fetcher, points=tuple(pts))
    if behind <= 0 and not (no_fetcher or fenced):
        return Verdict(UNKNOWN, f"as far as its leader ({last.follower_leo:g}) and out of the ISR for {still_s:.0f} s, but its fetcher "
                       "still holds the partition", since=since.at, behind=behind, no_fetcher=no_fetcher, points=tuple(pts))
    if no_fetcher or fenced:
        what = []
        if no_fetcher:
            what.append("no fetcher-lag gauge for the partition: no ReplicaFetcherThread fetches it")
        if fenced:
            what.append("its log: " + "; ".join(sorted({x.what for x in fence_lines})))
        moved = f"while the leader's went {since.leader_leo:g} -> {last.leader_leo:g}" if last.leader_leo != since.leader_leo else \
            f"(the leader's is {last.leader_leo:g}" + (": as far, yet it does not rejoin the ISR -- a fetching follower would)" if behind <= 0 else ")")
        return Verdict(STUCK, f"stuck: its log end offset stayed {last.follower_leo:g} for {still_s:.0f} s {moved}; " + "; ".join(what),
                       since=since.at, behind=behind, no_fetcher=no_fetcher, points=tuple(pts))
    return Verdict(NOT_PROGRESSING, f"no progress for {still_s:.0f} s ({behind:g} behind) although its fetcher holds the partition: "
                   f"its fetches fail (leader {last.leader} unreachable or not serving?)", since=since.at, behind=behind,
                   no_fetcher=False, points=tuple(pts))


def episode(samples: Sequence[Any], k: str) -> list[Point]:
    """The points of replica ``k``'s current episode out of the ISR: the trailing run of samples that hold it."""
    out: list[Point] = []
    for smp in reversed(list(samples)):
        pts = points_of([smp], k)
        if not pts:
            break
        out.append(pts[0])
    return list(reversed(out))


def is_about(x: LogLineSeen, partition: str, registration: int | None) -> bool:
    """Whether line ``x`` says the follower may not fetch ``partition``. A failed LeaderAndIsr counts only for the
    partitions it follows in that request, and only while its broker epoch is the broker's current registration
    (``registration``, the znode's czxid; unknown: not counted): for a newer registration the controller has sent
    new requests."""
    if x.what != "leader_and_isr_failed":
        return x.attrs.get("partition_name") == partition
    try:
        current = int(registration) if registration is not None else None
        epoch = int(x.attrs.get("request_broker_epoch", ""))
    except ValueError:
        return False
    return current is not None and epoch >= current and partition in x.attrs.get("partitions", "").split(",")


def fence_lines_of(lines: Iterable[LogLineSeen], broker: int, partition: str, since: str | None,
                   registration: int | None = None) -> list[LogLineSeen]:
    """The follower's own lines saying its fetcher dropped ``partition``, ignored its LeaderAndIsr or failed to handle
    it (see ``is_about``), at or after ``since``."""
    out = []
    for x in lines:
        if x.what not in FENCE_LINES or not is_about(x, partition, registration):
            continue
        if x.attrs.get("host_broker") not in (None, str(broker)):
            continue
        if since and x.at and x.at < since:
            continue
        out.append(x)
    return out


def _registration(s: ClusterSnapshot, broker: int) -> int | None:
    b = s.broker(broker)
    return b.registration_zxid if b is not None else None


def verdicts(s: ClusterSnapshot, series: Sequence[Any], stuck_after_s: float, lines: Iterable[LogLineSeen] = ()) -> dict[tuple[int, str], Verdict]:
    """{(follower, partition): Verdict} for every replica out of its ISR now."""
    lines = list(lines)
    out = {}
    for b, p in out_of_isr(s):
        pts = episode(series, key(b, p.name))
        first = pts[0].at if pts else None
        out[(b, p.name)] = classify(pts, stuck_after_s, fence_lines_of(lines, b, p.name, _minus(first, 60), _registration(s, b)))
    return out


def _minus(at: str | None, seconds: float) -> str | None:
    return clock.iso(clock.parse(at) - dt.timedelta(seconds=seconds)) if at else None


def follower_lines(s: ClusterSnapshot) -> list[LogLineSeen]:
    """The followers' lines about fenced / failed / ignored partitions: server.log (host probes) and state-change.log."""
    out = [x for x in s.controller_log if x.what in FENCE_LINES]
    for probe in s.probes:
        out += [LogLineSeen(x.what, x.at, x.line_no, x.excerpt, {**x.attrs, "host_broker": str(probe.broker_id)}, x.source)
                for x in probe.log_lines if x.what in FENCE_LINES]
    return out


# --------------------------------------------------------------------------- the finding

def findings(s: ClusterSnapshot, series: Sequence[Any], stuck_after_s: float, max_evidence: int = 20) -> list[Finding]:
    """``follower_stuck`` (warning, opens an incident: the response restarts that follower through the engine, approved)
    per stuck broker; ``follower_catching_up`` (info) per broker catching up, with the estimate."""
    by_broker: dict[int, dict[str, list]] = {}
    for (b, name), v in verdicts(s, series, stuck_after_s, follower_lines(s)).items():
        by_broker.setdefault(b, {}).setdefault(v.kind, []).append((name, v))
    out = []
    lines = follower_lines(s)
    for b, kinds in sorted(by_broker.items()):
        stuck = kinds.get(STUCK, [])
        if stuck:
            names = [n for n, _ in stuck]
            ev = [Evidence(source=f"history:{REPLICAS}/{key(b, n)}",
                           excerpt=f"{n} on broker {b}: " + "; ".join(f"{pt[0]} log end {pt[1]} (leader {pt[2]}), fetcher lag "
                                                                      f"{'none' if pt[3] is None else pt[3]}"
                                                                      for pt in v.to_dict()["points"][-4:]))
                  for n, v in stuck[:5]]
            ev += [Evidence(source=f"probe:broker/{b}/{x.source or 'server.log'}", lines=(x.line_no,), excerpt=x.excerpt[:300])
                   for x in [x for x in lines if x.attrs.get("host_broker") == str(b)
                             and any(is_about(x, n, _registration(s, b)) for n in names)][-5:]]
            first = stuck[0][1]
            out.append(Finding(
                kind="follower_stuck", severity=Severity.WARNING,
                summary=f"Broker {b} is registered but stuck out of the ISR of {len(stuck)} partition(s) "
                        f"({', '.join(names[:6])}{', ...' if len(names) > 6 else ''}): {stuck[0][0]} {first.reason}. It is not catching up "
                        "and will not by itself: nothing fetches the partition for it, and Kafka restarts a follower's fetcher "
                        "only for a LeaderAndIsr with a higher leader epoch than the one it has (a LeaderAndIsr of the same "
                        f"epoch is ignored). Fix: restart broker {b} through the engine (approved); a preferred election "
                        f"waiting for it gives up with this diagnosis. See {RUNBOOK}.",
                broker_ids=(b,), partitions=tuple(names[:40]), evidence=tuple(ev[:max_evidence]),
                details={"problem": PROBLEM, "broker_id": b, "stuck": {n: v.to_dict() for n, v in stuck[:40]},
                         "catching_up": [n for n, _ in kinds.get(CATCHING_UP, [])], "stuck_after_s": stuck_after_s,
                         "runbook": RUNBOOK, "remediation": f"restart broker {b} (kafka_incident_response, approved)"},
            ))
        catching = kinds.get(CATCHING_UP, [])
        if catching and not stuck:
            worst = max(catching, key=lambda x: (x[1].eta_s is None, x[1].eta_s or 0))
            out.append(Finding(
                kind="follower_catching_up", severity=Severity.INFO,
                summary=f"Broker {b} is catching up on {len(catching)} partition(s) out of their ISR; slowest {worst[0]}: {worst[1].reason}",
                broker_ids=(b,), partitions=tuple(n for n, _ in catching[:40]),
                details={"broker_id": b, "catching_up": {n: v.to_dict() for n, v in catching[:40]},
                         "eta_s": worst[1].eta_s},
            ))
    return out
