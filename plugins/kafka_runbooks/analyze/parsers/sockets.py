"""The socket-table reader of the analysis: whole captured tables, read row by row with the one socket-row reader
(``host/sockets.py`` ``read_row``): Linux ``ss -tanp`` (with or without -H, with or without a Netid column, ``ss -a``
with its wide columns), Linux ``netstat -an[t]p``, and macOS/BSD ``netstat -an[p tcp]`` (``tcp4``/``tcp46`` rows,
``host.port`` addresses, ``(state)`` header) and ``netstat -An`` (each row led by its PCB address and flow hash;
netstat cuts addresses to 18 characters there, so a cut address's port is not trusted). UNIX-domain rows
(``unix``/``u_str`` ..., the "Active UNIX domain sockets" section) are not TCP connections: they are skipped and
counted apart.

Without ``-n`` ss and netstat print ports by service name (``:XmlIpcRegSvc``, IANA's name of 9092) and addresses
with an interface suffix (``127.0.0.53%lo``): the names of the ports the analysis reads are mapped back
(``SERVICE_PORTS``), other names leave the port unknown and are said in a note. A table with lines but no rows is
never fine: it is unparsable, naming how many lines were not understood.

Every socket is counted once: a row repeated with the same protocol, state and both endpoints (ss lists a
socket shared by several processes once per process in some versions; a pasted table may repeat lines) is
kept once and the repeats are counted in ``duplicates``.

Pure: text/bytes in, SocketTable out. States are normalised to netstat spelling (CLOSE_WAIT, ...).
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field

from kafka_runbooks.host.sockets import SERVICE_PORTS, Row, read_row, split_host_port

from .base import LineTally, decode_evidence, iter_lines

_HEADERS = re.compile(
    r"^(Active (Internet|UNIX domain|Bluetooth|LOCAL \(UNIX\)|Multipath|kernel control|kernel event) |Proto\s{1,20}Recv-Q|"
    r"Netid\s{1,20}State|State\s{1,20}Recv-Q|Recv-Q\s{1,20}Send-Q|Address\s{1,20}Type|Socket\s{1,20}(?:Flowhash\s{1,20})?Proto)"
)
_UNIX_SECTION = re.compile(r"^Active (UNIX domain sockets|LOCAL \(UNIX\) domain sockets|kernel control|kernel event|Multipath)")
_UNIX_ROW = re.compile(r"^(?:unix\s|u_str\s|u_dgr\s|u_seq\s|nl\s|p_raw\s|p_dgr\s|v_str\s|v_dgr\s|[0-9a-f]{8,16}\s{1,10}(?:stream|dgram))")
BSD_A_ADDRESS_WIDTH = 18  # netstat -A prints each address in 18 characters (inet.c: "%-*.*s", width 18): longer ones are cut


def _named_port(addr: str, bsd: bool) -> str | None:
    """The service name an address gives for its port ('127.0.0.1:XmlIpcRegSvc' -> 'XmlIpcRegSvc'), else None."""
    tail = addr.rsplit("." if bsd else ":", 1)[-1] if ("." if bsd else ":") in addr else ""
    return tail if tail and tail != "*" and not tail.isdigit() else None


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

    @property
    def key(self) -> tuple:
        return (self.proto.rstrip("46"), self.state, self.local_host, self.local_port, self.peer_host, self.peer_port)


@dataclass
class SocketTable:
    rows: list[SocketRow] = field(default_factory=list)
    format: str | None = None  # "ss" | "netstat" | "netstat_bsd"
    unparsable: list[str] = field(default_factory=list)
    unrecognized: LineTally = field(default_factory=LineTally)
    ignored_lines: int = 0  # headers
    unix_rows: int = 0  # UNIX-domain sockets: not TCP, skipped
    duplicates: int = 0  # repeated rows of one socket, counted once
    notes: list[str] = field(default_factory=list)

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

    def served_on(self, port: int, host: str | None = None) -> list[SocketRow]:
        """Server-side sockets of a listener: local port == port (and local address == host when given)."""
        return [r for r in self.rows if r.local_port == port
                and (not host or r.local_host in (host, "*", "0.0.0.0", "::"))]


def parse_sockets(data: bytes | str | None) -> SocketTable:
    d = decode_evidence(data)
    table = SocketTable(notes=list(d.notes))
    if d.problems:
        table.unparsable.extend(d.problems)
        return table
    state = _Reading()
    for i, raw in iter_lines(d.text):
        ln = raw.rstrip()
        if ln.strip():
            state.nonblank += 1
            _read_line(table, state, i, ln)
    _finish(table, state)
    return table


@dataclass
class _Reading:
    in_unix: bool = False
    bsd: bool = False  # a BSD "(state)" header was seen
    nonblank: int = 0
    seen: set = field(default_factory=set)
    names: dict = field(default_factory=dict)  # service names read as ports
    cut: int = 0  # netstat -A addresses cut to 18 characters


def _read_line(table: SocketTable, st: _Reading, i: int, ln: str) -> None:
    s = ln.strip()
    if _UNIX_SECTION.match(s):
        st.in_unix = True
        table.ignored_lines += 1
        return
    if _HEADERS.match(s):
        table.ignored_lines += 1
        st.in_unix = st.in_unix and not s.startswith("Active Internet")
        st.bsd = st.bsd or "(state)" in s
        return
    if st.in_unix or _UNIX_ROW.match(s):
        table.unix_rows += 1
        return
    raw = read_row(s, bsd=st.bsd)
    if raw is None:
        table.unrecognized.add(i, ln)
        return
    table.format = table.format or raw.format
    row = _row(i, raw, raw.format == "netstat_bsd")
    for a in (row.local, row.peer):
        n = _named_port(a, table.format == "netstat_bsd")
        if n is not None:
            st.names[n] = st.names.get(n, 0) + 1
    if raw.pcb and (len(row.local) >= BSD_A_ADDRESS_WIDTH or len(row.peer) >= BSD_A_ADDRESS_WIDTH):
        st.cut += 1
        row = _cut(row)
    if row.key in st.seen and row.state != "LISTEN" and row.local_port is not None and row.peer_port is not None:
        table.duplicates += 1
        return
    st.seen.add(row.key)
    table.rows.append(row)


def _finish(table: SocketTable, st: _Reading) -> None:
    if table.duplicates:
        table.notes.append(f"{table.duplicates} repeated row(s) of the same socket counted once")
    if st.names:
        known = {n: c for n, c in st.names.items() if n in SERVICE_PORTS}
        unknown = {n: c for n, c in st.names.items() if n not in SERVICE_PORTS}
        table.notes.append("ports given by service name (ss/netstat without -n): "
                           + ", ".join(f"{n}={SERVICE_PORTS[n]} x{c}" for n, c in sorted(known.items()))
                           + ("; " if known and unknown else "")
                           + (f"ports unknown for {', '.join(f'{n} x{c}' for n, c in sorted(unknown.items())[:10])}"
                              if unknown else ""))
    if st.cut:
        table.notes.append(f"{st.cut} row(s) with an address that fills netstat -A's {BSD_A_ADDRESS_WIDTH} characters: "
                           "its port may be cut, so it is left unknown (capture without -A, or with -W)")
    if not table.rows and (table.unrecognized.count or not (table.ignored_lines or table.unix_rows)):
        first = f" (first at line {table.unrecognized.samples[0].line})" if table.unrecognized.count else ""
        table.unparsable.append(f"no socket rows recognised: {table.unrecognized.count} of {st.nonblank} non-blank lines "
                                f"not understood{first}")
    elif table.unrecognized.count * 2 > st.nonblank:
        table.unparsable.append(
            f"{table.unrecognized.count} of {st.nonblank} non-blank lines are not ss/netstat rows "
            f"(first at line {table.unrecognized.samples[0].line})"
        )


def _cut(row: SocketRow) -> SocketRow:
    """A netstat -A row whose address filled all 18 characters: the end of it (the port) may be cut off."""
    lp = row.local_port if len(row.local) < BSD_A_ADDRESS_WIDTH else None
    pp = row.peer_port if len(row.peer) < BSD_A_ADDRESS_WIDTH else None
    return dataclasses.replace(row, local_port=lp, peer_port=pp)


def _row(i: int, raw: Row, bsd: bool) -> SocketRow:
    lh, lp = split_host_port(raw.local, bsd)
    ph, pp = split_host_port(raw.peer, bsd)
    return SocketRow(
        line=i, proto=raw.proto, state=raw.state, recv_q=raw.recv_q, send_q=raw.send_q, local=raw.local, peer=raw.peer,
        local_host=lh, local_port=lp, peer_host=ph, peer_port=pp, pid=raw.pids[0] if raw.pids else None,
        program=raw.program,
    )
