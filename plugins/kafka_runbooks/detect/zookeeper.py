"""ZooKeeper detectors (incident 004). Pure: the snapshot's ZooKeeper probes and their history in, findings out.

* ``zookeeper_follower_dropped`` (warning, opens an incident for the capture and the record): a server
  left the quorum and came back while the ensemble did NOT elect a new leader -- seen in its history
  as its ZooKeeperServer restarting (mntr ``zk_uptime`` starting over, ``zk_packets_received`` starting
  over from ~0) and its own election count going up, while its process stayed the same and the
  leader and epoch stayed the same. Corroborated and explained by: its client connections falling and
  staying low (they moved to its peers: seed 004's "connection count drops to single digits and
  stays"), its log (``Exception when following the leader``, ``Peer state changed: looking``,
  ``FOLLOWING - LEADER ELECTION TOOK - N MS``), the leader's log (``closing socket to learner N``,
  ``transaction timeout``, ``Unexpected exception in LearnerHandler``) and ``syncLimit x tickTime``
  from its zoo.cfg; correlated with its host's load and the brokers' ZooKeeper session expiries in the
  same minutes. Reported for ``zookeeper_health.drop_window_s`` after the drop.

  Found after the fact, by the first check after it, whether or not a check ran during it (issue 16 §2): a follower
  whose ZooKeeperServer is younger than the leader's (mntr ``zk_uptime``) re-joined since -- the leader kept leading, so
  it was not an election of the ensemble -- and it is a drop, not a new process, when its own election count says it
  elected again after its start (``zk_cnt_election_time`` >= 2), its process is older than its server (SSH), or its log
  says it stopped following. What the leader logged about it and the brokers' session expiries are found the same way.
* ``zookeeper_server_not_serving`` (warning): a member that does not answer, or answers that it is not
  serving, while a quorum serves.
* ``zookeeper_quorum_lost`` (critical): no majority of the members serves.
* ``zookeeper_server_restarted`` (info): its process restarted (new pid, or its election count
  started over): not a drop.

All but the restart share ``details.problem = "zookeeper_member"`` and ``details.subject`` = the server,
so one server is one streak and one incident.
"""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import dataclass
from typing import Any, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import ZooKeeperHealthSettings
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.history import Sample, zookeeper_series_of
from kafka_runbooks.model import Evidence, Finding, LogLineSeen, Severity, ZooKeeperProbe

PROBLEM = "zookeeper_member"
OPENS_INCIDENT = ("zookeeper_follower_dropped", "zookeeper_quorum_lost", "zookeeper_unreachable")
RUNBOOK = "runbooks/zookeeper-follower-drop.md"


def _num(s: Sample, key: str) -> float | None:
    v = s.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _serving(s: Sample) -> bool:
    return s.get("serving") is True


def _cite(series: str, samples: list[Sample], key: str, unit: str = "") -> Evidence:
    pts = " -> ".join(f"{s.get(key)}{unit} at {s.at}" for s in samples)
    return Evidence(source=f"history:{series}/{key}", excerpt=f"{series} {key}: {pts}")


def _line_evidence(server: str, lines: list[LogLineSeen], host: str | None) -> list[Evidence]:
    return [Evidence(source=f"probe:zookeeper/{server}/{x.source or 'zookeeper.log'}", lines=(x.line_no,), excerpt=x.excerpt, host=host)
            for x in lines]


