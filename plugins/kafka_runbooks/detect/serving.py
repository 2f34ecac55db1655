"""Is each broker serving? Pure detectors of the "broker not serving" problem.

* ``broker_unresponsive`` (critical, opens an incident): registered in ZooKeeper, and the direct
  Kafka-protocol check of that broker failed, corroborated by at least one independent signal --
  peers' fetch errors naming it (windowed, after its current registration), its process stopped /
  a zombie / gone, CLOSE_WAIT or Recv-Q growing between probes (or far above its peers), its
  canary failing, the ISR shape (dropped from ISRs, or leading partitions alone), its server.log
  gone silent while the process lives.
* ``broker_check_failed`` (warning): the direct check failed with nothing to corroborate it yet
  (the next check usually brings the peers' errors); it counts toward the consecutive checks.
* ``broker_starting`` (info): registered moments ago (``health.startup_grace_s``; longer while its
  ISR memberships are still growing), process running, not answering yet -- a broker catching up
  after a restart is never accused.
* ``broker_unregistered_alive`` (critical): a configured broker host whose Kafka process is alive
  (running, or stopped by SIGSTOP: its port still held) but NOT registered -- its session expired.
* ``broker_absent`` (critical): a configured broker neither registered nor running (or its host
  cannot even be probed).

All five carry ``details["problem"] = "broker_not_serving"``: a broker that is paused moves from
unresponsive (still registered) to unregistered-alive (session expired) and stays one problem.
"""

from __future__ import annotations

import statistics
from typing import Any

from kafka_runbooks.detect import trends
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.evidence import (
    canary_evidence,
    check_evidence,
    fetch_error_evidence,
    probe_evidence,
    state_evidence,
    trend_evidence,
)
from kafka_runbooks.detect.history import broker_series
from kafka_runbooks.detect.isr import isr_shape
from kafka_runbooks.model import Evidence, Finding, Severity

PROBLEM = "broker_not_serving"
ISOLATED_RUNBOOK = "runbooks/broker-silently-isolated.md"
OPENS_INCIDENT = ("broker_unresponsive", "broker_unregistered_alive", "broker_absent")


def _corroboration(ctx: Context, bid: int) -> tuple[list[str], list[Evidence], dict[str, Any]]:
    """Independent signals that broker ``bid`` is not serving: (reasons, evidence, details)."""
    s = ctx.snapshot
    reasons: list[str] = []
    evidence: list[Evidence] = []
    details: dict[str, Any] = {}
    host = ctx.host_of(bid)

    peers = ctx.peer_fetch_errors(bid)
    if peers:
        total = sum(len(v) for v in peers.values())
        first = min(e.at for v in peers.values() for e in v)
        reasons.append(f"{len(peers)} peer(s) {sorted(peers)} logged {total} failed fetch(es) from it since {first}")
        for peer, errs in sorted(peers.items()):
            evidence += fetch_error_evidence(peer, errs, ctx.host_of(peer), limit=3)
    details["peer_fetch_errors"] = {str(p): len(v) for p, v in sorted(peers.items())}

    _process_signals(ctx, bid, host, reasons, evidence, details)
    _socket_signals(ctx, bid, reasons, evidence, details)

    canary = s.canary_of(bid)
    if canary is not None and not canary.ok:
        reasons.append(f"its canary failed: {canary.error}")
        evidence.append(canary_evidence(canary))

    shape = isr_shape(s, bid)
    parts = shape.pop("_partitions")
    if shape["dropped_from_isr"]:
        reasons.append(f"dropped from the ISR of {len(shape['dropped_from_isr'])} partition(s) led by {shape['dropped_by']}")
    if shape["led_with_isr_only_itself"]:
        reasons.append(f"leads {len(shape['led_with_isr_only_itself'])} partition(s) whose ISR shrank to itself")
    if parts:
        evidence += state_evidence(parts, 5)
    details["isr"] = shape
    return reasons, evidence, details


