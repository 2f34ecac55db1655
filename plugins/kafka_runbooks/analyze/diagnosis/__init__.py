"""From the parsed evidence of one bundle to findings (model.Finding). Pure: no I/O, no Spark.

Inputs are ParsedFile records (one per manifest file: path, kind, broker, the parser's result or a
LogSummary for logs, and any problems met before parsing, e.g. a sha256 mismatch). Every finding cites
file and line; when the evidence is ambiguous the finding says so (``details.ambiguity``).

One module per incident family (deadlocks, replication, zookeeper, ...), the shared core, and the report's
tables; ``diagnose()`` runs every family.

Honesty rules (issue 5 §3, issue 9 §4):
- a fetch failure is attributed to the leader the line names, and only failures inside the incident window
  count (earlier episodes are listed apart, not counted);
- failures the reporting broker caused itself are not blamed on its peers: its own controlled shutdown
  (fetchers stopped: "Client was shutdown"), or its own stall (its ZooKeeper client heard nothing for N ms /
  a long GC pause) right before it logged them;
- "request handling stalled" needs evidence of it: handler threads blocked behind a lock cycle, or direct
  Kafka checks that timed out while Recv-Q grew on the broker's port.
"""

from __future__ import annotations

import datetime as dt

from ...model import Finding, Severity
from ..parsed_file import ParsedFile
from .core import Window, as_summary, kafka_versions, mark_duplicate_logs, mark_virtual_thread_carriers
from .deadlocks import deadlock_findings, deadlock_unknown_findings, owner_unknown_findings
from .evidence_quality import unparsable_findings
from .group_coordinator import group_load_findings
from .jvm import gc_by_broker, gc_findings, process_findings
from .log_cleaner import log_cleaner_findings, oversized_offsets_findings
from .probes import probe_findings
from .replication import fetch_findings, truncation_refused_findings
from .report_tables import broker_table, file_table, timeline
from .requests import request_metrics_unknown_findings, request_queue_findings, unknown_api_findings
from .segments import segment_damage_findings
from .signature_counts import signature_count_findings
from .startup import startup_failure_findings
from .sockets import (broker_addresses_of, broker_port_of, broker_ports_of, close_wait_findings,
                      on_broker_endpoint)
from .zookeeper import zk_load_failed_findings, zk_server_findings, zk_session_findings, zk_stats_findings

__all__ = ["ParsedFile", "Window", "diagnose", "broker_table", "file_table", "timeline", "kafka_versions",
           "mark_duplicate_logs", "on_broker_endpoint", "broker_ports_of", "broker_port_of", "broker_addresses_of"]

_RANK = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}


def diagnose(files: list[ParsedFile], kafka_version: str | None = None,
             broker_ports: dict[int, int] | None = None,
             broker_hosts: dict[int, str] | None = None,
             broker_versions: dict[int, str] | None = None,
             window: Window | None = None,
             utc_offsets: dict[int, dt.timedelta] | None = None,
             zk_zones: dict[str, str] | None = None) -> list[Finding]:
    """All findings for one bundle, most severe first.

    Kafka version per broker: `kafka_version` (from configuration) overrides everything, then the
    server.log `Kafka version` line, then `broker_versions` (e.g. from the cluster snapshot).
    """
    mark_duplicate_logs(files)
    files = [as_summary(f) for f in files]
    mark_virtual_thread_carriers(files)
    window = window or Window()
    offsets: dict[int | None, dt.timedelta] = dict(utc_offsets or {})
    versions: dict[int | None, str] = dict(broker_versions or {})
    versions.update(kafka_versions(files))
    gc = gc_by_broker(files)
    zk_configs = {f.server or f.path: f.result for f in files if f.kind == "zk_config" and f.result is not None and f.result.ok}
    findings = (deadlock_findings(files, versions, kafka_version) + owner_unknown_findings(files) + deadlock_unknown_findings(files)
                + probe_findings(files, broker_ports, broker_hosts)
                + close_wait_findings(files, broker_ports, broker_hosts) + fetch_findings(files, window, offsets, gc)
                + truncation_refused_findings(files)
                + unknown_api_findings(files, versions) + group_load_findings(files) + log_cleaner_findings(files)
                + oversized_offsets_findings(files) + segment_damage_findings(files) + zk_session_findings(files, offsets, gc)
                + zk_server_findings(files, offsets, gc, zk_configs, zk_zones) + zk_stats_findings(files) + zk_load_failed_findings(files) + gc_findings(gc)
                + signature_count_findings(files) + startup_failure_findings(files) + request_queue_findings(files, versions) + request_metrics_unknown_findings(files) + process_findings(files)
                + unparsable_findings(files))
    return sorted(findings, key=lambda x: _RANK[x.severity])
