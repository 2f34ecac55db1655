"""``kafka-dump-log.sh`` / ``kafka.tools.DumpLogSegments`` output for ``.index``, ``.timeindex`` and ``.log``
segments (Kafka 0.11 -> 3.x; 2.x prints keysize/valuesize, 3.x keySize/valueSize and deleteHorizonMs).

Record batches are read by known keys, not by position, so a batch line wrapped by a terminal or a blog
(seed 004 prints "magic: 2 compre" / "sscodec: none ...") is re-joined and read correctly. Pure and linear.

Evidence it yields: offset gaps between batches, index entries pointing past the log or going backwards,
invalid CRCs, the time range a segment covers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import LineTally, decode_evidence, iter_lines

BATCH_KEYS = ("baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch",
              "partitionLeaderEpoch", "isTransactional", "isControl", "deleteHorizonMs", "position", "CreateTime",
              "LogAppendTime", "size", "magic", "compresscodec", "crc", "isvalid")
RECORD_KEYS = ("offset", "CreateTime", "LogAppendTime", "keysize", "keySize", "valuesize", "valueSize", "sequence",
               "headerKeys", "key", "payload")
_KEYS_RE = re.compile(r"(?<![A-Za-z])(" + "|".join(sorted(set(BATCH_KEYS), key=len, reverse=True)) + r"): ", re.ASCII)
_INDEX = re.compile(r"^offset: (?P<offset>-?[0-9]{1,19}) position: (?P<position>-?[0-9]{1,19})\s{0,10}$", re.ASCII)
_TIMEINDEX = re.compile(r"^timestamp: (?P<ts>-?[0-9]{1,19}) offset: (?P<offset>-?[0-9]{1,19})\s{0,10}$", re.ASCII)
_DUMPING = re.compile(r"^Dumping (?P<file>\S{1,4096})\s{0,10}$")
_STARTING = re.compile(r"^Starting offset: (?P<offset>-?[0-9]{1,19})\s{0,10}$", re.ASCII)
# the tool's own verification of an index against its log segment
_MISMATCH = re.compile(r"^Indexed offset: (?P<indexed>-?[0-9]{1,19}), found log offset: (?P<found>-?[0-9]{1,19})\s{0,10}$", re.ASCII)
_VERIFY_HEADERS = ("The following indexed offsets are not found in the log.", "Mismatches in :", "Found timestamp mismatch in :",
                   "Found out of order timestamp in :", "Non-consecutive offsets in ")


@dataclass(frozen=True)
class IndexEntry:
    line: int
    offset: int
    position: int | None = None  # .index
    timestamp: int | None = None  # .timeindex


@dataclass
class Batch:
    line: int
    fields: dict[str, str]
    records: int = 0  # "| offset:" lines printed under it (with --print-data-log / --deep-iteration)

    def int(self, key: str) -> int | None:
        v = self.fields.get(key)
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None

    @property
    def valid(self) -> bool | None:
        v = self.fields.get("isvalid")
        return None if v is None else v.lower() == "true"

    @property
    def timestamp(self) -> int | None:
        return self.int("CreateTime") if "CreateTime" in self.fields else self.int("LogAppendTime")

    @property
    def timestamp_type(self) -> str | None:
        return "CreateTime" if "CreateTime" in self.fields else ("LogAppendTime" if "LogAppendTime" in self.fields else None)


@dataclass
class DumpedFile:
    path: str
    kind: str  # "index" | "timeindex" | "log" | "unknown"
    line: int
    starting_offset: int | None = None
    index: list[IndexEntry] = field(default_factory=list)
    batches: list[Batch] = field(default_factory=list)
    records: int = 0
    mismatches: list[tuple[int, int, int]] = field(default_factory=list)  # (line, indexed offset, found log offset)
    verification: list[str] = field(default_factory=list)  # the tool's own verification headings, as printed

    def problems(self) -> list[str]:
        """Evidence of damage: gaps/overlaps between batches, invalid CRCs, index entries out of order."""
        out = []
        prev = None
        for b in self.batches:
            base, last = b.int("baseOffset"), b.int("lastOffset")
            if b.valid is False:
                out.append(f"line {b.line}: batch at offset {base} has an invalid CRC (isvalid: false, crc: {b.fields.get('crc')})")
            if prev is not None and base is not None and prev[1] is not None and base <= prev[1]:
                out.append(f"line {b.line}: batch baseOffset {base} is not after the previous lastOffset {prev[1]} (line {prev[0]})")
            if base is not None and last is not None and last < base:
                out.append(f"line {b.line}: lastOffset {last} < baseOffset {base}")
            prev = (b.line, last)
        for a, b in zip(self.index, self.index[1:]):
            if b.offset < a.offset or (a.position is not None and b.position is not None and b.position < a.position):
                out.append(f"line {b.line}: index entry goes backwards ({a.offset}@{a.position} -> {b.offset}@{b.position})")
        return out

    def offset_gaps(self) -> list[tuple[int, int, int]]:
        """(line, previous lastOffset, this baseOffset) where offsets jump (compaction or deletion leaves these)."""
        out, prev = [], None
        for b in self.batches:
            base = b.int("baseOffset")
            if prev is not None and base is not None and base > prev + 1:
                out.append((b.line, prev, base))
            prev = b.int("lastOffset") if b.int("lastOffset") is not None else prev
        return out

    def time_range(self) -> tuple[int, int] | None:
        ts = [b.timestamp for b in self.batches if b.timestamp is not None and b.timestamp >= 0]
        ts += [e.timestamp for e in self.index if e.timestamp is not None and e.timestamp >= 0]
        return (min(ts), max(ts)) if ts else None

    def offset_range(self) -> tuple[int, int] | None:
        offs = [o for b in self.batches for o in (b.int("baseOffset"), b.int("lastOffset")) if o is not None]
        offs += [e.offset for e in self.index]
        return (min(offs), max(offs)) if offs else None


@dataclass
class DumpLog:
    files: list[DumpedFile] = field(default_factory=list)
    unrecognized: LineTally = field(default_factory=LineTally)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable


def _kind_of(path: str) -> str:
    for k in ("timeindex", "index", "log"):
        if path.endswith("." + k):
            return k
    return "unknown"


def _batch_fields(text: str) -> dict[str, str]:
    keys = list(_KEYS_RE.finditer(text))
    out = {}
    for a, b in zip(keys, keys[1:] + [None]):
        out[a.group(1)] = text[a.end(): b.start() if b else len(text)].strip()
    return out


def parse_dump_log(data: bytes | str | None) -> DumpLog:
    d = decode_evidence(data)
    out = DumpLog()
    if d.problems:
        out.unparsable.extend(d.problems)
        return out
    cur: DumpedFile | None = None
    batch_text: list[str] = []
    batch_line = 0

    def flush() -> None:
        nonlocal batch_text
        if batch_text and cur is not None:
            cur.batches.append(Batch(batch_line, _batch_fields("".join(batch_text))))
        batch_text = []

    nonblank = 0
    for i, ln in iter_lines(d.text):
        s = ln.strip()
        if not s:
            flush()
            continue
        nonblank += 1
        m = _DUMPING.match(s)
        if m:
            flush()
            cur = DumpedFile(m.group("file"), _kind_of(m.group("file")), i)
            out.files.append(cur)
            continue
        if cur is None:  # output without its "Dumping <file>" header (an excerpt)
            cur = DumpedFile("", "unknown", i)
            out.files.append(cur)
        m = _MISMATCH.match(s)
        if m:
            cur.mismatches.append((i, int(m.group("indexed")), int(m.group("found"))))
            continue
        if s.startswith(_VERIFY_HEADERS):
            cur.verification.append(s[:300])
            continue
        m = _STARTING.match(s)
        if m:
            cur.starting_offset = int(m.group("offset"))
            cur.kind = "log" if cur.kind == "unknown" else cur.kind
            continue
        m = _INDEX.match(s)
        if m:
            flush()
            cur.index.append(IndexEntry(i, int(m.group("offset")), position=int(m.group("position"))))
            cur.kind = "index" if cur.kind == "unknown" else cur.kind
            continue
        m = _TIMEINDEX.match(s)
        if m:
            flush()
            cur.index.append(IndexEntry(i, int(m.group("offset")), timestamp=int(m.group("ts"))))
            cur.kind = "timeindex" if cur.kind == "unknown" else cur.kind
            continue
        if s.startswith("baseOffset:"):
            flush()
            batch_text, batch_line = [s], i
            cur.kind = "log" if cur.kind == "unknown" else cur.kind
            continue
        if s.startswith("| offset:") or s.startswith("offset:") and " position: " not in s:
            flush()
            if cur.batches:
                cur.batches[-1].records += 1
            cur.records += 1
            continue
        if batch_text:  # a wrapped batch line: glue it back (the wrap may split a word)
            batch_text.append(ln.rstrip("\r"))
            continue
        out.unrecognized.add(i, ln)
    flush()
    if not any(f.index or f.batches for f in out.files):
        out.unparsable.append(f"no index entries or record batches recognised in {nonblank} non-blank lines")
    elif out.unrecognized.count * 2 > nonblank:
        out.unparsable.append(f"{out.unrecognized.count} of {nonblank} lines are not kafka-dump-log output")
    return out