def drop_events(series: list[Sample], since: dt.datetime) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(drops, process restarts) between consecutive samples whose later one is at or after ``since``.

    A drop: the server's ZooKeeperServer started over (uptime or packets-received counter went down, or
    it was not serving and now serves) or its election count went up -- with the same process (same pid
    when known; an election count that went up, not back to its start)."""
    drops, restarts = [], []
    for a, b in zip(series, series[1:]):
        if clock.parse(b.at) < since:
            continue
        signals = []
        up_a, up_b = _num(a, "uptime_ms"), _num(b, "uptime_ms")
        el_a, el_b = _num(a, "elections"), _num(b, "elections")
        pk_a, pk_b = _num(a, "packets_received"), _num(b, "packets_received")
        if up_a is not None and up_b is not None and up_b < up_a:
            signals.append(f"uptime {int(up_a)} ms -> {int(up_b)} ms (its ZooKeeperServer started over)")
        if pk_a is not None and pk_b is not None and pk_b < pk_a:
            signals.append(f"packets received {int(pk_a)} -> {int(pk_b)} (counter started over)")
        if el_a is not None and el_b is not None and el_b > el_a:
            signals.append(f"elections {int(el_a)} -> {int(el_b)} (it went LOOKING and elected again)")
        if not _serving(a) and _serving(b):
            signals.append(f"not serving at {a.at} ({'it did not answer' if a.get('reachable') is False else 'it said it was not serving'}), "
                           f"{b.get('mode')} again at {b.at}")
        if not signals:
            continue
        pid_a, pid_b = a.get("pid"), b.get("pid")
        restarted = (pid_a is not None and pid_b is not None and pid_a != pid_b) or (
            el_a is not None and el_b is not None and el_b < el_a)
        last_serving = next((x.at for x in reversed(series[: series.index(a) + 1]) if _serving(x)), a.at)
        event = {"server": b.get("server"), "seen_at": b.at, "previous_sample_at": a.at, "last_serving_at": last_serving,
                 "signals": signals, "mode": b.get("mode"), "uptime_ms": int(up_b) if up_b is not None else None}
        if up_b is not None and _serving(b):
            event["serving_again_since"] = clock.iso(clock.parse(b.at) - dt.timedelta(milliseconds=up_b))
        if restarted:
            restarts.append({**event, "pid": [pid_a, pid_b]})
        elif _serving(b) or b.get("reachable") is not False:
            drops.append(event)
    return drops, restarts


STARTUP_SLACK_S = 30.0  # a server's ZooKeeperServer starts this long after its process at most (election, sync)


def rejoin_events(zs, now: dt.datetime, window_s: float, log_lines: Mapping[str, list[LogLineSeen]] | None = None) -> list[dict[str, Any]]:
    """Drops seen in ONE check, after the fact: followers whose ZooKeeperServer started within ``window_s`` while the
    leader's is older (the leader kept leading: no ensemble election), with the evidence that this was a drop and not a
    new process. Pure: ``zs`` are ZooKeeperProbes of one check."""
    leader = next((z for z in zs if z.mode == "leader" and z.serving), None)
    out = []
    if leader is None or leader.uptime_ms is None:
        return out
    for z in zs:
        if z is leader or not z.serving or z.uptime_ms is None or z.mode not in ("follower", "observer"):
            continue
        up_s = z.uptime_ms / 1000
        if up_s > window_s or leader.uptime_ms / 1000 <= up_s + STARTUP_SLACK_S:
            continue  # older than the window, or the leader is as young: an election of the whole ensemble
        own = [x for x in (log_lines or {}).get(z.server, z.log_lines) if x.what == "zk_follow_exception"]
        rejoined = clock.iso(now - dt.timedelta(seconds=up_s))
        signal = (f"its ZooKeeperServer is {up_s:.0f} s old while the leader's ({leader.server}) is {leader.uptime_ms / 1000:.0f} s: it "
                  f"left the quorum and rejoined at about {rejoined} while the leader kept leading")
        event = {"server": z.server, "seen_at": clock.iso(now), "previous_sample_at": None, "last_serving_at": None,
                 "signals": [signal], "mode": z.mode, "uptime_ms": z.uptime_ms, "serving_again_since": rejoined,
                 "after_the_fact": True}
        new_process = z.elections == 1 or (z.process_uptime_s is not None and z.process_uptime_s <= up_s + STARTUP_SLACK_S)
        if new_process:
            out.append({**event, "restart": True})  # its first election, or its process as young as its server
            continue
        if z.elections is not None:
            event["signals"].append(f"its election count is {z.elections}: it elected again after its start")
        if z.process_uptime_s is not None:
            event["signals"].append(f"its process runs since {z.process_uptime_s:.0f} s ago, its ZooKeeperServer only since {up_s:.0f} s ago")
        if own:
            event["signals"].append(f"it logged 'Exception when following the leader' at {own[-1].at}")
        if z.elections is None and z.process_uptime_s is None and not own:
            event["signals"].append("a new process cannot be ruled out (no mntr election count, no SSH to its host, no log line)")
        out.append(event)
    return out


def _drop_start(z: ZooKeeperProbe, leader: ZooKeeperProbe | None, rejoined: str) -> str:
    """Found after the fact: where the lines of THIS drop begin -- a little before the newest line, before it rejoined, of
    the leader closing its socket or of it failing to follow (an earlier drop's lines stay out)."""
    marks = [x.at for x in (leader.log_lines if leader is not None and leader is not z else ())
             if x.what == "zk_learner_closed" and x.attrs.get("sid") == z.server and x.at and x.at <= rejoined]
    if not marks:
        marks = [x.at for x in z.log_lines if x.what == "zk_follow_exception" and x.at and x.at <= rejoined]
    start = clock.parse(max(marks)) if marks else clock.parse(rejoined) - dt.timedelta(seconds=60)
    return clock.iso(start - dt.timedelta(seconds=5))


def _same_drop(a: dict[str, Any], b: dict[str, Any], slack_s: float = 5.0) -> bool:
    x, y = a.get("serving_again_since"), b.get("serving_again_since")
    return bool(x and y) and abs((clock.parse(x) - clock.parse(y)).total_seconds()) <= slack_s


def _connections(series: list[Sample], drop_at: str, s: ZooKeeperHealthSettings) -> dict[str, Any] | None:
    """Client connections before the drop vs every sample since: fell and stayed low?"""
    before = [v for x in series if x.at < drop_at for v in [_num(x, "connections")] if v is not None and _serving(x)]
    after = [(x.at, v) for x in series if x.at >= drop_at for v in [_num(x, "connections")] if v is not None]
    if not before or len(after) < s.stay_samples:
        return None
    was = statistics.median(before)
    now = max(v for _, v in after)
    stayed = was > 0 and now <= s.connections_low and now <= s.connections_drop_ratio * was and now < was
    return {"median_before": was, "after": [[at, int(v)] for at, v in after], "stayed_low": stayed}


def _sync_arithmetic(z: ZooKeeperProbe, leader: ZooKeeperProbe | None) -> dict[str, Any] | None:
    for src in (z, leader):
        if src is not None and src.tick_time_ms and src.sync_limit:
            ms = src.tick_time_ms * src.sync_limit
            return {"tick_time_ms": src.tick_time_ms, "sync_limit": src.sync_limit, "sync_timeout_ms": ms, "read_from": f"server {src.server}'s zoo.cfg",
                    "arithmetic": f"syncLimit {src.sync_limit} x tickTime {src.tick_time_ms} ms = {ms} ms"}
    return None


def _near(at: str | None, times: list[str], seconds: float) -> bool:
    if not at:
        return False
    t = clock.parse(at)
    return any(abs((clock.parse(x) - t).total_seconds()) <= seconds for x in times)


def detect_zookeeper_unreachable(ctx: Context) -> list[Finding]:
    """The health check could not read the cluster's state from ZooKeeper (kazoo's connection timed out or was lost):
    which ensemble, which members answer their four-letter words and what they say, and since when no check could read
    it (the history's ``leadership`` series). Critical; it pages on-call (``runbook/detect.py``)."""
    from kafka_runbooks.detect.leadership_state import LEADERSHIP

    s = ctx.snapshot
    if not s.zookeeper_error:
        return []
    since = s.taken_at
    last_ok = None
    for smp in reversed(list(ctx.history.get(LEADERSHIP, ()))):
        if smp.get("zookeeper_error"):
            since = min(since, smp.at)
        else:
            last_ok = smp.at
            break
    answering = [z for z in s.zookeeper if z.reachable]
    serving = [z for z in s.zookeeper if z.serving]
    members = "; ".join(f"{z.server} ({z.address}): " + (f"{z.mode}, zxid {hex(z.zxid) if z.zxid is not None else '?'}" if z.serving else
                                                         (z.error or "answers but does not serve") if z.reachable else f"no answer ({z.error})")
                        for z in s.zookeeper) or "no member probed"
    summary = (f"ZooKeeper could not be read by the health check: {s.zookeeper_error}. Since {since}"
               + (f" (last read at {last_ok})" if last_ok else " (no earlier check read it in this history)")
               + f"; {len(answering)} of {len(s.zookeeper)} members answer their four-letter words, {len(serving)} serve: {members}. "
               "Nothing about the brokers can be judged (registrations, leaders, ISRs are in ZooKeeper); Kafka itself cannot change "
               f"leaders or ISRs while it lasts. See {RUNBOOK}.")
    return [Finding(
        kind="zookeeper_unreachable", severity=Severity.CRITICAL, summary=summary,
        evidence=(Evidence(source="zookeeper:session", excerpt=f"{s.taken_at} {s.zookeeper_error}"),)
                 + tuple(Evidence(source=f"zookeeper:4lw/{z.server}", excerpt=f"{z.probed_at} {z.address}: "
                                  + (f"{z.mode} (serving)" if z.serving else z.error or "not serving")) for z in s.zookeeper),
        details={"problem": "zookeeper_unreachable", "subject": "ensemble", "error": s.zookeeper_error, "since": since,
                 "last_read_at": last_ok, "members": [{"server": z.server, "address": z.address, "answers": z.reachable,
                                                       "serving": z.serving, "mode": z.mode, "error": z.error} for z in s.zookeeper],
                 "runbook": RUNBOOK, "page": True},
    )]


def detect_zookeeper(ctx: Context) -> list[Finding]:
    zs = ctx.snapshot.zookeeper
    if not zs:
        return []
    s = ctx.zk_settings
    findings: list[Finding] = []
    serving = [z for z in zs if z.serving]
    leader = next((z for z in zs if z.mode == "leader"), None)
    if len(serving) * 2 <= len(zs):
        down = [z.server for z in zs if not z.serving]
        findings.append(Finding(
            kind="zookeeper_quorum_lost", severity=Severity.CRITICAL,
            summary=f"ZooKeeper has no quorum: only {len(serving)} of {len(zs)} servers serve (not serving: {down}); "
                    "brokers cannot change any state in ZooKeeper (no leader elections, no ISR changes)",
            evidence=tuple(Evidence(source=f"zookeeper:4lw/{z.server}", excerpt=f"{z.address}: {z.error or 'not serving'}") for z in zs if not z.serving),
            details={"problem": PROBLEM, "subject": "ensemble", "not_serving": down, "runbook": RUNBOOK},
        ))
    window_start = ctx.now - dt.timedelta(seconds=s.drop_window_s)
    broker_expiries = [x.at for p in ctx.snapshot.probes for x in p.lines("zk_session_expired") if x.at]
    for z in zs:
        series_name = zookeeper_series_of(z.address)
        series = ctx.zk_series(z.address)
        base = {"problem": PROBLEM, "subject": z.server, "server": z.server, "address": z.address, "zone": z.zone, "runbook": RUNBOOK}
        if not z.serving and len(serving) * 2 > len(zs):
            findings.append(Finding(
                kind="zookeeper_server_not_serving", severity=Severity.WARNING,
                summary=f"ZooKeeper server {z.server} ({z.address}) is not serving: {z.error or 'it says it is not serving requests'}; "
                        f"the quorum holds ({len(serving)} of {len(zs)} serve" + (f", leader {leader.server}" if leader else "") + ")"
                        + (f"; its process is {z.process_state}" if z.process_state else ""),
                evidence=(Evidence(source=f"zookeeper:4lw/{z.server}", excerpt=f"{z.probed_at} {z.address}: {z.error or 'not serving'}"),),
                details={**base, "error": z.error, "process_state": z.process_state},
            ))
        drops, restarts = drop_events(series, window_start)
        for ev in rejoin_events([z2 for z2 in zs if z2 is z or z2 is leader], ctx.now, s.drop_window_s):
            if ev.get("restart") or restarts:
                continue  # a new process (its first election, or a new pid in the history): not a drop
            if not any(_same_drop(ev, d) for d in drops):
                drops.append(ev)
        for r in restarts:
            findings.append(Finding(
                kind="zookeeper_server_restarted", severity=Severity.INFO,
                summary=f"ZooKeeper server {z.server} restarted between {r['previous_sample_at']} and {r['seen_at']} (pid {r['pid'][0]} -> {r['pid'][1]}): "
                        + "; ".join(r["signals"]),
                evidence=(_cite(series_name, [x for x in series if x.at in (r["previous_sample_at"], r["seen_at"])], "uptime_ms", " ms"),),
                details={"server": z.server, "restart": r},
            ))
        if not drops:
            continue
        findings.append(_drop_finding(ctx, z, leader, series_name, series, drops, broker_expiries, base))
    return findings


@dataclass(frozen=True)
class _DropLogs:
    """The log lines of one drop: the follower's own (``own``, and among them its 'Exception when following',
    election and 'looking' lines) and the leader's about this learner (``lead``)."""
    own: list[LogLineSeen]
    follow: list[LogLineSeen]
    took: list[LogLineSeen]
    looking: list[LogLineSeen]
    lead: list[LogLineSeen]
    since: str  # the earliest time a line of this drop may have


def _drop_finding(ctx: Context, z: ZooKeeperProbe, leader: ZooKeeperProbe | None, series_name: str, series: list[Sample],
                  drops: list[dict[str, Any]], broker_expiries: list[str], base: dict[str, Any]) -> Finding:
    s = ctx.zk_settings
    first = drops[-1]  # the newest drop is described; every one is listed in details
    parts: list[str] = []
    evidence: list[Evidence] = []
    around = [x for x in series if x.at >= (first["previous_sample_at"] or first["seen_at"])][:6] or series[-1:]
    for key, unit in (("uptime_ms", " ms"), ("elections", ""), ("packets_received", "")):
        if any(x.get(key) is not None for x in around):
            evidence.append(_cite(series_name, around, key, unit))
    no_election, epochs, leaders_seen, said = _ensemble_election(ctx, series, leader)
    parts.append(said)
    conns = _connections(series, first["seen_at"], s)
    if conns and conns["stayed_low"]:
        peers = {o.server: o.connections for o in ctx.snapshot.zookeeper if o.server != z.server and o.connections is not None}
        parts.append(f"its client connections fell from {conns['median_before']:g} to {conns['after'][-1][1]} and stayed there "
                     f"for {len(conns['after'])} probes (its clients moved: peers now hold {peers})")
        evidence.append(_cite(series_name, [x for x in series if x.get("connections") is not None][-8:], "connections"))
    if z.packets_received is not None and first.get("uptime_ms") is not None:
        parts.append(f"packets received since it rejoined: {z.packets_received}")
    logs = _drop_logs(z, leader, first)
    parts += _log_sentences(leader, logs)
    evidence += _line_evidence(z.server, logs.own[-6:], z.address)
    if leader is not None and leader is not z:
        evidence += _line_evidence(leader.server, logs.lead[-3:], leader.address)
        said_synced, cited = _leader_synced_followers(ctx, leader, first, logs.since)
        parts += said_synced
        evidence += cited
    sync = _sync_arithmetic(z, leader)
    if sync:
        parts.append(f"a proposal or ping unanswered for longer than {sync['arithmetic']} (read from {sync['read_from']}) makes the "
                     "leader drop a follower")
    drop_at, back_at, duration_ms = _drop_times(first, logs)
    corr, expiries = _same_minutes(z, s, broker_expiries, drop_at)
    silent_since = None
    if logs.lead and sync:
        silent_since = clock.iso(clock.parse(logs.lead[0].at) - dt.timedelta(milliseconds=sync["sync_timeout_ms"]))
        parts.append(f"so it had been silent since about {silent_since} ({sync['sync_timeout_ms']} ms before the leader gave up on it)")
    took = logs.took
    drop = {"server": z.server, "address": z.address, "zone": z.zone, "at": drop_at, "rejoined_at": back_at, "duration_ms": duration_ms,
            "silent_since": silent_since,
            "election_took_ms": int(took[-1].attrs["millis"]) if took and took[-1].attrs.get("millis", "").isdigit() else None,
            "leader": leader.server if leader else None, "signals": first["signals"], "seen_at": first["seen_at"]}
    summary = (f"ZooKeeper server {z.server} ({z.address}{', zone ' + z.zone if z.zone else ''}) dropped out of the quorum"
               + (f" at {drop_at}" if drop_at else "") + (f" and was back {duration_ms} ms later" if duration_ms is not None else " and came back")
               + ": " + "; ".join(first["signals"]) + "; " + "; ".join(parts) + "; same minutes: " + "; ".join(corr))
    return Finding(
        kind="zookeeper_follower_dropped", severity=Severity.WARNING, summary=summary,
        evidence=tuple(evidence[: ctx.settings.max_evidence]),
        details={**base, "drops": [drop] + [{"server": z.server, "seen_at": d["seen_at"], "signals": d["signals"], "zone": z.zone} for d in drops[1:]],
                 "no_ensemble_election": no_election, "epochs": epochs, "leaders_seen": sorted(leaders_seen),
                 "connections": conns, "sync_timeout": sync, "correlated": corr, "broker_session_expiries": expiries,
                 "log_lines": [x.to_dict() for x in logs.own[-10:] + logs.lead[-5:]]},
    )


def _ensemble_election(ctx: Context, series: list[Sample], leader: ZooKeeperProbe | None
                       ) -> tuple[bool, list[int], dict[str, str], str]:
    """Whether the ensemble did NOT elect within the drop window (the same leader and epoch across it): (no election,
    the epochs seen, {server: when it was seen leading}, the sentence that says so)."""
    since = ctx.now - dt.timedelta(seconds=ctx.zk_settings.drop_window_s)
    window = [x for x in series if clock.parse(x.at) >= since]
    epochs = sorted({int(v) for x in window for v in [_num(x, "epoch")] if v is not None})
    leaders_seen = {}
    for other in ctx.snapshot.zookeeper:
        for x in ctx.zk_series(other.address):
            if x.get("mode") == "leader" and clock.parse(x.at) >= since:
                leaders_seen[other.server] = x.at
    no_election = len(epochs) <= 1 and len(leaders_seen) <= 1
    if no_election:
        said = ("the ensemble did not elect a new leader (" + (f"leader {leader.server}, " if leader else "")
                + (f"epoch {epochs[0]} unchanged" if epochs else "epoch unknown") + ")")
    else:
        said = (f"the ensemble's leader or epoch changed in the window (leaders {sorted(leaders_seen)}, epochs {epochs}): "
                "an election of the whole ensemble, not only this follower")
    return no_election, epochs, leaders_seen, said


def _drop_logs(z: ZooKeeperProbe, leader: ZooKeeperProbe | None, first: dict[str, Any]) -> _DropLogs:
    """The logs of this drop (between its last serving sample and a little after it was seen back): the follower's
    own lines, the leader's about this learner."""
    hi = clock.iso(clock.parse(first["seen_at"]) + dt.timedelta(seconds=10))
    lo = first["last_serving_at"] or _drop_start(z, leader, first["serving_again_since"])

    def during(lines):
        return [x for x in lines if x.at and lo <= x.at <= hi]

    own = during([x for x in z.log_lines if x.what in ("zk_follow_exception", "zk_disconnected_from_leader", "zk_election_took", "zk_peer_state")])
    lead_lines = during([x for x in (leader.log_lines if leader and leader is not z else ())
                         if (x.what == "zk_learner_closed" and x.attrs.get("sid") == z.server)
                         or x.what in ("zk_transaction_timeout", "zk_learner_handler_error")])
    if not any(x.what == "zk_learner_closed" for x in lead_lines):
        lead_lines = []  # the leader's errors name no learner: only its "closing socket to learner <id>" ties them to this one
    return _DropLogs(own=own, follow=[x for x in own if x.what == "zk_follow_exception"],
                     took=[x for x in own if x.what == "zk_election_took" and x.attrs.get("role") == "FOLLOWING"],
                     looking=[x for x in own if x.what == "zk_peer_state"], lead=lead_lines, since=lo)


def _log_sentences(leader: ZooKeeperProbe | None, logs: _DropLogs) -> list[str]:
    """What the leader's and the follower's logs say of the drop."""
    parts = []
    if logs.lead:
        first_lead = logs.lead[0]
        why = first_lead.attrs.get("cause") or ("transaction timeout" if first_lead.what == "zk_transaction_timeout" else "")
        parts.append(f"the leader {leader.server} dropped it at {first_lead.at}" + (f" ({why})" if why else "")
                     + "".join(f"; '{x.excerpt.split(' - ', 2)[-1][:100]}'" for x in logs.lead if x.what == "zk_learner_closed")[:200])
    follow, took = logs.follow, logs.took
    if follow:
        parts.append(f"it logged 'Exception when following the leader' at {follow[-1].at}"
                     + (f" ({follow[-1].attrs['cause']})" if follow[-1].attrs.get("cause") else "")
                     + (", 'Peer state changed: looking'" if logs.looking else "")
                     + (f", then 'FOLLOWING - LEADER ELECTION TOOK - {took[-1].attrs.get('millis')} MS'" if took else ""))
    return parts


def _leader_synced_followers(ctx: Context, leader: ZooKeeperProbe, first: dict[str, Any], lo: str
                             ) -> tuple[list[str], list[Evidence]]:
    """The leader's own count of synced followers (mntr zk_synced_followers) in the checks around the drop, when it
    counted fewer than its most: (the sentence, its evidence), or two empty lists."""
    lead = [x for x in ctx.zk_series(leader.address) if x.get("synced_followers") is not None]
    near = [x for x in lead if x.at >= (first["previous_sample_at"] or lo)][:6]
    fewer = [x for x in near if isinstance(x.get("synced_followers"), int) and x.get("synced_followers") < max(
        (y.get("synced_followers") for y in lead if isinstance(y.get("synced_followers"), int)), default=0)]
    if not fewer:
        return [], []
    return ([f"the leader counted {fewer[0].get('synced_followers')} synced follower(s) at {fewer[0].at}"],
            [_cite(zookeeper_series_of(leader.address), near, "synced_followers")])


def _drop_times(first: dict[str, Any], logs: _DropLogs) -> tuple[str | None, str | None, int | None]:
    """When it dropped (the leader's line, else its own, else the samples), when it was back, how long (ms) between."""
    drop_at = (logs.lead[0].at if logs.lead else None) or (logs.follow[-1].at if logs.follow else None) \
        or first["previous_sample_at"] or first["serving_again_since"]
    back_at = first.get("serving_again_since")
    duration_ms = int((clock.parse(back_at) - clock.parse(drop_at)).total_seconds() * 1000) if back_at and drop_at and back_at >= drop_at else None
    return drop_at, back_at, duration_ms


def _same_minutes(z: ZooKeeperProbe, s: ZooKeeperHealthSettings, broker_expiries: list[str], drop_at: str | None
                  ) -> tuple[list[str], list[str]]:
    """The correlations in the same minutes: (its host's load and the brokers' session expiries said, those expiries)."""
    corr = []
    if z.load_1m is not None and z.cpus:
        per_cpu = z.load_1m / z.cpus
        corr.append(f"its host's load {z.load_1m:g} on {z.cpus} CPUs ({per_cpu:.1f} per CPU{' : HIGH' if per_cpu >= s.load_per_cpu_high else ''})")
    expiries = [at for at in broker_expiries if _near(at, [drop_at], 120)]
    corr.append(f"{len(expiries)} broker ZooKeeper session expiries within 2 minutes" if expiries else "no broker session expiry within 2 minutes")
    return corr, expiries
