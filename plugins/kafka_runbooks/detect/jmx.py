"""Request saturation and connection storms (incident 003). Pure: what to read over JMX, reading JmxTool's
answer, and the two detectors.

The JMX figures are incident 003's own list, read with Kafka's ``kafka.tools.JmxTool`` run on the broker's host
over SSH (the distribution the broker runs, no agent to install; ``--one-time true``, CSV). JmxTool 2.3 fails with a
NullPointerException on object-name *patterns* (``request=*``), so every name is spelled out. Measured on the lab:
~1.9 s of wall time (a JVM start) per broker, all brokers in parallel.

Before Kafka 2.2 (KIP-291, or without ``control.plane.listener.name`` configured after it) a broker queues the
controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) in the same request queue as clients' requests:
a broker whose queue is full of client requests learns late who leads. ``queued.max.requests`` (default 500) bounds
that queue; when it is full the network threads stop reading from every socket.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping

from kafka_runbooks.detect import trends
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.evidence import probe_evidence, trend_evidence
from kafka_runbooks.detect.history import broker_series
from kafka_runbooks.model import Evidence, Finding, RequestMetrics, Severity

REQUEST_QUEUE = "kafka.network:type=RequestChannel,name=RequestQueueSize"
RESPONSE_QUEUE = "kafka.network:type=RequestChannel,name=ResponseQueueSize"
FAILED_PRODUCE = "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec"
FAILED_FETCH = "kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec"
BYTES_IN = "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec"
PRODUCE_REQUESTS = "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec"
FETCH_REQUESTS = "kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec"
REQUEST_TYPES = ("Produce", "FetchConsumer", "FetchFollower")
TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "ResponseQueueTimeMs")


def request_metric(name: str, request: str) -> str:
    return f"kafka.network:type=RequestMetrics,name={name},request={request}"


OBJECT_NAMES: tuple[str, ...] = (
    REQUEST_QUEUE, RESPONSE_QUEUE, FAILED_PRODUCE, FAILED_FETCH, BYTES_IN, PRODUCE_REQUESTS, FETCH_REQUESTS,
    *(request_metric(t, r) for t in TIMES for r in REQUEST_TYPES),
)
ATTRIBUTES = ("Value", "Count", "OneMinuteRate", "Mean", "99thPercentile", "Max")
DEFAULT_QUEUED_MAX_REQUESTS = 500
RUNBOOK = "runbooks/preferred-election.md"


def jmx_url(host: str, port: int) -> str:
    return f"service:jmx:rmi:///jndi/rmi://{host}:{int(port)}/jmxrmi"


# JmxTool before 2.0 (KAFKA-6611) has no --one-time and exits on it; it prints a header and a row every
# --reporting-interval, forever, and only when every object named has every attribute asked (so no --attributes).
# This constant script runs the tool (its arguments, never part of the script), passes its first two lines on and
# stops it: the JVM ignores SIGPIPE, so a pipe into head would leave it running.
FIRST_ROW_SCRIPT = ('coproc JMX { exec "$@"; }; IFS= read -r head <&"${JMX[0]}" && IFS= read -r row <&"${JMX[0]}"; rc=$?; '
                    'kill "$JMX_PID" 2>/dev/null; wait "$JMX_PID" 2>/dev/null; printf "%s\\n%s\\n" "$head" "$row"; exit $rc')
REPORTING_INTERVAL_MS = 3_600_000  # the tool is stopped after its first row


def jmxtool_argv(kafka_home: str, url: str, heap: str = "-Xmx64m", version=None) -> tuple[str, ...]:
    """Kafka's JmxTool, once, CSV. ``JMX_PORT`` unset: kafka-run-class.sh would make the tool's own JVM bind it.
    ``version`` (``kafka_runbooks.versions.KafkaVersion``): with ``--one-time`` where every broker has it (2.0+),
    else (0.10, or unknown) run until its first row by ``FIRST_ROW_SCRIPT``; every object name is the same in 0.10.2.1
    (tests/analyze/fixtures/real0102/jmxtool.csv, recorded from the lab's broker)."""
    one_time = version is not None and version.has("jmxtool_one_time")
    argv = ["env", "-u", "JMX_PORT", f"KAFKA_HEAP_OPTS={heap}", "KAFKA_OPTS=", "KAFKA_JMX_OPTS=",
            f"{kafka_home.rstrip('/')}/bin/kafka-run-class.sh", "kafka.tools.JmxTool", "--jmx-url", url]
    if one_time:
        argv += ["--one-time", "true", "--report-format", "csv", "--attributes", ",".join(ATTRIBUTES)]
    else:
        argv += ["--reporting-interval", str(REPORTING_INTERVAL_MS)]
    for name in OBJECT_NAMES:
        argv += ["--object-name", name]
    return tuple(argv) if one_time else ("bash", "-c", FIRST_ROW_SCRIPT, "jmxtool", *argv)


def parse_jmxtool_csv(text: str) -> tuple[dict[str, float], list[str]]:
    """JmxTool's answer -> ({"<object name>:<attribute>": number}, problems). Kafka 2.3 with ``--one-time true
    --report-format csv`` prints one ``name,"value"`` line per attribute (the object names hold unquoted commas:
    the value is after the last ``,"``); with a reporting interval it prints a ``"time",...`` header and rows, read
    by the analysis' parser (``analyze/parsers/listings.parse_jmx``; the last row is taken)."""
    from kafka_runbooks.analyze.parsers.listings import parse_jmx

    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    out: dict[str, float] = {}
    if lines and lines[0].split(",", 1)[0].strip('"') == "time":
        series = parse_jmx(text)
        if not series.rows:
            return {}, list(series.unparsable) or ["JmxTool printed a header but no values"]
        for name, value in series.rows[-1].items():
            if name != "time" and isinstance(value, (int, float)):
                out[name] = float(value)
        return out, []
    for ln in lines:
        name, sep, value = ln.rpartition(',"')
        if not sep or not value.endswith('"') or name == "time":
            continue
        try:
            out[name] = float(value[:-1])
        except ValueError:
            continue
    if not out:
        first = lines[0] if lines else ""
        return {}, [f"no JmxTool values in its answer: {first[:200]!r}" if first else "JmxTool printed nothing"]
    return out, []


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


def metrics_summary(m: RequestMetrics) -> Mapping[str, Any]:
    """The figures kept in the history per check."""
    return {
        "request_queue": m.get(REQUEST_QUEUE, "Value"),
        "response_queue": m.get(RESPONSE_QUEUE, "Value"),
        "failed_produce_rate": m.get(FAILED_PRODUCE, "OneMinuteRate"),
        "failed_fetch_rate": m.get(FAILED_FETCH, "OneMinuteRate"),
        "bytes_in_rate": m.get(BYTES_IN, "OneMinuteRate"),
        "request_rate": _sum(m.get(PRODUCE_REQUESTS, "OneMinuteRate"), m.get(FETCH_REQUESTS, "OneMinuteRate")),
        "produce_queue_ms_p99": m.get(request_metric("RequestQueueTimeMs", "Produce"), "99thPercentile"),
    }


def _sum(*xs: float | None) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) if vals else None
