"""The socket tables of a host, and the one endpoint filter. Pure: text in, data out.

The one socket-row reader (:func:`read_row`) for every user: the host probes and the capture read ``ss -Hltnp`` /
``netstat -ltnp`` (listeners and their processes) and ``ss -Htan[i]`` / ``netstat -tan`` (connections, their queues
and, with ``-i``, their byte counters) through it; the analysis (``analyze/parsers/sockets.py``) reads whole captured
tables through it too -- Linux ``ss -tanp`` (with or without -H, with or without a Netid column, ``ss -a`` with its
wide columns), Linux ``netstat -an[t]p``, macOS/BSD ``netstat -an[p tcp]`` (``host.port`` addresses) and
``netstat -An`` (each row led by its PCB address and flow hash). States use netstat's spelling (ESTABLISHED,
CLOSE_WAIT, ...).

:class:`Endpoint` is the filter every probe and capture decision uses: the broker's ports on the
broker's OWN addresses. Several brokers may share one socket table (hosts on one machine, as in
the lab), so a connection counts for a broker only when its local end is one of that broker's
addresses -- never "any socket on port 9092". Host names are resolved to addresses before they
get here (:func:`kafka_runbooks.detect.endpoints.broker_endpoint`); a name is never compared
with an address.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Iterable

WILDCARDS = frozenset({"*", "0.0.0.0", "::", ""})

SS_STATES = {
    "ESTAB": "ESTABLISHED", "LISTEN": "LISTEN", "CLOSE-WAIT": "CLOSE_WAIT", "TIME-WAIT": "TIME_WAIT",
    "FIN-WAIT-1": "FIN_WAIT1", "FIN-WAIT-2": "FIN_WAIT2", "SYN-SENT": "SYN_SENT", "SYN-RECV": "SYN_RECV",
    "LAST-ACK": "LAST_ACK", "CLOSING": "CLOSING", "UNCONN": "UNCONN", "CLOSED": "CLOSE",
}
NETSTAT_STATES = frozenset(
    {"ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT",
     "LAST_ACK", "LISTEN", "CLOSING", "UNKNOWN"}
)
BSD_STATES = {"FIN_WAIT_1": "FIN_WAIT1", "FIN_WAIT_2": "FIN_WAIT2", "SYN_RCVD": "SYN_RECV", "CLOSED": "CLOSE"}
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
# service names ss/netstat print without -n for the ports the product reads (IANA's names, as in /etc/services)
SERVICE_PORTS = {"XmlIpcRegSvc": 9092, "eforward": 2181, "ssh": 22}
_SS_USERS = re.compile(r'\("(?P<prog>[^"\n]{0,200})",pid=(?P<pid>[0-9]{1,10})', re.ASCII)
_PID_RE = re.compile(r"pid=([0-9]{1,10})")
_NETSTAT_PROG = re.compile(r"^(?P<pid>[0-9]{1,10})/(?P<prog>\S.{0,300})$", re.ASCII)
_BSD_ADDR = re.compile(r"^(?P<host>.{1,200})\.(?P<port>[0-9]{1,5}|\*)$")
_LINUX_PORT = re.compile(r":(?:[0-9]{1,5}|\*)$")
_BSD_PORT = re.compile(r"\.(?:[0-9]{1,5}|\*)$")
_COUNTER_RE = re.compile(r"\b(bytes_received|bytes_acked):(\d+)")


def norm_addr(addr: str) -> str:
    """'[::ffff:127.0.0.1]' -> '127.0.0.1'; strips brackets, interface scopes and the v4-mapped prefix."""
    addr = addr.strip()
    if addr.startswith("[") and addr.endswith("]"):
        addr = addr[1:-1]
    if "%" in addr:  # interface scope, e.g. 0.0.0.0%lo or fe80::1%eth0
        addr = addr.split("%", 1)[0]
    if addr.lower().startswith("::ffff:") and "." in addr:
        addr = addr[7:]
    return addr


def bsd_address(addr: str) -> bool:
    """'127.0.0.1.9092', '::1.2181', '*.*' (BSD/macOS) vs '127.0.0.1:9092', '::ffff:1.2.3.4:9092', '[::]:*' (Linux)."""
    return bool(_BSD_PORT.search(addr)) and not _LINUX_PORT.search(addr)


def split_host_port(addr: str, bsd: bool = False) -> tuple[str, int | None]:
    """'::ffff:192.168.1.219:9092' -> ('192.168.1.219', 9092); '[::1]:9092' -> ('::1', 9092); ':::9092' (netstat) ->
    ('::', 9092); '*:*' -> ('*', None); '127.0.0.53%lo:53' -> ('127.0.0.53', 53); a service name (no -n) -> its port
    when known (``SERVICE_PORTS``), else None. BSD style (bsd=True): '192.168.1.5.9092' -> ('192.168.1.5', 9092),
    '*.9092' -> ('*', 9092), '*.*' -> ('*', None)."""
    a = addr.strip()
    if bsd:
        m = _BSD_ADDR.match(a)
        host, port = (m.group("host"), m.group("port")) if m else (a, "")
    elif a.startswith("[") and "]:" in a:
        host, _, port = a[1:].rpartition("]:")
    else:
        host, sep, port = a.rpartition(":")
        if not sep:
            return norm_addr(a) or "*", None
    try:
        p: int | None = int(port)
    except ValueError:
        p = SERVICE_PORTS.get(port)  # None when unknown or "*"
    return norm_addr(host) or "*", p


@dataclass(frozen=True)
class Row:
    """One socket row of ss or netstat, as printed (addresses unsplit), with the process column read."""

    proto: str
    state: str
    recv_q: int
    send_q: int
    local: str
    peer: str
    pids: tuple[int, ...] = ()
    program: str | None = None
    format: str = "ss"  # "ss" | "netstat" | "netstat_bsd"
    pcb: bool = False  # led by a macOS netstat -A PCB address: a long address may be cut


def read_row(line: str, *, bsd: bool = False) -> Row | None:
    """One line of ss or netstat (Linux, or BSD/macOS with ``bsd`` or BSD-style addresses) -> :class:`Row`, or None
    when it is no socket row (a header, a UNIX-domain row, an ss ``-i`` info line, anything else)."""
    s = line.strip()
    if not s:
        return None
    pcb = _BSD_PCB.match(s) if s[0] not in "tu" else None
    if pcb:
        s = s[pcb.end():]
    m = _NETSTAT_ROW.match(s)
    if m:
        return _netstat_row(m, bsd or pcb is not None or bsd_address(m.group("local")), pcb is not None)
    m = _SS_ROW.match(s)
    if m and m.group("state") in SS_STATES:
        prog = m.group("prog") or ""
        um = _SS_USERS.search(prog)
        pids = tuple(dict.fromkeys(int(p) for p in _PID_RE.findall(prog)))
        return Row(m.group("netid") or "tcp", SS_STATES[m.group("state")], int(m.group("rq")), int(m.group("sq")),
                   m.group("local"), m.group("peer"), pids, um.group("prog") if um else None, "ss")
    return None


def _netstat_row(m: re.Match, bsd: bool, pcb: bool) -> Row:
    proto, state, prog = m.group("proto"), m.group("state"), m.group("prog")
    if state is not None and state not in NETSTAT_STATES and state not in BSD_STATES:
        prog, state = (state + " " + (prog or "")).strip(), None  # udp rows: that column is the program
    state = BSD_STATES.get(state, state) if state else ("UNCONN" if proto.startswith("udp") else "UNKNOWN")
    pids: tuple[int, ...] = ()
    program = None
    if prog and prog != "-":
        pm = _NETSTAT_PROG.match(prog)
        if pm:
            pids, program = (int(pm.group("pid")),), pm.group("prog").strip()
        else:
            program = prog
    return Row(proto, state, int(m.group("rq")), int(m.group("sq")), m.group("local"), m.group("peer"), pids, program,
               "netstat_bsd" if bsd else "netstat", pcb)


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(norm_addr(host))
        return True
    except ValueError:
        return False


@dataclass(frozen=True)
class Listener:
    address: str
    port: int
    pids: tuple[int, ...]


@dataclass(frozen=True)
class Connection:
    state: str
    recv_q: int
    send_q: int
    local_addr: str
    local_port: int
    peer_addr: str
    peer_port: int | None
    bytes_received: int | None = None  # ss -i counters (None without -i, or for netstat)
    bytes_acked: int | None = None


@dataclass(frozen=True)
class Endpoint:
    """A broker's sockets: its ``ports`` on its ``addresses`` (IP literals, already resolved)."""

    addresses: frozenset[str]
    ports: tuple[int, ...]  # the configured listener's port first

    @classmethod
    def of(cls, addresses: Iterable[str], ports: Iterable[int]) -> "Endpoint":
        addrs = frozenset(norm_addr(a) for a in addresses if a and is_ip(a))
        return cls(addrs, tuple(dict.fromkeys(int(p) for p in ports)))

    def local(self, addr: str, port: int | None) -> bool:
        """Is (addr, port) one of this broker's own local socket ends?"""
        return port in self.ports and norm_addr(addr) in self.addresses

    def listens(self, listener: Listener) -> bool:
        return listener.port in self.ports and (listener.address in self.addresses or listener.address in WILDCARDS)


