"""Request handling seen in the logs and JMX: requests a broker could not parse (a client newer than the broker),
a request queue at its bound (before Kafka 2.2 controller requests wait behind client requests), and a JMX read
that gave no request queue (unknown, never taken as fine)."""

from __future__ import annotations

from collections import Counter

from ...findings import FindingKind
from ...model import Evidence, Finding, Severity
from ..known_bugs import parse_version
from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from .core import broker_label, by_broker, cite, logs_by_broker
from .sockets import socket_tables


API_KEYS = {
    18: ("ApiVersions", "0.10.0"), 19: ("CreateTopics", "0.10.1"), 20: ("DeleteTopics", "0.10.1"),
    21: ("DeleteRecords", "0.11.0"), 22: ("InitProducerId", "0.11.0"), 23: ("OffsetForLeaderEpoch", "0.11.0"),
    24: ("AddPartitionsToTxn", "0.11.0"), 25: ("AddOffsetsToTxn", "0.11.0"), 26: ("EndTxn", "0.11.0"),
    27: ("WriteTxnMarkers", "0.11.0"), 28: ("TxnOffsetCommit", "0.11.0"), 29: ("DescribeAcls", "0.11.0"),
    30: ("CreateAcls", "0.11.0"), 31: ("DeleteAcls", "0.11.0"), 32: ("DescribeConfigs", "0.11.0"),
    33: ("AlterConfigs", "0.11.0"), 34: ("AlterReplicaLogDirs", "1.0.0"), 35: ("DescribeLogDirs", "1.0.0"),
    36: ("SaslAuthenticate", "1.0.0"), 37: ("CreatePartitions", "1.0.0"), 38: ("CreateDelegationToken", "1.1.0"),
    39: ("RenewDelegationToken", "1.1.0"), 40: ("ExpireDelegationToken", "1.1.0"), 41: ("DescribeDelegationToken", "1.1.0"),
    42: ("DeleteGroups", "1.1.0"), 43: ("ElectLeaders", "2.2.0"), 44: ("IncrementalAlterConfigs", "2.3.0"),
    45: ("AlterPartitionReassignments", "2.4.0"), 46: ("ListPartitionReassignments", "2.4.0"),
    47: ("OffsetDelete", "2.4.0"), 48: ("DescribeClientQuotas", "2.6.0"), 49: ("AlterClientQuotas", "2.6.0"),
    50: ("DescribeUserScramCredentials", "2.7.0"), 51: ("AlterUserScramCredentials", "2.7.0"),
    56: ("AlterPartition", "2.7.0"), 57: ("UpdateFeatures", "2.7.0"), 60: ("DescribeCluster", "2.8.0"),
    61: ("DescribeProducers", "2.8.0"), 65: ("DescribeTransactions", "3.0.0"), 66: ("ListTransactions", "3.0.0"),
    68: ("ConsumerGroupHeartbeat", "3.5.0"),
}


def _api_key_name(k: str | None) -> str:
    try:
        key = int(k or "")
    except ValueError:
        return f"API key {k}"
    name, since = API_KEYS.get(key, (None, None))
    return f"API key {key} ({name}, added in Kafka {since})" if name else f"API key {key} (unknown to Kafka's API list)"


def _client_of(connection: str | None) -> tuple[str | None, int | None]:
    """'127.102.1.1:9092-127.0.0.1:48908-5' -> ('127.0.0.1', 48908)."""
    if not connection:
        return None, None
    parts = connection.split("-")
    if len(parts) >= 2:
        host, _, port = parts[1].rpartition(":")
        try:
            return host or None, int(port)
        except ValueError:
            return host or None, None
    return None, None


