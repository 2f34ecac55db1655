"""Log files of Kafka brokers (server.log, controller.log, log-cleaner.log, kafkaServer.out) and ZooKeeper
servers, in any of the layouts of ``layouts.py``: records (header + continuation lines), classified with the
signature table. Pure and linear: header regexes are anchored and bounded, messages are only ever searched
for literals first and then with the (linear) signature patterns.

``parse_log(data)`` -> LogParse: records, the layout used, the parsed share, decoding notes.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any, Iterator

from .. import signatures as sigs
from .base import LineTally, check_budget, decode_evidence, split_lines
from .layouts import BY_NAME, LOGGER_RE, Header, Layout, detect, simple_name

EXCEPTION_HEAD = re.compile(r"(?:Caused by: )?[A-Za-z_$][A-Za-z0-9_$.]{0,300}(?:Exception|Error|Throwable)(?::|$|\s)", re.ASCII)
_MORE = re.compile(r"\s{1,40}\.\.\. [0-9]{1,9} (?:more|common frames omitted)\s{0,10}$", re.ASCII)


def is_exception_line(line: str) -> bool:
    return bool(line) and not line[0].isspace() and EXCEPTION_HEAD.match(line) is not None


def continuation_kind(line: str) -> str:
    """frame | exception | indented | other"""
    if not line:
        return "blank"
    c = line[0]
    if c == " " or c == "\t":
        s = line.lstrip()
        if s.startswith("at ") or s.startswith("Suppressed: ") or _MORE.match(line):
            return "frame"
        return "indented"
    if line.startswith("Caused by: ") or is_exception_line(line):
        return "exception"
    return "other"


@dataclass
class LogRecord:
    line: int  # header line (1-based)
    end_line: int
    ts: str  # "YYYY-MM-DDTHH:MM:SS.mmm" as logged (local time of the host; see `zone`)
    level: str
    logger: str | None
    thread: str | None
    message: str
    zone: str | None = None
    myid: str | None = None
    exception: str | None = None  # the exception line right under the header
    exception_line: int | None = None
    frames: int = 0
    continuation: int = 0  # continuation lines (frames, exception lines, indented lines, ...)
    signature: str | None = None
    wording: str | None = None  # the signature row's versions, i.e. which wording matched
    attrs: dict[str, str] = field(default_factory=dict)
    raw: str = ""  # the header line as logged (cut at 2000 characters)

    @property
    def logger_simple(self) -> str:
        return simple_name(self.logger)

    @property
    def timestamp(self) -> str:
        """The timestamp as printed by the old Kafka layout ('2020-04-22 10:43:36,369'), for display."""
        return self.ts.replace("T", " ").replace(".", ",")

    def at(self, utc_offset: dt.timedelta | None = None) -> dt.datetime | None:
        """The record's time in UTC. Log4j writes local time: pass the host's UTC offset when it is not UTC."""
        try:
            t = dt.datetime.fromisoformat(self.ts)
        except ValueError:
            return None
        if self.zone and self.zone != "Z":
            z = self.zone.replace(":", "")
            try:
                off = dt.timedelta(hours=int(z[1:3]), minutes=int(z[3:5])) * (1 if z[0] == "+" else -1)
                return (t - off).replace(tzinfo=dt.timezone.utc)
            except (ValueError, IndexError):
                pass
        if utc_offset:
            t = t - utc_offset
        return t.replace(tzinfo=dt.timezone.utc)

    def to_dict(self) -> dict[str, Any]:
        return {"line": self.line, "end_line": self.end_line, "ts": self.ts, "level": self.level, "logger": self.logger,
                "thread": self.thread, "message": self.message[:2000], "exception": self.exception,
                "exception_line": self.exception_line, "signature": self.signature, "attrs": dict(self.attrs)}


@dataclass
class LogParse:
    records: list[LogRecord] = field(default_factory=list)
    layout: str | None = None
    total_lines: int = 0
    nonblank: int = 0
    headers: int = 0
    explained: int = 0  # headers + recognised continuation lines
    unexplained: LineTally = field(default_factory=LineTally)
    notes: list[str] = field(default_factory=list)  # decoding notes (damaged ranges, replaced bytes, UTF-16)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    @property
    def parsed_share(self) -> float:
        return self.explained / self.nonblank if self.nonblank else 0.0

    def signatures(self, name: str | None = None) -> list[LogRecord]:
        return [r for r in self.records if r.signature and (name is None or r.signature == name)]


def classify(record: LogRecord, next_line: str | None = None, frame_line: str | None = None) -> LogRecord:
    """Attach the record's signature and attributes (in place; also returned).

    ``next_line`` is the line right under the header (its exception line, if it is one) and ``frame_line``
    the line under that: the same two lines the Spark scan joins to a signature row.
    """
    hit = classify_fields(record.logger_simple, record.message, next_line, frame_line)
    if hit is not None:
        sig, record.attrs = hit
        record.signature, record.wording = sig.name, sig.versions
    return record


def classify_fields(logger_simple: str, message: str, next_line: str | None = None,
                    frame_line: str | None = None) -> "tuple[sigs.Signature, dict[str, str]] | None":
    """The signature of a record (logger's simple name, message, the two lines under it) and its attributes,
    or None: what ``classify`` attaches to a LogRecord."""
    exc = next_line if next_line is not None and is_exception_line(next_line) else None
    hit = sigs.classify_text(logger_simple, message, exc)
    if hit is None:
        return None
    sig, attrs = hit
    src = exc if exc is not None else message
    for k, v in sigs.exception_attrs(sig.name, src).items():
        if k not in attrs:
            attrs[k] = v
    if exc is not None and frame_line is not None:
        attrs.update(sigs.frame_attrs(sig.name, frame_line))
    return sig, attrs


def _record(h: Header, i: int, line: str) -> LogRecord:
    return LogRecord(line=i, end_line=i, ts=h.ts, level=h.level, logger=h.logger, thread=h.thread, message=h.message,
                     zone=h.zone, myid=h.myid, raw=line[:2000])


def _headerless(line: str) -> Header | None:
    """A pasted message without its timestamp: 'msg (logger)' (used only when no layout reads the file)."""
    r = line.rstrip()
    if not r.endswith(")"):
        return None
    k = r.rfind("(")
    cand = r[k + 1:-1] if k >= 0 else ""
    if not cand or "." not in cand or not LOGGER_RE.fullmatch(cand):
        return None
    return Header("", "", cand, None, r[:k].rstrip())


def iter_records(lines: list[str], layout: Layout | None, out: LogParse) -> Iterator[LogRecord]:
    cur: LogRecord | None = None
    pending: list[str] = []  # the (up to) two lines under the current header, for classify()

    def finish(rec: LogRecord) -> LogRecord:
        classify(rec, pending[0] if pending else None, pending[1] if len(pending) > 1 else None)
        return rec

    for i, ln in enumerate(lines, start=1):
        if not i & 0xFFF:
            check_budget(f"line {i}")
        if not ln.strip():
            if cur is not None and len(pending) < 2:
                pending.append(ln)
            continue
        out.nonblank += 1
        h = layout.header(ln) if layout is not None else _headerless(ln)
        if h is not None:
            if cur is not None:
                yield finish(cur)
            cur = _record(h, i, ln)
            pending = []
            out.headers += 1
            out.explained += 1
            continue
        kind = continuation_kind(ln)
        if cur is None:
            out.unexplained.add(i, ln)
            continue
        if len(pending) < 2:
            pending.append(ln)
        cur.end_line = i
        cur.continuation += 1
        if kind == "frame":
            cur.frames += 1
        if kind == "exception" and cur.exception is None and cur.continuation == 1:
            cur.exception, cur.exception_line = ln.strip()[:2000], i
        if kind == "other":
            out.unexplained.add(i, ln)
        else:
            out.explained += 1
    if cur is not None:
        yield finish(cur)


def parse_lines(lines: list[str], layout_name: str | None = None) -> LogParse:
    out = LogParse(total_lines=len(lines))
    layout = BY_NAME.get(layout_name) if layout_name else detect(lines)[0]
    out.layout = layout.name if layout else None
    out.records = list(iter_records(lines, layout, out))
    if layout is None and out.records:
        out.layout = "message_only"
    return out


def parse_log(data: bytes | str | None, layout: str | None = None) -> LogParse:
    d = decode_evidence(data)
    if d.problems:
        return LogParse(unparsable=list(d.problems), notes=list(d.notes))
    out = parse_lines(split_lines(d.text), layout)
    out.notes = list(d.notes)
    if not out.records:
        out.unparsable.append(f"no log records recognised in {out.nonblank} non-blank lines (no known layout)")
    elif out.unexplained.count * 2 > out.nonblank:
        out.unparsable.append(
            f"{out.unexplained.count} of {out.nonblank} non-blank lines are outside the {out.layout} layout "
            f"(first at line {out.unexplained.samples[0].line})")
    return out