@dataclass(frozen=True)
class SocketSummary:
    """The broker's connections (its local ends), LISTEN excluded."""

    states: dict[str, int] = field(default_factory=dict)
    recv_q_bytes: int = 0
    recv_q_sockets: int = 0
    bytes_received: int | None = None
    bytes_acked: int | None = None

    @property
    def close_wait(self) -> int:
        return self.states.get("CLOSE_WAIT", 0)


# --------------------------------------------------------------------------- listeners


def parse_listeners(text: str) -> list[Listener]:
    """The LISTEN rows of ``ss -Hltnp`` or ``netstat -ltnp`` (headers tolerated): address, port and the visible
    processes (``pid=`` of ss's users column, ``PID/Program`` of netstat's)."""
    out = []
    for line in text.splitlines():
        row = read_row(line)
        if row is None or row.state != "LISTEN" or not row.proto.startswith("tcp"):
            continue
        addr, port = split_host_port(row.local, row.format == "netstat_bsd")
        if port is not None:
            out.append(Listener(addr, port, row.pids))
    return out


def find_broker_pid(listeners: Iterable[Listener], endpoint: Endpoint) -> int | None:
    """The visible process listening on the endpoint's ports (in order: the configured listener's
    port first) at one of its addresses, else at a wildcard address. Only listeners whose process
    is visible (pid known) count: on a shared socket table other users' processes show no pid."""
    listeners = [l for l in listeners if l.pids]
    for port in endpoint.ports:
        on_port = [l for l in listeners if l.port == port]
        for group in ([l for l in on_port if l.address in endpoint.addresses], [l for l in on_port if l.address in WILDCARDS]):
            pids = list(dict.fromkeys(p for l in group for p in l.pids))
            if pids:
                return pids[0]
    return None


