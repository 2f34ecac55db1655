"""The one socket-table parser: Linux ``ss -tanp`` (with or without -H, with or without a Netid column, ``ss -a``
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

import re
from collections import Counter
from dataclasses import dataclass, field

from .base import LineTally, decode_evidence, iter_lines

_SS_STATES = {
    "ESTAB": "ESTABLISHED", "LISTEN": "LISTEN", "CLOSE-WAIT": "CLOSE_WAIT", "TIME-WAIT": "TIME_WAIT",
    "FIN-WAIT-1": "FIN_WAIT1", "FIN-WAIT-2": "FIN_WAIT2", "SYN-SENT": "SYN_SENT", "SYN-RECV": "SYN_RECV",
    "LAST-ACK": "LAST_ACK", "CLOSING": "CLOSING", "UNCONN": "UNCONN", "CLOSED": "CLOSE",
}
_NETSTAT_STATES = {
    "ESTABLISHED", "LISTEN", "CLOSE_WAIT", "TIME_WAIT", "FIN_WAIT1", "FIN_WAIT2", "SYN_SENT", "SYN_RECV",
    "LAST_ACK", "CLOSING", "CLOSE", "UNKNOWN",
}
_BSD_STATES = {"FIN_WAIT_1": "FIN_WAIT1", "FIN_WAIT_2": "FIN_WAIT2", "SYN_RCVD": "SYN_RECV", "CLOSED": "CLOSE"}
# columns are padded to the widest value of the table: ss -a pads addresses to UNIX socket paths (100+ blanks)
_NETSTAT_ROW = re.compile(
    r"^(?P<proto>tcp(?:4|6|46)?|udp(?:4|6|46)?)\s{1,400}(?P<rq>[0-9]{1,15})\s{1,400}(?P<sq>[0-9]{1,15})\s{1,400}(?P<local>\S{1,300})"
    r"\s{1,400}(?P<peer>\S{1,300})(?:\s{1,400}(?P<state>[A-Z_0-9]{1,20}))?(?:\s{1,400}(?P<prog>\S.{0,300}))?$", re.ASCII
)
_SS_ROW = re.compile(
    r"^(?:(?P<netid>tcp|udp|raw|mptcp|sctp)\s{1,400})?(?P<state>[A-Z][A-Z0-9-]{0,20})\s{1,400}"
    r"(?P<rq>[0-9]{1,15})\s{1,400}(?P<sq>[0-9]{1,15})\s{1,400}(?P<local>\S{1,300})\s{1,400}(?P<peer>\S{1,300})(?:\s{1,400}(?P<prog>\S.{0,2000}))?$",
    re.ASCII,
)
# macOS `netstat -A`: the PCB address (%16lx) and, since 10.7, the flow hash (%8x) lead each Internet row
_BSD_PCB = re.compile(r"^[0-9a-f]{1,16}\s{1,20}(?:[0-9a-f]{1,8}\s{1,20})?(?=(?:tcp|udp)(?:4|6|46)?\s)", re.ASCII)
BSD_A_ADDRESS_WIDTH = 18  # netstat -A prints each address in 18 characters (inet.c: "%-*.*s", width 18): longer ones are cut
# service names ss/netstat print without -n for the ports the analysis reads (IANA's names, as in /etc/services)
SERVICE_PORTS = {"XmlIpcRegSvc": 9092, "eforward": 2181, "ssh": 22}
_SS_USERS = re.compile(r'\("(?P<prog>[^"\n]{0,200})",pid=(?P<pid>[0-9]{1,10})', re.ASCII)
_NETSTAT_PROG = re.compile(r"^(?P<pid>[0-9]{1,10})/(?P<prog>\S.{0,300})$", re.ASCII)
_HEADERS = re.compile(
    r"^(Active (Internet|UNIX domain|Bluetooth|LOCAL \(UNIX\)|Multipath|kernel control|kernel event) |Proto\s{1,20}Recv-Q|"
    r"Netid\s{1,20}State|State\s{1,20}Recv-Q|Recv-Q\s{1,20}Send-Q|Address\s{1,20}Type|Socket\s{1,20}(?:Flowhash\s{1,20})?Proto)"
)
_UNIX_SECTION = re.compile(r"^Active (UNIX domain sockets|LOCAL \(UNIX\) domain sockets|kernel control|kernel event|Multipath)")
_UNIX_ROW = re.compile(r"^(?:unix\s|u_str\s|u_dgr\s|u_seq\s|nl\s|p_raw\s|p_dgr\s|v_str\s|v_dgr\s|[0-9a-f]{8,16}\s{1,10}(?:stream|dgram))")
_BSD_ADDR = re.compile(r"^(?P<host>.{1,200})\.(?P<port>[0-9]{1,5}|\*)$")


_LINUX_PORT = re.compile(r":(?:[0-9]{1,5}|\*)$")
_BSD_PORT = re.compile(r"\.(?:[0-9]{1,5}|\*)$")


def _bsd_address(addr: str) -> bool:
    """'127.0.0.1.9092', '::1.2181', '*.*' (BSD/macOS) vs '127.0.0.1:9092', '::ffff:1.2.3.4:9092', '[::]:*' (Linux)."""
    return bool(_BSD_PORT.search(addr)) and not _LINUX_PORT.search(addr)


def split_hostport(addr: str, bsd: bool = False) -> tuple[str, int | None]:
    """'::ffff:192.168.1.219:9092' -> ('192.168.1.219', 9092); '[::1]:9092' -> ('::1', 9092); '*:*' -> ('*', None);
    BSD style (bsd=True): '192.168.1.5.9092' -> ('192.168.1.5', 9092), '*.9092' -> ('*', 9092), '*.*' -> ('*', None)."""
    a = addr.strip()
    if bsd:
        m = _BSD_ADDR.match(a)
        if m:
            host, port = m.group("host"), m.group("port")
        else:
            host, port = a, ""
    elif a.startswith("[") and "]:" in a:
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
        p = SERVICE_PORTS.get(port)  # a service name (no -n); None when unknown or "*"
    return host or "*", p


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
    in_unix = False
    bsd = False
    nonblank = 0
    seen: set[tuple] = set()
    names: dict[str, int] = {}  # service names read as ports
    cut = 0  # netstat -A addresses cut to 18 characters
    for i, raw in iter_lines(d.text):
        ln = raw.rstrip()
        if not ln.strip():
            continue
        nonblank += 1
        s = ln.strip()
        if _UNIX_SECTION.match(s):
            in_unix = True
            table.ignored_lines += 1
            continue
        if _HEADERS.match(s):
            table.ignored_lines += 1
            if s.startswith("Active Internet"):
                in_unix = False
            if "(state)" in s:
                bsd = True
            continue
        if in_unix or _UNIX_ROW.match(s):
            table.unix_rows += 1
            continue
        row = None
        pcb = _BSD_PCB.match(s) if s[0] not in "tu" else None
        if pcb:
            s = s[pcb.end():]
        m = _NETSTAT_ROW.match(s)
        if m:
            proto = m.group("proto")
            row_bsd = bsd or pcb is not None or _bsd_address(m.group("local"))
            state = m.group("state")
            prog = m.group("prog")
            if state is not None and state not in _NETSTAT_STATES and state not in _BSD_STATES:
                prog, state = (state + " " + (prog or "")).strip(), None  # udp rows: that column is the program
            state = _BSD_STATES.get(state, state) if state else ("UNCONN" if proto.startswith("udp") else "UNKNOWN")
            pid = program = None
            if prog and prog != "-":
                pm = _NETSTAT_PROG.match(prog)
                if pm:
                    pid, program = int(pm.group("pid")), pm.group("prog").strip()
                else:
                    program = prog
            row = _row(i, proto, state, m, pid, program, row_bsd)
            table.format = table.format or ("netstat_bsd" if row_bsd else "netstat")
        else:
            m = _SS_ROW.match(s)
            if m and m.group("state") in _SS_STATES:
                pid = program = None
                if m.group("prog"):
                    um = _SS_USERS.search(m.group("prog"))
                    if um:
                        pid, program = int(um.group("pid")), um.group("prog")
                row = _row(i, m.group("netid") or "tcp", _SS_STATES[m.group("state")], m, pid, program, False)
                table.format = table.format or "ss"
        if row is None:
            table.unrecognized.add(i, ln)
            continue
        row_bsd = table.format == "netstat_bsd"
        for a in (row.local, row.peer):
            n = _named_port(a, row_bsd)
            if n is not None:
                names[n] = names.get(n, 0) + 1
        if pcb is not None and (len(row.local) >= BSD_A_ADDRESS_WIDTH or len(row.peer) >= BSD_A_ADDRESS_WIDTH):
            cut += 1
            row = _cut(row)
        if row.key in seen and row.state != "LISTEN" and row.local_port is not None and row.peer_port is not None:
            table.duplicates += 1
            continue
        seen.add(row.key)
        table.rows.append(row)
    if table.duplicates:
        table.notes.append(f"{table.duplicates} repeated row(s) of the same socket counted once")
    if names:
        known = {n: c for n, c in names.items() if n in SERVICE_PORTS}
        unknown = {n: c for n, c in names.items() if n not in SERVICE_PORTS}
        table.notes.append("ports given by service name (ss/netstat without -n): "
                           + ", ".join(f"{n}={SERVICE_PORTS[n]} x{c}" for n, c in sorted(known.items()))
                           + ("; " if known and unknown else "")
                           + (f"ports unknown for {', '.join(f'{n} x{c}' for n, c in sorted(unknown.items())[:10])}"
                              if unknown else ""))
    if cut:
        table.notes.append(f"{cut} row(s) with an address that fills netstat -A's {BSD_A_ADDRESS_WIDTH} characters: its "
                           "port may be cut, so it is left unknown (capture without -A, or with -W)")
    if not table.rows and (table.unrecognized.count or not (table.ignored_lines or table.unix_rows)):
        first = f" (first at line {table.unrecognized.samples[0].line})" if table.unrecognized.count else ""
        table.unparsable.append(f"no socket rows recognised: {table.unrecognized.count} of {nonblank} non-blank lines not "
                                f"understood{first}")
    elif table.unrecognized.count * 2 > nonblank:
        table.unparsable.append(
            f"{table.unrecognized.count} of {nonblank} non-blank lines are not ss/netstat rows "
            f"(first at line {table.unrecognized.samples[0].line})"
        )
    return table


def _cut(row: SocketRow) -> SocketRow:
    """A netstat -A row whose address filled all 18 characters: the end of it (the port) may be cut off."""
    import dataclasses

    lp = row.local_port if len(row.local) < BSD_A_ADDRESS_WIDTH else None
    pp = row.peer_port if len(row.peer) < BSD_A_ADDRESS_WIDTH else None
    return dataclasses.replace(row, local_port=lp, peer_port=pp)


def _row(i: int, proto: str, state: str, m: re.Match, pid: int | None, program: str | None, bsd: bool) -> SocketRow:
    lh, lp = split_hostport(m.group("local"), bsd)
    ph, pp = split_hostport(m.group("peer"), bsd)
    return SocketRow(
        line=i, proto=proto, state=state, recv_q=int(m.group("rq")), send_q=int(m.group("sq")),
        local=m.group("local"), peer=m.group("peer"), local_host=lh, local_port=lp, peer_host=ph, peer_port=pp,
        pid=pid, program=program,
    )