def _process_signals(ctx: Context, bid: int, host: str | None, reasons: list[str], evidence: list[Evidence],
                     details: dict[str, Any]) -> None:
    """Its process: stopped or gone, or its server.log silent while it lives (added to reasons, evidence, details)."""
    s, h = ctx.snapshot, ctx.settings
    probe = s.probe(bid)
    if probe is not None and probe.reachable:
        details["process_state"] = probe.process_state
        if probe.stopped:
            reasons.append(f"its process (pid {probe.pid}) is {probe.process_state}")
        elif probe.pid is None:
            reasons.append(f"no process listens on its ports {list(probe.ports)}")
        if probe.process_alive and probe.server_log_age_s is not None and probe.server_log_age_s >= h.log_stale_s:
            reasons.append(f"its server.log was last written {probe.server_log_age_s:.0f} s ago while the process lives")
            details["log_silent"] = {"age_s": probe.server_log_age_s, "stale_s": h.log_stale_s}
        else:
            silent = _log_silent(ctx, bid)
            if silent is not None:
                peers = ", ".join(f"broker {b} {a:.0f} s" for b, a in silent["peer_ages_s"].items())
                reasons.append(f"its server.log has not been written for {silent['age_s']:.0f} s while its process lives, "
                               f"and its peers' logs were written moments ago ({peers})")
                details["log_silent"] = silent
        evidence.append(probe_evidence(probe, host))


def _socket_signals(ctx: Context, bid: int, reasons: list[str], evidence: list[Evidence], details: dict[str, Any]) -> None:
    """Its sockets and files: CLOSE_WAIT or Recv-Q rising, traffic near zero, memory falling with them, counts far
    above its peers' (added to reasons, evidence, details)."""
    h = ctx.settings
    series = ctx.series(bid)
    name = broker_series(bid)
    found_trends = []
    for key, growth, label in (("close_wait", h.close_wait_growth, "CLOSE_WAIT"), ("recv_q_bytes", h.recv_q_growth_bytes, "Recv-Q bytes")):
        t = trends.rising(name, series, key, growth, h.trend_samples)
        if t is not None:
            found_trends.append(t)
            reasons.append(f"{label} on its ports rose from {t.points[0][1]:g} to {t.points[-1][1]:g} over {len(t.points)} probes")
            evidence.append(trend_evidence(t))
    quiet = _traffic_near_zero(ctx, bid)
    if quiet is not None:
        mine, peers_median = quiet
        found_trends.append(mine)
        reasons.append(f"its sockets sent {mine.change:g} B/s since the last probe vs {peers_median:g} B/s at its peers (median)")
        evidence.append(trend_evidence(mine))
        details["traffic_near_zero"] = {"rate": mine.change, "peers_median": peers_median}
    memory = trends.falling(name, series, "mem_available_bytes", h.trend_samples)
    if memory is not None and found_trends:
        found_trends.append(memory)
        reasons.append(f"its host's available memory fell from {memory.points[0][1] / 2**20:.0f} MiB to {memory.points[-1][1] / 2**20:.0f} MiB "
                       f"over {len(memory.points)} probes")
        evidence.append(trend_evidence(memory))
    details["trends"] = [t.to_dict() for t in found_trends]
    cw = ctx.outlier(bid, "close_wait", h.close_wait_ratio, h.close_wait_min)
    if cw:
        reasons.append(f"{cw['value']} CLOSE_WAIT sockets on its ports vs peer median {cw['peer_median']}")
        details["close_wait_outlier"] = cw
    of = ctx.outlier(bid, "open_files", h.open_files_ratio, h.open_files_min)
    if of:
        reasons.append(f"{of['value']} open files vs peer median {of['peer_median']}")
        details["open_files_outlier"] = of


def _log_silent(ctx: Context, bid: int) -> dict[str, Any] | None:
    """Its server.log untouched for ``health.log_silent_s`` while every reachable registered peer whose process
    lives wrote its own within that time (incident 000: "broker 0's log files stop being written at 07:00";
    a whole cluster that is merely quiet is never this)."""
    s, h = ctx.snapshot, ctx.settings
    probe = s.probe(bid)
    if probe is None or not probe.process_alive or probe.server_log_age_s is None or probe.server_log_age_s < h.log_silent_s:
        return None
    peers = [p for p in s.probes if p.broker_id != bid and p.reachable and p.process_alive and p.broker_id in s.live_broker_ids
             and p.server_log_age_s is not None]
    if not peers or any(p.server_log_age_s >= h.log_silent_s for p in peers):
        return None
    return {"age_s": probe.server_log_age_s, "silent_s": h.log_silent_s, "mtime": probe.server_log_mtime,
            "peer_ages_s": {str(p.broker_id): p.server_log_age_s for p in sorted(peers, key=lambda p: p.broker_id)}}