def listening(listeners: Iterable[Listener], endpoint: Endpoint, pid: int | None = None) -> bool:
    """Does someone (``pid``, when given and visible) hold a listening socket on the endpoint?"""
    return any(endpoint.listens(l) and (pid is None or not l.pids or pid in l.pids) for l in listeners)


# --------------------------------------------------------------------------- connections


def parse_connections(text: str, *, netstat: bool = False) -> list[Connection]:
    """``ss -Htan[i]`` (``-i`` info lines are attached to the socket above them) or ``netstat -tan``; ``netstat``
    says which was run (an ss info line is only read as one after ss)."""
    out: list[Connection] = []
    for line in text.splitlines():
        if not netstat and line[:1] in (" ", "\t") and line.strip():  # ss -i: the info line of the socket above
            counters = dict(_COUNTER_RE.findall(line))
            if out and counters:
                prev = out[-1]
                out[-1] = Connection(
                    prev.state, prev.recv_q, prev.send_q, prev.local_addr, prev.local_port, prev.peer_addr,
                    prev.peer_port, int(counters.get("bytes_received", 0)), int(counters.get("bytes_acked", 0)),
                )
            continue
        row = read_row(line)
        if row is None or not row.proto.startswith("tcp"):
            continue
        bsd = row.format == "netstat_bsd"
        laddr, lport = split_host_port(row.local, bsd)
        paddr, pport = split_host_port(row.peer, bsd)
        if lport is not None:
            out.append(Connection(row.state, row.recv_q, row.send_q, laddr, lport, paddr, pport))
    return out


def summarize(connections: Iterable[Connection], endpoint: Endpoint) -> SocketSummary:
    """State counts, Recv-Q and byte counters of the broker's own connections (LISTEN excluded)."""
    states: dict[str, int] = {}
    rq_bytes = rq_sockets = 0
    received = acked = None
    for c in connections:
        if c.state == "LISTEN" or not endpoint.local(c.local_addr, c.local_port):
            continue
        states[c.state] = states.get(c.state, 0) + 1
        rq_bytes += c.recv_q
        rq_sockets += 1 if c.recv_q > 0 else 0
        if c.bytes_received is not None:
            received = (received or 0) + c.bytes_received
            acked = (acked or 0) + (c.bytes_acked or 0)
    return SocketSummary(dict(sorted(states.items())), rq_bytes, rq_sockets, received, acked)


def connection_states(text: str, endpoint: Endpoint, *, netstat: bool = False) -> dict[str, int]:
    """state -> count of the broker's connections, from ``ss -tan[p]`` or ``netstat -an[p]``."""
    return summarize(parse_connections(text, netstat=netstat), endpoint).states
