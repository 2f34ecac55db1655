"""Leadership: imbalance, the automatic-rebalance hazard, election storms and metadata divergence (issue 7,
incident 003). Pure detectors over the snapshot and the history.

Incident 003 (Kafka 1.1, a bank): broker 3 came back after a disk replacement with
``auto.leader.rebalance.enable=true``. Every 5 minutes the controller moved leadership of TopicXXX-1 back to it
while it was still catching up and losing its ZooKeeper session (4 session losses, 3 elections); its metadata
cache stayed at leader epoch 426 while ZooKeeper went to 435 -- 22 minutes in which brokers disagreed about who
led TopicXXX-1, and clients bounced between brokers that each answered NotLeaderForPartition. The fix: automatic
rebalance off, and the preferred-replica election run later, by hand, at low traffic. ``runbooks/preferred-election.md``.

Kafka's own rule (``KafkaController.checkAndTriggerAutoLeaderRebalance``, 1.1 -- 2.x): for each broker B, of the
partitions whose preferred (first) replica is B, the share not led by B is B's imbalance ratio; above
``leader.imbalance.per.broker.percentage`` / 100 (default 10 %) the controller elects B for those partitions whose
replica on B is online -- the election itself only succeeds where B is in the ISR. It checks every
``leader.imbalance.check.interval.seconds`` (default 300). ``auto.leader.rebalance.enable`` is read by the active
controller at startup; it is not a dynamic config (Kafka 2.3 refuses it through the Admin API and ignores it in
``/config/brokers``, logging "Non-dynamic configs configured in ZooKeeper will be ignored"), so the value that
counts is each broker's server.properties (Kafka's default: true).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.evidence import canary_evidence, state_evidence
from kafka_runbooks.model import partition_order
from kafka_runbooks.detect.history import Sample
from kafka_runbooks.detect.leadership_state import LEADERSHIP, NOT_LEADER, divergence
from kafka_runbooks.model import CONSUMER_OFFSETS, ClusterSnapshot, Evidence, Finding, LogLineSeen, Partition, Severity

PROBLEM = "leadership"
OPENS_INCIDENT = ("metadata_divergence", "election_storm")
RUNBOOK = "runbooks/preferred-election.md"
ELECTION_DAG = "kafka_preferred_election"

REBALANCE = "auto.leader.rebalance.enable"
IMBALANCE_PCT = "leader.imbalance.per.broker.percentage"
CHECK_INTERVAL = "leader.imbalance.check.interval.seconds"
DEFAULT_IMBALANCE_PCT = 10.0
DEFAULT_CHECK_INTERVAL_S = 300
# server.properties keys the health check keeps (an allow-list: the file may hold passwords)
STATIC_KEYS = (REBALANCE, IMBALANCE_PCT, CHECK_INTERVAL, "queued.max.requests", "control.plane.listener.name",
               "num.io.threads", "num.network.threads", "zookeeper.session.timeout.ms", "replica.lag.time.max.ms",
               "inter.broker.protocol.version", "num.replica.fetchers")
MAX_TABLE_ROWS = 12
MAX_LISTED = 40


def preferred(p: Partition) -> int:
    return p.replicas[0]


# --------------------------------------------------------------------------- settings the controller uses

def rebalance_setting(s: ClusterSnapshot, broker_id: int) -> tuple[bool | None, str]:
    """(auto.leader.rebalance.enable of broker ``broker_id``, where that came from)."""
    raw = s.static_config(REBALANCE, broker_id)
    if raw is not None:
        return raw.strip().lower() == "true", f"broker {broker_id}'s server.properties: {REBALANCE}={raw.strip()}"
    if str(broker_id) in s.static_configs:
        return True, f"broker {broker_id}'s server.properties does not set {REBALANCE}: Kafka's default, true"
    return None, f"broker {broker_id}'s server.properties was not read: {REBALANCE} unknown (Kafka's default is true)"


def _number(s: ClusterSnapshot, key: str, broker_id: int | None, default: float) -> float:
    raw = s.static_config(key, broker_id) if broker_id is not None else None
    try:
        return float(raw) if raw is not None else default
    except ValueError:
        return default


def imbalance_threshold(s: ClusterSnapshot) -> float:
    return _number(s, IMBALANCE_PCT, s.controller_id, DEFAULT_IMBALANCE_PCT)


def check_interval_s(s: ClusterSnapshot) -> float:
    return _number(s, CHECK_INTERVAL, s.controller_id, DEFAULT_CHECK_INTERVAL_S)


def ignored_dynamic_rebalance(s: ClusterSnapshot) -> list[str]:
    """auto.leader.rebalance.enable written into /config/brokers: Kafka ignores it (not a dynamic config)."""
    return [f"/config/brokers/{entity} sets {REBALANCE}={cfg[REBALANCE]}: Kafka ignores it there (not a dynamic config; "
            "brokers log 'Non-dynamic configs configured in ZooKeeper will be ignored')"
            for entity, cfg in sorted(s.broker_configs.items()) if REBALANCE in cfg]


# --------------------------------------------------------------------------- imbalance (Kafka's rule)

def imbalance(s: ClusterSnapshot) -> dict[int, dict[str, Any]]:
    """{broker: {"preferred": n, "not_led": [partition names], "ratio": r}} for every broker that is some
    partition's preferred replica (Kafka's per-broker imbalance ratio)."""
    out: dict[int, dict[str, Any]] = {}
    for p in sorted(s.partitions, key=partition_order):
        b = preferred(p)
        entry = out.setdefault(b, {"preferred": 0, "not_led": [], "ready": []})
        entry["preferred"] += 1
        if p.leader != b:
            entry["not_led"].append(p.name)
            if b in p.isr and b in s.live_broker_ids:
                entry["ready"].append(p.name)
    for entry in out.values():
        entry["ratio"] = round(len(entry["not_led"]) / entry["preferred"], 4) if entry["preferred"] else 0.0
    return out


def detect_leadership_imbalance(ctx: Context) -> list[Finding]:
    s = ctx.snapshot
    pct = imbalance_threshold(s)
    on, source = rebalance_setting(s, s.controller_id) if s.controller_id is not None else (None, "no active controller")
    findings = []
    offline = {p.name for p in s.partitions if p.offline or p.leader not in s.live_broker_ids}
    for b, e in sorted(imbalance(s).items()):
        e["not_led"] = [n for n in e["not_led"] if n not in offline]  # offline partitions are offline_partitions' finding
        e["ratio"] = round(len(e["not_led"]) / e["preferred"], 4) if e["preferred"] else 0.0
        if e["ratio"] <= pct / 100 or b not in s.live_broker_ids:
            continue
        then = (f"the controller moves them back at its next imbalance check (every {check_interval_s(s):g} s; {source})"
                if on else f"automatic rebalance is off ({source}): restore it with {ELECTION_DAG} (deferred, in batches)"
                if on is False else f"{source}")
        waiting = len(e["not_led"]) - len(e["ready"])
        if waiting:
            then += f"; broker {b} is not yet in the ISR of {waiting} of them"
        findings.append(Finding(
            kind="leadership_imbalance", severity=Severity.WARNING if on is False and e["ready"] else Severity.INFO,
            summary=f"Broker {b} leads {e['preferred'] - len(e['not_led'])} of the {e['preferred']} partitions it is the preferred "
                    f"replica of: imbalance {e['ratio'] * 100:.0f} % > leader.imbalance.per.broker.percentage {pct:g} %; {then}",
            broker_ids=(b,), partitions=tuple(e["not_led"]),
            evidence=tuple(state_evidence([p for p in s.partitions if p.name in set(e["not_led"])], ctx.settings.max_evidence)),
            details={"problem": PROBLEM, "broker_id": b, **e, "threshold_pct": pct, "auto_rebalance": on, "auto_rebalance_source": source,
                     "runbook": RUNBOOK},
        ))
    return findings


# --------------------------------------------------------------------------- returning brokers and the hazard

def sessions_seen(ctx: Context, broker_id: int, window_s: float) -> list[tuple[str, int]]:
    """[(first seen at, session id)] of broker ``broker_id``'s registrations within the window, oldest first
    (from the history; the current registration included)."""
    since = ctx.now - dt.timedelta(seconds=window_s)
    out: list[tuple[str, int]] = []
    for smp in ctx.series(broker_id):
        sid = smp.get("session_id")
        if isinstance(sid, int) and clock.parse(smp.at) >= since and sid not in [x for _, x in out]:
            out.append((str(smp.get("registered_at") or smp.at), sid))
    b = ctx.snapshot.broker(broker_id)
    if b is not None and b.session_id is not None and b.session_id not in [x for _, x in out]:
        out.append((b.registered_at or ctx.snapshot.taken_at, b.session_id))
    return out


def returning(ctx: Context) -> dict[int, dict[str, Any]]:
    """Registered brokers that returned: registered within ``returned_s``, or re-registered (new sessions)
    ``flap_registrations`` times within the window; with why they are not ready yet (not back in every ISR).
    {broker: {"reasons": [...], ...}}."""
    s, h = ctx.snapshot, ctx.leadership
    out: dict[int, dict[str, Any]] = {}
    for b in sorted(s.live_broker_ids):
        reasons: list[str] = []
        info: dict[str, Any] = {}
        age = ctx.registration_age_s(b)
        if age is not None and age < h.returned_s:
            reasons.append(f"registered {age:.0f} s ago (session {hex(s.broker(b).session_id or 0)})")
            info["registered_age_s"] = round(age, 1)
        missing = sorted((p for p in s.partitions_of(b) if b not in p.isr), key=partition_order)
        if missing:
            reasons.append(f"not in the ISR of {len(missing)} of its {len(s.partitions_of(b))} partitions "
                           f"({', '.join(p.name for p in missing[:8])}{', ...' if len(missing) > 8 else ''})")
            info["not_in_isr"] = [p.name for p in missing]
        sessions = sessions_seen(ctx, b, h.window_s)
        if len(sessions) >= h.flap_registrations:
            reasons.append(f"registered {len(sessions)} times (new ZooKeeper sessions) in the last {h.window_s / 60:g} min")
            info["sessions"] = [{"at": at, "session": hex(sid)} for at, sid in sessions]
        if (age is not None and age < h.returned_s) or len(sessions) >= h.flap_registrations:
            out[b] = {"reasons": reasons, **info}
    return out


def config_change(ctx: Context) -> dict[str, Any]:
    """The exact change the hazard recommends (the product never edits broker configs)."""
    return {"set": {REBALANCE: "false"}, "where": "server.properties of every broker (the controller reads it at startup; "
            "not a dynamic config)", "then": "restart the brokers one at a time (kafka_rolling_restart) so that whichever "
            "becomes controller has it", "afterwards": f"restore preferred leadership with {ELECTION_DAG} at low traffic"}


def detect_rebalance_hazard(ctx: Context) -> list[Finding]:
    """Automatic rebalance on and a broker returning: the controller will move leadership back to it before it
    is ready -- before incident 003 happens."""
    s = ctx.snapshot
    if s.controller_id is None:
        return []
    on, source = rebalance_setting(s, s.controller_id)
    if not on:
        return []  # off, or the controller's server.properties could not be read (then nothing is claimed)
    back = returning(ctx)
    if not back:
        return []
    others_on = sorted(b for b in s.live_broker_ids if b != s.controller_id and rebalance_setting(s, b)[0])
    interval = check_interval_s(s)
    findings = []
    for b, info in back.items():
        mine = [p for p in s.partitions if preferred(p) == b]
        moved = [p.name for p in mine if p.leader != b]
        if not moved and len(info.get("sessions", [])) < ctx.leadership.flap_registrations:
            continue  # the controller already moved them back, and its session holds: nothing pending
        summary = (f"Automatic leader rebalance is on ({source}) and broker {b} is returning: "
                   + "; ".join(info["reasons"]) + f". Every {interval:g} s the controller moves leadership of the "
                   f"{len(mine)} partitions whose preferred replica is {b} back to it as soon as it is in their ISR -- before it "
                   "is ready (incident 003: 3 such elections while the broker flapped, 22 minutes of brokers disagreeing "
                   f"about the leader). Recommended: set {REBALANCE}=false in every broker's server.properties (rolling "
                   f"restart), then run {ELECTION_DAG}, which waits until broker {b} is in every ISR, its session is stable "
                   f"and traffic is low. The product does not change broker configs itself. See {RUNBOOK}.")
        evidence = [Evidence(source=f"probe:broker/{s.controller_id}/server.properties", excerpt=source)]
        b_obj = s.broker(b)
        evidence.append(Evidence(source=f"zookeeper:/brokers/ids/{b}",
                                 excerpt=f"registered at {b_obj.registered_at}, session {hex(b_obj.session_id or 0)}, czxid {b_obj.registration_zxid}"))
        for smp in info.get("sessions", [])[:-1]:
            evidence.append(Evidence(source=f"history:broker-{b}/session_id", excerpt=f"session {smp['session']} registered at {smp['at']}"))
        evidence += state_evidence([p for p in s.partitions_of(b) if b not in p.isr], 5)
        findings.append(Finding(
            kind="rebalance_hazard", severity=Severity.WARNING, summary=summary, broker_ids=(b,),
            partitions=tuple(p.name for p in sorted(mine, key=partition_order)),
            evidence=tuple(evidence[: ctx.settings.max_evidence]),
            details={"problem": PROBLEM, "broker_id": b, "auto_rebalance": on, "auto_rebalance_source": source,
                     "controller": s.controller_id, "other_brokers_with_it_on": others_on, "check_interval_s": interval,
                     "imbalance_threshold_pct": imbalance_threshold(s), "preferred_partitions": len(mine),
                     "not_led_now": moved, **info, "config_change": config_change(ctx),
                     "ignored_in_zookeeper": ignored_dynamic_rebalance(s), "runbook": RUNBOOK, "remediation": ELECTION_DAG},
        ))
    return findings


# --------------------------------------------------------------------------- the history of leadership

def _leadership_samples(ctx: Context, window_s: float) -> list[Sample]:
    since = ctx.now - dt.timedelta(seconds=window_s)
    return [x for x in ctx.history.get(LEADERSHIP, ()) if clock.parse(x.at) >= since]


# --------------------------------------------------------------------------- the storm

def epoch_churn(samples: Iterable[Sample]) -> dict[str, list[tuple[str, int, int, int, int]]]:
    """{partition: [(at, old leader, old epoch, new leader, new epoch)]} over the samples."""
    out: dict[str, list[tuple[str, int, int, int, int]]] = {}
    for smp in samples:
        for name, ch in (smp.get("changes") or {}).items():
            if isinstance(ch, list) and len(ch) == 4:
                out.setdefault(name, []).append((smp.at, *ch))
    return out


# why a partition's leader moved (issue 16 §3): only AUTOMATIC and UNEXPLAINED moves make a storm
AUTOMATIC = "automatic"  # the controller's automatic preferred election (auto.leader.rebalance.enable: incident 003)
UNEXPLAINED = "unexplained"


def _session_changed(ctx: Context, broker: int, t0: str | None, t1: str) -> bool:
    """Broker ``broker`` deregistered or registered with a new session between the check before ``t1`` and the check
    after it (a controlled shutdown moves leaderships away a moment before the broker deregisters)."""
    series = ctx.series(broker)
    before = [x for x in series if t0 is not None and x.at <= t0]
    after = [x for x in series if x.at >= t1][:2]
    if not before or not after:
        return False
    was = before[-1].get("session_id")
    return any(x.get("registered") is False or (x.get("session_id") is not None and x.get("session_id") != was) for x in after)


def _elections_within(ctx: Context, partition: str, t0: str | None, t1: str) -> list[LogLineSeen]:
    lo = clock.iso((clock.parse(t0) if t0 else clock.parse(t1) - dt.timedelta(seconds=ctx.leadership.window_s)) - dt.timedelta(seconds=5))
    return [x for x in ctx.snapshot.controller_log if x.what in ("preferred_election", "preferred_election_failed") and lo <= (x.at or "") <= t1
            and partition in ((x.attrs.get("partitions") or "").split(",") + [x.attrs.get("partition") or ""])]


def why_moved(ctx: Context, partition: str, move: tuple, before: str | None,
              preferred: Mapping[str, int] | None = None) -> tuple[str, int]:
    """Why ``partition``'s leader changed between the check at ``before`` and the one at move[0], and how many moves of
    a storm that is: "plan <kind> <record>" (the product's own remediation ran then: 0), "failover" (the old leader
    deregistered or re-registered -- a controlled shutdown, a crash, a session loss: the controller moves its leaderships
    once -- plus any automatic election back within the same interval), "automatic" (the controller's automatic
    preferred elections, each counted; incident 003), "epoch" (the leader is the same at both checks: an ISR change, or
    moves away and back between them -- the automatic elections within count), "election" (one somebody asked for: 0),
    or "unexplained" (1). A preferred election of the product's explains only a move onto the partition's preferred
    replica (``preferred``: {partition: preferred replica}, else read from the snapshot): a crash just before it is a
    failover."""
    from kafka_runbooks.detect.activity import covering

    at, old, _, new, _ = move
    plans = covering(ctx.activity, before, at)
    if any(a.kind == "preferred_election" for a in plans):
        if preferred is None:
            preferred = preferred_replicas(ctx.snapshot)
        plans = [a for a in plans if a.kind != "preferred_election" or preferred.get(partition) == new]
    if plans:
        return f"plan {plans[0].kind} {plans[0].record}", 0
    lines = _elections_within(ctx, partition, before, at)
    started = [x for x in lines if x.what == "preferred_election"]
    autos = max(0, sum(1 for x in started if x.attrs.get("automatic") == "true") - sum(1 for x in lines if x.what == "preferred_election_failed"))
    if old == new:
        return ("epoch" + (f" ({autos} automatic election(s) between the checks)" if autos else "")), autos
    if old >= 0 and _session_changed(ctx, old, before, at):
        return "failover", autos
    if autos:
        return AUTOMATIC, autos
    if started:
        return "election", 0
    return UNEXPLAINED, 1


def preferred_replicas(s) -> dict[str, int]:
    """{partition: its preferred replica (the first of its replicas)}."""
    return {p.name: p.replicas[0] for p in s.partitions if p.replicas}


def detect_election_storm(ctx: Context) -> list[Finding]:
    """Leadership of the same partitions moving back and forth within the window without an operator's or the
    product's action: leader changes in the history, each explained when it can be (``why_moved``); the controllers'
    automatic preferred elections and unexplained moves count, the product's own plans, controlled shutdowns and
    failovers (each moves a broker's leaderships once) and asked-for elections do not."""
    s, h = ctx.snapshot, ctx.leadership
    samples = _leadership_samples(ctx, h.window_s)
    # each check's previous check from the whole history, not only the window: the first check in the window holds the
    # moves since the check before it, which has aged out of the window -- without it a failover there is "unexplained"
    every = list(ctx.history.get(LEADERSHIP, ()))
    previous = {smp.at: prev.at for prev, smp in zip(every, every[1:])}
    churn = epoch_churn(samples)
    stormy = {}
    explained_total: dict[str, int] = {}
    preferred = preferred_replicas(s) if churn else {}
    for name, moves in churn.items():
        whys = [(m, *why_moved(ctx, name, m, previous.get(m[0]), preferred)) for m in moves]
        for _, w, _ in whys:
            key = w.split(" ")[0]
            explained_total[key] = explained_total.get(key, 0) + 1
        counted = sum(n for _, _, n in whys)
        if counted >= h.storm_epoch_changes:
            shown = [(m, w) for m, w, n in whys if n or m[1] != m[3]]
            stormy[name] = {"changes": counted, "moves": [m for m, _ in shown], "why": [w for _, w in shown]}
    if not stormy:
        return []
    since = clock.iso(ctx.now - dt.timedelta(seconds=h.window_s))
    autos = [x for x in s.controller_log if x.what == "preferred_election" and x.attrs.get("automatic") == "true"
             and x.attrs.get("partitions") and (x.at or "") >= since]
    auto_hits = [x for x in autos if set(x.attrs["partitions"].split(",")) & set(stormy)]
    failed = [x for x in s.controller_log if x.what == "preferred_election_failed" and (x.at or "") >= since and x.attrs.get("partition") in stormy]
    not_leader = [c for c in s.canary if (c.error_code or "") in NOT_LEADER]
    seen_not_leader = sorted({b for smp in samples for b in (smp.get("canary_not_leader") or [])})
    names = sorted(stormy, key=lambda n: (-stormy[n]["changes"], n))
    moved_to = sorted({m[3] for n in names for m in stormy[n]["moves"]})
    involved = sorted({m[1] for n in names for m in stormy[n]["moves"]} | set(moved_to))
    worst = names[0]
    w = stormy[worst]
    trail = " -> ".join(f"{m[3]}@{m[4]} ({why})" for m, why in list(zip(w["moves"], w["why"]))[-8:])
    parts = [f"{len(names)} partition(s) changed leader {h.storm_epoch_changes}+ times in the last {h.window_s / 60:g} min without "
             f"an operator's or the product's action; {worst}: {w['changes']} such moves (leader@epoch {trail})"]
    if auto_hits:
        parts.append(f"the controller started {len(auto_hits)} automatic preferred election(s) of them "
                     f"({len(failed)} failed: preferred replica not in the ISR)")
    if not_leader or seen_not_leader:
        parts.append(f"the canary got NOT_LEADER_FOR_PARTITION on partitions led by brokers {sorted({c.broker_id for c in not_leader} | set(seen_not_leader))}")
    evidence: list[Evidence] = [Evidence(source=f"history:{LEADERSHIP}/{n}",
                                         excerpt=f"{n}: " + "; ".join(f"{m[0]} leader {m[1]}@{m[2]} -> {m[3]}@{m[4]} ({why})"
                                                                     for m, why in list(zip(stormy[n]["moves"], stormy[n]["why"]))[-6:]))
                                for n in names[:5]]
    evidence += [Evidence(source=f"probe:broker/{x.attrs.get('host_broker', '?')}/{x.source or 'controller.log'}", lines=(x.line_no,),
                          excerpt=x.excerpt[:300]) for x in auto_hits[-5:]]
    evidence += [canary_evidence(c) for c in not_leader[:3]]
    severe = bool(not_leader or seen_not_leader or divergence(s))
    return [Finding(
        kind="election_storm", severity=Severity.CRITICAL if severe else Severity.WARNING,
        summary="Election storm: " + "; ".join(parts) + f". Clients see leadership move each time. See {RUNBOOK}.",
        broker_ids=tuple(moved_to), partitions=tuple(names[:MAX_LISTED]), evidence=tuple(evidence[: ctx.settings.max_evidence]),
        details={"problem": PROBLEM, "partitions": {n: {"changes": stormy[n]["changes"], "moves": [list(m) for m in stormy[n]["moves"]],
                                                         "why": stormy[n]["why"]} for n in names[:MAX_LISTED]},
                 "moves_by_cause": explained_total,
                 "brokers_involved": involved, "automatic_elections": [x.to_dict() for x in auto_hits[-10:]],
                 "automatic_elections_count": len(auto_hits), "failed_elections": len(failed),
                 "canary_not_leader": sorted({c.broker_id for c in not_leader} | set(seen_not_leader)),
                 "window_s": h.window_s, "runbook": RUNBOOK, "remediation": ELECTION_DAG},
    )]


# --------------------------------------------------------------------------- divergence

def divergence_table(ctx: Context, partition: str) -> tuple[list[dict[str, Any]], str | None]:
    """Rows like incident 003's table (time, ZooKeeper leader and epoch, each broker's view), oldest first, over the
    history and this check, and since when the current divergence of ``partition`` has lasted."""
    samples = list(_leadership_samples(ctx, ctx.leadership.window_s))
    current = divergence(ctx.snapshot).get(partition)
    rows: list[dict[str, Any]] = []
    for smp in samples:
        d = (smp.get("diverged") or {}).get(partition)
        if smp.at == ctx.snapshot.taken_at:
            continue
        rows.append({"at": smp.at, "diverged": d is not None, **(d or {})})
    if current is not None:
        rows.append({"at": ctx.snapshot.taken_at, "diverged": True, **current})
    since = None
    for row in reversed(rows):
        if not row["diverged"]:
            break
        since = row["at"]
    shown = [r for r in rows if r["diverged"]][-MAX_TABLE_ROWS:]
    return shown, since


def _cell(x) -> str:
    return "?" if x is None else (f"{x[0]}@{x[1]}" if x[1] is not None else f"{x[0]}")


def detect_metadata_divergence(ctx: Context) -> list[Finding]:
    """Brokers whose own metadata says another leader than ZooKeeper's state znode: clients that ask them are sent
    to a broker that answers NOT_LEADER_FOR_PARTITION (incident 003: 22 minutes of it)."""
    s, h = ctx.snapshot, ctx.leadership
    div = divergence(s)
    if not div:
        return []
    dissenters: dict[int, list[str]] = {}
    for name, d in div.items():
        for b, v in d["views"].items():
            if v is None or v[0] != d["zk"][0]:
                dissenters.setdefault(int(b), []).append(name)
    seen_before = any(smp.at != s.taken_at and smp.get("diverged") for smp in _leadership_samples(ctx, h.window_s)[-2:])
    starting = all((ctx.registration_age_s(b) or 1e18) < ctx.settings.startup_grace_s for b in dissenters)
    if starting and not seen_before:
        return []  # a broker that just registered learns the leaders from the controller's next UpdateMetadata: wait a check
    stale = sorted(dissenters, key=lambda b: (-len(dissenters[b]), b))
    worst = max(div, key=lambda n: (len([1 for v in div[n]["views"].values() if v is None or v[0] != div[n]["zk"][0]]), n))
    table, since = divergence_table(ctx, worst)
    lasted = (ctx.now - clock.parse(since)).total_seconds() if since else 0.0
    failing = [c for c in s.canary if not c.ok]
    severe = lasted >= h.divergence_critical_s or any((c.error_code or "") in NOT_LEADER for c in failing)
    brokers = sorted(str(v.broker_id) for v in s.metadata_views if v.ok)
    head = " | ".join(["time", "ZooKeeper leader@epoch", *[f"broker {b}" for b in brokers]])
    lines = [head] + [" | ".join([r["at"], _cell(r.get("zk")), *[_cell((r.get("views") or {}).get(b)) for b in brokers]]) for r in table]
    summary = (f"Brokers disagree with ZooKeeper about the leader of {len(div)} partition(s): "
               + "; ".join(f"broker {b} on {len(dissenters[b])} ({', '.join(dissenters[b][:4])}{', ...' if len(dissenters[b]) > 4 else ''})"
                           for b in stale)
               + f". {worst}: ZooKeeper says leader {_cell(div[worst]['zk'])}, "
               + ", ".join(f"broker {b} says {_cell(v)}" for b, v in sorted(div[worst]["views"].items()))
               + (f"; diverging since {since} ({lasted:.0f} s)" if since else "")
               + ". Clients that ask a dissenting broker are sent to a broker that answers NOT_LEADER_FOR_PARTITION. "
               "Before Kafka 2.2 (KIP-291) the controller's updates wait behind client requests in the broker's request "
               f"queue. See {RUNBOOK}.")
    evidence = [Evidence(source=f"kafka:metadata/broker/{b}", excerpt=f"{s.view_of(b).at} broker {b}'s own metadata: "
                         + ", ".join(f"{n} leader {_cell(s.view_of(b).leaders.get(n))}" for n in dissenters[b][:6]))
                for b in stale if s.view_of(b) is not None]
    evidence += state_evidence([p for p in s.partitions if p.name in div], 5)
    evidence.append(Evidence(source=f"history:{LEADERSHIP}/{worst}", excerpt="\n".join(lines)))
    evidence += [canary_evidence(c) for c in failing[:3]]
    return [Finding(
        kind="metadata_divergence", severity=Severity.CRITICAL if severe else Severity.WARNING, summary=summary,
        broker_ids=tuple(stale), partitions=tuple(sorted(div, key=lambda n: (n.split("-")[0] != CONSUMER_OFFSETS, n))[:MAX_LISTED]),
        evidence=tuple(evidence[: ctx.settings.max_evidence]),
        details={"problem": PROBLEM, "diverged": {n: div[n] for n in list(div)[:MAX_LISTED]}, "count": len(div),
                 "dissenters": {str(b): v for b, v in dissenters.items()}, "table": {"partition": worst, "columns": head, "rows": table},
                 "since": since, "lasted_s": round(lasted, 1), "runbook": RUNBOOK, "remediation": ELECTION_DAG,
                 "views_failed": {str(v.broker_id): v.error for v in s.metadata_views if not v.ok}},
    )]


DETECTORS = (detect_leadership_imbalance, detect_rebalance_hazard, detect_election_storm, detect_metadata_divergence)
