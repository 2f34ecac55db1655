"""Parser for `ss -tanp` (with or without -H, with or without a Netid column) and `netstat -an[t]p`.

Pure: text/bytes in, SocketTable out. States are normalised to netstat spelling (CLOSE_WAIT, ...).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from .base import LineTally, decode

_SS_STATES = {
    "ESTAB": "ESTABLISHED", "LISTEN": "LISTEN", "CLOSE-WAIT": "CLOSE_WAIT", "TIME-WAIT": "TIME_WAIT",
    "FIN-WAIT-1": "FIN_WAIT1", "FIN-WAIT-2": "FIN_WAIT2", "SYN-SENT": "SYN_SENT", "SYN-RECV": "SYN_RECV",
    "LAST-ACK": "LAST_ACK", "CLOSING": "CLOSING", "UNCONN": "UNCONN", "CLOSED": "CLOSE",
}
_NETSTAT_STATES = {
    "ESTABLISHED", "LISTEN", "CLOSE_WAIT", "TIME_WAIT", "FIN_WAIT1", "FIN_WAIT2", "SYN_SENT", "SYN_RECV",
    "LAST_ACK", "CLOSING", "CLOSE", "UNKNOWN",
}
_NETSTAT_ROW = re.compile(
    r"^(?P<proto>tcp6?|udp6?)\s+(?P<rq>\d+)\s+(?P<sq>\d+)\s+(?P<local>\S+)\s+(?P<peer>\S+)"
    r"(?:\s+(?P<state>[A-Z_0-9]+))?(?:\s+(?P<prog>\S.*?))?\s*$"
)
_SS_ROW = re.compile(
    r"^(?:(?P<netid>tcp|udp|raw|u_str|u_dgr|u_seq|p_raw|p_dgr|nl|mptcp|sctp)\s+)?(?P<state>[A-Z][A-Z0-9-]*)\s+"
    r"(?P<rq>\d+)\s+(?P<sq>\d+)\s+(?P<local>\S+)\s+(?P<peer>\S+)(?:\s+(?P<prog>\S.*?))?\s*$"
)
_SS_USERS = re.compile(r'\("(?P<prog>[^"]*)",pid=(?P<pid>\d+)')
_NETSTAT_PROG = re.compile(r"^(?P<pid>\d+)/(?P<prog>\S.*)$")
_HEADERS = re.compile(
    r"^(Active (Internet|UNIX domain|Bluetooth) |Proto\s+Recv-Q|Netid\s+State|State\s+Recv-Q|Recv-Q\s+Send-Q)"
)
_UNIX_SECTION = re.compile(r"^Active UNIX domain sockets")


def split_hostport(addr: str) -> tuple[str, int | None]:
    """'::ffff:192.168.1.219:9092' -> ('192.168.1.219', 9092); '[::1]:9092' -> ('::1', 9092); '*:*' -> ('*', None)."""
    a = addr.strip()
    if a.startswith("[") and "]:" in a:
        host, _, port = a[1:].rpartition("]:")
    else:
        host, sep, port = a.rpartition(":")
        if not sep:
            return a, None
    host = host.split("%", 1)[0]  # ss prints 127.0.0.53%lo
    if host.lower().startswith("::ffff:") and "." in host:
        host = host[7:]
    try:
        p: int | None = int(port)
    except ValueError:
        p = None
    return host or "*", p


@dataclass(frozen=True)
class SocketRow:
    line: int
    proto: str
    state: str
    recv_q: int
    send_q: int
    local: str
    peer: str
    local_host: str
    local_port: int | None
    peer_host: str
    peer_port: int | None
    pid: int | None = None
    program: str | None = None

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class SocketTable:
    rows: list[SocketRow] = field(default_factory=list)
    format: str | None = None  # "ss" | "netstat"
    unparsable: list[str] = field(default_factory=list)
    unrecognized: LineTally = field(default_factory=LineTally)
    ignored_lines: int = 0  # headers and non-TCP sections (UNIX sockets)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def counts_by_state(self) -> dict[str, int]:
        return dict(Counter(r.state for r in self.rows))

    def counts_by_local_port(self) -> dict[int, dict[str, int]]:
        out: dict[int, Counter] = {}
        for r in self.rows:
            if r.local_port is not None:
                out.setdefault(r.local_port, Counter())[r.state] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def counts_by_peer_host(self) -> dict[str, dict[str, int]]:
        out: dict[str, Counter] = {}
        for r in self.rows:
            out.setdefault(r.peer_host, Counter())[r.state] += 1
        return {k: dict(v) for k, v in sorted(out.items())}

    def on_port(self, port: int) -> list[SocketRow]:
        """Connections involving `port` on either side (server side and client side)."""
        return [r for r in self.rows if r.local_port == port or r.peer_port == port]


def parse_sockets(data: bytes | str | None) -> SocketTable:
    text, problems = decode(data)
    table = SocketTable()
    if problems:
        table.unparsable.extend(problems)
        return table
    lines = text.splitlines()
    in_unix = False
    nonblank = 0
    for i, raw in enumerate(lines, start=1):
        ln = raw.rstrip()
        if not ln.strip():
            continue
        nonblank += 1
        if _UNIX_SECTION.match(ln):
            in_unix = True
            table.ignored_lines += 1
            continue
        if _HEADERS.match(ln.strip()):
            table.ignored_lines += 1
            if ln.startswith("Active Internet"):
                in_unix = False
            continue
        if in_unix:
            table.ignored_lines += 1
            continue
        s = ln.strip()
        m = _NETSTAT_ROW.match(s)
        if m and (m.group("state") in _NETSTAT_STATES or m.group("proto").startswith("udp") or m.group("state") is None):
            state = m.group("state") or ("UNCONN" if m.group("proto").startswith("udp") else "UNKNOWN")
            prog = m.group("prog")
            if state not in _NETSTAT_STATES and state != "UNCONN":  # udp: the "state" slot holds the program
                prog, state = (m.group("state") + " " + (prog or "")).strip(), "UNCONN"
            pid = program = None
            if prog and prog != "-":
                pm = _NETSTAT_PROG.match(prog)
                if pm:
                    pid, program = int(pm.group("pid")), pm.group("prog").strip()
                else:
                    program = prog
            table.rows.append(_row(i, m.group("proto"), state, m, pid, program))
            table.format = table.format or "netstat"
            continue
        m = _SS_ROW.match(s)
        if m and m.group("state") in _SS_STATES:
            pid = program = None
            if m.group("prog"):
                um = _SS_USERS.search(m.group("prog"))
                if um:
                    pid, program = int(um.group("pid")), um.group("prog")
            table.rows.append(_row(i, m.group("netid") or "tcp", _SS_STATES[m.group("state")], m, pid, program))
            table.format = table.format or "ss"
            continue
        table.unrecognized.add(i, ln)
    if not table.rows and not table.ignored_lines:
        table.unparsable.append(f"no socket rows recognised in {nonblank} non-blank lines")
    elif table.unrecognized.count * 2 > nonblank:
        table.unparsable.append(
            f"{table.unrecognized.count} of {nonblank} non-blank lines are not ss/netstat rows "
            f"(first at line {table.unrecognized.samples[0].line})"
        )
    return table


def _row(i: int, proto: str, state: str, m: re.Match, pid: int | None, program: str | None) -> SocketRow:
    lh, lp = split_hostport(m.group("local"))
    ph, pp = split_hostport(m.group("peer"))
    return SocketRow(
        line=i, proto=proto, state=state, recv_q=int(m.group("rq")), send_q=int(m.group("sq")),
        local=m.group("local"), peer=m.group("peer"), local_host=lh, local_port=lp, peer_host=ph, peer_port=pp,
        pid=pid, program=program,
    )