def pattern_of(details: dict[str, Any]) -> str | None:
    """Which post-mortem a not-serving broker looks like, from the outside: its logs silent while it lives
    AND its traffic near zero or its peers failing to fetch from it = a broker that silently dropped out
    (incident 000). Else None (a stuck broker: the analysis of the capture tells a deadlock, incident 001)."""
    silent = bool(details.get("log_silent"))
    cut_off = bool(details.get("traffic_near_zero")) or any(details.get("peer_fetch_errors", {}).values())
    return "silently_isolated" if silent and cut_off else None


def _traffic_near_zero(ctx: Context, bid: int) -> tuple[trends.Trend, float] | None:
    """Bytes sent on the broker's ports (``ss -ti`` bytes_acked) grew at most ``traffic_ratio`` x
    the median of its registered peers' rates between the last two probes (incident 000: its NIC
    traffic fell to ~0 while the peers kept moving data)."""
    mine = trends.rate(broker_series(bid), ctx.series(bid), "bytes_acked")
    peers = [r.change for p in ctx.snapshot.live_broker_ids if p != bid
             for r in [trends.rate(broker_series(p), ctx.series(p), "bytes_acked")] if r is not None]
    if mine is None or not peers:
        return None
    median = statistics.median(peers)
    if median <= 0 or mine.change > ctx.settings.traffic_ratio * median:
        return None
    return mine, median


def _starting(ctx: Context, bid: int) -> str | None:
    """Why a registered broker that does not answer yet is still starting up, or None.

    Never starting: a broker that already answered a check in this registration (same ZooKeeper
    session, from the history), or whose peers' fetchers failed on it since it registered (it led
    partitions, so it had served)."""
    h = ctx.settings
    age = ctx.registration_age_s(bid)
    if age is None:
        return None
    b = ctx.snapshot.broker(bid)
    if any(s.get("check_ok") is True and s.get("session_id") == b.session_id for s in ctx.series(bid)):
        return None
    if ctx.peer_fetch_errors(bid):
        return None
    if age < h.startup_grace_s:
        return f"registered {age:.0f} s ago (startup grace {h.startup_grace_s:g} s)"
    t = trends.rising(broker_series(bid), ctx.series(bid), "isr_member_of", 1, h.trend_samples)
    if age < 2 * h.startup_grace_s and t is not None:
        return f"registered {age:.0f} s ago and still rejoining ISRs ({t.excerpt()})"
    return None


def detect_not_serving(ctx: Context) -> list[Finding]:
    s, h = ctx.snapshot, ctx.settings
    findings = []
    for b in sorted(s.brokers, key=lambda b: b.id):
        check = s.kafka_check(b.id)
        if check is None or check.ok:
            continue
        probe = s.probe(b.id)
        down = probe is not None and probe.reachable and (probe.stopped or probe.pid is None)
        host = ctx.host_of(b.id)
        base = {"problem": PROBLEM, "broker_id": b.id, "host": host, "registered": True,
                "registered_at": b.registered_at, "session_id": b.session_id, "check": check.to_dict(),
                "is_controller": s.controller_id == b.id}
        starting = None if down else _starting(ctx, b.id)
        if starting:
            findings.append(Finding(
                kind="broker_starting", severity=Severity.INFO,
                summary=f"Broker {b.id} does not answer yet but is starting: {starting}",
                broker_ids=(b.id,), evidence=(check_evidence(check),), details={**base, "why": starting},
            ))
            continue
        reasons, evidence, details = _corroboration(ctx, b.id)
        head = f"direct check of {check.endpoint or 'its endpoint'} failed ({check.error})"
        if reasons:
            pattern = pattern_of(details)
            if pattern:
                details.update(pattern=pattern, incident="000", runbook=ISOLATED_RUNBOOK)
            findings.append(Finding(
                kind="broker_unresponsive", severity=Severity.CRITICAL,
                summary=f"Broker {b.id} is registered in ZooKeeper but does not serve: {head}; " + "; ".join(reasons)
                + ("; it looks SILENTLY ISOLATED (incident 000): it stopped serving and stopped logging while its process "
                   f"lives; see {ISOLATED_RUNBOOK}" if pattern else ""),
                broker_ids=(b.id,),
                partitions=tuple(details["isr"]["dropped_from_isr"] + details["isr"]["led_partitions_missing_followers"]),
                evidence=tuple([check_evidence(check), *evidence][: h.max_evidence]),
                details={**base, **details, "corroborated_by": reasons},
            ))
        else:
            findings.append(Finding(
                kind="broker_check_failed", severity=Severity.WARNING,
                summary=f"Broker {b.id}: {head}; nothing corroborates it yet (no peer fetch errors, process {details.get('process_state') or 'state unknown'})",
                broker_ids=(b.id,), evidence=tuple([check_evidence(check), *evidence][: h.max_evidence]),
                details={**base, **details, "corroborated_by": []},
            ))
    return findings


