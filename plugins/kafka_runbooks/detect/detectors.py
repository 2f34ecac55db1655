"""Detectors: pure functions from a ClusterSnapshot (ZooKeeper state, direct Kafka checks, canary,
host probes) and the recent history to Findings. No I/O here; every ``details`` is JSON-serialisable.

Whether a broker serves is decided by asking it (the direct checks) and corroborated from the
outside (peers' logs, its process and sockets, trends): see :mod:`kafka_runbooks.detect.serving`.
The ISR shape is corroboration only (:mod:`kafka_runbooks.detect.isr`): a stuck 2.3 broker keeps
its ISRs when no data flows.
"""

from __future__ import annotations

from typing import Callable, Iterable

from kafka_runbooks.config import HealthSettings, LeadershipSettings, ZooKeeperHealthSettings
from kafka_runbooks.detect import trends
from kafka_runbooks.detect.activity import Activity, annotate
from kafka_runbooks.detect.context import Context
from kafka_runbooks.detect.evidence import probe_evidence, state_evidence, trend_evidence
from kafka_runbooks.model import partition_order
from kafka_runbooks.detect.history import History, broker_series
from kafka_runbooks.detect.isr import isr_shape, isr_suspects
from kafka_runbooks.detect.serving import OPENS_INCIDENT as SERVING_INCIDENTS
from kafka_runbooks.detect.serving import PROBLEM as NOT_SERVING
from kafka_runbooks.detect.serving import detect_not_serving, detect_unregistered
from kafka_runbooks.detect.version_check import mismatch_findings
from kafka_runbooks.detect.clients import OPENS_INCIDENT as CLIENT_INCIDENTS
from kafka_runbooks.detect.clients import detect_unknown_api_requests
from kafka_runbooks.detect.jmx import detect_connection_storm, detect_request_metrics_unknown, detect_request_saturation
from kafka_runbooks.detect.leadership import DETECTORS as LEADERSHIP_DETECTORS
from kafka_runbooks.detect.leadership import OPENS_INCIDENT as LEADERSHIP_INCIDENTS
from kafka_runbooks.detect import replicas
from kafka_runbooks.detect.offsets import OPENS_INCIDENT as CLEANER_INCIDENTS
from kafka_runbooks.detect.offsets import detect_cleaner, detect_failed_loads, detect_slow_loads
from kafka_runbooks.detect.zookeeper import OPENS_INCIDENT as ZOOKEEPER_INCIDENTS
from kafka_runbooks.detect.zookeeper import detect_zookeeper, detect_zookeeper_unreachable
from kafka_runbooks.model import ClusterSnapshot, Evidence, Finding, Severity

# finding kinds that open an incident; of those, the ones naming brokers or ZooKeeper servers start a response
# (leadership incidents never do: remediate/choice.first_response leaves them to a person)
OPENS_INCIDENT = (*SERVING_INCIDENTS, "offline_partitions", *ZOOKEEPER_INCIDENTS, *CLIENT_INCIDENTS, *CLEANER_INCIDENTS,
                  *LEADERSHIP_INCIDENTS, *replicas.OPENS_INCIDENT)


def problem_of(f: Finding) -> str:
    """The problem a finding is about: kinds of one problem share a streak and an incident."""
    return str(f.details.get("problem") or f.kind)


def subject_of(f: Finding) -> str | None:
    """What a finding without brokers is about (a ZooKeeper server): part of its streak."""
    subject = f.details.get("subject")
    return str(subject) if subject is not None else None


def detect_under_replicated(ctx: Context) -> list[Finding]:
    s = ctx.snapshot
    urp = sorted((p for p in s.partitions if p.under_replicated and not p.offline), key=partition_order)
    if not urp:
        return []
    missing = sorted({r for p in urp for r in p.replicas if r not in p.isr})
    rejoining = [b for b in missing if (ctx.registration_age_s(b) or 1e18) < 2 * ctx.settings.startup_grace_s
                 and (s.kafka_check(b) is None or s.kafka_check(b).ok)]
    return [
        Finding(
            kind="under_replicated_partitions",
            severity=Severity.WARNING,
            summary=f"{len(urp)} under-replicated partition(s); replicas out of ISR: brokers {missing}"
            + (f" (brokers {rejoining} registered recently and answer: catching up)" if rejoining else ""),
            broker_ids=tuple(missing),
            partitions=tuple(p.name for p in urp),
            evidence=tuple(state_evidence(urp, ctx.settings.max_evidence)),
            details={
                "count": len(urp),
                "partitions": [
                    {"partition": p.name, "replicas": list(p.replicas), "isr": list(p.isr), "leader": p.leader}
                    for p in urp
                ],
                "under_min_isr": [
                    p.name for p in urp if p.min_insync_replicas is not None and len(p.isr) < p.min_insync_replicas
                ],
                "catching_up": rejoining,
            },
        )
    ]


