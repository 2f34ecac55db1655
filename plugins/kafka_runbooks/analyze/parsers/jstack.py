"""Thread dumps, every way a JVM prints them:

- ``jstack [-l]`` and ``jcmd PID Thread.print`` of JDK 8 -> 21 (JDK 19+ headers ``"main" #1 [7] prio=5 ...``,
  module-qualified frames, ``-e`` extras), and ``kill -3`` output inside ``kafkaServer.out`` (between log
  lines: only the dump sections are read, the log around them is left to the log parser);
- VisualVM / NetBeans dumps (``"name" - Thread t@N``, ``- waiting to lock <a> (a C) owned by "x" t@M``);
- jcmd's JSON dump (``Thread.dump_to_file -format=json``: format 1 of JDK 19-24 has names and stacks only,
  format 2 of JDK 25+ adds state, blockedOn, parkBlocker{object,owner} and monitorsOwned);
- jcmd's text dump (``Thread.dump_to_file -format=text``, JDK 21+: pid, time and version lines, then
  ``#<tid> "<name>"`` headers, `` virtual`` for virtual threads, frames without ``at``); a carrier's
  ``Carrying virtual thread #N`` line (jstack / Thread.print of JDK 21+) links it to that virtual thread;
- partial excerpts (threads without the ``Full thread dump`` header, jstack's own ``Found one Java-level
  deadlock:`` report with or without its heading, its "Java stack information" with or without its heading).

Lines around a dump that are not dump output (blank lines, a timestamp, a shell prompt) never make a good dump
unparsable: a stretch without thread dump content next to one with it is left out, with a note.

A file holding several dumps (kill -3 twice, a capture appending jstack runs) gives several dumps, in order.
Threads are identified by nid/tid (``ThreadInfo.key``), not by name: two threads may share a name. A missing
``JNI global refs`` trailer is normal (older JVMs, jcmd) and not reported.

Pure and linear: headers are read with string operations; lock lines with anchored, bounded patterns.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from .base import LineTally, decode_evidence, split_lines, check_budget

_LOCK = re.compile(
    r"^\s{0,40}- (?P<verb>locked|waiting to lock|waiting on|parking to wait for|eliminated|waiting to re-lock in wait\(\))"
    r"\s{1,10}<(?P<addr>(?:0x)?[0-9a-fA-F]{1,32})> \(a (?P<cls>[^)\n]{1,500})\)(?: owned by \"(?P<owner>[^\"\n]{0,500})\" t@(?P<owner_tid>[0-9]{1,12}))?\s{0,10}$",
    re.ASCII)
_LOCK_NOREF = re.compile(r"^\s{0,40}- (?:waiting on|locked|waiting to lock) <no object reference available>\s{0,10}$")
_OWNABLE_HDR = re.compile(r"^\s{0,40}Locked ownable synchronizers:\s{0,10}$")
_OWNABLE = re.compile(r"^\s{0,40}- <(?P<addr>(?:0x)?[0-9a-fA-F]{1,32})> \(a (?P<cls>[^)\n]{1,500})\)\s{0,10}$", re.ASCII)
_NONE = re.compile(r"^\s{0,40}- None\s{0,10}$")
_STATE = re.compile(r"^\s{1,40}java\.lang\.Thread\.State: (?P<state>[A-Z_]{1,20})(?: \((?P<detail>[^)\n]{0,100})\))?\s{0,10}$")
_DL_WAIT_MON = re.compile(
    r"^\s{1,40}waiting to lock monitor (?P<mon>0x[0-9a-fA-F]{1,32}) \(object (?P<addr>0x[0-9a-fA-F]{1,32}), a (?P<cls>[^)\n]{1,500})\),?\s{0,10}$")
_DL_WAIT_SYNC = re.compile(
    r"^\s{1,40}waiting for ownable synchronizer (?P<addr>0x[0-9a-fA-F]{1,32}),? \(a (?P<cls>[^)\n]{1,500})\),?\s{0,10}$")
_DL_END = re.compile(r"^Found (?P<n>[0-9]{1,6}) deadlocks?\.\s{0,10}$")
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\s{0,10}$")
_CARRYING = re.compile(r"^\s{1,40}Carrying virtual thread #(?P<tid>[0-9]{1,19})\s{0,10}$")
_TEXT_HEADER = re.compile(r'^#(?P<tid>[0-9]{1,19}) "(?P<name>[^\n]{0,1000})"(?P<rest>(?: [A-Za-z_]{1,20}){0,4})\s{0,10}$')
_ISO_INSTANT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z\s{0,10}$")
_REPORT_WAIT = ("waiting to lock", "waiting for ", "which is held by")
_STACK_LINE = ("at ", "- ", "java.lang.Thread.State:")
_VISUALVM = re.compile(r"^\"(?P<name>[^\n]{0,1000})\" - Thread t@(?P<tid>[0-9]{1,12})\s{0,10}$")
_COMPILER = re.compile(r"^\s{1,40}(?:No compile task|Compiling:.{0,500})$")
_SMR_BODY = re.compile(r"^\s{0,10}(?:0x[0-9a-fA-F]{1,20},?\s{0,10}){1,8}$", re.ASCII)
_REQUEST_HANDLER_FRAMES = ("kafka.server.KafkaRequestHandler.run", "kafka.server.KafkaApis.handle")


@dataclass(frozen=True)
class LockRef:
    address: str
    cls: str
    line: int
    frame_index: int | None = None  # index of the frame the lock line belongs to
    text: str = ""  # the line as printed (stripped)
    owner: str | None = None  # VisualVM prints the owner: ("name", "t@N")
    owner_tid: str | None = None

    def to_dict(self) -> dict:
        return {"address": self.address, "class": self.cls, "line": self.line}


@dataclass
class Frame:
    text: str
    line: int


@dataclass
class ThreadInfo:
    name: str
    line: int  # line of the thread header
    header_text: str = ""
    source: str = "dump"  # "dump" | "deadlock_stacks" (stack list of jstack's deadlock report)
    number: int | None = None
    daemon: bool = False
    tid: str | None = None
    nid: str | None = None
    header_state: str = ""  # text after nid=..: "waiting for monitor entry"
    state: str | None = None  # BLOCKED, WAITING, RUNNABLE, ...
    state_detail: str | None = None
    state_line: int | None = None
    frames: list[Frame] = field(default_factory=list)
    locked: list[LockRef] = field(default_factory=list)
    waiting_to_lock: LockRef | None = None
    waiting_on: list[LockRef] = field(default_factory=list)
    parking_for: LockRef | None = None
    ownable_synchronizers: list[LockRef] = field(default_factory=list)
    last_line: int = 0
    virtual: bool = False
    carrying: int | None = None  # a carrier thread: the tid of the virtual thread mounted on it ("Carrying virtual thread #N")
    carrying_line: int | None = None
    carrier: str | None = None  # a virtual thread: the name of the carrier it is mounted on (when a dump shows it)

    @property
    def key(self) -> str:
        """Identity within one dump: the native thread id, else the JVM thread id, else name and line."""
        if self.nid:
            return f"nid={self.nid}"
        if self.tid:
            return f"tid={self.tid}"
        return f"{self.name}@{self.line}"

    @property
    def awaited(self) -> LockRef | None:
        return self.waiting_to_lock or self.parking_for

    @property
    def awaited_kind(self) -> str | None:
        if self.waiting_to_lock:
            return "monitor"
        if self.parking_for:
            return "synchronizer"
        return None

    def held(self) -> list[tuple[LockRef, str]]:
        """Locks this thread owns: monitors (minus those released by Object.wait) and ownable synchronizers."""
        released = {w.address for w in self.waiting_on}
        out = [(l, "monitor") for l in self.locked if l.address not in released]
        out += [(l, "synchronizer") for l in self.ownable_synchronizers]
        return out

    @property
    def serves_requests(self) -> bool:
        """A Kafka request handler, known by what it runs (its frames), not by its name."""
        return any(f.text.startswith(_REQUEST_HANDLER_FRAMES) or "/kafka.server.KafkaRequestHandler.run" in f.text
                   for f in self.frames[-4:])

    def top_frames(self, n: int = 3) -> tuple[str, ...]:
        return tuple(f.text for f in self.frames[:n])

    def to_dict(self) -> dict:
        aw = self.awaited
        return {
            "name": self.name, "line": self.line, "source": self.source, "tid": self.tid, "nid": self.nid,
            "key": self.key, "daemon": self.daemon, "state": self.state, "state_detail": self.state_detail,
            "frames": [{"text": f.text, "line": f.line} for f in self.frames],
            "locked": [l.to_dict() for l in self.locked],
            "ownable_synchronizers": [l.to_dict() for l in self.ownable_synchronizers],
            "awaited": aw.to_dict() if aw else None, "awaited_kind": self.awaited_kind,
            "virtual": self.virtual, "carrying": self.carrying, "carrier": self.carrier,
        }


@dataclass
class DeadlockEntry:
    """One entry of jstack's own `Found one Java-level deadlock:` report."""

    thread: str
    line: int
    kind: str | None = None  # "monitor" | "synchronizer"
    address: str | None = None
    cls: str | None = None
    held_by: str | None = None
    held_line: int | None = None


