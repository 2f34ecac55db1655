"""Wait-for graph of a thread dump, all of its cycles, who is stuck behind them, and stuck-vs-progressing
across successive dumps.

Edges come from lock ownership as printed in the stacks: thread W waits for lock L ("waiting to lock" a
monitor, or "parking to wait for" a j.u.c. synchronizer such as a ReentrantLock$NonfairSync), and L is held
by thread H ("- locked" a monitor, or listed under "Locked ownable synchronizers"). VisualVM prints the owner
on the waiting line ("owned by "x" t@N") and jcmd's JSON format 2 gives a park blocker's owner tid: both are
used directly. jstack's own deadlock report only fills in holders the stacks do not show (it is never required);
when a file holds the report without the waiting threads' stacks (a pasted excerpt), each entry's named holder
is the edge.

Threads are nodes by identity (nid / tid), not by name: two threads may share a name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .parsers.jstack import JstackDump, ThreadInfo

MAX_CYCLES = 1000


@dataclass(frozen=True)
class LockEdge:
    waiter: str  # thread name (for people)
    holder: str
    address: str
    cls: str
    kind: str  # "monitor" | "synchronizer"
    waiter_line: int
    holder_line: int | None  # None: the holder came from jstack's report / an owner hint
    source: str = "stacks"  # "stacks" | "deadlock_report" | "owner_hint"
    waiter_key: str = ""
    holder_key: str = ""

    def to_dict(self) -> dict:
        return {"waiter": self.waiter, "holder": self.holder, "address": self.address, "class": self.cls,
                "kind": self.kind, "waiter_line": self.waiter_line, "holder_line": self.holder_line,
                "source": self.source, "waiter_key": self.waiter_key, "holder_key": self.holder_key}


@dataclass
class WaitForGraph:
    edges: list[LockEdge] = field(default_factory=list)
    unresolved: list[tuple[str, str, str]] = field(default_factory=list)  # (waiter, address, cls): holder unknown
    names: dict[str, str] = field(default_factory=dict)  # key -> name

    def successors(self, key: str) -> list[LockEdge]:
        return [e for e in self.edges if e.waiter_key == key]


@dataclass(frozen=True)
class Cycle:
    edges: tuple[LockEdge, ...]  # e[i].holder == e[i+1].waiter, last.holder == first.waiter

    @property
    def threads(self) -> tuple[str, ...]:
        return tuple(e.waiter for e in self.edges)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(e.waiter_key for e in self.edges)

    def key(self) -> frozenset[str]:
        """Identity of the cycle across dumps: its threads' nid/tid (stable across dumps of one JVM), or their
        names when the dump prints neither (excerpts)."""
        return frozenset(e.waiter_key if e.waiter_key.startswith(("nid=", "tid=")) else e.waiter for e in self.edges)

    def describe(self) -> str:
        names = list(self.threads) + [self.threads[0]]
        return " -> ".join(names)


def build_wait_for_graph(dump: JstackDump) -> WaitForGraph:
    threads = dump.all_threads()
    g = WaitForGraph(names={t.key: t.name for t in threads})
    owners: dict[str, list[tuple[ThreadInfo, int, str]]] = {}
    for t in threads:
        for ref, kind in t.held():
            owners.setdefault(ref.address.lower(), []).append((t, ref.line, kind))
    by_name: dict[str, list[ThreadInfo]] = {}
    by_tid: dict[str, ThreadInfo] = {}
    for t in threads:
        by_name.setdefault(t.name, []).append(t)
        if t.tid:
            by_tid[t.tid] = t
    report_holders: dict[tuple[str, str], str] = {}
    report_by_addr: dict[str, str] = {}  # the report names a lock's holder: true for every waiter of that lock
    for dl in dump.deadlocks:
        for e in dl:
            if e.address and e.held_by:
                report_holders[(e.thread, e.address.lower())] = e.held_by
                report_by_addr[e.address.lower()] = e.held_by
    for t in threads:
        aw = t.awaited
        if aw is None:
            continue
        kind = t.awaited_kind or "monitor"
        holders = [(h, line) for (h, line, _) in owners.get(aw.address.lower(), []) if h.key != t.key]
        if holders:
            for h, line in holders:
                g.edges.append(LockEdge(t.name, h.name, aw.address, aw.cls, kind, aw.line, line, "stacks", t.key, h.key))
            continue
        hint = None
        if aw.owner_tid:
            hint = by_tid.get(aw.owner_tid) or (by_tid.get(f"t@{aw.owner_tid}") if not aw.owner_tid.startswith("t@") else None)
        if hint is None and aw.owner:
            cands = by_name.get(aw.owner) or []
            hint = cands[0] if len(cands) == 1 else None
        if hint is not None and hint.key != t.key:
            g.edges.append(LockEdge(t.name, hint.name, aw.address, aw.cls, kind, aw.line, None, "owner_hint", t.key, hint.key))
            continue
        held_by = report_holders.get((t.name, aw.address.lower())) or report_by_addr.get(aw.address.lower())
        if held_by is not None:
            hk = _report_key(held_by, by_name)
            g.names.setdefault(hk, held_by)
            g.edges.append(LockEdge(t.name, held_by, aw.address, aw.cls, kind, aw.line, None, "deadlock_report", t.key, hk))
            continue
        g.unresolved.append((t.name, aw.address, aw.cls))
    # report entries of threads whose stack the file does not show waiting (an excerpt of the report alone): the
    # holder each entry names is enough for the edge
    waiting = {e.waiter for e in g.edges} | {n for n, _, _ in g.unresolved}
    for dl in dump.deadlocks:
        for e in dl:
            if e.thread in waiting or not e.held_by or not e.address:
                continue
            wk, hk = _report_key(e.thread, by_name), _report_key(e.held_by, by_name)
            g.names.setdefault(wk, e.thread)
            g.names.setdefault(hk, e.held_by)
            kind = e.kind if e.kind in ("monitor", "synchronizer") else "monitor"
            g.edges.append(LockEdge(e.thread, e.held_by, e.address, e.cls or "", kind, e.line, None, "deadlock_report", wk, hk))
            waiting.add(e.thread)
    return g


def _report_key(name: str, by_name: dict[str, list[ThreadInfo]]) -> str:
    """A thread named in jstack's deadlock report: its dump identity when the name is unique, else name@report."""
    cands = by_name.get(name) or []
    return cands[0].key if len(cands) == 1 else f"{name}@report"


