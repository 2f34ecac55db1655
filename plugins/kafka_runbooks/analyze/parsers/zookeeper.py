"""ZooKeeper four-letter-word outputs (``mntr``, ``srvr``/``stat``, ``cons``) and configuration files
(``zoo.cfg``, Kafka's ``server.properties``). Pure; the words themselves are fetched by the one
four-letter-word client in ``hooks/zookeeper.py``.

``ruok`` is deliberately not parsed: a server that lost quorum still answers ``imok``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kafka_runbooks.host.properties import property_line

from .base import decode_evidence, iter_lines


def epoch_of(zxid: int | None) -> int | None:
    """A zxid's high 32 bits are the leader epoch."""
    return None if zxid is None else zxid >> 32


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    v = v.strip()
    try:
        return int(v, 16) if v.lower().startswith("0x") else int(float(v)) if "." in v else int(v)
    except ValueError:
        return None


@dataclass
class ZkStats:
    """One server's state from mntr and/or srvr (fields stay None when that word did not report them)."""

    mode: str | None = None  # leader | follower | observer | standalone | read-only
    version: str | None = None
    zxid: int | None = None
    connections: int | None = None
    outstanding: int | None = None
    packets_received: int | None = None
    packets_sent: int | None = None
    latency_min: float | None = None
    latency_avg: float | None = None
    latency_max: float | None = None
    node_count: int | None = None
    synced_followers: int | None = None
    learners: int | None = None
    peer_state: str | None = None
    raw: dict[str, str] = field(default_factory=dict)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    @property
    def epoch(self) -> int | None:
        return epoch_of(self.zxid)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in ("mode", "version", "zxid", "connections", "outstanding", "packets_received",
                                           "packets_sent", "latency_min", "latency_avg", "latency_max", "node_count",
                                           "synced_followers", "learners", "peer_state")}
        d["epoch"] = self.epoch
        d["zxid_hex"] = hex(self.zxid) if self.zxid is not None else None
        return d


_MNTR_MAP = {
    "zk_server_state": ("mode", str), "zk_version": ("version", str), "zk_num_alive_connections": ("connections", _int),
    "zk_outstanding_requests": ("outstanding", _int), "zk_packets_received": ("packets_received", _int),
    "zk_packets_sent": ("packets_sent", _int), "zk_min_latency": ("latency_min", float), "zk_avg_latency": ("latency_avg", float),
    "zk_max_latency": ("latency_max", float), "zk_znode_count": ("node_count", _int),
    "zk_synced_followers": ("synced_followers", _int), "zk_learners": ("learners", _int), "zk_peer_state": ("peer_state", str),
    "zk_last_zxid": ("zxid", _int), "zk_zxid": ("zxid", _int),
}


def parse_mntr(data: bytes | str | None) -> ZkStats:
    d = decode_evidence(data)
    s = ZkStats()
    if d.problems:
        s.unparsable.extend(d.problems)
        return s
    for _, ln in iter_lines(d.text):
        if "\t" not in ln:
            continue
        k, _, v = ln.partition("\t")
        k, v = k.strip(), v.strip()
        s.raw[k] = v
        if k in _MNTR_MAP:
            attr, conv = _MNTR_MAP[k]
            try:
                setattr(s, attr, conv(v))
            except ValueError:
                pass
    if not s.raw:
        s.unparsable.append("no 'zk_<name>\\t<value>' lines (is 4lw.commands.whitelist missing mntr?)"
                            if "not in the whitelist" not in d.text else d.text.strip()[:200])
    return s


_SRVR = re.compile(r"^(?P<k>Zookeeper version|Latency min/avg/max|Received|Sent|Connections|Outstanding|Zxid|Mode|Node count)"
                   r":\s{0,10}(?P<v>.{0,300})$", re.ASCII)


def parse_srvr(data: bytes | str | None) -> ZkStats:
    """`srvr` (and the summary part of `stat`)."""
    d = decode_evidence(data)
    s = ZkStats()
    if d.problems:
        s.unparsable.extend(d.problems)
        return s
    for _, ln in iter_lines(d.text):
        m = _SRVR.match(ln.strip())
        if not m:
            continue
        k, v = m.group("k"), m.group("v").strip()
        s.raw[k] = v
        if k == "Zookeeper version":
            s.version = v
        elif k == "Latency min/avg/max":
            parts = v.split("/")
            if len(parts) == 3:
                try:
                    s.latency_min, s.latency_avg, s.latency_max = (float(x) for x in parts)
                except ValueError:
                    pass
        elif k == "Received":
            s.packets_received = _int(v)
        elif k == "Sent":
            s.packets_sent = _int(v)
        elif k == "Connections":
            s.connections = _int(v)
        elif k == "Outstanding":
            s.outstanding = _int(v)
        elif k == "Zxid":
            s.zxid = _int(v)
        elif k == "Mode":
            s.mode = v
        elif k == "Node count":
            s.node_count = _int(v)
    if not s.raw:
        s.unparsable.append("no srvr fields (Mode:, Zxid:, ...) recognised"
                            + (": " + d.text.strip()[:160] if d.text.strip() else ""))
    return s


@dataclass(frozen=True)
class ZkConnection:
    line: int
    host: str
    port: int | None
    session: str | None
    received: int | None
    sent: int | None
    last_op: str | None
    timeout_ms: int | None


@dataclass
class ZkCons:
    connections: list[ZkConnection] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable


_CONS = re.compile(r"^\s{0,4}/(?P<addr>[0-9a-fA-F.:\[\]%a-zA-Z_-]{1,100}):(?P<port>[0-9]{1,5})\[(?P<ops>[0-9]{1,3})\]\((?P<fields>[^)\n]{0,600})\)\s{0,4}$",
                   re.ASCII)


def parse_cons(data: bytes | str | None) -> ZkCons:
    d = decode_evidence(data)
    c = ZkCons()
    if d.problems:
        c.unparsable.extend(d.problems)
        return c
    for i, ln in iter_lines(d.text):
        if not ln.strip():
            continue
        m = _CONS.match(ln)
        if not m:
            continue
        f = dict(kv.split("=", 1) for kv in m.group("fields").split(",") if "=" in kv)
        c.connections.append(ZkConnection(i, m.group("addr"), _int(m.group("port")), f.get("sid"), _int(f.get("recved")),
                                          _int(f.get("sent")), f.get("lop"), _int(f.get("to"))))
    if not c.connections and d.text.strip():
        c.unparsable.append("no connection lines ( /host:port[n](...) ) recognised")
    return c


@dataclass
class Properties:
    values: dict[str, str] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def int(self, key: str) -> int | None:
        return _int(self.values.get(key))


def parse_properties(data: bytes | str | None) -> Properties:
    """zoo.cfg / server.properties, read by ``host.properties.property_line``, with each key's line number."""
    d = decode_evidence(data)
    p = Properties()
    if d.problems:
        p.unparsable.extend(d.problems)
        return p
    for i, ln in iter_lines(d.text):
        kv = property_line(ln, blank_separates=False)  # a line of prose is no property here
        if kv:
            p.values[kv[0]] = kv[1]
            p.lines[kv[0]] = i
    if not p.values:
        p.unparsable.append("no key=value lines")
    return p