@dataclass
class JstackDump:
    threads: list[ThreadInfo] = field(default_factory=list)
    deadlock_stacks: list[ThreadInfo] = field(default_factory=list)
    deadlocks: list[list[DeadlockEntry]] = field(default_factory=list)
    reported_deadlock_count: int | None = None
    timestamp: str | None = None
    jvm: str | None = None
    full_dump: bool = False
    complete: bool = True
    total_lines: int = 0
    first_line: int = 0
    last_line: int = 0
    format: str = "jstack"  # jstack | visualvm | json | excerpt
    ownable_info: bool = False  # "Locked ownable synchronizers" sections present (jstack -l, jcmd Thread.print -l)
    index: int = 0  # position of this dump in its file (0-based)
    unparsable: list[str] = field(default_factory=list)
    unrecognized: LineTally = field(default_factory=LineTally)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def all_threads(self) -> list[ThreadInfo]:
        """Threads of the full dump, plus deadlock-section stacks of threads the dump does not have."""
        names = {t.name for t in self.threads}
        return list(self.threads) + [t for t in self.deadlock_stacks if t.name not in names]

    def thread(self, name: str) -> ThreadInfo | None:
        return next((t for t in self.all_threads() if t.name == name), None)

    def by_key(self, key: str) -> ThreadInfo | None:
        return next((t for t in self.all_threads() if t.key == key), None)


