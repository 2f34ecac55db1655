"""Parser for Kafka broker log4j output (server.log):

    [2020-04-22 10:43:36,369] WARN [ReplicaFetcherThread-1-219], Error in fetch ... (kafka.server.ReplicaFetcherThread)
    java.io.IOException: Connection to 219 was disconnected before the response was read
            at kafka.utils....

Continuation lines (exception line, `at` frames, `Caused by:`, `... N more`) are attached to their
event. Any other line outside the layout is kept in `unparsed` (counted exactly, sampled).
Signatures extracted: replica_fetch_error, isr_shrink, isr_expand, group_load_start, group_load_done,
kafka_version, broker_started, processor_uncaught_exception, not_coordinator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import LineTally, decode

_EVENT = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,3})?)\]\s+(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\s+"
    r"(?P<msg>.*?)(?:\s+\((?P<logger>[A-Za-z_$][\w.$]*)\))?\s*$"
)
_EXC = re.compile(r"^(?:Caused by: )?(?P<cls>[a-zA-Z_$][\w$]*(?:\.[\w$]+)+(?:Exception|Error|Throwable))(?::\s*(?P<msg>.*))?\s*$")
_AT = re.compile(r"^\s+at \S")
_MORE = re.compile(r"^\s+\.\.\. \d+ (?:more|common frames omitted)\s*$")
_SUPPRESSED = re.compile(r"^\s+Suppressed: ")

_SIGS: list[tuple[str, re.Pattern]] = [
    ("replica_fetch_error", re.compile(
        r"\[ReplicaFetcherThread-(?P<fetcher_id>\d+)-(?P<remote_broker>\d+)\],? Error in fetch")),
    ("replica_fetch_error", re.compile(
        r"\[ReplicaFetcher replicaId=(?P<local_broker>\d+), leaderId=(?P<remote_broker>\d+), fetcherId=(?P<fetcher_id>\d+)\]"
        r" Error (?:in response for fetch|sending fetch)")),
    ("isr_shrink", re.compile(
        r"Shrinking ISR for partition \[(?P<topic>[^,\]]+),(?P<partition>\d+)\] from (?P<from>[\d,]+) to (?P<to>[\d,]+)")),
    ("isr_shrink", re.compile(
        r"\[Partition (?P<topic>\S+)-(?P<partition>\d+) broker=\d+\] Shrinking ISR from (?P<from>[\d,]+) to (?P<to>[\d,]+)")),
    ("isr_expand", re.compile(
        r"Expanding ISR for partition \[(?P<topic>[^,\]]+),(?P<partition>\d+)\] from (?P<from>[\d,]+) to (?P<to>[\d,]+)")),
    ("isr_expand", re.compile(
        r"\[Partition (?P<topic>\S+)-(?P<partition>\d+) broker=\d+\] Expanding ISR from (?P<from>[\d,]+) to (?P<to>[\d,]+)")),
    ("group_load_start", re.compile(
        r"Loading offsets and group metadata from \[?(?P<topic>__consumer_offsets)[,-](?P<partition>\d+)\]?")),
    ("group_load_done", re.compile(
        r"Finished loading offsets (?:and group metadata )?from \[?(?P<topic>__consumer_offsets)[,-](?P<partition>\d+)\]?"
        r" in (?P<millis>\d+) milliseconds")),
    ("kafka_version", re.compile(r"Kafka version\s*:\s*(?P<version>[\w.\-]+)")),
    ("broker_started", re.compile(r"\[Kafka ?Server (?:id=)?(?P<broker_id>\d+)\],? started")),
    ("processor_uncaught_exception", re.compile(r"Processor got uncaught exception")),
    ("not_coordinator", re.compile(r"[Nn]ot coordinator for group|NOT_COORDINATOR|NotCoordinator")),
]
_DISCONNECTED = re.compile(r"Connection to (?P<broker>\d+) was disconnected before the response was read")


@dataclass
class LogEvent:
    line: int  # first line (1-based)
    end_line: int  # last continuation line
    timestamp: str  # as printed: "2020-04-22 10:43:36,369"
    level: str
    logger: str | None
    message: str
    exception: str | None = None  # "java.io.IOException: Connection to 219 was ..."
    exception_line: int | None = None
    continuation: list[str] = field(default_factory=list)
    signature: str | None = None
    attrs: dict[str, str] = field(default_factory=dict)

    @property
    def iso_time(self) -> str:
        return self.timestamp.replace(",", ".").replace(" ", "T")

    def to_dict(self) -> dict:
        return {
            "line": self.line, "end_line": self.end_line, "timestamp": self.timestamp, "level": self.level,
            "logger": self.logger, "message": self.message, "exception": self.exception,
            "signature": self.signature, "attrs": dict(self.attrs),
        }


@dataclass
class KafkaLog:
    events: list[LogEvent] = field(default_factory=list)
    unparsed: LineTally = field(default_factory=LineTally)
    total_lines: int = 0
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def signatures(self, name: str | None = None) -> list[LogEvent]:
        return [e for e in self.events if e.signature and (name is None or e.signature == name)]

    @property
    def kafka_version(self) -> str | None:
        v = self.signatures("kafka_version")
        return v[-1].attrs["version"] if v else None

    def summary(self) -> "KafkaLog":
        """A copy holding only signature events (for shipping to the Spark driver); counts are kept."""
        return KafkaLog(events=self.signatures(), unparsed=self.unparsed, total_lines=self.total_lines,
                        unparsable=list(self.unparsable))


def _classify(ev: LogEvent) -> None:
    for name, rx in _SIGS:
        m = rx.search(ev.message)
        if m:
            ev.signature = name
            ev.attrs = {k: v for k, v in m.groupdict().items() if v is not None}
            break


def _finish(ev: LogEvent) -> None:
    if ev.signature == "replica_fetch_error" and ev.exception:
        m = _DISCONNECTED.search(ev.exception)
        if m:
            ev.attrs["disconnected_broker"] = m.group("broker")
            ev.attrs["cause"] = "disconnected_before_response"
    if ev.signature == "processor_uncaught_exception" and ev.exception:
        ev.attrs["exception_class"] = ev.exception.split(":", 1)[0]
        if "ArrayIndexOutOfBoundsException" in ev.exception:
            ev.attrs["detail"] = ev.exception.split(":", 1)[1].strip() if ":" in ev.exception else ""
            if any("ApiKeys.forId" in c for c in ev.continuation):
                ev.attrs["unknown_api_key"] = ev.attrs["detail"]
    if ev.signature is None and ev.exception and ("NotCoordinator" in ev.exception):
        ev.signature = "not_coordinator"


def parse_kafka_log(data: bytes | str | None) -> KafkaLog:
    text, problems = decode(data)
    log = KafkaLog()
    if problems:
        log.unparsable.extend(problems)
        return log
    lines = text.splitlines()
    log.total_lines = len(lines)
    cur: LogEvent | None = None
    nonblank = 0
    for i, raw in enumerate(lines, start=1):
        ln = raw.rstrip("\r")
        if not ln.strip():
            continue
        nonblank += 1
        m = _EVENT.match(ln)
        if m:
            if cur is not None:
                _finish(cur)
            cur = LogEvent(line=i, end_line=i, timestamp=m.group("ts"), level=m.group("level").replace("WARNING", "WARN"),
                           logger=m.group("logger"), message=m.group("msg"))
            _classify(cur)
            log.events.append(cur)
            continue
        if cur is not None and (_AT.match(ln) or _MORE.match(ln) or _SUPPRESSED.match(ln) or _EXC.match(ln.strip())):
            cur.continuation.append(ln)
            cur.end_line = i
            em = _EXC.match(ln.strip())
            if em and cur.exception is None:
                cur.exception = ln.strip()
                cur.exception_line = i
            continue
        log.unparsed.add(i, ln)
    if cur is not None:
        _finish(cur)
    if not log.events:
        log.unparsable.append(f"no log4j events recognised in {nonblank} non-blank lines")
    elif log.unparsed.count * 2 > nonblank:
        log.unparsable.append(
            f"{log.unparsed.count} of {nonblank} non-blank lines are outside the log4j layout "
            f"(first at line {log.unparsed.samples[0].line})"
        )
    return log