def detect_followers(ctx: Context) -> list[Finding]:
    """Followers out of their ISR: stuck (no progress, no fetcher: ``follower_stuck``) or catching up, with the estimate
    (``detect/replicas.py``)."""
    return replicas.findings(ctx.snapshot, list(ctx.history.get(replicas.REPLICAS, ())), ctx.settings.follower_stuck_s,
                             ctx.settings.max_evidence)


def detect_offline(ctx: Context) -> list[Finding]:
    s = ctx.snapshot
    live = s.live_broker_ids
    off = sorted((p for p in s.partitions if p.offline or p.leader not in live), key=partition_order)
    if not off:
        return []
    gone_leaders = sorted({p.leader for p in off if p.leader >= 0})
    return [
        Finding(
            kind="offline_partitions",
            severity=Severity.CRITICAL,
            summary=f"{len(off)} offline partition(s) (no leader, or leader not registered"
            + (f": brokers {gone_leaders}" if gone_leaders else "")
            + ")",
            broker_ids=tuple(gone_leaders),
            partitions=tuple(p.name for p in off),
            evidence=tuple(state_evidence(off, ctx.settings.max_evidence)),
            details={
                "count": len(off),
                "partitions": [
                    {"partition": p.name, "leader": p.leader, "leader_registered": p.leader in live,
                     "replicas": list(p.replicas), "isr": list(p.isr)}
                    for p in off
                ],
                "live_brokers": sorted(live),
            },
        )
    ]


def detect_unparsable(ctx: Context) -> list[Finding]:
    s = ctx.snapshot
    if not s.unparsable:
        return []
    evidence = []
    for entry in s.unparsable[: ctx.settings.max_evidence]:
        path, _, why = entry.partition(": ")
        evidence.append(Evidence(source=f"zookeeper:{path}", excerpt=why))
    return [
        Finding(
            kind="unparsable",
            severity=Severity.WARNING,
            summary=f"{len(s.unparsable)} ZooKeeper znode(s) could not be understood; the snapshot is incomplete there",
            evidence=tuple(evidence),
            details={"entries": list(s.unparsable)},
        )
    ]


def detect_unreachable(ctx: Context) -> list[Finding]:
    """Registered brokers whose host could not be probed (unregistered ones: broker_absent)."""
    s = ctx.snapshot
    findings = []
    for probe in sorted(s.probes, key=lambda p: p.broker_id):
        if probe.reachable or probe.broker_id not in s.live_broker_ids:
            continue
        host = ctx.host_of(probe.broker_id)
        findings.append(Finding(
            kind="host_unreachable",
            severity=Severity.WARNING,
            summary=f"Broker {probe.broker_id} is registered in ZooKeeper but its host"
            + (f" {host}" if host else "") + f" could not be probed: {probe.error or 'unreachable'}",
            broker_ids=(probe.broker_id,),
            evidence=(Evidence(source=f"probe:broker/{probe.broker_id}", excerpt=probe.error or "unreachable", host=host),),
            details={"broker_id": probe.broker_id, "host": host, "error": probe.error},
        ))
    return findings