@dataclass
class ThreadDumps:
    """Every dump of one file, in order."""

    dumps: list[JstackDump] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    total_lines: int = 0

    @property
    def ok(self) -> bool:
        return not self.unparsable

    @property
    def threads(self) -> list[ThreadInfo]:
        return [t for d in self.dumps for t in d.all_threads()]


def strip_deadlock_section(text: str) -> str:
    """Remove every `Found one Java-level deadlock:` block (up to and including `Found N deadlock(s).`).

    Line count is preserved (removed lines become empty) so line citations stay valid.
    """
    out, inside = [], False
    for ln in text.split("\n"):
        if ln.startswith("Found one Java-level deadlock:"):
            inside = True
        if inside:
            out.append("")
            if _DL_END.match(ln):
                inside = False
            continue
        out.append(ln)
    return "\n".join(out)


# ---------------------------------------------------------------- headers (string operations only)


def _read_header(ln: str) -> ThreadInfo | None:
    """'"name" #12 daemon prio=5 ... tid=0x.. nid=0x.. waiting for monitor entry  [0x..]' (JDK 8-21)."""
    if not ln.startswith('"'):
        return None
    q = ln.rfind('"')
    if q <= 0:
        return None
    name, rest = ln[1:q], ln[q + 1:]
    if rest.strip() == ":":
        return None  # a deadlock-report entry
    if rest and rest[0] not in " \t":
        return None
    r = rest.strip()
    if r and not (r.startswith("#") or r.startswith("daemon") or r.startswith("prio=") or r.startswith("os_prio=")
                  or "tid=" in r or "nid=" in r or r.startswith("Id=")):
        return None
    t = ThreadInfo(name=name, line=0, header_text=ln.strip())
    toks = r.split()
    for k, tok in enumerate(toks):
        if tok.startswith("#") and tok[1:].isdigit() and t.number is None:
            t.number = int(tok[1:])
        elif tok == "daemon":
            t.daemon = True
        elif tok.startswith("tid=") and t.tid is None:
            t.tid = tok[4:]
        elif tok.startswith("nid=") and t.nid is None:
            t.nid = tok[4:]
            tail = " ".join(toks[k + 1:])
            br = tail.rfind("[0x")
            t.header_state = (tail[:br] if br >= 0 else tail).strip()
        elif tok == "virtual":
            t.virtual = True
    if t.nid is None and len(toks) > 1 and toks[1].startswith("[") and toks[1].endswith("]") and toks[1][1:-1].isdigit():
        t.nid = toks[1][1:-1]  # JDK 19+ prints the OS thread id as "#1 [7]" too
    return t


def _short_header(ln: str) -> str | None:
    """'"name":' (deadlock report and its stack list)."""
    s = ln.rstrip()
    if s.startswith('"') and s.endswith('":') and len(s) >= 3:
        return s[1:-2]
    return None


def _above(lines: list[str], j: int, floor: int) -> int:
    """The nearest non-blank line above ``j`` (at most 3 blank lines up, not below ``floor``), else -1."""
    k = j - 1
    while k >= floor and k >= j - 4 and not lines[k].strip():
        k -= 1
    return k if k >= floor and lines[k].strip() else -1


