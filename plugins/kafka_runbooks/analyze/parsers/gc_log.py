"""JVM GC logs: stop-the-world pauses, so "a 9 s GC pause expired the ZooKeeper session" can be said.

- JDK 9+ unified logging (``-Xlog:gc*``, Kafka's default ``time,tags`` decorations and the default
  ``uptime,level,tags``):  ``[2026-11-22T13:57:32.123+0000][gc] GC(3) Pause Young (Normal) (G1 Evacuation Pause) 24M->4M(256M) 7.160ms``
  and safepoint lines: JDK 9-16 ``Total time for which application threads were stopped: 0.0123 seconds``, JDK 17+
  ``Safepoint "G1CollectFull", Time since last: .. ns, Reaching safepoint: .. ns, ..., Total: 1246912 ns``. A GC
  pause and the safepoint line after it are one stop of the application (``GcLog.stops``), counted once.
- JDK 8 ``-XX:+PrintGCDetails [-XX:+PrintGCDateStamps] [-XX:+PrintGCTimeStamps]``: ``[GC (Allocation Failure) ...,
  0.0070479 secs]``, ``[Full GC (...) ..., 1.1821630 secs]``, G1 ``[GC pause (G1 Evacuation Pause) (young), 0.0123 secs]``
  with the pause's wall time from the ``[Times: user=.. sys=.., real=N secs]`` line that closes the event.

Only stop-the-world pauses are pauses. JDK 8: ``[GC pause ...`` (G1 young / mixed, with or without initial-mark),
``[GC remark ...``, ``[GC cleanup ...`` (G1's STW phases of a marking cycle), ``[Full GC ...``, and ``[GC (cause)``,
``[GC [ParNew|PSYoungGen|DefNew...``, ``[GC 123K->...`` (Parallel, Serial, ParNew, CMS's initial mark and final
remark). Not pauses: G1's ``[GC concurrent-...`` phases (``concurrent-mark-end, 6.5 secs`` ran beside the
application), CMS's ``[CMS-concurrent-...``, and the per-phase detail lines inside a G1 pause (``[GC Worker Start
(ms)``, ``[GC Worker End (ms)``, ``[GC ref-proc``). JDK 9+ (``-Xlog:gc``): ``GC(N) Pause Young|Mixed|Remark|
Cleanup|Full ...`` are pauses, ``GC(N) Concurrent ...`` are not. The concurrent phases are counted apart
(``GcLog.concurrent``) so a report can say they were seen and not counted.

Pure and linear: each line is read with anchored, bounded patterns and string searches.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .base import LineTally, decode_evidence, iter_lines

_UNIFIED = re.compile(r"\[(?P<deco>[^\]\n]{1,80})\](?:\[[^\]\n]{0,80}\]){0,6}\s{0,20}GC\((?P<gc>[0-9]{1,12})\) (?P<what>Pause [A-Za-z ()0-9.,:/_-]{1,120}?)"
                      r"(?: (?P<before>[0-9]{1,9})[MKG]->(?P<after>[0-9]{1,9})[MKG]\((?P<total>[0-9]{1,9})[MKG]\))? (?P<ms>[0-9]{1,9}\.[0-9]{1,6})ms\s{0,10}$",
                      re.ASCII)
_UNI_TIME = re.compile(r"\[(?P<t>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?(?:[+-][0-9]{4}|Z)?)\]", re.ASCII)
_UNI_UP = re.compile(r"\[(?P<up>[0-9]{1,12}\.[0-9]{1,6})s\]", re.ASCII)
_J8_PREFIX = re.compile(r"^(?:(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{4}): )?"
                        r"(?:(?P<up>[0-9]{1,12}\.[0-9]{3}): )?", re.ASCII)
_STOPPED = re.compile(r"Total time for which application threads were stopped: (?P<s>[0-9]{1,9}\.[0-9]{1,9}) seconds", re.ASCII)
# JDK 17+ -Xlog:safepoint: 'Safepoint "G1CollectFull", Time since last: .. ns, Reaching safepoint: .. ns, ..., Total: N ns'
_SAFEPOINT = re.compile(r'\[safepoint\s{0,20}\] Safepoint "(?P<op>[A-Za-z0-9_]{1,60})", .{0,200}?Total: (?P<ns>[0-9]{1,15}) ns', re.ASCII)
_J8_HEAD = re.compile(r"(?:(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}[+-][0-9]{4}): )?"
                      r"(?:(?P<up>[0-9]{1,12}\.[0-9]{3}): )?\[(?P<kind>Full GC|GC)\b", re.ASCII)
# what follows "[GC" in a JDK 8 event line that is a stop-the-world pause; "[GC concurrent-..." is a concurrent phase,
# anything else ("[GC Worker Start (ms): ...", "[GC ref-proc, ...") a detail line inside an event
_J8_STW = re.compile(r" ?(?:(?P<g1>pause)\b|(?P<remark>remark)\b|(?P<cleanup>cleanup)\b|\(|\[|[0-9]|--|,)", re.ASCII)
_J8_SECS = re.compile(r", (?P<s>[0-9]{1,9}\.[0-9]{4,9}) secs\]", re.ASCII)
_J8_REAL = re.compile(r"real=(?P<s>[0-9]{1,9}\.[0-9]{1,9}) secs", re.ASCII)
_J8_CAUSE = re.compile(r"\((?P<c>[A-Za-z0-9 .-]{1,60})\)", re.ASCII)


@dataclass(frozen=True)
class GcPause:
    line: int
    at: str | None  # ISO time as logged (with its zone), when the log carries one
    uptime_s: float | None
    seconds: float
    kind: str  # "young" | "full" | "remark" | "cleanup" | "mixed" | "initial-mark" | "safepoint" | "other"
    cause: str
    text: str

    def to_dict(self) -> dict:
        return {"line": self.line, "at": self.at, "uptime_s": self.uptime_s, "seconds": self.seconds,
                "kind": self.kind, "cause": self.cause}


@dataclass
class GcLog:
    pauses: list[GcPause] = field(default_factory=list)
    format: str | None = None  # "unified" | "jdk8"
    stopped: list[GcPause] = field(default_factory=list)  # "Total time ... stopped" safepoint lines
    concurrent: int = 0  # JDK 8 "[GC concurrent-..." / "[CMS-concurrent-..." lines (beside the application: not pauses)
    unrecognized: LineTally = field(default_factory=LineTally)
    notes: list[str] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def longest(self) -> GcPause | None:
        return max(self.stops(), key=lambda p: p.seconds, default=None)

    def stops(self) -> list[GcPause]:
        """Each time the application stood still, once. A safepoint line ("Total time for which application threads
        were stopped", ``-XX:+PrintGCApplicationStoppedTime`` or ``-Xlog:safepoint``) reports the whole stop of the
        GC pause(s) logged since the previous safepoint line (JDK 8 logs a young GC and the full GC that followed it
        inside one safepoint): they are one stop -- the longest pause's line, its length the safepoint's (or the
        pauses' sum, whichever is longer). A safepoint with no GC pause (a thread dump, a biased-lock revocation) is a
        stop of its own; a pause no safepoint line follows (a log without them) too."""
        out: list[GcPause] = []
        pending: list[GcPause] = []
        events = sorted([(p.line, 0, p) for p in self.pauses] + [(p.line, 1, p) for p in self.stopped], key=lambda e: e[:2])
        for _, is_safepoint, p in events:
            if not is_safepoint:
                pending.append(p)
                continue
            if pending:
                top = max(pending, key=lambda q: q.seconds)
                p = GcPause(top.line, top.at, top.uptime_s, max(p.seconds, sum(q.seconds for q in pending)), top.kind,
                            top.cause, top.text)
            out.append(p)
            pending = []
        return out + pending


def _kind(text: str) -> str:
    t = text.lower()
    for k in ("full", "young", "remark", "cleanup", "mixed"):
        if k in t:
            return k
    return "other"


def parse_gc_log(data: bytes | str | None) -> GcLog:
    d = decode_evidence(data)
    g = GcLog(notes=list(d.notes))
    if d.problems:
        g.unparsable.extend(d.problems)
        return g
    pending: tuple[int, str | None, float | None, str, str, str] | None = None  # a JDK 8 event waiting for [Times:]
    seen = 0
    for i, ln in iter_lines(d.text):
        if not ln.strip():
            continue
        seen += 1
        if "GC(" in ln and "Pause" in ln:
            m = _UNIFIED.search(ln) if ln.startswith("[") else None
            if m:
                g.format = g.format or "unified"
                tm, up = _UNI_TIME.match(ln), _UNI_UP.search(ln, 0, 200)
                g.pauses.append(GcPause(i, tm.group("t") if tm else None, float(up.group("up")) if up else None,
                                        float(m.group("ms")) / 1000.0, _kind(m.group("what")), m.group("what").strip(), ln[:300]))
                continue
        if "Safepoint \"" in ln:
            m = _SAFEPOINT.search(ln, 0, 400)
            if m:
                tm, up = _UNI_TIME.match(ln), _UNI_UP.search(ln, 0, 200)
                g.format = g.format or "unified"
                g.stopped.append(GcPause(i, tm.group("t") if tm else None, float(up.group("up")) if up else None,
                                         int(m.group("ns")) / 1e9, "safepoint", m.group("op"), ln[:300]))
                continue
        if "stopped:" in ln:
            m = _STOPPED.search(ln)
            if m:
                tm, j8 = _UNI_TIME.match(ln), _J8_PREFIX.match(ln)
                up = j8.group("up") if j8 else None
                g.stopped.append(GcPause(i, tm.group("t") if tm else (j8.group("date") if j8 else None),
                                         float(up) if up else None, float(m.group("s")), "safepoint",
                                         "application threads stopped", ln[:300]))
                continue
        if "[GC" in ln or "[Full GC" in ln:
            m = _J8_HEAD.match(ln.lstrip())
            if m:
                kind = _j8_kind(m.group("kind"), ln.lstrip()[m.end():m.end() + 200])
                if kind == "concurrent":
                    g.format = g.format or "jdk8"
                    g.concurrent += 1
                    continue
                if kind is None:
                    continue  # a detail line inside an event ([GC Worker End (ms): ...])
                g.format = g.format or "jdk8"
                if pending is not None:  # the previous event had no [Times:] line: use its own duration
                    _flush_j8(g, pending, None)
                cause = _J8_CAUSE.search(ln, m.end(), m.end() + 200)
                pending = (i, m.group("date"), float(m.group("up")) if m.group("up") else None, kind,
                           cause.group("c") if cause else "", ln)
                if "[Times:" in ln:
                    _flush_j8(g, pending, ln)
                    pending = None
                continue
        if "[CMS-concurrent-" in ln:  # CMS's concurrent phases (with their own [Times:]): not pauses
            g.format = g.format or "jdk8"
            g.concurrent += 1
            continue
        if "[Times:" in ln and pending is not None and "concurrent" not in ln:  # CMS's concurrent phases print [Times:] too
            _flush_j8(g, pending, ln)
            pending = None
            continue
        if ln.startswith("[") or ln.startswith(" ") or ln.startswith("\t") or "[" in ln[:40]:
            continue  # heap summaries, GC phase details, other -Xlog tags
        g.unrecognized.add(i, ln)
    if pending is not None:
        _flush_j8(g, pending, None)
    if not g.pauses and not g.stopped:
        g.unparsable.append(f"no GC pause recognised in {seen} non-blank lines")
    return g


def _j8_kind(head: str, rest: str) -> str | None:
    """The kind of a JDK 8 line starting ``[Full GC`` / ``[GC`` (``rest`` is what follows): a pause's kind,
    "concurrent" for a concurrent phase, None for a detail line of an event."""
    if head == "Full GC":
        return "full"
    if rest.startswith(" concurrent-"):
        return "concurrent"
    m = _J8_STW.match(rest)
    if not m:
        return None
    if m.group("remark") or "Final Remark" in rest[:40]:
        return "remark"
    if m.group("cleanup"):
        return "cleanup"
    if m.group("g1"):
        return "mixed" if "(mixed)" in rest else "young"
    return "initial-mark" if "Initial Mark" in rest[:40] else "young"


def _flush_j8(g: GcLog, p: tuple, times_line: str | None) -> None:
    i, date, up, kind, cause, head = p
    secs = None
    if times_line is not None:
        m = _J8_REAL.search(times_line)
        if m:
            secs = float(m.group("s"))
    if secs is None:  # the event's own duration (a concurrent phase's end printed inside its line is not it)
        ms = list(_J8_SECS.finditer(head.split("[GC concurrent-")[0]))
        if ms:
            secs = float(ms[-1].group("s"))
    if secs is not None:
        g.pauses.append(GcPause(i, date, up, secs, kind, cause, head[:300]))
