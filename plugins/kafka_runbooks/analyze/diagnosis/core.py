"""What every incident family of the diagnosis shares: the incident window, files grouped per broker, citations,
times in UTC, log results normalised to LogSummary, and the logs that repeat another (read once). Pure."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from ...model import Evidence
from ..logsummary import LogSummary, summarize
from ..parsed_file import ParsedFile
from ..parsers.jstack import JstackDump, ThreadDumps, link_virtual_threads
from ..parsers.kafka_log import KafkaLog
from ..parsers.logs import LogParse, LogRecord

MAX_CITED_LINES = 50
STALL_MS = 4000  # a broker that heard nothing from ZooKeeper for this long was itself stalled
LOG_KINDS = ("server_log", "controller_log", "state_change_log", "log_cleaner_log", "kafka_stdout", "zk_log")


@dataclass(frozen=True)
class Window:
    """The incident's time window (UTC): fetch errors before ``since`` are earlier episodes."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    source: str = ""

    def contains(self, t: dt.datetime | None) -> bool | None:
        if t is None:
            return None
        if self.since and t < self.since:
            return False
        if self.until and t > self.until:
            return False
        return True

    def describe(self) -> str:
        if not self.since and not self.until:
            return "no incident window known: every episode in the logs counts"
        f = lambda t: t.strftime("%Y-%m-%d %H:%M:%S") if t else "open"  # noqa: E731
        return f"{f(self.since)} .. {f(self.until)} UTC ({self.source})"


def natural_key(s: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", s)]


def by_broker(files: Iterable[ParsedFile], kind: str | tuple[str, ...]) -> dict[int | None, list[ParsedFile]]:
    kinds = (kind,) if isinstance(kind, str) else kind
    out: dict[int | None, list[ParsedFile]] = defaultdict(list)
    for f in files:
        if f.kind in kinds and f.result is not None and not f.problems:
            out[f.broker_id].append(f)
    for v in out.values():
        v.sort(key=lambda f: (f.seq, natural_key(f.path)))
    return out


def logs_by_broker(files: Iterable[ParsedFile]) -> dict[int | None, list[ParsedFile]]:
    return by_broker((f for f in files if not f.duplicate_of), LOG_KINDS)


DUPLICATE_SHARE = 0.9


def mark_duplicate_logs(files: list[ParsedFile]) -> None:
    """Kafka's default log4j configuration sends the root logger to both server.log and stdout (kafkaServer.out):
    with both in a bundle every record would count twice. A log of a broker whose records (time + logger +
    message) are, for >= 90 %, records of that broker's server_log is marked ``duplicate_of`` it and read only
    for what else it holds (thread dumps). Sets the mark on the given objects (idempotent)."""
    conv = [(as_summary(f), f) for f in files]
    by_broker: dict[int | None, list] = defaultdict(list)
    for c, f in conv:
        if c.kind in LOG_KINDS and isinstance(c.result, LogSummary) and not f.duplicate_of:
            by_broker[c.broker_id].append((c, f))
    for b, items in by_broker.items():
        mains = [(c, f) for c, f in items if c.kind == "server_log"]
        if not mains:
            continue
        keys = {(e.ts, e.logger, e.message) for c, _ in mains for e in c.result.events}
        for c, f in items:
            if c.kind == "server_log" or c.kind not in ("kafka_stdout", "log"):
                continue
            evs = c.result.events
            if not evs:
                continue
            same = sum(1 for e in evs if (e.ts, e.logger, e.message) in keys)
            if same >= DUPLICATE_SHARE * len(evs):
                f.duplicate_of = mains[0][0].path
                note = (f"its log records repeat {mains[0][0].path} ({same} of {len(evs)} events read): log4j's "
                        "stdout appender; counted once, from that file")
                if note not in f.notes:
                    f.notes.append(note)


def kafka_versions(files: Iterable[ParsedFile]) -> dict[int | None, str]:
    out: dict[int | None, str] = {}
    for b, logs in logs_by_broker(files).items():
        for f in logs:
            v = f.result.kafka_version if isinstance(f.result, LogSummary) else None
            if v:
                out[b] = v
    return out


def broker_label(b: int | None) -> str:
    return f"broker {b}" if b is not None else "an unknown broker"


def cite(f: ParsedFile, recs: list[LogRecord], n: int = 10) -> Evidence:
    lines, ex = [], []
    for r in recs[:MAX_CITED_LINES // 2]:
        lines.append(r.line)
        if r.exception_line:
            lines.append(r.exception_line)
    for r in recs[:n]:
        ex.append(f"{r.line}: {r.raw or r.message}"[:600])
        if r.exception and r.exception_line:
            ex.append(f"{r.exception_line}: {r.exception}"[:400])
    return Evidence(source=f.path, lines=tuple(sorted(set(lines)))[:MAX_CITED_LINES], excerpt="\n".join(ex), host=f.host)


def utc_of(r: LogRecord, offsets: dict[int | None, dt.timedelta], broker: int | None) -> dt.datetime | None:
    return r.at(offsets.get(broker))


def parse_utc(ts: str | None, offset: dt.timedelta | None) -> dt.datetime | None:
    if not ts:
        return None
    try:
        t = dt.datetime.fromisoformat(ts)
    except ValueError:
        return None
    if offset:
        t = t - offset
    return t.replace(tzinfo=dt.timezone.utc)


def dumps_by_broker(files: list[ParsedFile]) -> dict[int | None, list[tuple[ParsedFile, JstackDump]]]:
    out: dict[int | None, list[tuple[ParsedFile, JstackDump]]] = defaultdict(list)
    for b, fs in by_broker(files, ("jstack", "thread_dump_json")).items():
        for f in fs:
            dumps = f.result.dumps if isinstance(f.result, ThreadDumps) else [f.result]
            for d in dumps:
                out[b].append((f, d))
    return out


def as_summary(f: ParsedFile) -> ParsedFile:
    """Log results given as a LogParse/KafkaLog (pure callers) become the LogSummary diagnose reads (a copy of the
    ParsedFile; every other field kept)."""
    r = f.result
    if isinstance(r, KafkaLog):
        r = r.parse
    if isinstance(r, LogParse):
        return dataclasses.replace(f, result=summarize(r, f.path, f.kind, f.broker_id, f.host), problems=list(f.problems),
                                   notes=list(f.notes))
    if f.kind == "jstack" and isinstance(r, JstackDump):
        return dataclasses.replace(f, result=ThreadDumps(dumps=[r]), problems=list(f.problems), notes=list(f.notes))
    return f


def mark_virtual_thread_carriers(files: list[ParsedFile]) -> None:
    """Per broker, across its thread-dump files: a carrier's 'Carrying virtual thread #N' (jstack of JDK 21+) and the
    virtual thread #N (jcmd Thread.dump_to_file) are one thread of work; each such pair is noted on both files
    (idempotent)."""
    for _, pairs in dumps_by_broker(files).items():
        where = {id(d): f for f, d in pairs}
        dumps = [d for _, d in pairs]
        for carrier, virtual in link_virtual_threads(dumps):
            cf = next((where[id(d)] for d in dumps if carrier in d.threads), None)
            vf = next((where[id(d)] for d in dumps if virtual in d.threads), None)
            if cf is None or vf is None:
                continue
            note = (f"virtual thread #{virtual.number} {virtual.name!r} ({vf.path}:{virtual.line}) is mounted on carrier "
                    f"{carrier.name!r} ({cf.path}:{carrier.carrying_line})")
            for f in {cf.path: cf, vf.path: vf}.values():
                if note not in f.notes:
                    f.notes.append(note)
