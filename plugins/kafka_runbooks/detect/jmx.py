"""Request saturation and connection storms (incident 003): the detectors. Pure. What is read over JMX and how
JmxTool's answer is read: ``host/jmxtool.py`` (measured on the lab: ~1.9 s of wall time, a JVM start, per broker,
all brokers in parallel).

Before Kafka 2.2 (KIP-291, or without ``control.plane.listener.name`` configured after it) a broker queues the
controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) in the same request queue as clients' requests:
a broker whose queue is full of client requests learns late who leads. ``queued.max.requests`` (default 500) bounds
that queue; when it is full the network threads stop reading from every socket.
"""

from __future__ import annotations

import statistics

from kafka_runbooks.detect import trends
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.evidence import probe_evidence, trend_evidence
from kafka_runbooks.detect.history import broker_series
from kafka_runbooks.host.jmxtool import (DEFAULT_QUEUED_MAX_REQUESTS, FAILED_FETCH, FAILED_PRODUCE, REQUEST_QUEUE,
                                          REQUEST_TYPES, request_metric)
from kafka_runbooks.model import Evidence, Finding, RequestMetrics, Severity

RUNBOOK = "runbooks/preferred-election.md"


def kip291_note(version, control_plane_listener: str | None, queued_max: int, explicit: bool) -> str:
    """What on-call must know about the request queue on this version (``version``: a
    ``kafka_runbooks.versions.KafkaVersion``, or a version string for pure callers)."""
    from kafka_runbooks import versions

    bound = f"queued.max.requests is {queued_max}" + ("" if explicit else " (Kafka's default)") + \
        ": when that many requests wait, the network threads stop reading every socket"
    kv = version if isinstance(version, versions.KafkaVersion) else versions.assumed(version)
    if kv.lacks("control_plane"):
        return (f"Kafka {kv.describe()} < 2.2 puts the controller's requests (LeaderAndIsr, UpdateMetadata) in the same queue, "
                f"behind client requests (fixed by KIP-291 in 2.2): a full queue delays who-leads updates; {bound}")
    if not control_plane_listener:
        return (f"no control.plane.listener.name: the controller's requests share this queue with client requests "
                f"(KIP-291's separate control plane needs that listener); {bound}")
    return bound


def queued_max_requests(ctx: Context, broker_id: int) -> tuple[int, bool]:
    raw = ctx.snapshot.static_config("queued.max.requests", broker_id) or ctx.snapshot.broker_config("queued.max.requests", broker_id)
    try:
        return int(raw), True
    except (TypeError, ValueError):
        return DEFAULT_QUEUED_MAX_REQUESTS, False


def _metrics_evidence(m: RequestMetrics, names: list[tuple[str, str]]) -> Evidence:
    shown = "; ".join(f"{o.split(',name=')[-1]}:{a} = {m.get(o, a):g}" for o, a in names if m.get(o, a) is not None)
    return Evidence(source=f"jmx:broker/{m.broker_id}", excerpt=f"{m.at} JmxTool: {shown}")


