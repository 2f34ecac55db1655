"""The one Kafka log parser (broker server.log / controller.log / log-cleaner.log / kafkaServer.out, any
layout, Kafka 0.9 -> 4.x). Pure: no Spark, no I/O; the detectors call it on log tails fetched over SSH and
the analysis on bundle files.

    parse(text)                      -> list[LogRecord]   (multi-line records, classified)
    classify(record)                 -> signature name or None (a record built by hand, e.g. from a tail)
    fetch_errors(text, since, until) -> list[FetchError]  (replica fetch failures, attributed and windowed)
    parse_kafka_log(data)            -> KafkaLog          (records + layout + parsed share + notes)

Timestamps: log4j prints the host's local time without a zone. Pass ``utc_offset`` when the host is not
on UTC; otherwise times are taken as UTC (and the analysis says so).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from .. import signatures as sigs
from .base import decode_evidence, split_lines
from .logs import LogParse, LogRecord, classify as _classify, is_exception_line, parse_lines, parse_log

# fetch failure causes, from the exception line (or the inline cause of FetchSessionHandler's line)
CAUSE_DISCONNECTED = "disconnected"  # "Connection to N was disconnected before the response was read"
CAUSE_CLIENT_SHUTDOWN = "client_shutdown"  # the fetcher itself was being stopped (leadership moved / own shutdown)
CAUSE_TIMEOUT = "timeout"  # SocketTimeoutException ("Failed to connect within N ms"), request timeouts
CAUSE_CONNECTION_FAILED = "connection_failed"  # "Connection to host:port (id: N rack: R) failed."
CAUSE_FETCHER_STOPPED = "fetcher_stopped"  # logged between the fetcher's own 'Shutting down' and 'Stopped'
CAUSE_UNKNOWN = "unknown"
# the causes that mean "the leader did not serve this fetcher" (client_shutdown: the fetcher was stopped itself)
UNREACHABLE_CAUSES = (CAUSE_DISCONNECTED, CAUSE_TIMEOUT, CAUSE_CONNECTION_FAILED)
PAIR_WITHIN_S = 2.0  # FetchSessionHandler's INFO and the fetcher's WARN of one failure: same thread, same moment

FETCH_SIGNATURES = ("replica_fetch_error", "fetch_session_error")


@dataclass(frozen=True)
class FetchError:
    """One failed replica fetch, as the fetching broker logged it."""

    at: dt.datetime | None  # UTC
    fetcher_broker_id: int | None  # the broker that logged it (from the line, else the caller's broker_id)
    leader_broker_id: int  # the broker it was fetching from, as the line names it
    line_no: int
    excerpt: str
    cause: str = CAUSE_UNKNOWN
    signature: str = "replica_fetch_error"
    ts: str = ""  # as logged (local time)
    exception_line_no: int | None = None
    note: str = ""  # ambiguity, e.g. the exception names another node than the leader

    def to_dict(self) -> dict[str, Any]:
        return {"at": self.at.isoformat() if self.at else None, "fetcher_broker_id": self.fetcher_broker_id,
                "leader_broker_id": self.leader_broker_id, "line_no": self.line_no, "excerpt": self.excerpt,
                "cause": self.cause, "signature": self.signature, "ts": self.ts,
                "exception_line_no": self.exception_line_no, "note": self.note}


def parse(text: bytes | str | None, layout: str | None = None) -> list[LogRecord]:
    """Every record of the text, classified (an empty list for empty/binary input)."""
    return parse_log(text, layout).records


def classify(record: LogRecord, next_line: str | None = None, frame_line: str | None = None) -> str | None:
    """The record's signature name (None when no row of the signature table matches); attrs are filled in."""
    _classify(record, next_line if next_line is not None else record.exception, frame_line)
    return record.signature


# A controller request's body as Kafka 2.1 - 2.3 print it (the request's Struct):
# "{topic=orders,partition_states=[{partition=0,controller_epoch=3,leader=1,leader_epoch=9,...},...]},{topic=..."
_BODY_ITEM = re.compile(r"\{topic=(" + sigs.T + r"),partition_states=\[|\{partition=([0-9]{1,9}),controller_epoch=[0-9]{1,19},"
                        r"leader=(-?[0-9]{1,10}),", re.ASCII)


def request_partitions(message: str) -> list[tuple[str, int, int]]:
    """(topic, partition, leader) of each partition state in a controller request's body, as logged with a failed
    request ("Error when handling request: ... api=LEADER_AND_ISR, body={...}", 2.1 - 2.3); [] for other shapes
    (2.4+ prints the request's data classes: not read)."""
    out: list[tuple[str, int, int]] = []
    topic = None
    for m in _BODY_ITEM.finditer(message):
        if m.group(1) is not None:
            topic = m.group(1)
        elif topic is not None:
            out.append((topic, int(m.group(2)), int(m.group(3))))
    return out


