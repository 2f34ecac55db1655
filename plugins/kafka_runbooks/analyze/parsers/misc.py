"""Small parsers for the other capture kinds: open_files, process_stat, jmap_histo, heap_info.

Formats (what capture runs):
- open_files:   `ls /proc/PID/fd | wc -l` or `lsof -p PID | wc -l` -> one integer;
                raw `lsof -p PID` output (header COMMAND PID ...) is also accepted (count = rows).
- process_stat: `ps -o pid=,etimes=,rss=,args= -p PID` -> "  81068 123456 1901924 java ... kafka.Kafka ...";
                empty output means the process is gone (unparsable: "no such process").
- jmap_histo:   `jmap -histo[:live] PID` / `jcmd PID GC.class_histogram`.
- heap_info:    `jcmd PID GC.heap_info` (G1, Parallel, Serial, ZGC/Shenandoah first lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import LineTally, decode, split_lines


@dataclass
class OpenFiles:
    count: int | None = None
    line: int | None = None
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable


def parse_open_files(data: bytes | str | None) -> OpenFiles:
    text, problems = decode(data)
    if problems:
        return OpenFiles(unparsable=problems)
    lines = [(i, l.strip()) for i, l in enumerate(split_lines(text), start=1) if l.strip()]
    if len(lines) == 1 and lines[0][1].isascii() and lines[0][1].isdigit():
        return OpenFiles(count=int(lines[0][1]), line=lines[0][0])
    if lines and lines[0][1].startswith("COMMAND") and " PID " in lines[0][1] + " ":
        return OpenFiles(count=len(lines) - 1, line=lines[-1][0])
    # a listing of the process's fd directory, one entry per line (`find /proc/PID/fd -mindepth 1 ...`)
    if lines and all(_FD_ENTRY.fullmatch(l) for _, l in lines):
        return OpenFiles(count=len(lines), line=lines[-1][0])
    return OpenFiles(unparsable=[f"expected an fd count, an lsof listing or a /proc/PID/fd listing; got {len(lines)} "
                                 f"lines: {lines[0][1][:80]!r}" if lines else "no lines"])


_FD_ENTRY = re.compile(r"(?:/proc/[0-9]{1,10}/fd/)?[0-9]{1,10}", re.ASCII)


@dataclass
class ProcessStat:
    pid: int | None = None
    uptime_s: int | None = None
    rss_kb: int | None = None
    args: str | None = None
    line: int | None = None
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    @property
    def is_kafka(self) -> bool:
        return bool(self.args and "kafka.Kafka" in self.args)


# anchored; the free-text args are whatever follows (stripped with str.strip, never by a regex)
_PS = re.compile(r"^\s{0,40}(?P<pid>[0-9]{1,10})\s{1,40}(?P<etimes>[0-9]{1,12})\s{1,40}(?P<rss>[0-9]{1,15})(?=\s|$)", re.ASCII)
_ETIME = re.compile(r"^\s{0,40}(?P<pid>[0-9]{1,10})\s{1,40}(?:(?P<d>[0-9]{1,6})-)?(?:(?P<h>[0-9]{1,2}):)?(?P<m>[0-9]{1,2}):(?P<s>[0-9]{1,2})"
                    r"\s{1,40}(?P<rss>[0-9]{1,15})(?=\s|$)", re.ASCII)


def parse_process_stat(data: bytes | str | None) -> ProcessStat:
    text, problems = decode(data)
    if problems:
        return ProcessStat(unparsable=["no such process (empty ps output)"] if "empty" in problems[0] else problems)
    rows = [(i, l) for i, l in enumerate(split_lines(text), start=1) if l.strip() and not l.strip().startswith("PID")]
    for i, l in rows:
        m = _PS.match(l)
        if m:
            return ProcessStat(int(m.group("pid")), int(m.group("etimes")), int(m.group("rss")), l[m.end():].strip() or None, i)
        m = _ETIME.match(l)  # `ps -o pid=,etime=,rss=,args=` ([[dd-]hh:]mm:ss)
        if m:
            up = int(m.group("d") or 0) * 86400 + int(m.group("h") or 0) * 3600 + int(m.group("m")) * 60 + int(m.group("s"))
            return ProcessStat(int(m.group("pid")), up, int(m.group("rss")), l[m.end():].strip() or None, i)
    return ProcessStat(unparsable=[f"no 'pid etimes rss args' row in {len(rows)} lines"])


@dataclass(frozen=True)
class HistoRow:
    rank: int
    instances: int
    bytes: int
    cls: str
    line: int


@dataclass
class JmapHisto:
    rows: list[HistoRow] = field(default_factory=list)
    total_instances: int | None = None
    total_bytes: int | None = None
    unparsable: list[str] = field(default_factory=list)
    unrecognized: LineTally = field(default_factory=LineTally)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def top(self, n: int = 10) -> list[HistoRow]:
        return sorted(self.rows, key=lambda r: -r.bytes)[:n]


_HISTO = re.compile(r"^\s{0,40}(?P<rank>[0-9]{1,9}):\s{1,40}(?P<inst>[0-9]{1,19})\s{1,40}(?P<bytes>[0-9]{1,19})\s{1,40}(?P<cls>\S{1,2000})"
                    r"(?:\s{1,40}\([^)\n]{0,300}\))?\s{0,40}$", re.ASCII)
_HISTO_TOTAL = re.compile(r"^\s{0,40}Total\s{1,40}(?P<inst>[0-9]{1,19})\s{1,40}(?P<bytes>[0-9]{1,19})\s{0,40}$", re.ASCII)


def parse_jmap_histo(data: bytes | str | None) -> JmapHisto:
    text, problems = decode(data)
    h = JmapHisto()
    if problems:
        h.unparsable.extend(problems)
        return h
    for i, l in enumerate(split_lines(text), start=1):
        if not l.strip() or l.strip().startswith(("num ", "---")) or (l.strip().endswith(":") and l.strip()[:-1].isdigit()):
            continue
        m = _HISTO.match(l)
        if m:
            h.rows.append(HistoRow(int(m.group("rank")), int(m.group("inst")), int(m.group("bytes")), m.group("cls"), i))
            continue
        m = _HISTO_TOTAL.match(l)
        if m:
            h.total_instances, h.total_bytes = int(m.group("inst")), int(m.group("bytes"))
            continue
        h.unrecognized.add(i, l)
    if not h.rows:
        h.unparsable.append("no histogram rows recognised")
    elif h.total_bytes is None:
        h.unparsable.append(f"truncated histogram: no 'Total' line after {len(h.rows)} rows")
    return h


@dataclass
class HeapInfo:
    collector: str | None = None
    total_kb: int | None = None
    used_kb: int | None = None
    metaspace_used_kb: int | None = None
    line: int | None = None
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable


# "<name>   total NK, used NK": the name is what precedes " total " (found with str.find, not a lazy regex)
_HEAP_NUM = re.compile(r"total (?:reserved )?(?P<total>[0-9]{1,15})K, (?:committed [0-9]{1,15}K, )?used (?P<used>[0-9]{1,15})K", re.ASCII)
_META = re.compile(r"^\s{0,40}Metaspace\s{1,40}used (?P<used>[0-9]{1,15})K", re.ASCII)


def parse_heap_info(data: bytes | str | None) -> HeapInfo:
    text, problems = decode(data)
    hi = HeapInfo()
    if problems:
        hi.unparsable.extend(problems)
        return hi
    young_old: list[tuple[int, int]] = []
    for i, l in enumerate(split_lines(text), start=1):
        k = l.find(" total ")
        m = _HEAP_NUM.match(l, k + 1) if k > 0 else None
        if m and l[:k].strip():
            name = " ".join(l[:k].split())
            if name in ("PSYoungGen", "ParOldGen", "def new generation", "tenured generation", "par new generation",
                        "concurrent mark-sweep generation"):
                young_old.append((int(m.group("total")), int(m.group("used"))))
                hi.collector = hi.collector or name
                hi.line = hi.line or i
            elif hi.total_kb is None:
                hi.collector, hi.total_kb, hi.used_kb, hi.line = name, int(m.group("total")), int(m.group("used")), i
            continue
        m = _META.match(l)
        if m and hi.metaspace_used_kb is None:
            hi.metaspace_used_kb = int(m.group("used"))
    if hi.total_kb is None and young_old:
        hi.total_kb = sum(t for t, _ in young_old)
        hi.used_kb = sum(u for _, u in young_old)
    if hi.total_kb is None:
        hi.unparsable.append("no 'total NK, used NK' heap line recognised")
    return hi


# ---------------------------------------------------------------- /proc/<pid>/stat and /proc/<pid>/task/*/stat

PROC_STATES = {"R": "running", "S": "sleeping", "D": "disk sleep", "T": "stopped", "t": "tracing stop",
               "Z": "zombie", "X": "dead", "I": "idle", "W": "paging", "P": "parked", "K": "wakekill"}


@dataclass(frozen=True)
class ProcThread:
    tid: int
    name: str  # the kernel's comm: the first 15 characters of the Java thread name
    state: str  # one letter (PROC_STATES)
    line: int


@dataclass
class ProcState:
    """``cat /proc/<pid>/stat`` (kind process_state) or ``/proc/<pid>/task/*/stat`` (kind proc_threads)."""

    threads: list[ProcThread] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    @property
    def process(self) -> ProcThread | None:
        return self.threads[0] if self.threads else None

    @property
    def state_word(self) -> str | None:
        p = self.process
        return PROC_STATES.get(p.state, p.state) if p else None

    def states(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.threads:
            out[t.state] = out.get(t.state, 0) + 1
        return out


def parse_proc_stat(data: bytes | str | None) -> ProcState:
    """Lines ``pid (comm) S ppid ...``: comm may hold spaces and parentheses, so the state is the first field after
    the LAST ')' of the line (as proc(5) says); no regex over the free text."""
    text, problems = decode(data)
    if problems:
        return ProcState(unparsable=problems)
    out = ProcState()
    bad = 0
    for i, l in enumerate(split_lines(text), start=1):
        if not l.strip():
            continue
        open_, close = l.find("("), l.rfind(")")
        head, rest = l[:open_].strip() if open_ > 0 else "", l[close + 1:].split() if close > open_ > 0 else []
        if not head.isdigit() or not rest or len(rest[0]) != 1:
            bad += 1
            continue
        out.threads.append(ProcThread(int(head), l[open_ + 1:close], rest[0], i))
    if not out.threads:
        out.unparsable.append(f"no '/proc/<pid>/stat' line ('pid (comm) state ...') in {bad} line(s)")
    return out
