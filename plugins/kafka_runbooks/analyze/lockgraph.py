"""Wait-for graph of a thread dump, all of its cycles, and stuck-vs-progressing across dumps.

Edges come from lock ownership as printed in the stacks: thread W waits for lock L ("waiting to lock"
a monitor, or "parking to wait for" a j.u.c. synchronizer), and L is held by thread H ("- locked" a
monitor, or listed under "Locked ownable synchronizers"). jstack's own deadlock report is used only
to fill in holders the stacks do not show (it is never required).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parsers.jstack import JstackDump, ThreadInfo

MAX_CYCLES = 1000


@dataclass(frozen=True)
class LockEdge:
    waiter: str
    holder: str
    address: str
    cls: str
    kind: str  # "monitor" | "synchronizer"
    waiter_line: int  # line of "- waiting to lock" / "- parking to wait for"
    holder_line: int | None  # line of "- locked" / ownable synchronizer entry (None: from jstack's report)
    source: str = "stacks"  # "stacks" | "deadlock_report"

    def to_dict(self) -> dict:
        return {
            "waiter": self.waiter,
            "holder": self.holder,
            "address": self.address,
            "class": self.cls,
            "kind": self.kind,
            "waiter_line": self.waiter_line,
            "holder_line": self.holder_line,
            "source": self.source,
        }


@dataclass
class WaitForGraph:
    edges: list[LockEdge] = field(default_factory=list)
    unresolved: list[tuple[str, str, str]] = field(default_factory=list)  # (waiter, address, cls): holder unknown

    def successors(self, thread: str) -> list[LockEdge]:
        return [e for e in self.edges if e.waiter == thread]


@dataclass(frozen=True)
class Cycle:
    edges: tuple[LockEdge, ...]  # e[i].holder == e[i+1].waiter, last.holder == first.waiter

    @property
    def threads(self) -> tuple[str, ...]:
        return tuple(e.waiter for e in self.edges)

    def key(self) -> frozenset[str]:
        return frozenset(self.threads)

    def describe(self) -> str:
        names = list(self.threads) + [self.threads[0]]
        return " -> ".join(names)


def build_wait_for_graph(dump: JstackDump) -> WaitForGraph:
    threads = dump.all_threads()
    owners: dict[str, list[tuple[ThreadInfo, int, str]]] = {}
    for t in threads:
        for ref, kind in t.held():
            owners.setdefault(ref.address.lower(), []).append((t, ref.line, kind))
    report_holders: dict[tuple[str, str], str] = {}
    for dl in dump.deadlocks:
        for e in dl:
            if e.address and e.held_by:
                report_holders[(e.thread, e.address.lower())] = e.held_by
    g = WaitForGraph()
    for t in threads:
        aw = t.awaited
        if aw is None:
            continue
        holders = [(h, line, kind) for (h, line, kind) in owners.get(aw.address.lower(), []) if h.name != t.name]
        if holders:
            for h, line, _ in holders:
                g.edges.append(LockEdge(t.name, h.name, aw.address, aw.cls, t.awaited_kind or "monitor", aw.line, line))
        elif (t.name, aw.address.lower()) in report_holders:
            g.edges.append(
                LockEdge(t.name, report_holders[(t.name, aw.address.lower())], aw.address, aw.cls,
                         t.awaited_kind or "monitor", aw.line, None, source="deadlock_report")
            )
        else:
            g.unresolved.append((t.name, aw.address, aw.cls))
    return g


def find_cycles(graph: WaitForGraph) -> list[Cycle]:
    """All elementary cycles (each reported once, rotated to start at its smallest thread name)."""
    nodes = sorted({e.waiter for e in graph.edges} | {e.holder for e in graph.edges})
    order = {n: i for i, n in enumerate(nodes)}
    adj: dict[str, list[LockEdge]] = {n: [] for n in nodes}
    for e in graph.edges:
        adj[e.waiter].append(e)
    cycles: list[Cycle] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for start in nodes:
        # DFS over nodes ordered after `start` only: each elementary cycle found exactly from its minimum.
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[LockEdge] = []
        on_path = {start}
        while stack:
            node, idx = stack[-1]
            succ = adj[node]
            if idx >= len(succ):
                stack.pop()
                if path:
                    on_path.discard(path[-1].holder)
                    path.pop()
                continue
            stack[-1] = (node, idx + 1)
            e = succ[idx]
            if e.holder == start:
                cyc = tuple(path + [e])
                sig = tuple((x.waiter, x.address) for x in cyc)
                if sig not in seen:
                    seen.add(sig)
                    cycles.append(Cycle(cyc))
                    if len(cycles) >= MAX_CYCLES:
                        return cycles
            elif order[e.holder] > order[start] and e.holder not in on_path:
                path.append(e)
                on_path.add(e.holder)
                stack.append((e.holder, 0))
    return cycles


def blocked_behind(graph: WaitForGraph, cycle: Cycle) -> list[LockEdge]:
    """Edges of threads outside the cycle that (transitively) wait on it: they can never proceed either."""
    members = set(cycle.threads)
    doomed = set(members)
    changed = True
    while changed:
        changed = False
        for e in graph.edges:
            if e.waiter not in doomed and e.holder in doomed:
                doomed.add(e.waiter)
                changed = True
    return [e for e in graph.edges if e.waiter in doomed - members and e.holder in doomed]


def chain_into(graph: WaitForGraph, cycle: Cycle) -> list[LockEdge]:
    """A wait-for path that ends in the cycle, starting at the tail thread farthest from it (for summaries)."""
    tails = blocked_behind(graph, cycle)
    if not tails:
        return list(cycle.edges)
    by_waiter = {e.waiter: e for e in tails}
    holders = {e.holder for e in tails}
    starts = sorted(w for w in by_waiter if w not in holders) or sorted(by_waiter)
    path, cur = [], starts[0]
    while cur in by_waiter:
        e = by_waiter[cur]
        path.append(e)
        cur = e.holder
    # cur is now a cycle member: continue around the cycle once
    idx = next(i for i, e in enumerate(cycle.edges) if e.waiter == cur)
    return path + list(cycle.edges[idx:]) + list(cycle.edges[:idx])


# ---------------------------------------------------------------- successive dumps


@dataclass
class CycleProgress:
    threads: tuple[str, ...]
    status: str  # "stuck" | "progressing"
    dumps: int  # how many dumps were compared
    reasons: list[str] = field(default_factory=list)  # why "progressing" (or notes for "stuck")

    def to_dict(self) -> dict:
        return {"threads": list(self.threads), "status": self.status, "dumps": self.dumps, "reasons": self.reasons}


def _thread_key(t: ThreadInfo) -> tuple:
    aw = t.awaited
    return (t.state, aw.cls if aw else None, t.frames[0].text if t.frames else None)


def compare_dumps(dumps: list[JstackDump], threads: tuple[str, ...]) -> CycleProgress:
    """Are `threads` blocked on the same locks with identical top frames in every dump?

    Lock identity is the lock's class plus the holder relationship; addresses are compared too, but a
    changed address alone (objects moved by a compacting GC) is reported as a note, not as progress.
    """
    reasons: list[str] = []
    notes: list[str] = []
    if len(dumps) < 2:
        return CycleProgress(threads, "stuck", len(dumps), ["only one dump: progress not measured"])
    first = dumps[0]
    graphs = [build_wait_for_graph(d) for d in dumps]
    for n in threads:
        t0 = first.thread(n)
        if t0 is None:
            reasons.append(f"{n!r} missing from dump 1")
            continue
        e0 = [e for e in graphs[0].edges if e.waiter == n]
        for k, d in enumerate(dumps[1:], start=2):
            t = d.thread(n)
            if t is None:
                reasons.append(f"{n!r} missing from dump {k}")
                continue
            if _thread_key(t) != _thread_key(t0):
                reasons.append(f"{n!r} changed between dump 1 and dump {k} (state/lock/top frame)")
                continue
            ek = [e for e in graphs[k - 1].edges if e.waiter == n]
            if {e.holder for e in ek} != {e.holder for e in e0}:
                reasons.append(f"{n!r} waits for a different holder in dump {k}")
                continue
            a0, a = t0.awaited, t.awaited
            if a0 and a and a0.address.lower() != a.address.lower():
                notes.append(f"{n!r}: lock address {a0.address} -> {a.address} in dump {k} (same class; GC relocation)")
    if reasons:
        return CycleProgress(threads, "progressing", len(dumps), reasons)
    return CycleProgress(threads, "stuck", len(dumps), notes)
