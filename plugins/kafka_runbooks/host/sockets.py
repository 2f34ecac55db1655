"""The socket tables of a broker host, and the one endpoint filter. Pure: text in, data out.

Reads ``ss -Hltnp`` / ``netstat -ltnp`` (listeners and their processes) and ``ss -Htan[i]`` /
``netstat -tan`` (connections, their queues and, with ``-i``, their byte counters). States use
netstat's spelling (ESTABLISHED, CLOSE_WAIT, ...).

:class:`Endpoint` is the filter every probe and capture decision uses: the broker's ports on the
broker's OWN addresses. Several brokers may share one socket table (hosts on one machine, as in
the lab), so a connection counts for a broker only when its local end is one of that broker's
addresses -- never "any socket on port 9092". Host names are resolved to addresses before they
get here (:func:`kafka_runbooks.detect.endpoints.broker_endpoint`); a name is never compared
with an address.

(analyze/parsers/sockets.py parses captured tables for the analysis with its own parser; the two
should become one -- noted for the lead, not merged here because analyze/ is being rewritten.)
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from typing import Iterable

WILDCARDS = frozenset({"*", "0.0.0.0", "::", ""})

SS_STATES = {
    "ESTAB": "ESTABLISHED",
    "SYN-SENT": "SYN_SENT",
    "SYN-RECV": "SYN_RECV",
    "FIN-WAIT-1": "FIN_WAIT1",
    "FIN-WAIT-2": "FIN_WAIT2",
    "TIME-WAIT": "TIME_WAIT",
    "CLOSE-WAIT": "CLOSE_WAIT",
    "LAST-ACK": "LAST_ACK",
    "LISTEN": "LISTEN",
    "CLOSING": "CLOSING",
    "UNCONN": "CLOSE",
    "CLOSED": "CLOSE",
}
NETSTAT_STATES = frozenset(
    {"ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT",
     "LAST_ACK", "LISTEN", "CLOSING", "UNKNOWN"}
)
_PID_RE = re.compile(r"pid=(\d+)")
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


def split_host_port(s: str) -> tuple[str, int | None]:
    """'127.0.0.1:9092', '[::ffff:127.0.0.1]:9092', '*:9092', ':::9092' (netstat) -> (addr, port)."""
    s = s.strip()
    if s.startswith("["):
        host, _, rest = s[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = s.rpartition(":")
    try:
        p = int(port)
    except ValueError:
        p = None
    return norm_addr(host), p


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


def parse_ss_listeners(text: str) -> list[Listener]:
    """``ss -Hltnp`` (header tolerated): State Recv-Q Send-Q Local Peer [Process]."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5 or parts[0] != "LISTEN":
            continue
        addr, port = split_host_port(parts[3])
        if port is None:
            continue
        pids = tuple(dict.fromkeys(int(p) for p in _PID_RE.findall(" ".join(parts[5:]))))
        out.append(Listener(addr, port, pids))
    return out


def parse_netstat_listeners(text: str) -> list[Listener]:
    """``netstat -ltnp``: Proto Recv-Q Send-Q Local Foreign State PID/Program."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or not parts[0].startswith("tcp") or "LISTEN" not in parts:
            continue
        addr, port = split_host_port(parts[3])
        if port is None:
            continue
        pids: tuple[int, ...] = ()
        if len(parts) >= 7:
            m = re.match(r"(\d+)/", parts[6])
            if m:
                pids = (int(m.group(1)),)
        out.append(Listener(addr, port, pids))
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
    """``ss -Htan[i]`` (``-i`` info lines are attached to the socket above them) or ``netstat -tan``."""
    out: list[Connection] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not netstat and line[:1] in (" ", "\t"):  # ss -i: the info line of the previous socket
            if out:
                counters = dict(_COUNTER_RE.findall(line))
                if counters:
                    prev = out[-1]
                    out[-1] = Connection(
                        prev.state, prev.recv_q, prev.send_q, prev.local_addr, prev.local_port, prev.peer_addr,
                        prev.peer_port, int(counters.get("bytes_received", 0)), int(counters.get("bytes_acked", 0)),
                    )
            continue
        parts = line.split()
        if netstat:
            if len(parts) < 6 or not parts[0].startswith("tcp") or parts[5] not in NETSTAT_STATES:
                continue
            state, rq, sq, local, peer = parts[5], parts[1], parts[2], parts[3], parts[4]
        else:
            if len(parts) < 5 or parts[0] not in SS_STATES:
                continue
            state, rq, sq, local, peer = SS_STATES[parts[0]], parts[1], parts[2], parts[3], parts[4]
        if not (rq.isdigit() and sq.isdigit()):
            continue
        laddr, lport = split_host_port(local)
        paddr, pport = split_host_port(peer)
        if lport is None:
            continue
        out.append(Connection(state, int(rq), int(sq), laddr, lport, paddr, pport))
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
