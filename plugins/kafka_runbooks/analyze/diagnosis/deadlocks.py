"""JVM deadlocks from thread dumps: every lock cycle (monitors and ownable synchronizers), who is blocked behind it,
the request handlers it stalls, stuck or progressing across successive dumps, known Kafka bugs it matches; and
waits on locks whose owner the dump does not show (a cycle through them can be neither shown nor ruled out)."""

from __future__ import annotations

import re

from ...model import Evidence, Finding, Severity
from ..known_bugs import make_signature, match_known_bugs, upgrade_advice
from ..lockgraph import (Cycle, LockEdge, WaitForGraph, blocked_behind, build_wait_for_graph, chain_into,
                         compare_dumps, find_cycles, stalled_request_handlers)
from ..parsed_file import ParsedFile
from ..parsers.jstack import JstackDump
from .core import MAX_CITED_LINES, broker_label, dumps_by_broker


def _thread_at(d: JstackDump, key: str, name: str):
    return d.by_key(key) or d.thread(name)


def _cycle_evidence(f: ParsedFile, dump: JstackDump, edges: list[LockEdge]) -> Evidence:
    lines: set[int] = set()
    excerpt: list[tuple[int, str]] = []
    entries = {x.thread: x for dl in dump.deadlocks for x in dl}
    for e in edges:
        t = _thread_at(dump, e.waiter_key, e.waiter)
        if t is None:
            x = entries.get(e.waiter)
            if x is not None:  # a thread the file shows only in jstack's report: cite its entry
                lines.update(n for n in (x.line, x.held_line) if n)
                excerpt.append((x.line, f'"{x.thread}": waiting for <{x.address}> ({x.cls})'))
                if x.held_line:
                    excerpt.append((x.held_line, f'  which is held by "{x.held_by}"'))
            continue
        lines.add(t.line)
        excerpt.append((t.line, t.header_text))
        if t.frames:
            excerpt.append((t.frames[0].line, "\tat " + t.frames[0].text))
            lines.add(t.frames[0].line)
        aw = t.awaited
        if aw:
            lines.add(aw.line)
            excerpt.append((aw.line, "\t" + aw.text))
        h = _thread_at(dump, e.holder_key, e.holder)
        if h is not None and e.holder_line:
            ref = next((r for r, _ in h.held() if r.line == e.holder_line), None)
            lines.add(e.holder_line)
            excerpt.append((e.holder_line, f"\t{ref.text if ref else ''}   [in {e.holder!r}]"))
    for dl in dump.deadlocks:
        if {x.thread for x in dl} & {e.waiter for e in edges}:
            for x in dl:
                lines.add(x.line)
    seen, ex = set(), []
    for ln, text in sorted(excerpt):
        if (ln, text) not in seen:
            seen.add((ln, text))
            ex.append(f"{ln}: {text}")
    where = f" (dump {dump.index + 1} of the file, lines {dump.first_line}-{dump.last_line})" if dump.index or f.embedded else ""
    return Evidence(source=f.path, lines=tuple(sorted(lines))[:MAX_CITED_LINES], excerpt="\n".join(ex) + where, host=f.host)


def deadlock_findings(files: list[ParsedFile], versions: dict[int | None, str], kafka_version: str | None) -> list[Finding]:
    findings: list[Finding] = []
    for broker, pairs in dumps_by_broker(files).items():
        dumps = [d for _, d in pairs]
        graphs: list[WaitForGraph] = [build_wait_for_graph(d) for d in dumps]
        per_dump = [find_cycles(g) for g in graphs]
        distinct: dict[frozenset, tuple[int, Cycle]] = {}
        for k, cycles in enumerate(per_dump):
            for c in cycles:
                distinct.setdefault(c.key(), (k, c))
        version = kafka_version or versions.get(broker)
        for key, (k0, cycle) in distinct.items():
            g0, d0 = graphs[k0], dumps[k0]
            chain = chain_into(g0, cycle)
            members = set(cycle.keys)
            tails = [e for e in blocked_behind(g0, cycle)]
            present = [k for k, cs in enumerate(per_dump) if any(c.key() == key for c in cs)]
            progress = compare_dumps(dumps[k0:], cycle.threads, cycle.keys)
            reasons = list(progress.reasons)
            status = progress.status
            if len(present) != len(dumps) - k0:
                status = "progressing"
                reasons.append(f"cycle present in {len(present)} of {len(dumps) - k0} dumps")
            frames = [fr.text for e in list(cycle.edges) + tails for t in [_thread_at(d0, e.waiter_key, e.waiter)] if t
                      for fr in t.frames[:12]]
            sig = make_signature([e.waiter for e in chain], [e.cls for e in chain], frames)
            candidates, ruled_out = match_known_bugs(sig, version)
            path = [e.waiter for e in chain] + [chain[-1].holder]
            locks = []
            for e in chain:
                s = f"<{e.address}> ({e.cls})"
                if s not in locks:
                    locks.append(s)
            handlers = stalled_request_handlers(d0, g0, cycle)
            summary = (f"JVM deadlock on {broker_label(broker)}: {' -> '.join(path)}; locks {', '.join(locks)}; "
                       f"{status} across {len(dumps) - k0} dump(s)")
            if handlers:
                summary += (f"; request handling stalled behind the deadlock: {len(handlers)} request handler thread(s) "
                            f"blocked ({', '.join(sorted(t.name for t in handlers)[:5])}{', ...' if len(handlers) > 5 else ''})")
            if candidates and version:
                summary += f"; Kafka {version}: matches {', '.join(c['id'] for c in candidates)}"
            reported = any(set(x.thread for x in dl) & set(cycle.threads) for d in dumps for dl in d.deadlocks)
            ev_pairs = [p for k, p in enumerate(pairs) if k >= k0][:8]
            details = {
                "cycle": [{"thread": e.waiter, "thread_key": e.waiter_key,
                           "waiting_for": {"address": e.address, "class": e.cls, "kind": e.kind},
                           "held_by": e.holder, "held_by_key": e.holder_key, "in_cycle": e.waiter_key in members,
                           "edge_source": e.source} for e in chain],
                "cycle_threads": list(cycle.threads),
                "lock_kinds": sorted({e.kind for e in cycle.edges}),
                "blocked_behind_cycle": [e.waiter for e in tails],
                "request_handlers_stalled": sorted(t.name for t in handlers),
                "dumps": len(dumps) - k0,
                "dump_files": sorted({f.path for f, _ in pairs[k0:]}),
                "progress": status,
                "progress_notes": reasons,
                "reported_by_jstack": reported,
                "kafka_version": version,
                "known_bugs": candidates,
                "ruled_out_bugs": ruled_out,
                "advice": upgrade_advice(broker, version, candidates),
            }
            findings.append(Finding(kind="jvm_deadlock", severity=Severity.CRITICAL, summary=summary,
                                    broker_ids=(broker,) if broker is not None else (),
                                    evidence=tuple(_cycle_evidence(f, d, chain) for f, d in ev_pairs), details=details))
            if handlers:
                findings.append(Finding(
                    kind="request_handling_stalled", severity=Severity.CRITICAL,
                    summary=(f"request handling stalled behind the deadlock on {broker_label(broker)}: "
                             f"{len(handlers)} thread(s) running KafkaRequestHandler/KafkaApis wait on the lock cycle "
                             f"{' -> '.join(list(cycle.threads) + [cycle.threads[0]])}"),
                    broker_ids=(broker,) if broker is not None else (),
                    evidence=(Evidence(ev_pairs[0][0].path, tuple(sorted({t.line for t in handlers}))[:MAX_CITED_LINES],
                                       "\n".join(f"{t.line}: {t.header_text}" for t in handlers[:10]), ev_pairs[0][0].host),),
                    details={"cause": "deadlock", "handlers": sorted(t.name for t in handlers),
                             "handler_keys": sorted(t.key for t in handlers), "cycle_threads": list(cycle.threads)}))
    return findings


