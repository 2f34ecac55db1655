"""Socket tables against the brokers' listeners: which rows are a broker's own server side, and connections piling
up in CLOSE_WAIT (the broker stopped reading sockets its peers already closed)."""

from __future__ import annotations

import ipaddress
from collections import Counter
from typing import Iterable

from ...findings import FindingKind
from ...model import Evidence, Finding, Severity
from ..parsed_file import ParsedFile
from ..parsers.sockets import SocketTable
from .core import MAX_CITED_LINES, broker_label, by_broker

DEFAULT_BROKER_PORT = 9092
CLOSE_WAIT_MIN = 5


def socket_tables(files: Iterable[ParsedFile]) -> dict[int | None, list[ParsedFile]]:
    """Connection tables per broker, in capture order; listener-only tables (``ss -Hltnp``) are left out (they
    would read as 'no connections' between two samples)."""
    out = {}
    for b, fs in by_broker(files, ("sockets_ss", "sockets_netstat")).items():
        keep = [f for f in fs if any(r.state != "LISTEN" for r in f.result.rows) or not f.result.rows]
        if keep:
            out[b] = keep
    return out


def broker_ports_of(broker: int | None, broker_ports: dict | None) -> tuple[int, ...]:
    """The broker's listener ports (every listener: CLIENT, REPLICATION, ...); a value may be one port or several."""
    v = (broker_ports or {}).get(broker) if broker is not None else None
    if v is None:
        return (DEFAULT_BROKER_PORT,)
    if isinstance(v, int):
        return (v,)
    ports = sorted({int(x) for x in v})
    return tuple(ports) or (DEFAULT_BROKER_PORT,)


def broker_port_of(broker: int | None, broker_ports: dict | None) -> int:
    return broker_ports_of(broker, broker_ports)[0]


def _is_ip(h: str) -> bool:
    try:
        ipaddress.ip_address(h)
        return True
    except ValueError:
        return False


def broker_addresses_of(broker: int | None, broker_hosts: dict | None) -> frozenset[str]:
    """The broker's own addresses (one or several); names are left out (a name is never compared with an address)."""
    v = (broker_hosts or {}).get(broker) if broker is not None else None
    if not v:
        return frozenset()
    vals = [v] if isinstance(v, str) else list(v)
    return frozenset(h for h in vals if isinstance(h, str) and _is_ip(h))


def on_broker_endpoint(row, broker: int | None, broker_ports: dict | None, broker_hosts: dict | None = None) -> bool:
    """A server-side socket of one of the broker's own listeners: its ports and, when the broker's addresses are
    known, one of those addresses (hosts sharing one socket table, or with several addresses, show others' sockets
    too)."""
    if row.local_port not in broker_ports_of(broker, broker_ports):
        return False
    hosts = broker_addresses_of(broker, broker_hosts)
    return not hosts or row.local_host in hosts or row.local_host in ("*", "0.0.0.0", "::")


def close_wait_findings(files: list[ParsedFile], broker_ports: dict[int, int] | None,
                         broker_hosts: dict[int, str] | None = None) -> list[Finding]:
    tables = socket_tables(files)
    port_counts: dict[int | None, dict[str, int]] = {}
    latest: dict[int | None, ParsedFile] = {}
    for b, fs in tables.items():
        f = fs[-1]
        latest[b] = f
        port_counts[b] = dict(Counter(r.state for r in f.result.rows
                                      if r.state != "LISTEN" and on_broker_endpoint(r, b, broker_ports, broker_hosts)))
    findings = []
    for b, f in latest.items():
        t: SocketTable = f.result
        ports = broker_ports_of(b, broker_ports)
        port = ports[0]
        rows = [r for r in t.rows if on_broker_endpoint(r, b, broker_ports, broker_hosts) and r.state != "LISTEN"]
        cw = [r for r in rows if r.state == "CLOSE_WAIT"]
        if len(cw) < CLOSE_WAIT_MIN or len(cw) * 2 < len(rows):
            continue
        peers = Counter(r.peer_host for r in cw)
        recvq = sum(r.recv_q for r in cw)
        others = {str(o): c for o, c in port_counts.items() if o != b}
        summary = (f"connections piling up in CLOSE_WAIT on {broker_label(b)}: {len(cw)} of {len(rows)} connections to its listener{'s' if len(ports) > 1 else ''} "
                   f"{', '.join(f':{p}' for p in ports)} (peers: {', '.join(f'{h} x{n}' for h, n in peers.most_common(5))}); {recvq} bytes unread in Recv-Q")
        if others:
            summary += f"; other brokers' listeners: " + ", ".join(
                f"{o}: {c.get('CLOSE_WAIT', 0)} CLOSE_WAIT / {sum(c.values())}" for o, c in others.items())
        cited = cw[:MAX_CITED_LINES]
        findings.append(Finding(
            kind=FindingKind.BROKER_SOCKET_PILEUP, severity=Severity.CRITICAL if len(cw) >= 100 else Severity.WARNING, summary=summary,
            broker_ids=(b,) if b is not None else (),
            evidence=(Evidence(source=f.path, lines=tuple(r.line for r in cited),
                               excerpt="\n".join(f"{r.line}: {r.state} recv_q={r.recv_q} {r.local} <- {r.peer}" for r in cited[:10]),
                               host=f.host),),
            details={"port": port, "ports": list(ports), "port_label": f"Kafka listener(s) of {broker_label(b)}", "states_on_port": port_counts[b],
                     "close_wait_by_peer": dict(peers), "recv_q_bytes_close_wait": recvq, "other_brokers_on_port": others,
                     "counted_once": True, "duplicates_dropped": t.duplicates,
                     "meaning": "the broker stopped closing (reading) sockets its peers already closed: "
                                "its network/request threads are not making progress"},
        ))
    return findings