def _dump_starts(lines: list[str]) -> list[int]:
    """0-based indexes where a new dump begins (a 'Full thread dump' header, with its date line and jcmd's 'PID:'
    line above it, blank lines between them allowed)."""
    starts: list[int] = []
    for i, ln in enumerate(lines):
        if ln.startswith("Full thread dump "):
            floor = starts[-1] + 1 if starts else 0
            j = i
            k = _above(lines, j, floor)
            if k >= 0 and _TIMESTAMP.match(lines[k]):
                j = k
                k = _above(lines, j, floor)
            if k >= 0 and lines[k].rstrip().rstrip(":").isdigit():  # jcmd's "PID:" line
                j = k
            starts.append(j)
    return starts


def _has_content(d: "JstackDump") -> bool:
    return bool(d.threads or d.deadlocks or d.deadlock_stacks)


def _next_nonblank(lines: list[str], idx: int, b: int) -> str:
    """The next non-blank line after ``idx`` (within 5 lines and the section), stripped; '' if none."""
    for k in range(idx + 1, min(b, idx + 6)):
        if lines[k].strip():
            return lines[k].strip()
    return ""


def parse_thread_dumps(data: bytes | str | None, *, embedded: bool | None = None) -> ThreadDumps:
    """Every dump in the file. ``embedded``: the dumps sit inside other output (kafkaServer.out); only the dump
    sections are read. None: decided from the content (a dump header after other, non-dump lines)."""
    d = decode_evidence(data)
    out = ThreadDumps(notes=list(d.notes))
    if d.problems:
        out.unparsable.extend(d.problems)
        return out
    text = d.text
    stripped = text.lstrip()
    if stripped.startswith("{") and '"threadDump"' in text[:2000]:
        dump = parse_json_dump(text)
        out.dumps.append(dump)
        out.unparsable.extend(dump.unparsable)
        return out
    lines = split_lines(text)
    out.total_lines = len(lines)
    if _is_text_dump(lines):
        dump = parse_text_dump(lines)
        out.dumps.append(dump)
        out.unparsable.extend(dump.unparsable)
        return out
    starts = _dump_starts(lines)
    if embedded is None:
        embedded = bool(starts) and any(ln.strip() and not _TIMESTAMP.match(ln) and not ln.rstrip().rstrip(":").isdigit()
                                        for ln in lines[:starts[0]])
    if not starts:
        sections = [(0, len(lines))]
    else:
        bounds = starts + [len(lines)]
        sections = [(bounds[k], bounds[k + 1]) for k in range(len(starts))]
        if starts[0] > 0 and not embedded:
            sections.insert(0, (0, starts[0]))  # threads pasted before the first header
    for k, (a, b) in enumerate(sections):
        dump = _parse_section(lines, a, b, embedded)
        if _has_content(dump) or not embedded:
            out.dumps.append(dump)
    if any(_has_content(x) for x in out.dumps):
        # a stretch around the dumps without dump content (blank lines, a date, a prompt) is left out, said once
        for x in out.dumps:
            if not _has_content(x) and x.unrecognized.count:
                out.notes.append(f"lines {x.first_line}-{x.last_line}: {x.unrecognized.count} line(s) that are not thread "
                                 f"dump output around the dump(s), left out (first: {x.unrecognized.samples[0].text[:80]!r})")
        out.dumps = [x for x in out.dumps if _has_content(x)]
    for k, x in enumerate(out.dumps):
        x.index = k
    if not out.dumps or all(not _has_content(x) for x in out.dumps):
        reasons = [r for x in out.dumps for r in x.unparsable] or ["no thread dump content recognised"]
        out.unparsable.extend(dict.fromkeys(reasons))
    else:
        for x in out.dumps:
            out.unparsable.extend(r for r in x.unparsable if r not in out.unparsable)
    link_virtual_threads(out.dumps)
    return out


def parse_jstack(data: bytes | str | None) -> JstackDump:
    """The first dump of the file (for callers that expect one); see parse_thread_dumps for all of them."""
    td = parse_thread_dumps(data)
    if not td.dumps:
        dump = JstackDump(complete=False, unparsable=list(td.unparsable) or ["no thread dump content recognised"])
        return dump
    first = td.dumps[0]
    if len(td.dumps) > 1:
        first.notes.append(f"{len(td.dumps)} dumps in this file; parse_thread_dumps() returns all of them")
    return first


def _parse_section(lines: list[str], a: int, b: int, embedded: bool) -> JstackDump:
    return _Section(lines, a, b, embedded).parse()


