"""The broker's JVM and process: GC pauses long enough to expire a ZooKeeper session, and a process stopped
(SIGSTOP, a debugger) that serves nothing until continued."""

from __future__ import annotations

from collections import defaultdict

from ...model import Evidence, Finding, Severity
from ..parsed_file import ParsedFile
from ..parsers.misc import PROC_STATES
from .core import MAX_CITED_LINES, STALL_MS, broker_label, by_broker


def gc_by_broker(files: list[ParsedFile]) -> dict[int | None, list]:
    out: dict[int | None, list] = defaultdict(list)
    for b, fs in by_broker(files, "gc_log").items():
        for f in fs:
            for p in f.result.stops():  # a GC pause and the safepoint line of the same stop count once
                out[b].append((f, p))
    return out


def gc_findings(gc: dict[int | None, list]) -> list[Finding]:
    out = []
    for b, pauses in gc.items():
        long = [(f, p) for f, p in pauses if p.seconds * 1000 >= STALL_MS]
        if long:
            f, p = max(long, key=lambda x: x[1].seconds)
            out.append(Finding(kind="gc_pause_long", severity=Severity.WARNING,
                               summary=(f"{broker_label(b)}: {len(long)} GC pause(s) of {STALL_MS / 1000:.0f} s or more, the longest {p.seconds:.1f} s "
                                        f"at {p.at or ('uptime ' + str(p.uptime_s) + ' s')}: long enough to expire a ZooKeeper session"),
                               broker_ids=(b,) if b is not None else (),
                               evidence=(Evidence(f.path, tuple(x.line for _, x in long[:MAX_CITED_LINES]), "\n".join(f"{x.line}: {x.text}" for _, x in long[:5]), f.host),),
                               details={"pauses_s": [x.seconds for _, x in long][:50]}))
    return out


def process_findings(files: list[ParsedFile]) -> list[Finding]:
    """/proc/<pid>/stat of a broker (kind process_state): a STOPPED process (SIGSTOP, a debugger, a job-control
    stop) serves nothing and answers nothing until continued; it also explains its peers' fetch failures and its
    ZooKeeper session expiring."""
    out = []
    for b, fs in by_broker(files, "process_state").items():
        stopped = [(f, f.result.process) for f in fs if f.result.process and f.result.process.state in ("T", "t")]
        if not stopped:
            continue
        f, p = stopped[-1]
        out.append(Finding(
            kind="process_stopped", severity=Severity.CRITICAL,
            summary=(f"{broker_label(b)}'s process {p.tid} ({p.name}) is {PROC_STATES.get(p.state, p.state)} (state {p.state} in "
                     f"/proc/<pid>/stat, {len(stopped)} of {len(fs)} sample(s)): stopped by SIGSTOP, a debugger or job "
                     "control, it serves nothing until continued (SIGCONT)"),
            broker_ids=(b,) if b is not None else (),
            evidence=tuple(Evidence(g.path, (q.line,), f"{q.tid} ({q.name}) {q.state}", g.host) for g, q in stopped),
            details={"pid": p.tid, "state": p.state, "samples": len(fs), "stopped_samples": len(stopped)}))
    return out