def fetch_cause(attrs: dict[str, str]) -> str:
    if "disconnected_node" in attrs or "disconnected before the response" in attrs.get("cause", ""):
        return CAUSE_DISCONNECTED
    if "client_shutdown" in attrs or "Client was shutdown" in attrs.get("cause", ""):
        return CAUSE_CLIENT_SHUTDOWN
    if "timeout" in attrs or "Timeout" in attrs.get("cause", ""):
        return CAUSE_TIMEOUT
    if "connection_failed" in attrs:
        return CAUSE_CONNECTION_FAILED
    return CAUSE_UNKNOWN


def fetcher_of(attrs: dict[str, str]) -> tuple[str | None, str | None]:
    """The fetcher a record names, as (leader, fetcher id): ReplicaFetcherThread-<id>-<leader> (0.9 - 0.11) or
    [ReplicaFetcher replicaId=.., leaderId=<leader>, fetcherId=<id>] (1.0+)."""
    return attrs.get("leader") or attrs.get("leader2"), attrs.get("fetcher_id") or attrs.get("fetcher_id2")


STOP_SIGNATURES = ("fetcher_shutdown", "fetcher_stopped", "fetcher_removed", "broker_shutting_down",
                   "controlled_shutdown_start")


def stopping_fetchers(records: list[LogRecord]) -> dict[int, str]:
    """Fetch failures a broker logged while that very fetcher was being stopped -- between its 'Shutting down' and
    its 'Stopped' (the in-flight fetch fails: 'Client was shutdown', ClosedSelectorException, ...) -- by line, with
    why it was stopped: the 'Removed fetcher for partitions' before it (leadership moved: this broker became the
    leader, or follows another one), or the broker's own shutdown. Records of one log file."""
    out: dict[int, str] = {}
    stopping: dict[tuple, str] = {}
    removed: LogRecord | None = None
    shutdown: LogRecord | None = None
    for r in sorted((r for r in records if r.signature in STOP_SIGNATURES or r.signature in FETCH_SIGNATURES),
                    key=lambda r: r.line):
        sig = r.signature
        if sig == "fetcher_removed":
            removed = r
        elif sig in ("broker_shutting_down", "controlled_shutdown_start"):
            shutdown = r
        elif sig == "fetcher_shutdown":
            leader, _ = fetcher_of(r.attrs)
            if removed is not None and (shutdown is None or removed.line > shutdown.line):
                why = (f"its fetcher from broker {leader} was being stopped (line {r.line}) after 'Removed fetcher for "
                       f"partitions {removed.attrs.get('partitions', '')[:200]}' (line {removed.line}): leadership moved, "
                       "not the leader's fault")
            elif shutdown is not None:
                why = f"its fetcher from broker {leader} was being stopped (line {r.line}) during its own shutdown (line {shutdown.line})"
            else:
                why = f"its fetcher from broker {leader} was being stopped ('Shutting down', line {r.line})"
            stopping[fetcher_of(r.attrs)] = why
        elif sig == "fetcher_stopped":
            stopping.pop(fetcher_of(r.attrs), None)
        elif fetcher_of(r.attrs) in stopping:
            out[r.line] = stopping[fetcher_of(r.attrs)]
    return out