class _Section:
    """One dump's lines ``[a, b)`` read into a JstackDump: markers (dump and deadlock-report headings, separators, the
    timestamp, SMR info), jstack's deadlock report, thread headers, and each thread's lines (state, frames, locks,
    ownable synchronizers); then what the whole says about completeness."""

    def __init__(self, lines: list[str], a: int, b: int, embedded: bool) -> None:
        self.lines, self.a, self.b, self.embedded = lines, a, b, embedded
        self.dump = JstackDump(first_line=a + 1, last_line=b, total_lines=b - a)
        self.mode = "top"  # top | thread | ownable | dl_summary | dl_stacks | after
        self.cur: ThreadInfo | None = None
        self.dl_cur: DeadlockEntry | None = None
        self.dl_list: list[DeadlockEntry] | None = None
        self.dl_open = False
        self.saw_trailer = False
        self.recognized = 0
        self.nonblank = 0

    def parse(self) -> JstackDump:
        for idx in range(self.a, self.b):
            i = idx + 1
            if not i & 0xFFF:
                check_budget(f"line {i}")
            ln = self.lines[idx]
            if not ln.strip():
                continue
            if self.mode == "after" and not ln.startswith("Found one Java-level deadlock:"):
                continue  # after the JNI trailer: jstack's deadlock report may follow; else heap summary / the log around
            self.nonblank += 1
            self._line(idx, i, ln)
        self._close_thread()
        self._finish()
        return self.dump

    def _close_thread(self) -> None:
        if self.cur is not None:
            (self.dump.deadlock_stacks if self.cur.source == "deadlock_stacks" else self.dump.threads).append(self.cur)
        self.cur = None

    def _line(self, idx: int, i: int, ln: str) -> None:
        if self._marker(ln):
            self.recognized += 1
            return
        if ln[0] == '"' and self.mode in ("top", "thread") and _short_header(ln) is not None \
                and _next_nonblank(self.lines, idx, self.b).startswith(_REPORT_WAIT):
            # jstack's deadlock report pasted without its 'Found one Java-level deadlock:' heading
            self._close_thread()
            self.dl_list = []
            self.dump.deadlocks.append(self.dl_list)
            self.mode = "dl_summary"
            self.dump.notes.append(f"line {i}: jstack's deadlock report without its 'Found one Java-level deadlock:' "
                                   "heading (an excerpt); its entries are read as the report")
        if self.mode == "dl_summary":
            if self._report_line(idx, i, ln):
                self.recognized += 1
            else:
                self.dump.unrecognized.add(i, ln)
            return
        if ln[0] == '"' and self._thread_header(i, ln):
            self.recognized += 1
            return
        if self.cur is None:
            if not self.embedded:
                self.dump.unrecognized.add(i, ln)
            return
        if not ln[0].isspace():
            if self.embedded:  # the dump ended: back to the surrounding log
                self._close_thread()
                self.mode = "after"
                return
            self.dump.unrecognized.add(i, ln)
            return
        self.cur.last_line = i
        if self._thread_line(i, ln):
            self.recognized += 1
        else:
            self.dump.unrecognized.add(i, ln)

    def _marker(self, ln: str) -> bool:
        """A heading, separator, timestamp or SMR line (True: recognised, nothing more to read on it)."""
        dump, c0 = self.dump, ln[0]
        if c0 == "F":
            if ln.startswith("Full thread dump "):
                dump.full_dump = True
                dump.jvm = ln[len("Full thread dump "):].rstrip().rstrip(":")
                return True
            if ln.startswith("Found one Java-level deadlock:"):
                self._close_thread()
                self.dl_list = []
                dump.deadlocks.append(self.dl_list)
                self.dl_open, self.mode = True, "dl_summary"
                return True
            m = _DL_END.match(ln)
            if m:
                self._close_thread()
                dump.reported_deadlock_count = int(m.group("n"))
                self.dl_open, self.mode = False, "top"
                return True
        if c0 == "J":
            if ln.startswith("Java stack information for the threads listed above:"):
                self._close_thread()
                self.mode = "dl_stacks"
                return True
            if ln.startswith("JNI global ref"):
                self._close_thread()
                self.saw_trailer = True
                self.mode = "after" if self.embedded or dump.full_dump else "top"
                return True
        if c0 == "=" and not ln.strip("="):
            return True
        if _TIMESTAMP.match(ln) and dump.timestamp is None and not dump.threads:
            dump.timestamp = ln.strip()
            return True
        return self.mode == "top" and (ln.startswith("Threads class SMR info:") or ln.startswith("_java_thread_list=")
                                       or ln.strip() == "}" or ln.rstrip().rstrip(":").isdigit() or bool(_SMR_BODY.match(ln)))

    def _report_line(self, idx: int, i: int, ln: str) -> bool:
        """A line of jstack's deadlock report (True: recognised)."""
        name = _short_header(ln)
        if name is not None and _next_nonblank(self.lines, idx, self.b).startswith(_STACK_LINE):
            # the report's stacks without their 'Java stack information' heading: a stack, not a third entry
            self._close_thread()
            self.cur = ThreadInfo(name=name, line=i, header_text=ln.strip(), source="deadlock_stacks")
            self.mode = "dl_stacks"
            self.dump.notes.append(f"line {i}: the deadlock report's stacks follow without their 'Java stack information' "
                                   "heading")
            return True
        if name is not None:
            self.dl_cur = DeadlockEntry(thread=name, line=i)
            assert self.dl_list is not None
            self.dl_list.append(self.dl_cur)
            return True
        entry = self.dl_cur
        if entry is None:
            return False
        m = _DL_WAIT_MON.match(ln)
        if m:
            entry.kind, entry.address, entry.cls = "monitor", m.group("addr"), m.group("cls")
            return True
        m = _DL_WAIT_SYNC.match(ln)
        if m:
            entry.kind, entry.address, entry.cls = "synchronizer", m.group("addr"), m.group("cls")
            return True
        s = ln.strip()
        if s.startswith("waiting to lock") or s.startswith("waiting for"):
            entry.kind = "other"
            return True
        if s.startswith("which is held by"):
            held = s[len("which is held by"):].strip()
            entry.held_by = held[1:-1] if held.startswith('"') and held.endswith('"') else held
            entry.held_line = i
            return True
        return False

    def _thread_header(self, i: int, ln: str) -> bool:
        """A thread's header line, in any of the formats read (True: a new thread begins)."""
        if self.mode == "dl_stacks":
            name = _short_header(ln)
            if name is not None:
                self._close_thread()
                self.cur = ThreadInfo(name=name, line=i, header_text=ln.strip(), source="deadlock_stacks")
                return True
        m = _VISUALVM.match(ln)
        if m:
            self._close_thread()
            self.cur = ThreadInfo(name=m.group("name"), line=i, header_text=ln.strip(), tid=f"t@{m.group('tid')}")
            self.dump.format = "visualvm"
            self.mode = "thread"
            return True
        t = _read_header(ln)
        if t is not None:
            self._close_thread()
            t.line = i
            self.cur = t
            self.mode = "thread"
            return True
        if _short_header(ln) is not None and self.mode == "top":
            # an excerpt of a deadlock report's stacks without its heading
            self._close_thread()
            self.cur = ThreadInfo(name=_short_header(ln), line=i, header_text=ln.strip(), source="deadlock_stacks")
            self.mode = "dl_stacks"
            return True
        return False

    def _thread_line(self, i: int, ln: str) -> bool:
        """An indented line of the current thread: its state, a frame, a lock, its ownable synchronizers."""
        cur = self.cur
        assert cur is not None
        s = ln.strip()
        if _OWNABLE_HDR.match(ln):
            self.dump.ownable_info = True
            self.mode = "ownable"
            return True
        if self.mode == "ownable":
            m = _OWNABLE.match(ln)
            if m:
                cur.ownable_synchronizers.append(LockRef(_addr(m.group("addr")), m.group("cls"), i, None, s))
                return True
            if _NONE.match(ln):
                return True
        if s.startswith("java.lang.Thread.State:"):
            m = _STATE.match(ln)
            if m:
                cur.state, cur.state_detail, cur.state_line = m.group("state"), m.group("detail"), i
                return True
        if s.startswith("at "):
            cur.frames.append(Frame(s[3:].strip(), i))
            return True
        if s.startswith("Carrying virtual thread"):
            m = _CARRYING.match(ln)
            if m:
                cur.carrying, cur.carrying_line = int(m.group("tid")), i
                return True
        if s.startswith("- ") and self._lock_line(cur, i, ln, s):
            return True
        return bool(_COMPILER.match(ln))

    @staticmethod
    def _lock_line(cur: ThreadInfo, i: int, ln: str, s: str) -> bool:
        m = _LOCK.match(ln)
        if m:
            fi = len(cur.frames) - 1 if cur.frames else None
            ref = LockRef(_addr(m.group("addr")), m.group("cls"), i, fi, s, m.group("owner"),
                          f"t@{m.group('owner_tid')}" if m.group("owner_tid") else None)
            verb = m.group("verb")
            if verb == "locked":
                cur.locked.append(ref)
            elif verb in ("waiting to lock", "waiting to re-lock in wait()"):
                cur.waiting_to_lock = cur.waiting_to_lock or ref
            elif verb == "waiting on":
                cur.waiting_on.append(ref)
            elif verb == "parking to wait for":
                cur.parking_for = cur.parking_for or ref
            return True  # "eliminated": recognised and ignored (lock elided by the JIT)
        return bool(_LOCK_NOREF.match(ln))

    def _finish(self) -> None:
        """What the whole section says: a cut dump, inferred deadlock states, an excerpt, what could not be read."""
        dump = self.dump
        if dump.full_dump and not self.saw_trailer and dump.format == "jstack":
            dump.notes.append("no 'JNI global refs' line after the threads: normal for older JVMs and some tools, "
                              "or the dump was cut (last thread: " + (repr(dump.threads[-1].name) if dump.threads else "none") + ")")
        for t in dump.deadlock_stacks:
            if t.state is None and t.awaited is not None:
                t.state = "BLOCKED" if t.waiting_to_lock else "WAITING"
                t.state_detail = "inferred from the deadlock section"
        if dump.deadlock_stacks and not dump.threads and not dump.full_dump:
            dump.format = "excerpt" if dump.format == "jstack" else dump.format
        if self.recognized == 0:
            dump.unparsable.append("no thread dump content recognised (no thread headers, no deadlock section)")
            dump.complete = False
        elif not dump.threads and not dump.deadlock_stacks and not dump.deadlocks:
            dump.unparsable.append("no threads found")
            dump.complete = False
        if self.dl_open:
            dump.complete = False
            if all(e.held_by for dl in dump.deadlocks for e in dl):
                dump.notes.append("the deadlock report ends without its 'Found N deadlock(s).' line (an excerpt); every "
                                  "entry names its holder")
            else:
                dump.unparsable.append("truncated deadlock section: no 'Found N deadlock(s).' line")
        for dl in dump.deadlocks:
            for e in dl:
                if e.held_by is None:
                    dump.complete = False
                    dump.unparsable.append(f"deadlock entry for {e.thread!r} at line {e.line} has no 'which is held by' line")
        if dump.unrecognized.count and dump.unrecognized.count * 2 > self.nonblank:
            dump.unparsable.append(
                f"{dump.unrecognized.count} of {self.nonblank} non-blank lines are not thread dump output "
                f"(first at line {dump.unrecognized.samples[0].line})")