def detect_socket_pileup(ctx: Context) -> list[Finding]:
    """CLOSE_WAIT piling up on a broker that still answers (or was not checked): a warning with
    the samples that show it. A broker that does not answer gets this as corroboration instead."""
    s, h = ctx.snapshot, ctx.settings
    findings = []
    for bid in sorted(s.live_broker_ids):
        check = s.kafka_check(bid)
        if check is not None and not check.ok:
            continue
        t = trends.rising(broker_series(bid), ctx.series(bid), "close_wait", h.close_wait_growth, h.trend_samples)
        cw = ctx.outlier(bid, "close_wait", h.close_wait_ratio, h.close_wait_min)
        if t is None and cw is None:
            continue
        evidence = [trend_evidence(t)] if t else []
        probe = s.probe(bid)
        if probe is not None:
            evidence.append(probe_evidence(probe, ctx.host_of(bid)))
        reasons = []
        if t:
            reasons.append(f"CLOSE_WAIT rose from {t.points[0][1]:g} to {t.points[-1][1]:g} over {len(t.points)} probes")
        if cw:
            reasons.append(f"{cw['value']} CLOSE_WAIT vs peer median {cw['peer_median']}")
        findings.append(Finding(
            kind="broker_socket_pileup", severity=Severity.WARNING,
            summary=f"Broker {bid}: " + "; ".join(reasons) + " (it still answers the direct check)",
            broker_ids=(bid,), evidence=tuple(evidence),
            details={"broker_id": bid, "trend": t.to_dict() if t else None, "outlier": cw},
        ))
    return findings


def detect_isr_suspects(ctx: Context) -> list[Finding]:
    """Without direct checks (a ZooKeeper-only snapshot), the ISR shape is reported as a warning;
    it never opens an incident on its own."""
    s = ctx.snapshot
    checked = {c.broker_id for c in s.kafka_checks}
    findings = []
    for bid in isr_suspects(s):
        if bid in checked:
            continue
        shape = isr_shape(s, bid)
        parts = shape.pop("_partitions")
        findings.append(Finding(
            kind="isr_shape_suspect", severity=Severity.WARNING,
            summary=f"Broker {bid} explains the partitions' missing ISR members "
            f"(dropped from {len(shape['dropped_from_isr'])}, leads {len(shape['led_with_isr_only_itself'])} alone); "
            "not checked directly",
            broker_ids=(bid,), partitions=tuple(p.name for p in parts),
            evidence=tuple(state_evidence(parts, ctx.settings.max_evidence)), details={"broker_id": bid, **shape},
        ))
    return findings


def detect_version_mismatch(ctx: Context) -> list[Finding]:
    """The configured kafka_version against what the brokers report (kafka_runbooks.versions): a warning."""
    return mismatch_findings(ctx.snapshot.version, ctx.kafka_version) if ctx.snapshot.kafka_version else []


DETECTORS: tuple[Callable[[Context], list[Finding]], ...] = (
    detect_version_mismatch,
    detect_not_serving,
    detect_unregistered,
    detect_offline,
    detect_under_replicated,
    detect_followers,
    detect_socket_pileup,
    detect_isr_suspects,
    detect_unreachable,
    detect_unparsable,
    detect_zookeeper,
    detect_unknown_api_requests,
    detect_cleaner,
    detect_slow_loads,
    detect_failed_loads,
    *LEADERSHIP_DETECTORS,
    detect_request_saturation,
    detect_request_metrics_unknown,
    detect_connection_storm,
)


def detect(snapshot: ClusterSnapshot, settings: HealthSettings | None = None, history: History | None = None,
           zk_settings: ZooKeeperHealthSettings | None = None, *, leadership: LeadershipSettings | None = None,
           kafka_version: str | None = None, activity: Iterable[Activity] = ()) -> list[Finding]:
    """All findings for one snapshot (and the history ending with it), most severe first. ``activity``: the product's
    own remediations (``detect/activity.py``): what they cause is theirs, and findings about the brokers of one that runs
    (or ran when the snapshot was taken) are annotated ``details.during_plan``."""
    ctx = Context(snapshot, settings or HealthSettings(), history or {}, zk_settings or ZooKeeperHealthSettings(),
                  leadership or LeadershipSettings(), kafka_version, tuple(activity))
    if snapshot.zookeeper_error:
        # brokers and partitions are unknown: only what the ensemble's members say themselves
        findings = detect_zookeeper_unreachable(ctx) + [f for f in detect_zookeeper(ctx) if f.kind == "zookeeper_quorum_lost"]
    else:
        findings = annotate([f for d in DETECTORS for f in d(ctx)], ctx.activity, snapshot.taken_at)
    rank = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(findings, key=lambda f: rank[f.severity])


__all__ = ["DETECTORS", "NOT_SERVING", "OPENS_INCIDENT", "detect", "problem_of", "subject_of"]