def _int(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None


def fetch_error_of(r: LogRecord, broker_id: int | None = None, utc_offset: dt.timedelta | None = None) -> FetchError | None:
    if r.signature not in FETCH_SIGNATURES:
        return None
    leader = _int(r.attrs.get("leader"))
    if leader is None:
        return None
    fetcher = _int(r.attrs.get("fetcher"))
    note = ""
    if fetcher is not None and broker_id is not None and fetcher != broker_id:
        note = f"the line says replicaId={fetcher} but the log belongs to broker {broker_id}"
    node = _int(r.attrs.get("disconnected_node") or r.attrs.get("node"))
    if node is not None and node != leader:
        note = (note + "; " if note else "") + f"the exception names node {node}, the fetcher's leader is {leader}"
    exc = f"\n{r.exception}" if r.exception else ""
    return FetchError(at=r.at(utc_offset), fetcher_broker_id=fetcher if fetcher is not None else broker_id,
                      leader_broker_id=leader, line_no=r.line, excerpt=(r.raw or r.message)[:600] + exc[:400],
                      cause=fetch_cause(r.attrs), signature=r.signature or "", ts=r.ts,
                      exception_line_no=r.exception_line, note=note)


def select_fetch_failures(records: list[LogRecord]) -> list[LogRecord]:
    """Kafka >= 1.1 logs each failed fetch twice (FetchSessionHandler INFO with the cause inline, then the
    fetcher's WARN with the exception under it): count the fetcher's lines, and the session lines only in a
    log that has none of the former (e.g. WARN filtered out)."""
    main = [r for r in records if r.signature == "replica_fetch_error"]
    return main if main else [r for r in records if r.signature == "fetch_session_error"]


def _aware(t: dt.datetime | None) -> dt.datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def _pairs(records: list[LogRecord]) -> list[tuple[LogRecord, LogRecord | None]]:
    """One entry per failed fetch: Kafka >= 1.1 logs one failure twice, FetchSessionHandler's INFO (cause inline)
    then the fetcher's WARN (exception under it) -- same fetcher thread and leader, within PAIR_WITHIN_S. An INFO
    without its WARN (a fetcher being stopped logs no WARN) and a WARN without an INFO (0.9 - 1.0, or INFO
    filtered out) are failures on their own."""
    recs = sorted((r for r in records if r.signature in FETCH_SIGNATURES), key=lambda r: r.line)
    out: list[tuple[LogRecord, LogRecord | None]] = []
    pending: dict[tuple, list] = {}  # (fetcher, leader, fetcher_id) -> unpaired INFO entries
    for r in recs:
        key = (r.attrs.get("fetcher"), r.attrs.get("leader"), r.attrs.get("fetcher_id"))
        if r.signature == "fetch_session_error":
            entry = [r, None]
            out.append(entry)  # type: ignore[arg-type]
            pending.setdefault(key, []).append(entry)
            continue
        match = None
        for entry in pending.get(key, []):
            a, b = entry[0].at(), r.at()
            if entry[1] is None and a is not None and b is not None and 0 <= (b - a).total_seconds() <= PAIR_WITHIN_S:
                match = entry
                break
        if match is not None:
            match[1] = r
            pending[key].remove(match)
        else:
            out.append([r, None])  # type: ignore[arg-type]
    return [(a, b) for a, b in out]


def fetch_errors(text: bytes | str | None, since: dt.datetime | None = None, until: dt.datetime | None = None,
                 *, broker_id: int | None = None, utc_offset: dt.timedelta | None = None,
                 layout: str | None = None) -> list[FetchError]:
    """Replica fetch failures in a broker's log, oldest first, one per failure (the INFO + WARN pair of Kafka
    >= 1.1 counts once and is cited by its first line), every cause (filter with UNREACHABLE_CAUSES), within
    [since, until] when given (naive = UTC).

    Each is attributed to the leader the line itself names (thread name ReplicaFetcherThread-F-<leader>, or
    leaderId=<leader>); the fetching broker is the line's replicaId, else ``broker_id``.
    """
    s, u = _aware(since), _aware(until)
    out = []
    records = parse(text, layout)
    stopped = stopping_fetchers(records)
    for first, second in _pairs(records):
        fe = fetch_error_of(first, broker_id, utc_offset)
        if fe is None:
            continue
        if first.line in stopped and fe.cause != CAUSE_CLIENT_SHUTDOWN:  # ("Client was shutdown" says so already)
            fe = dataclasses.replace(fe, cause=CAUSE_FETCHER_STOPPED, note="; ".join(x for x in (fe.note, stopped[first.line]) if x))
        if second is not None:
            other = fetch_error_of(second, broker_id, utc_offset)
            if other is not None:
                fe = dataclasses.replace(
                    fe, excerpt=(fe.excerpt + "\n" + other.excerpt)[:1200],
                    cause=fe.cause if fe.cause != CAUSE_UNKNOWN else other.cause,
                    exception_line_no=other.exception_line_no,
                    note="; ".join(x for x in (fe.note, f"logged twice (lines {first.line} and {second.line}): one failure")
                                   if x))
        if (s or u) and fe.at is None:
            continue
        if s and fe.at < s:
            continue
        if u and fe.at > u:
            continue
        out.append(fe)
    return out


@dataclass
class KafkaLog:
    """A parsed Kafka log file (kept for the report and the Spark job's per-file path)."""

    parse: LogParse = field(default_factory=LogParse)

    @property
    def events(self) -> list[LogRecord]:
        return self.parse.records

    @property
    def unparsable(self) -> list[str]:
        return self.parse.unparsable

    @property
    def ok(self) -> bool:
        return self.parse.ok

    @property
    def layout(self) -> str | None:
        return self.parse.layout

    @property
    def total_lines(self) -> int:
        return self.parse.total_lines

    @property
    def unparsed(self):
        return self.parse.unexplained

    def signatures(self, name: str | None = None) -> list[LogRecord]:
        return self.parse.signatures(name)

    @property
    def kafka_version(self) -> str | None:
        v = self.signatures("kafka_version")
        return v[-1].attrs["version"] if v else None


def parse_kafka_log(data: bytes | str | None, layout: str | None = None) -> KafkaLog:
    return KafkaLog(parse_log(data, layout))


__all__ = ["parse", "classify", "fetch_errors", "FetchError", "parse_kafka_log", "KafkaLog", "LogRecord",
           "stopping_fetchers", "fetcher_of",
           "select_fetch_failures", "fetch_error_of", "is_exception_line", "parse_lines", "split_lines",
           "decode_evidence", "sigs"]