def _addr(a: str) -> str:
    return a if a.lower().startswith("0x") else "0x" + a


# ---------------------------------------------------------------- virtual threads


def link_virtual_threads(dumps: list[JstackDump]) -> list[tuple[ThreadInfo, ThreadInfo]]:
    """(carrier, virtual thread) pairs: a carrier's 'Carrying virtual thread #N' names the virtual thread whose tid is
    N (``#N "" virtual`` in jcmd's Thread.dump_to_file). Sets ``carrier`` on each virtual thread found."""
    virtual: dict[int, ThreadInfo] = {}
    for d in dumps:
        for t in d.threads:
            if t.virtual and t.number is not None:
                virtual.setdefault(t.number, t)
    pairs = []
    for d in dumps:
        for t in d.threads:
            v = virtual.get(t.carrying) if t.carrying is not None else None
            if v is not None:
                v.carrier = t.name
                pairs.append((t, v))
    return pairs


# ---------------------------------------------------------------- jcmd Thread.dump_to_file -format=text


def _is_text_dump(lines: list[str]) -> bool:
    """JDK 21+'s plain-text dump: a pid line, an ISO-8601 instant, the runtime version, then '#<tid> "<name>"'
    headers (no 'Full thread dump' line, no quoted-name headers)."""
    head = [ln for ln in lines[:40] if ln.strip()][:10]
    return (any(_ISO_INSTANT.match(ln) for ln in head) and any(_TEXT_HEADER.match(ln) for ln in head)
            and not any(ln.startswith(('"', "Full thread dump ")) for ln in head))


