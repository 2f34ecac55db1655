"""Parser for `jstack -l` / `jcmd Thread.print` output (JDK 8 and JDK 11+), and for bare excerpts
that hold only the `Found one Java-level deadlock:` section and its "Java stack information".

Pure: takes text/bytes, returns a JstackDump. Line numbers are 1-based lines of the given text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import LineTally, decode

# "name" #12 daemon prio=5 os_prio=0 cpu=.. elapsed=.. tid=0x.. nid=0x.. waiting for monitor entry  [0x..]
_HEADER = re.compile(r'^"(?P<name>.*)"(?P<rest>(?: #\d+| daemon| prio=| os_prio=| cpu=| tid=| nid=| \w).*)?$')
_SHORT_HEADER = re.compile(r'^"(?P<name>.*)":\s*$')  # deadlock section and its stack list
_STATE = re.compile(r"^\s+java\.lang\.Thread\.State: (?P<state>[A-Z_]+)(?: \((?P<detail>[^)]*)\))?\s*$")
_FRAME = re.compile(r"^\s+at (?P<frame>\S.*?)\s*$")
_LOCK = re.compile(
    r"^\s+- (?P<verb>locked|waiting to lock|waiting on|parking to wait for|eliminated|"
    r"waiting to re-lock in wait\(\))\s+<(?P<addr>0x[0-9a-fA-F]+)> \(a (?P<cls>[^)]+)\)\s*$"
)
_LOCK_NOREF = re.compile(r"^\s+- (waiting on|locked) <no object reference available>\s*$")
_OWNABLE_HDR = re.compile(r"^\s+Locked ownable synchronizers:\s*$")
_OWNABLE = re.compile(r"^\s+- <(?P<addr>0x[0-9a-fA-F]+)> \(a (?P<cls>[^)]+)\)\s*$")
_NONE = re.compile(r"^\s+- None\s*$")
_DL_START = re.compile(r"^Found one Java-level deadlock:\s*$")
_DL_WAIT_MON = re.compile(
    r"^\s+waiting to lock monitor (?P<mon>0x[0-9a-fA-F]+) \(object (?P<addr>0x[0-9a-fA-F]+), a (?P<cls>[^)]+)\),?\s*$"
)
_DL_WAIT_SYNC = re.compile(
    r"^\s+waiting for ownable synchronizer (?P<addr>0x[0-9a-fA-F]+),? \(a (?P<cls>[^)]+)\),?\s*$"
)
_DL_WAIT_OTHER = re.compile(r"^\s+waiting (?:to lock|for) .*$")
_DL_HELD = re.compile(r'^\s+which is held by (?:"(?P<name>.*)"|(?P<other>\S.*?))\s*$')
_DL_STACKS = re.compile(r"^Java stack information for the threads listed above:\s*$")
_DL_END = re.compile(r"^Found (?P<n>\d+) deadlocks?\.\s*$")
_RULE = re.compile(r"^=+\s*$")
_FULL_DUMP = re.compile(r"^Full thread dump (?P<jvm>.*?):?\s*$")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s*$")
_TRAILER = re.compile(r"^JNI global (?:refs?|references)\b.*$")
_SMR = re.compile(r"^(Threads class SMR info:|_java_thread_list=.*|\s*0x[0-9a-fA-F]+(?:, 0x[0-9a-fA-F]+)*,?\s*|\})\s*$")
_JCMD_PID = re.compile(r"^\d+:\s*$")
_TID = re.compile(r"\btid=(0x[0-9a-fA-F]+)")
_NID = re.compile(r"\bnid=(0x[0-9a-fA-F]+|\d+)")
_NUM = re.compile(r"^ #(\d+)")
_COMPILER = re.compile(r"^\s+(No compile task|Compiling:.*)\s*$")


@dataclass(frozen=True)
class LockRef:
    address: str
    cls: str
    line: int
    frame_index: int | None = None  # index of the frame the lock line belongs to
    text: str = ""  # the line as printed (stripped)

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
    source: str = "dump"  # "dump" (full thread dump) | "deadlock_stacks" (stack list of the deadlock section)
    number: int | None = None
    daemon: bool = False
    tid: str | None = None
    nid: str | None = None
    header_state: str = ""  # text after nid=..: "waiting for monitor entry"
    state: str | None = None  # BLOCKED, WAITING, RUNNABLE, ...
    state_detail: str | None = None
    state_line: int | None = None
    frames: list[Frame] = field(default_factory=list)
    locked: list[LockRef] = field(default_factory=list)  # "- locked" monitors
    waiting_to_lock: LockRef | None = None  # "- waiting to lock" / "waiting to re-lock in wait()"
    waiting_on: list[LockRef] = field(default_factory=list)  # "- waiting on" (Object.wait: monitor released)
    parking_for: LockRef | None = None  # "- parking to wait for" (j.u.c. synchronizer)
    ownable_synchronizers: list[LockRef] = field(default_factory=list)
    last_line: int = 0

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

    def top_frames(self, n: int = 3) -> tuple[str, ...]:
        return tuple(f.text for f in self.frames[:n])

    def to_dict(self) -> dict:
        aw = self.awaited
        return {
            "name": self.name,
            "line": self.line,
            "source": self.source,
            "tid": self.tid,
            "nid": self.nid,
            "daemon": self.daemon,
            "state": self.state,
            "state_detail": self.state_detail,
            "frames": [{"text": f.text, "line": f.line} for f in self.frames],
            "locked": [l.to_dict() for l in self.locked],
            "ownable_synchronizers": [l.to_dict() for l in self.ownable_synchronizers],
            "awaited": aw.to_dict() if aw else None,
            "awaited_kind": self.awaited_kind,
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
    threads: list[ThreadInfo] = field(default_factory=list)  # from the full thread dump
    deadlock_stacks: list[ThreadInfo] = field(default_factory=list)  # from "Java stack information ..."
    deadlocks: list[list[DeadlockEntry]] = field(default_factory=list)  # jstack's own report, one list per cycle
    reported_deadlock_count: int | None = None  # "Found N deadlocks."
    timestamp: str | None = None
    jvm: str | None = None
    full_dump: bool = False
    complete: bool = True
    total_lines: int = 0
    unparsable: list[str] = field(default_factory=list)
    unrecognized: LineTally = field(default_factory=LineTally)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def all_threads(self) -> list[ThreadInfo]:
        """Threads of the full dump, plus deadlock-section stacks of threads the dump does not have."""
        names = {t.name for t in self.threads}
        return list(self.threads) + [t for t in self.deadlock_stacks if t.name not in names]

    def thread(self, name: str) -> ThreadInfo | None:
        return next((t for t in self.all_threads() if t.name == name), None)


def strip_deadlock_section(text: str) -> str:
    """Remove every `Found one Java-level deadlock:` block (up to and including `Found N deadlock(s).`).

    Used by tests and by callers that want to prove the cycle detection does not depend on it.
    Line count is preserved (removed lines become empty) so line citations stay valid.
    """
    out, inside = [], False
    for ln in text.split("\n"):
        if _DL_START.match(ln):
            inside = True
        if inside:
            out.append("")
            if _DL_END.match(ln):
                inside = False
            continue
        out.append(ln)
    return "\n".join(out)


def parse_jstack(data: bytes | str | None) -> JstackDump:
    text, problems = decode(data)
    dump = JstackDump()
    if problems:
        dump.unparsable.extend(problems)
        dump.complete = False
        return dump
    lines = text.splitlines()
    dump.total_lines = len(lines)

    mode = "top"  # top | thread | ownable | dl_summary | dl_stacks
    cur: ThreadInfo | None = None
    dl_cur: DeadlockEntry | None = None
    dl_list: list[DeadlockEntry] | None = None
    dl_open = False
    saw_trailer = False
    recognized = 0

    def close_thread() -> None:
        nonlocal cur
        if cur is not None:
            (dump.deadlock_stacks if cur.source == "deadlock_stacks" else dump.threads).append(cur)
        cur = None

    for i, raw in enumerate(lines, start=1):
        ln = raw.rstrip("\r")
        if not ln.strip():
            if mode in ("thread", "ownable") and cur is not None:
                cur.last_line = cur.last_line or i - 1
            continue
        # section switches
        if _DL_START.match(ln):
            close_thread()
            dl_list = []
            dump.deadlocks.append(dl_list)
            dl_open = True
            mode = "dl_summary"
            recognized += 1
            continue
        if _DL_STACKS.match(ln):
            close_thread()
            mode = "dl_stacks"
            recognized += 1
            continue
        m = _DL_END.match(ln)
        if m:
            close_thread()
            dump.reported_deadlock_count = int(m.group("n"))
            dl_open = False
            mode = "top"
            recognized += 1
            continue
        if _RULE.match(ln):
            recognized += 1
            continue
        m = _FULL_DUMP.match(ln)
        if m:
            dump.full_dump = True
            dump.jvm = m.group("jvm")
            recognized += 1
            continue
        if _TIMESTAMP.match(ln) and dump.timestamp is None and not dump.threads:
            dump.timestamp = ln.strip()
            recognized += 1
            continue
        if _TRAILER.match(ln):
            close_thread()
            saw_trailer = True
            mode = "top"
            recognized += 1
            continue
        if mode == "top" and (_SMR.match(ln) or _JCMD_PID.match(ln)):
            recognized += 1
            continue

        if mode == "dl_summary":
            m = _SHORT_HEADER.match(ln)
            if m:
                dl_cur = DeadlockEntry(thread=m.group("name"), line=i)
                assert dl_list is not None
                dl_list.append(dl_cur)
                recognized += 1
                continue
            if dl_cur is not None:
                m = _DL_WAIT_MON.match(ln)
                if m:
                    dl_cur.kind, dl_cur.address, dl_cur.cls = "monitor", m.group("addr"), m.group("cls")
                    recognized += 1
                    continue
                m = _DL_WAIT_SYNC.match(ln)
                if m:
                    dl_cur.kind, dl_cur.address, dl_cur.cls = "synchronizer", m.group("addr"), m.group("cls")
                    recognized += 1
                    continue
                if _DL_WAIT_OTHER.match(ln):
                    dl_cur.kind = "other"
                    recognized += 1
                    continue
                m = _DL_HELD.match(ln)
                if m:
                    dl_cur.held_by = m.group("name") if m.group("name") is not None else m.group("other")
                    dl_cur.held_line = i
                    recognized += 1
                    continue
            dump.unrecognized.add(i, ln)
            continue

        # thread headers
        if mode == "dl_stacks":
            m = _SHORT_HEADER.match(ln)
            if m:
                close_thread()
                cur = ThreadInfo(name=m.group("name"), line=i, header_text=ln.strip(), source="deadlock_stacks")
                recognized += 1
                continue
        m = _HEADER.match(ln) if not ln[0].isspace() else None
        if m and not _SHORT_HEADER.match(ln):
            close_thread()
            rest = m.group("rest") or ""
            cur = ThreadInfo(name=m.group("name"), line=i, header_text=ln.strip())
            nm = _NUM.match(rest)
            cur.number = int(nm.group(1)) if nm else None
            cur.daemon = " daemon " in rest + " "
            t = _TID.search(rest)
            cur.tid = t.group(1) if t else None
            n = _NID.search(rest)
            cur.nid = n.group(1) if n else None
            hs = re.search(r"\bnid=\S+\s+(?P<s>[^\[]*?)\s*(?:\[0x[0-9a-fA-F]+\])?\s*$", rest)
            cur.header_state = hs.group("s").strip() if hs else ""
            mode = "thread"
            recognized += 1
            continue

        if cur is None:
            dump.unrecognized.add(i, ln)
            continue
        cur.last_line = i
        if _OWNABLE_HDR.match(ln):
            mode = "ownable"
            recognized += 1
            continue
        if mode == "ownable":
            m = _OWNABLE.match(ln)
            if m:
                cur.ownable_synchronizers.append(LockRef(m.group("addr"), m.group("cls"), i, None, ln.strip()))
                recognized += 1
                continue
            if _NONE.match(ln):
                recognized += 1
                continue
            dump.unrecognized.add(i, ln)
            continue
        m = _STATE.match(ln)
        if m:
            cur.state, cur.state_detail, cur.state_line = m.group("state"), m.group("detail"), i
            recognized += 1
            continue
        m = _FRAME.match(ln)
        if m:
            cur.frames.append(Frame(m.group("frame"), i))
            recognized += 1
            continue
        m = _LOCK.match(ln)
        if m:
            fi = len(cur.frames) - 1 if cur.frames else None
            ref = LockRef(m.group("addr"), m.group("cls"), i, fi, ln.strip())
            verb = m.group("verb")
            if verb == "locked":
                cur.locked.append(ref)
            elif verb in ("waiting to lock", "waiting to re-lock in wait()"):
                cur.waiting_to_lock = cur.waiting_to_lock or ref
            elif verb == "waiting on":
                cur.waiting_on.append(ref)
            elif verb == "parking to wait for":
                cur.parking_for = cur.parking_for or ref
            recognized += 1  # "eliminated" is recognised and ignored (lock elided by the JIT)
            continue
        if _LOCK_NOREF.match(ln) or _COMPILER.match(ln):
            recognized += 1
            continue
        dump.unrecognized.add(i, ln)
    close_thread()

    # Derive thread states for excerpt stacks that have no State: line.
    for t in dump.deadlock_stacks:
        if t.state is None and t.awaited is not None:
            t.state = "BLOCKED" if t.waiting_to_lock else "WAITING"
            t.state_detail = "inferred from the deadlock section"

    if recognized == 0:
        dump.unparsable.append("no thread dump content recognised (no thread headers, no deadlock section)")
        dump.complete = False
    elif not dump.threads and not dump.deadlock_stacks and not dump.deadlocks:
        dump.unparsable.append("no threads found")
        dump.complete = False
    if dump.full_dump and not saw_trailer:
        dump.complete = False
        last = dump.threads[-1].name if dump.threads else None
        dump.unparsable.append(
            f"truncated thread dump: no 'JNI global refs' trailer after line {dump.total_lines}"
            + (f" (last thread parsed: {last!r})" if last else "")
        )
    if dl_open:
        dump.complete = False
        dump.unparsable.append("truncated deadlock section: no 'Found N deadlock(s).' line")
    for dl in dump.deadlocks:
        for e in dl:
            if e.held_by is None:
                dump.complete = False
                dump.unparsable.append(f"deadlock entry for {e.thread!r} at line {e.line} has no 'which is held by' line")
    total_nonblank = sum(1 for l in lines if l.strip())
    if dump.unrecognized.count and dump.unrecognized.count * 2 > total_nonblank:
        dump.unparsable.append(
            f"{dump.unrecognized.count} of {total_nonblank} non-blank lines are not jstack output "
            f"(first at line {dump.unrecognized.samples[0].line})"
        )
    return dump