def detect_request_saturation(ctx: Context) -> list[Finding]:
    """A broker whose request queue nears queued.max.requests, whose requests wait long in the request or response
    queue, or that fails produce/fetch requests: with the KIP-291 note for its version."""
    s, h = ctx.snapshot, ctx.leadership
    findings = []
    for m in sorted(s.request_metrics, key=lambda m: m.broker_id):
        if not m.ok:
            continue
        bound, explicit = queued_max_requests(ctx, m.broker_id)
        reasons, cited = [], []
        queue = m.get(REQUEST_QUEUE, "Value")
        saturated = queue is not None and queue >= h.queue_ratio * bound
        if saturated:
            reasons.append(f"RequestQueueSize {queue:g} of queued.max.requests {bound}")
            cited.append((REQUEST_QUEUE, "Value"))
            # the queue times are histograms over the last minutes (a broker that hung earlier keeps huge p99s after
            # it recovered): they describe a saturated queue, they do not make one
            for t in ("RequestQueueTimeMs", "ResponseQueueTimeMs"):
                for r in REQUEST_TYPES:
                    p99 = m.get(request_metric(t, r), "99thPercentile")
                    if p99 is not None and p99 >= h.queue_time_ms:
                        reasons.append(f"{r} {t} p99 {p99:g} ms")
                        cited.append((request_metric(t, r), "99thPercentile"))
        failed = {n: m.get(o, "OneMinuteRate") for n, o in (("produce", FAILED_PRODUCE), ("fetch", FAILED_FETCH))}
        failing = {n: v for n, v in failed.items() if v is not None and v > 0}
        if not reasons and not failing:
            continue
        if failing:
            reasons.append("failed " + ", ".join(f"{n} requests {v:.2f}/s" for n, v in failing.items()))
            cited += [(FAILED_PRODUCE, "OneMinuteRate"), (FAILED_FETCH, "OneMinuteRate")]
        b = s.broker(m.broker_id)
        # what the brokers report; the setting only where nothing was observed (pure callers)
        note = kip291_note(s.version if s.kafka_version else (b.version if b and b.version else ctx.kafka_version),
                           s.static_config("control.plane.listener.name", m.broker_id), bound, explicit)
        findings.append(Finding(
            kind="request_queue_saturated" if saturated else "requests_failing",
            severity=Severity.WARNING,
            summary=f"Broker {m.broker_id}: " + "; ".join(reasons) + f". {note}",
            broker_ids=(m.broker_id,),
            evidence=(_metrics_evidence(m, cited),),
            details={"problem": "leadership", "broker_id": m.broker_id, "queued_max_requests": bound,
                     "queued_max_requests_set": explicit, "kip_291": note,
                     "figures": {f"{o}:{a}": m.get(o, a) for o, a in cited}, "runbook": RUNBOOK},
        ))
    return findings


def detect_request_metrics_unknown(ctx: Context) -> list[Finding]:
    """Registered brokers whose request-path figures were asked for and could not be read (JmxTool failed, answered
    without RequestQueueSize, or the broker registered no JMX port): *unknown*, said so, never taken as fine."""
    s = ctx.snapshot
    unknown = sorted((m for m in s.request_metrics if not m.ok and m.broker_id in s.live_broker_ids), key=lambda m: m.broker_id)
    if not unknown or not ctx.leadership.jmx:
        return []
    return [Finding(
        kind="request_metrics_unknown", severity=Severity.WARNING,
        summary="Request queues unknown on brokers " + ", ".join(str(m.broker_id) for m in unknown) + ": "
                + "; ".join(f"broker {m.broker_id}: {(m.error or 'not read')[:200]}" for m in unknown)
                + ". Saturation cannot be judged there, and a preferred election halts rather than pass its queue check on no data.",
        broker_ids=tuple(m.broker_id for m in unknown),
        evidence=tuple(Evidence(source=f"jmx:broker/{m.broker_id}", excerpt=f"{m.at} {m.error or 'not read'}"[:400]) for m in unknown),
        details={"brokers": {str(m.broker_id): m.error for m in unknown}, "runbook": RUNBOOK},
    )]


def detect_connection_storm(ctx: Context) -> list[Finding]:
    """ESTABLISHED connections on a broker's ports far above its own recent median (incident 003: ~10k -> ~30k
    within minutes, as clients bounced between brokers that each denied leadership)."""
    s, h = ctx.snapshot, ctx.leadership
    findings = []
    for bid in sorted(s.live_broker_ids):
        series = ctx.series(bid)
        pts = trends.points(series, "established", len(series))
        if len(pts) < 3:
            continue
        now = pts[-1][1]
        base = statistics.median(v for _, v in pts[:-1])
        if now < h.connection_min or now < h.connection_ratio * max(base, 1.0):
            continue
        t = trends.Trend(broker_series(bid), "established", tuple(pts[-min(len(pts), 6):]), now - base)
        probe = s.probe(bid)
        evidence = [trend_evidence(t)] + ([probe_evidence(probe, ctx.host_of(bid))] if probe else [])
        findings.append(Finding(
            kind="connection_storm", severity=Severity.WARNING,
            summary=f"Broker {bid}: {now:g} ESTABLISHED connections on its ports, {now / max(base, 1.0):.1f}x its median of "
                    f"{base:g} over the last {len(pts) - 1} checks (clients reconnecting: leadership moving, or clients told "
                    "NOT_LEADER_FOR_PARTITION retry elsewhere)",
            broker_ids=(bid,), evidence=tuple(evidence),
            details={"problem": "leadership", "broker_id": bid, "established": now, "median": base, "trend": t.to_dict(),
                     "runbook": RUNBOOK},
        ))
    return findings