def unknown_api_findings(files: list[ParsedFile], versions: dict[int | None, str]) -> list[Finding]:
    out = []
    sockets = socket_tables(files)
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            s: LogSummary = f.result
            recs = s.signatures("processor_uncaught_exception") + s.signatures("invalid_request")
            if not recs:
                continue
            keys = Counter(r.attrs.get("api_key") or r.attrs.get("api_key_aioobe") for r in recs
                           if r.attrs.get("api_key") or (r.attrs.get("api_key_aioobe") and r.attrs.get("api_key_frame")))
            clients = Counter(_client_of(r.attrs.get("connection")) for r in recs if r.attrs.get("connection"))
            matched = []
            for (host, port), n in clients.items():
                for sf in sockets.get(b, []):
                    for row in sf.result.rows:
                        if row.peer_host == host and row.peer_port == port:
                            matched.append(f"{sf.path}:{row.line} {row.state} {row.local} <- {row.peer} "
                                           f"{'(pid ' + str(row.pid) + ')' if row.pid else ''}".strip())
            ver = versions.get(b)
            what = ", ".join(_api_key_name(k) for k in keys) if keys else "a request the broker could not parse"
            total = s.count("processor_uncaught_exception") + s.count("invalid_request")
            summary = (f"{broker_label(b)} rejected {total} request(s) from a client it does not understand: {what}")
            if clients:
                summary += "; client(s): " + ", ".join(f"{h}:{p} x{n}" for (h, p), n in clients.most_common(5))
            if s.count("processor_uncaught_exception"):
                summary += ("; on Kafka 0.9 - 0.10.0 the network thread drops every request selected in the same poll, "
                            "broker-to-broker requests included")
            advice = ("Find the client by its address (and client id in its own logs) and pin its protocol/version to what "
                      f"the broker supports (Kafka {ver or 'of this broker'}), or upgrade the brokers. No restart is proposed.")
            out.append(Finding(kind=FindingKind.UNKNOWN_API_REQUESTS, severity=Severity.CRITICAL if s.count("processor_uncaught_exception") else Severity.WARNING,
                               summary=summary, broker_ids=(b,) if b is not None else (), evidence=(cite(f, recs),),
                               details={"api_keys": {k: _api_key_name(k) for k in keys}, "clients": [
                                   {"host": h, "port": p, "count": n} for (h, p), n in clients.items()],
                                   "socket_table_matches": matched[:20], "kafka_version": ver, "advice": advice,
                                   "no_restart": True}))
    return out


def request_queue_findings(files: list[ParsedFile], versions: dict[int | None, str]) -> list[Finding]:
    """Request queue at its bound (queued.max.requests, default 500): before Kafka 2.2 (KIP-291) controller
    requests wait in the same queue behind client requests (incident 003)."""
    out = []
    configs = {b: fs[-1].result for b, fs in by_broker(files, "kafka_config").items()}
    for b, fs in by_broker(files, "jmx").items():
        series = [(f, t, v) for f in fs for t, v in f.result.series("RequestQueueSize")]
        if not series:
            continue
        cfg = configs.get(b)
        bound = (cfg.int("queued.max.requests") if cfg is not None else None) or 500
        f, t, peak = max(series, key=lambda x: x[2])
        if peak < 0.9 * bound:
            continue
        v = parse_version(versions.get(b))
        kip = ""
        if v is not None and v < (2, 2, 0, 0):
            kip = (f"; Kafka {versions.get(b)} < 2.2 queues controller requests behind client requests (KIP-291): "
                   "leadership changes wait too")
        out.append(Finding(kind="request_queue_saturated", severity=Severity.WARNING,
                           summary=(f"{broker_label(b)}: RequestQueueSize reached {peak:.0f} of queued.max.requests {bound}"
                                    f"{' (default)' if cfg is None or cfg.int('queued.max.requests') is None else ''}{kip}"),
                           broker_ids=(b,) if b is not None else (),
                           evidence=(Evidence(f.path, (), f"time {t}: RequestQueueSize {peak:.0f}", f.host),),
                           details={"peak": peak, "bound": bound, "samples": len(series)}))
    return out


def request_metrics_unknown_findings(files: list[ParsedFile]) -> list[Finding]:
    """A JMX read of the capture whose JmxTool failed or had no answer within its bound (the manifest's command
    error) and gave no RequestQueueSize: the request path's figures are unknown on that broker -- the health check's
    ``request_metrics_unknown``, here citing the capture's own file. Beside it, the broker's direct Kafka checks of
    the same capture: a broker that serves nothing may not answer JMX either (Kafka's RequestQueueSize gauge takes
    the request queue's lock, which a stuck request path can hold; see its thread dumps)."""
    out = []
    probes = by_broker(files, "kafka_probe")
    for b, fs in by_broker(files, "jmx").items():
        unread = [f for f in fs if f.command_error and not f.result.series("RequestQueueSize")]
        if not unread:
            continue
        f = unread[-1]
        checks = [r for p in probes.get(b, []) for r in p.result.results]
        failed = [r for r in checks if not r.ok]
        beside = (f"; every direct Kafka check of it during the capture failed too ({len(failed)} of {len(checks)}: "
                  f"{failed[-1].error}), so its silence is consistent with a request path that serves nothing"
                  if checks and len(failed) == len(checks) else
                  f"; it answered {len(checks) - len(failed)} of {len(checks)} direct Kafka checks during the capture" if checks else "")
        out.append(Finding(
            kind="request_metrics_unknown", severity=Severity.WARNING,
            summary=f"{broker_label(b)}: request queues unknown: the capture's JmxTool read failed ({f.command_error}){beside}",
            broker_ids=(b,) if b is not None else (),
            evidence=(Evidence(f.path, (), f"JmxTool: {f.command_error}; {f.bytes} bytes of output "
                                           f"(what the tool said: {f.path[:-len('.out')]}.err)", f.host),),
            details={"command_error": f.command_error, "direct_checks": len(checks), "direct_checks_failed": len(failed)}))
    return out