def parse_text_dump(lines: list[str]) -> JstackDump:
    """``jcmd PID Thread.dump_to_file -format=text``: every platform and virtual thread (virtual threads that are not
    mounted appear only here), with their stacks; JDK 21 prints neither states nor locks."""
    dump = JstackDump(format="text", full_dump=True, first_line=1, last_line=len(lines), total_lines=len(lines))
    cur: ThreadInfo | None = None
    nonblank = 0
    for idx, ln in enumerate(lines):
        i = idx + 1
        if not i & 0xFFF:
            check_budget(f"line {i}")
        if not ln.strip():
            continue
        nonblank += 1
        m = _TEXT_HEADER.match(ln)
        if m:
            if cur is not None:
                dump.threads.append(cur)
            rest = m.group("rest").split()
            cur = ThreadInfo(name=m.group("name"), line=i, header_text=ln.strip(), number=int(m.group("tid")),
                             tid=m.group("tid"), virtual="virtual" in rest)
            cur.state = next((w for w in rest if w.isupper() and w != "virtual"), None)
            continue
        if cur is None:  # the preamble: pid, time, runtime version
            s = ln.strip()
            if _ISO_INSTANT.match(s) and dump.timestamp is None:
                dump.timestamp = s
            elif s.isdigit() or (dump.timestamp and dump.jvm is None and s[:1].isdigit() and " " not in s):
                dump.jvm = s if not s.isdigit() else dump.jvm
            else:
                dump.unrecognized.add(i, ln)
            continue
        if ln[0].isspace():
            cur.frames.append(Frame(ln.strip(), i))
            cur.last_line = i
            continue
        dump.unrecognized.add(i, ln)
    if cur is not None:
        dump.threads.append(cur)
    if not dump.threads:
        dump.unparsable.append("no threads in the text dump")
    else:
        dump.notes.append("jcmd Thread.dump_to_file text format (JDK 21+): thread names and stacks only, no states or lock "
                          "information; lock cycles cannot be derived from it (take a jstack too)")
    if dump.unrecognized.count and dump.unrecognized.count * 2 > nonblank:
        dump.unparsable.append(f"{dump.unrecognized.count} of {nonblank} non-blank lines are not thread dump output "
                               f"(first at line {dump.unrecognized.samples[0].line})")
    return dump


