"""The report's tables: one row per broker, how each file was read, and the key log events in time order."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter

from ..logsummary import LogSummary
from ..parsed_file import ParsedFile
from ..parsers.jstack import ThreadDumps
from ..parsers.misc import HeapInfo, OpenFiles, ProcessStat
from .core import as_summary, by_broker, dumps_by_broker, kafka_versions, logs_by_broker, mark_duplicate_logs
from .evidence_quality import empty_optional
from .sockets import broker_port_of, broker_ports_of, on_broker_endpoint, socket_tables


def broker_table(files: list[ParsedFile], broker_ports: dict[int, int] | None = None,
                 broker_hosts: dict[int, str] | None = None) -> list[dict]:
    """One row per broker: pid, uptime, RSS, open files, heap, connection states on its listener, threads blocked."""
    files = [as_summary(f) for f in files]
    rows: dict[int | None, dict] = {}

    def row(b):
        return rows.setdefault(b, {"broker_id": b, "pid": None, "uptime_s": None, "rss_kb": None, "open_files": None,
                                   "heap_used_kb": None, "heap_total_kb": None, "connection_states": {},
                                   "threads_blocked": None, "threads_total": None, "kafka_version": None,
                                   "listener_port": broker_port_of(b, broker_ports),
                                   "listener_ports": list(broker_ports_of(b, broker_ports))})

    for b, fs in by_broker(files, "process_stat").items():
        p: ProcessStat = fs[-1].result
        row(b).update(pid=p.pid, uptime_s=p.uptime_s, rss_kb=p.rss_kb)
    for b, fs in by_broker(files, "open_files").items():
        o: OpenFiles = fs[-1].result
        row(b)["open_files"] = o.count
    for b, fs in by_broker(files, "heap_info").items():
        h: HeapInfo = fs[-1].result
        row(b).update(heap_used_kb=h.used_kb, heap_total_kb=h.total_kb)
    for b, fs in socket_tables(files).items():
        row(b)["connection_states"] = dict(
            Counter(r.state for r in fs[-1].result.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts)))
    for b, pairs in dumps_by_broker(files).items():
        d = pairs[-1][1]
        ts = d.all_threads()
        row(b).update(threads_total=len(ts), threads_blocked=sum(1 for t in ts if t.state == "BLOCKED"))
    for b, v in kafka_versions(files).items():
        row(b)["kafka_version"] = v
    return [rows[k] for k in sorted(rows, key=lambda x: (x is None, x or 0))]


def file_table(files: list[ParsedFile]) -> list[dict]:
    """How each file was read: layout, parsed share, reader, problems (the report's 'Evidence read' table)."""
    out = []
    for f in files:
        r = f.result
        empty = empty_optional(f)
        row = {"path": f.path, "kind": f.kind, "broker_id": f.broker_id, "bytes": f.bytes,
               "problems": None if empty else "; ".join(f.reasons) or None,
               "notes": "; ".join(f.notes + list(getattr(r, "notes", []) or []) + ([empty] if empty else [])) or None}
        if isinstance(r, LogSummary):
            row.update(layout=r.layout, parsed_share=r.parsed_share, share_sampled=r.share_sampled, read_by=r.read_by,
                       signatures=sum(r.counts.values()))
        elif isinstance(r, ThreadDumps):
            row.update(layout="thread dump" + (" (inside the log)" if f.embedded else ""), dumps=len(r.dumps),
                       formats=sorted({d.format for d in r.dumps}),
                       virtual_threads=sum(1 for t in r.threads if t.virtual),
                       carriers=sum(1 for t in r.threads if t.carrying is not None))
        out.append(row)
    return out


def timeline(files: list[ParsedFile], limit: int = 300) -> list[dict]:
    """Key log events (signatures and ERROR/FATAL lines) across brokers, in time order."""
    mark_duplicate_logs(files)
    files = [as_summary(f) for f in files]
    out = []
    for b, fs in logs_by_broker(files).items():
        for f in fs:
            for e in f.result.events:
                out.append({"timestamp": e.timestamp, "broker_id": b, "level": e.level, "signature": e.signature or "",
                            "message": e.message[:400], "source": f.path, "line": e.line})
    out.sort(key=lambda r: r["timestamp"])
    return out[:limit]


ISR_CHANGES = ("isr_shrink", "isr_expand")


def chart_data(files: list[ParsedFile]) -> dict:
    """What the report's charts are drawn from (``analyze/charts.py``): every broker's ISR changes (time in UTC, the
    partition, the ISR before and after), how many of them the log summaries left out of their samples, and every GC
    pause with its broker."""
    mark_duplicate_logs(files)
    summaries = [as_summary(f) for f in files]
    isr, omitted = [], 0
    for b, fs in logs_by_broker(summaries).items():
        for f in fs:
            omitted += sum((getattr(f.result, "omitted", None) or {}).get(s, 0) for s in ISR_CHANGES)
            for e in f.result.events:
                if e.signature in ISR_CHANGES:
                    isr.append({"at": e.at(), "broker_id": b, "signature": e.signature, **{k: e.attrs.get(k) for k in (
                        "topic", "partition", "from", "to")}})
    gc = [{"at": p.at, "broker_id": f.broker_id, "seconds": p.seconds, "kind": p.kind}
          for f in files if f.kind == "gc_log" and f.result is not None for p in getattr(f.result, "pauses", ())]
    return {"isr_events": isr, "isr_omitted": omitted, "gc_pauses": gc, **request_queue_data(files),
            "has_snapshot": any(f.kind == "cluster_snapshot" for f in files)}


def request_queue_data(files: list[ParsedFile]) -> dict:
    """The capture's JMX reads: every RequestQueueSize reading with its broker (time in UTC), every broker whose read
    gave none (why: the tool's error, or what its output lacked), and each broker's queued.max.requests when its
    server.properties was read (Kafka's default, 500, when the file does not set it)."""
    points, unanswered = [], []
    jmx: dict = {}
    for f in files:  # every read, a damaged or empty one too (by_broker leaves those out): its broker is named
        if f.kind == "jmx":
            jmx.setdefault(f.broker_id, []).append(f)
    for b, fs in sorted(jmx.items(), key=lambda kv: (kv[0] is None, kv[0] or 0)):
        read = [(t, v) for f in fs if f.result is not None for t, v in f.result.series("RequestQueueSize")]
        mine = [(t, float(v)) for t, v in read if t > 0 and math.isfinite(float(v))]  # a reading without a time or a
        points += [{"at": dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).isoformat(), "broker_id": b, "value": v}
                   for t, v in mine]  # number is no point: never drawn, its broker named below instead
        if not mine:
            f = fs[-1]
            unanswered.append({"broker_id": b, "reason": f.command_error or "; ".join(
                [*f.problems, *getattr(f.result, "unparsable", ())]) or (
                "its RequestQueueSize readings have no time or no finite value" if read else "its output has no RequestQueueSize")})
    bounds = {}
    for b, fs in by_broker(files, "kafka_config").items():
        n = fs[-1].result.int("queued.max.requests")
        bounds[b] = {"value": n or 500, "default": n is None}
    return {"request_queue": points, "request_queue_unanswered": unanswered, "queued_max_requests": bounds}