def find_cycles(graph: WaitForGraph) -> list[Cycle]:
    """All elementary cycles (each reported once, found from its smallest thread key)."""
    nodes = sorted({e.waiter_key for e in graph.edges} | {e.holder_key for e in graph.edges})
    order = {n: i for i, n in enumerate(nodes)}
    adj: dict[str, list[LockEdge]] = {n: [] for n in nodes}
    for e in graph.edges:
        adj[e.waiter_key].append(e)
    cycles: list[Cycle] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for start in nodes:
        stack: list[tuple[str, int]] = [(start, 0)]
        path: list[LockEdge] = []
        on_path = {start}
        while stack:
            node, idx = stack[-1]
            succ = adj[node]
            if idx >= len(succ):
                stack.pop()
                if path:
                    on_path.discard(path[-1].holder_key)
                    path.pop()
                continue
            stack[-1] = (node, idx + 1)
            e = succ[idx]
            if e.holder_key == start:
                cyc = tuple(path + [e])
                sig = tuple((x.waiter_key, x.address) for x in cyc)
                if sig not in seen:
                    seen.add(sig)
                    cycles.append(Cycle(cyc))
                    if len(cycles) >= MAX_CYCLES:
                        return cycles
            elif order[e.holder_key] > order[start] and e.holder_key not in on_path:
                path.append(e)
                on_path.add(e.holder_key)
                stack.append((e.holder_key, 0))
    return cycles


def blocked_behind(graph: WaitForGraph, cycle: Cycle) -> list[LockEdge]:
    """Edges of threads outside the cycle that (transitively) wait on it: they can never proceed either."""
    members = set(cycle.keys)
    doomed = set(members)
    changed = True
    while changed:
        changed = False
        for e in graph.edges:
            if e.waiter_key not in doomed and e.holder_key in doomed:
                doomed.add(e.waiter_key)
                changed = True
    return [e for e in graph.edges if e.waiter_key in doomed - members and e.holder_key in doomed]