def detect_unregistered(ctx: Context) -> list[Finding]:
    """Configured brokers that are not registered: alive-but-unregistered, or absent."""
    s, h = ctx.snapshot, ctx.settings
    findings = []
    for bid in sorted(set(s.configured_broker_ids) - s.live_broker_ids):
        probe = s.probe(bid)
        series = ctx.series(bid)
        last = trends.last_true(series, "registered")
        last_note = (f"last seen registered at {last.at} (session {last.get('session_id')})" if last
                     else "never seen registered by this health check")
        base: dict[str, Any] = {"problem": PROBLEM, "broker_id": bid, "registered": False,
                                "last_registered_sample": last.to_dict() if last else None}
        evidence: list[Evidence] = [Evidence(source="zookeeper:/brokers/ids", excerpt=f"{s.taken_at}: registered {sorted(s.live_broker_ids)}; {bid} missing; {last_note}")]
        check = s.kafka_check(bid)
        if check is not None:
            evidence.append(check_evidence(check))
            base["check"] = check.to_dict()
        if probe is None or not probe.reachable:
            why = probe.error if probe is not None else "no host probe was run"
            findings.append(Finding(
                kind="broker_absent", severity=Severity.CRITICAL,
                summary=f"Broker {bid} is not registered in ZooKeeper and its host could not be probed ({why}); {last_note}",
                broker_ids=(bid,), evidence=tuple(evidence), details={**base, "host_reachable": False, "error": why},
            ))
            continue
        evidence.append(probe_evidence(probe, None))
        peers = ctx.peer_fetch_errors(bid)
        for peer, errs in sorted(peers.items()):
            evidence += fetch_error_evidence(peer, errs, ctx.host_of(peer), limit=2)
        base.update(host_reachable=True, pid=probe.pid, process_state=probe.process_state, listening=probe.listening,
                    ports=list(probe.ports), peer_fetch_errors={str(p): len(v) for p, v in sorted(peers.items())})
        if probe.pid is not None and probe.process_alive:
            if not probe.stopped and probe.process_uptime_s is not None and probe.process_uptime_s < h.startup_grace_s:
                findings.append(Finding(
                    kind="broker_starting", severity=Severity.INFO,
                    summary=f"Broker {bid} is not registered yet; its process started {probe.process_uptime_s:.0f} s ago",
                    broker_ids=(bid,), evidence=tuple(evidence[: h.max_evidence]), details=base,
                ))
                continue
            port = "holds its port(s) " + str(list(probe.ports)) if probe.listening else "does not listen on its ports"
            findings.append(Finding(
                kind="broker_unregistered_alive", severity=Severity.CRITICAL,
                summary=f"Broker {bid}'s Kafka process (pid {probe.pid}) is alive and {probe.process_state} and {port}, "
                        f"but it is not registered in ZooKeeper (its session expired?); {last_note}",
                broker_ids=(bid,), evidence=tuple(evidence[: h.max_evidence]), details=base,
            ))
        else:
            what = f"its process is a {probe.process_state}" if probe.pid is not None else f"no process listens on its ports {list(probe.ports)}"
            findings.append(Finding(
                kind="broker_absent", severity=Severity.CRITICAL,
                summary=f"Broker {bid} is not registered in ZooKeeper and {what}; {last_note}",
                broker_ids=(bid,), evidence=tuple(evidence[: h.max_evidence]), details=base,
            ))
    return findings