def owner_unknown_findings(files: list[ParsedFile]) -> list[Finding]:
    """Threads parked on an ownable lock (ReentrantLock & co.) whose owner the dump does not show: without
    jstack -l a cycle through such locks cannot be seen, so say so instead of implying there is none."""
    out = []
    for broker, pairs in dumps_by_broker(files).items():
        f, d = pairs[-1]
        g = build_wait_for_graph(d)
        waits = [(n, a, c) for n, a, c in g.unresolved if re.search(r"Lock\$[A-Za-z]{0,20}Sync$", c)]
        if not waits:
            continue
        why = ("the dump has no 'Locked ownable synchronizers' sections (taken without jstack -l)" if not d.ownable_info
               else "no thread in the dump lists them as owned")
        out.append(Finding(kind="lock_owner_unknown", severity=Severity.INFO if d.ownable_info else Severity.WARNING,
                           summary=(f"{len(waits)} thread(s) on {broker_label(broker)} wait on lock(s) "
                                    f"{', '.join(sorted({f'<{a}> ({c})' for _, a, c in waits})[:3])} whose owner is unknown: {why}; "
                                    "a deadlock through them can be neither shown nor ruled out"),
                           broker_ids=(broker,) if broker is not None else (),
                           evidence=(Evidence(f.path, (), "\n".join(f"{n} waits for <{a}> ({c})" for n, a, c in waits[:10]), f.host),),
                           details={"waiting": [{"thread": n, "address": a, "class": c} for n, a, c in waits[:50]],
                                    "ownable_info": d.ownable_info, "ambiguity": why}))
    return out


def lockless(d: JstackDump) -> bool:
    """A dump that carries no lock information: jcmd's Thread.dump_to_file (JDK 19-24: the text format, and JSON
    format 1) prints thread names and stacks only -- no states, no 'locked' / 'waiting to lock' lines."""
    return d.format in ("text", "json") and not any(t.state for t in d.threads)


def deadlock_unknown_findings(files: list[ParsedFile]) -> list[Finding]:
    """A broker whose only thread dumps carry no lock data: whether its threads are deadlocked cannot be told (no
    finding would read as 'no deadlock')."""
    out = []
    for b, pairs in dumps_by_broker(files).items():
        if not pairs or not all(lockless(d) for _, d in pairs):
            continue
        paths = sorted({f.path for f, _ in pairs})
        forms = sorted({"jcmd Thread.dump_to_file " + ("-format=json" if d.format == "json" else "-format=text") for _, d in pairs})
        out.append(Finding(
            kind="deadlock_unknown", severity=Severity.WARNING,
            summary=(f"{broker_label(b)}: whether threads are deadlocked cannot be told: its thread dump(s) ({', '.join(paths)}; "
                     f"{', '.join(forms)}) carry thread names and stacks only, no lock owners or waits; take "
                     "`jstack -l <pid>` or `jcmd <pid> Thread.print -l` to see lock cycles"),
            broker_ids=(b,) if b is not None else (),
            evidence=tuple(Evidence(f.path, (d.first_line,) if d.first_line else (),
                                    f"{len(d.threads)} threads, format {d.format}, no thread states or locks", f.host)
                           for f, d in pairs[:MAX_CITED_LINES]),
            details={"dumps": len(pairs), "formats": forms, "ambiguity": "no lock data: a deadlock can be neither shown nor ruled out"}))
    return out