def chain_into(graph: WaitForGraph, cycle: Cycle) -> list[LockEdge]:
    """A wait-for path that ends in the cycle, starting at the tail thread farthest from it (for summaries)."""
    tails = blocked_behind(graph, cycle)
    if not tails:
        return list(cycle.edges)
    by_waiter = {}
    for e in tails:
        by_waiter.setdefault(e.waiter_key, e)
    holders = {e.holder_key for e in tails}
    starts = sorted(w for w in by_waiter if w not in holders) or sorted(by_waiter)
    path, cur, seen = [], starts[0], set()
    while cur in by_waiter and cur not in seen:
        seen.add(cur)
        e = by_waiter[cur]
        path.append(e)
        cur = e.holder_key
    idx = next((i for i, e in enumerate(cycle.edges) if e.waiter_key == cur), 0)
    return path + list(cycle.edges[idx:]) + list(cycle.edges[:idx])


def stalled_request_handlers(dump: JstackDump, graph: WaitForGraph, cycle: Cycle) -> list[ThreadInfo]:
    """Threads that serve Kafka requests (KafkaRequestHandler.run / KafkaApis.handle in their stack) and are in
    the cycle or blocked behind it: request handling is stalled behind the deadlock."""
    keys = set(cycle.keys) | {e.waiter_key for e in blocked_behind(graph, cycle)}
    return [t for t in dump.all_threads() if t.key in keys and t.serves_requests]


# ---------------------------------------------------------------- successive dumps


@dataclass
class CycleProgress:
    threads: tuple[str, ...]
    status: str  # "stuck" | "progressing"
    dumps: int
    reasons: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"threads": list(self.threads), "status": self.status, "dumps": self.dumps, "reasons": self.reasons}


def _thread_key(t: ThreadInfo) -> tuple:
    aw = t.awaited
    return (t.state, aw.cls if aw else None, t.frames[0].text if t.frames else None)


def _find(d: JstackDump, key: str, name: str) -> ThreadInfo | None:
    """The same thread in another dump: by nid/tid; by name only when the dumps print no thread ids."""
    t = d.by_key(key)
    if t is None and not key.startswith(("nid=", "tid=")):
        t = d.thread(name)
    return t


def compare_dumps(dumps: list[JstackDump], threads: tuple[str, ...], keys: tuple[str, ...] | None = None) -> CycleProgress:
    """Are the cycle's threads blocked on the same locks with identical top frames in every dump?

    Threads are matched across dumps by nid/tid (names when a dump has neither). A changed lock address
    alone (objects moved by a compacting GC) is a note, not progress.
    """
    keys = keys or tuple(threads)
    reasons: list[str] = []
    notes: list[str] = []
    if len(dumps) < 2:
        return CycleProgress(threads, "stuck", len(dumps), ["only one dump: progress not measured"])
    first = dumps[0]
    graphs = [build_wait_for_graph(d) for d in dumps]
    for n, k in zip(threads, keys):
        t0 = _find(first, k, n)
        if t0 is None:
            reasons.append(f"{n!r} missing from dump 1")
            continue
        e0 = {e.holder_key for e in graphs[0].edges if e.waiter_key == t0.key}
        for j, d in enumerate(dumps[1:], start=2):
            t = _find(d, t0.key, n)
            if t is None:
                reasons.append(f"{n!r} missing from dump {j}")
                continue
            if _thread_key(t) != _thread_key(t0):
                reasons.append(f"{n!r} changed between dump 1 and dump {j} (state/lock/top frame)")
                continue
            ek = {e.holder_key for e in graphs[j - 1].edges if e.waiter_key == t.key}
            if ek != e0:
                reasons.append(f"{n!r} waits for a different holder in dump {j}")
                continue
            a0, a = t0.awaited, t.awaited
            if a0 and a and a0.address.lower() != a.address.lower():
                notes.append(f"{n!r}: lock address {a0.address} -> {a.address} in dump {j} (same class; GC relocation)")
    if reasons:
        return CycleProgress(threads, "progressing", len(dumps), reasons)
    return CycleProgress(threads, "stuck", len(dumps), notes)