# ---------------------------------------------------------------- jcmd JSON


def parse_json_dump(text: str) -> JstackDump:
    """``jcmd PID Thread.dump_to_file -format=json``. Line numbers are not meaningful in JSON: every thread
    cites line 1 and its position (``#k``) in its container."""
    dump = JstackDump(format="json", full_dump=True, first_line=1, last_line=text.count("\n") + 1)
    try:
        doc = json.loads(text)
        td = doc["threadDump"]
        containers = td.get("threadContainers") or []
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        dump.unparsable.append(f"not a jcmd JSON thread dump: {exc.__class__.__name__}: {exc}")
        dump.complete = False
        return dump
    dump.timestamp = str(td.get("time") or "") or None
    dump.jvm = str(td.get("runtimeVersion") or "") or None
    pos = 0
    for c in containers:
        for t in (c.get("threads") or []) if isinstance(c, dict) else []:
            if not isinstance(t, dict):
                continue
            pos += 1
            tid = str(t.get("tid")) if t.get("tid") is not None else None
            th = ThreadInfo(name=str(t.get("name") or ""), line=1, header_text=f"#{pos} tid={tid} {t.get('name')!r}",
                            tid=tid, state=t.get("state"), virtual=bool(t.get("virtual")))
            for k, fr in enumerate(t.get("stack") or []):
                th.frames.append(Frame(str(fr), 1))
            if t.get("blockedOn"):
                th.waiting_to_lock = LockRef(str(t["blockedOn"]), str(t["blockedOn"]).split("@", 1)[0], 1, 0, f"blockedOn {t['blockedOn']}")
            pb = t.get("parkBlocker")
            if isinstance(pb, dict) and pb.get("object"):
                owner = pb.get("owner")
                th.parking_for = LockRef(str(pb["object"]), str(pb["object"]).split("@", 1)[0], 1, 0, f"parkBlocker {pb['object']}",
                                         None, str(owner) if owner is not None else None)
            for mo in t.get("monitorsOwned") or []:
                if isinstance(mo, dict):
                    for lk in mo.get("locks") or []:
                        if lk:
                            th.locked.append(LockRef(str(lk), str(lk).split("@", 1)[0], 1, mo.get("depth"), f"owns {lk}"))
            if t.get("waitingOn"):
                th.waiting_on.append(LockRef(str(t["waitingOn"]), str(t["waitingOn"]).split("@", 1)[0], 1, 0, f"waitingOn {t['waitingOn']}"))
            dump.threads.append(th)
    if not dump.threads:
        dump.unparsable.append("no threads in the JSON dump")
    elif not any(t.state for t in dump.threads):
        dump.notes.append("JSON thread dump format 1 (JDK 19-24): no thread states or lock information; "
                          "lock cycles cannot be derived from it (take a jstack too)")
    return dump
