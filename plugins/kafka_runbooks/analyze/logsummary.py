"""What the findings need from a log file, the same whichever way it was read (pure):

- ``event_rows(parse)``: the log_events rows (signature records, and ERROR/FATAL records of the kafka and
  strimzi layouts) exactly as the Spark scan produces them for big files;
- ``LogSummary``: per file, exact counts per signature, a bounded sample of events (the first and last
  SAMPLE of each signature), exact per-minute counts of replica fetch failures, the layout and parsed share.

The Spark job builds LogSummary from Parquet aggregates; the pure path builds it from a LogParse. diagnose()
only ever sees LogSummary.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from .parsers.kafka_log import FETCH_SIGNATURES, fetch_cause
from .parsers.layouts import BY_NAME, level_kept, simple_name
from .parsers.logs import LogParse, LogRecord

SAMPLE = 200  # events kept per (file, signature) at each end


def event_row(r: LogRecord, layout: str | None, path: str, broker_id: int | None) -> dict[str, Any]:
    return event_dict(path, broker_id, layout, r.line, r.ts, r.zone, r.level, simple_name(r.logger), r.signature,
                      r.wording, dict(r.attrs), r.raw, r.exception, r.exception_line)


def event_dict(path: str, broker_id: int | None, layout: str | None, line: int, ts: str, zone: str | None, level: str,
               logger_simple: str, signature: str | None, wording: str | None, attrs: dict[str, str], raw: str,
               exception: str | None, exception_line: int | None) -> dict[str, Any]:
    """A log_events row (the table's columns, tables.SCHEMAS)."""
    return {"path": path, "broker_id": broker_id, "layout": layout, "line": line, "ts": ts, "zone": zone,
            "level": level, "logger": logger_simple, "signature": signature, "wording": wording, "attrs": attrs,
            "raw": raw[:2000], "exception": exception, "exception_line": exception_line}


def event_rows(p: LogParse, path: str, broker_id: int | None) -> list[dict[str, Any]]:
    return [event_row(r, p.layout, path, broker_id) for r in p.records
            if r.signature or level_kept(p.layout, r.raw)]


def record_of(row: dict[str, Any]) -> LogRecord:
    """A LogRecord rebuilt from a log_events row (message, logger and thread re-read from the raw line, unless the
    row carries its parsed ``header``: logger, thread, message, myid)."""
    raw = row.get("raw") or ""
    hdr = row.get("header")
    if hdr is None:
        layout = BY_NAME.get(row.get("layout") or "")
        h = layout.header(raw) if layout else None
        hdr = (h.logger, h.thread, h.message, h.myid) if h else (row.get("logger"), None, raw, None)
    logger, thread, message, myid = hdr
    r = LogRecord(line=int(row["line"]), end_line=int(row["line"]), ts=row.get("ts") or "", level=row.get("level") or "",
                  logger=logger, thread=thread, message=message, zone=row.get("zone"), myid=myid,
                  exception=row.get("exception"), exception_line=row.get("exception_line"),
                  signature=row.get("signature"), wording=row.get("wording"), attrs=dict(row.get("attrs") or {}), raw=raw)
    return r


def minute_key(row: dict[str, Any]) -> tuple:
    a = row.get("attrs") or {}
    return (row.get("signature"), a.get("leader"), a.get("fetcher"), fetch_cause(a), (row.get("ts") or "")[:16])


def fetch_minutes(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Exact per-minute counts of replica fetch failures (the Spark job computes the same with groupBy)."""
    agg: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        if row.get("signature") not in FETCH_SIGNATURES:
            continue
        k = minute_key(row)
        a = agg.get(k)
        if a is None:
            agg[k] = {"signature": k[0], "leader": k[1], "fetcher": k[2], "cause": k[3], "minute": k[4], "count": 1,
                      "first_line": row["line"], "last_line": row["line"]}
        else:
            a["count"] += 1
            a["first_line"] = min(a["first_line"], row["line"])
            a["last_line"] = max(a["last_line"], row["line"])
    return sorted(agg.values(), key=lambda a: (a["minute"], a["first_line"]))


@dataclass
class LogSummary:
    path: str
    kind: str
    broker_id: int | None = None
    host: str | None = None
    layout: str | None = None
    parsed_share: float | None = None
    share_sampled: bool = False  # True: estimated from the file's head and tail (Spark path)
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # exact, per signature
    events: list[LogRecord] = field(default_factory=list)  # sampled, in line order
    omitted: dict[str, int] = field(default_factory=dict)  # signature -> events left out of the sample
    minutes: list[dict[str, Any]] = field(default_factory=list)  # fetch failures per minute (exact)
    read_by: str = "python"  # "python" | "spark"
    first_ts: str | None = None  # first and last record times of the file (local time as logged)
    last_ts: str | None = None

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def signatures(self, name: str | None = None) -> list[LogRecord]:
        return [e for e in self.events if e.signature and (name is None or e.signature == name)]

    def count(self, name: str) -> int:
        return self.counts.get(name, 0)

    @property
    def kafka_version(self) -> str | None:
        v = self.signatures("kafka_version")
        return v[-1].attrs.get("version") if v else None

    def describe_read(self) -> str:
        share = "" if self.parsed_share is None else (
            f", {self.parsed_share:.1%} of lines parsed" + (" (sampled head and tail)" if self.share_sampled else ""))
        return f"layout {self.layout or 'unknown'}{share}, read by {self.read_by}"


def sample_rows(rows: list[dict[str, Any]], per_end: int = SAMPLE) -> tuple[list[dict[str, Any]], dict[str, int]]:
    by_sig: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_sig[r.get("signature") or ""].append(r)
    out, omitted = [], {}
    for sig, rs in by_sig.items():
        rs.sort(key=lambda r: r["line"])
        if len(rs) > 2 * per_end:
            omitted[sig] = len(rs) - 2 * per_end
            rs = rs[:per_end] + rs[-per_end:]
        out.extend(rs)
    out.sort(key=lambda r: r["line"])
    return out, omitted


def summarize(p: LogParse, path: str, kind: str, broker_id: int | None = None, host: str | None = None) -> LogSummary:
    rows = event_rows(p, path, broker_id)
    sampled, omitted = sample_rows(rows)
    return LogSummary(path=path, kind=kind, broker_id=broker_id, host=host, layout=p.layout,
                      parsed_share=round(p.parsed_share, 4) if p.nonblank else None, lines=p.total_lines,
                      notes=list(p.notes), unparsable=list(p.unparsable),
                      counts=dict(Counter(r["signature"] for r in rows if r["signature"])),
                      events=[record_of(r) for r in sampled], omitted=omitted, minutes=fetch_minutes(rows),
                      first_ts=next((r.ts for r in p.records if r.ts), None),
                      last_ts=next((r.ts for r in reversed(p.records) if r.ts), None))
