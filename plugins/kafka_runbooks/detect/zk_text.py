"""Reading what a ZooKeeper server says: its four-letter words and its log lines. Pure.

ADAPTER, TO BE REPLACED: the analysis helper's ``kafka_runbooks.analyze.parsers.zookeeper``
(``parse_mntr``, ``parse_srvr``, ``parse_cons``, ``parse_properties``) and its log signatures
(``zk_follow_exception``, ``zk_election_took``, ...) are on its branch, not on main yet. This module
reads the same texts the same way for the health probe; once they land, its bodies become calls to
theirs (mntr's ``raw`` dict carries ``zk_uptime`` and ``zk_cnt_election_time``, which the probe needs).

Wordings, as ZooKeeper 3.8 prints them on the lab's ensemble (and 3.6 in seed 004)::

    2026-11-22 15:44:43,735 [myid:1] - WARN  [QuorumPeer[myid=1](plain=127.106.0.1:2181)(secure=disabled):Follower@128] - Exception when following the leader
    2026-11-22 15:44:43,775 [myid:1] - INFO  [QuorumPeer[myid=1](...):QuorumPeer@917] - Peer state changed: looking
    2026-11-22 15:44:43,784 [myid:1] - INFO  [QuorumPeer[myid=1](...):Follower@77] - FOLLOWING - LEADER ELECTION TOOK - 9 MS
    2026-11-22 15:44:41,133 [myid:3] - ERROR [LearnerHandler-/127.0.0.1:50172:LearnerHandler@719] - Unexpected exception in LearnerHandler:
    2026-11-22 15:44:41,133 [myid:3] - INFO  [LearnerHandler-/127.0.0.1:50172:LearnerHandler@1159] - Synchronously closing socket to learner 1.
    2023-09-01 04:02:01,248 [myid:37] - WARN [QuorumPeer[myid=37](...):LearnerHandler@1077] - Closing connection to peer due to transaction timeout.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

NOT_SERVING = "This ZooKeeper instance is not currently serving requests"


@dataclass(frozen=True)
class Stats:
    """One server's figures from srvr + mntr + cons (None where the words did not say)."""

    serving: bool
    mode: str | None = None
    zxid: int | None = None
    connections: int | None = None  # as the server counts them (the asking connection included)
    packets_received: int | None = None
    packets_sent: int | None = None
    outstanding: int | None = None
    latency_avg_ms: float | None = None
    latency_max_ms: float | None = None
    uptime_ms: int | None = None
    elections: int | None = None
    learners: int | None = None
    synced_followers: int | None = None
    version: str | None = None
    clients: tuple[str, ...] = ()  # "host:port" of each connection `cons` listed
    problems: tuple[str, ...] = ()


def _int(v: str | None) -> int | None:
    if v is None:
        return None
    v = v.strip()
    try:
        return int(v, 16) if v.lower().startswith("0x") else int(float(v))
    except ValueError:
        return None


def _float(v: str | None) -> float | None:
    try:
        return float(v) if v is not None else None
    except ValueError:
        return None


def mntr_values(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition("\t")
        if sep and k.strip().startswith("zk_"):
            out[k.strip()] = v.strip()
    return out


def srvr_values(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k.strip() in ("Zookeeper version", "Latency min/avg/max", "Received", "Sent", "Connections", "Outstanding",
                                 "Zxid", "Mode", "Node count"):
            out[k.strip()] = v.strip()
    return out


_CONS = re.compile(r"^\s*/(?P<addr>[^\s\[]+)\[\d+\]\(")


def cons_clients(text: str) -> tuple[str, ...]:
    return tuple(m.group("addr") for m in map(_CONS.match, text.splitlines()) if m)


def stats(srvr: str | None, mntr: str | None, cons: str | None) -> Stats:
    """The figures of one server from whichever of its words answered."""
    texts = [t for t in (srvr, mntr, cons) if t]
    if any(NOT_SERVING in t for t in texts):
        return Stats(serving=False, problems=("the server answers that it is not currently serving requests (no quorum, "
                                              "or it is electing a leader)",))
    s, m = srvr_values(srvr or ""), mntr_values(mntr or "")
    problems = []
    if srvr is not None and not s:
        problems.append("srvr answered nothing recognisable" + (f": {srvr.strip()[:120]!r}" if srvr.strip() else ""))
    if mntr is not None and not m:
        problems.append("mntr answered nothing recognisable (is it in 4lw.commands.whitelist?)"
                        + (f": {mntr.strip()[:120]!r}" if mntr.strip() else ""))
    lat = (s.get("Latency min/avg/max") or "").split("/")
    mode = m.get("zk_server_state") or s.get("Mode")
    return Stats(
        serving=bool(mode),
        mode=mode,
        zxid=_int(s.get("Zxid") or m.get("zk_last_zxid") or m.get("zk_zxid")),
        connections=_int(m.get("zk_num_alive_connections") or s.get("Connections")),
        packets_received=_int(m.get("zk_packets_received") or s.get("Received")),
        packets_sent=_int(m.get("zk_packets_sent") or s.get("Sent")),
        outstanding=_int(m.get("zk_outstanding_requests") or s.get("Outstanding")),
        latency_avg_ms=_float(m.get("zk_avg_latency") or (lat[1] if len(lat) == 3 else None)),
        latency_max_ms=_float(m.get("zk_max_latency") or (lat[2] if len(lat) == 3 else None)),
        uptime_ms=_int(m.get("zk_uptime")),
        elections=_int(m.get("zk_cnt_election_time")),
        learners=_int(m.get("zk_learners")),
        synced_followers=_int(m.get("zk_synced_followers")),
        version=(m.get("zk_version") or s.get("Zookeeper version") or "").split(",")[0].strip() or None,
        clients=cons_clients(cons or ""),
        problems=tuple(problems),
    )


def properties(text: str) -> dict[str, str]:
    """zoo.cfg: key=value lines (# and ! comments)."""
    out = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        k, sep, v = s.partition("=")
        if sep and k.strip():
            out[k.strip()] = v.strip()
    return out


# ------------------------------------------------------------------ the server's log

_LINE = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{1,3}) (?:\[myid:(?P<myid>\d*)\] )?- (?P<level>[A-Z]+)\s+"
                   r"\[(?P<thread>.*?):(?P<cls>[A-Za-z0-9_$]+)@\d+\] - (?P<msg>.*)$")
# an entry glued to the previous one on one physical line (as blogs print them: seed 004)
_GLUED = re.compile(r" (?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[myid:\d*\] - [A-Z]+ )")
# (what, literal, pattern over the message)
SIGNATURES = (
    ("zk_follow_exception", "Exception when following the leader", None),
    ("zk_disconnected_from_leader", "Disconnected from leader",
     re.compile(r"Disconnected from leader \(with address: (?P<leader>\S+)\)\. Was connected for (?P<millis>\d+)ms")),
    ("zk_peer_state", "Peer state changed: looking", re.compile(r"Peer state changed: (?P<state>looking)")),
    ("zk_election_took", "LEADER ELECTION TOOK", re.compile(r"(?P<role>FOLLOWING|LEADING|OBSERVING) - LEADER ELECTION TOOK - (?P<millis>\d+)")),
    ("zk_transaction_timeout", "Closing connection to peer due to transaction timeout", None),
    ("zk_learner_closed", "closing socket to learner", re.compile(r"[Cc]losing socket to learner (?P<sid>\d+)")),
    ("zk_learner_handler_error", "Unexpected exception in LearnerHandler", None),
)
_TS_FORMATS = ("%Y-%m-%d %H:%M:%S,%f", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S,%f", "%Y-%m-%dT%H:%M:%S.%f")


@dataclass(frozen=True)
class ZkLogLine:
    what: str
    at: dt.datetime  # UTC
    line_no: int
    excerpt: str
    attrs: dict[str, str] = field(default_factory=dict)


def _local_time(ts: str) -> dt.datetime | None:
    for fmt in _TS_FORMATS:
        try:
            return dt.datetime.strptime(ts, fmt)
        except ValueError:
            continue
    return None


def log_lines(text: str, since: dt.datetime | None = None, *, utc_offset: dt.timedelta | None = None,
              max_excerpt: int = 300) -> list[ZkLogLine]:
    """The lines of a follower dropping out (and of the leader dropping it), oldest first, with
    ``at >= since`` (UTC). The cause of ``Exception when following the leader`` is the exception line
    under it (3.8) or the rest of its own line (seed 004)."""
    offset = utc_offset or dt.timedelta(0)
    lo = since.astimezone(dt.timezone.utc) if since is not None and since.tzinfo else (since.replace(tzinfo=dt.timezone.utc) if since else None)
    lines = text.splitlines()
    entries = [(i, part) for i, raw in enumerate(lines) for part in _GLUED.split(raw)]
    out: list[ZkLogLine] = []
    for n, (i, raw) in enumerate(entries):
        m = _LINE.match(raw)
        if not m:
            continue
        msg = m.group("msg")
        for what, literal, rx in SIGNATURES:
            if literal not in msg:
                continue
            attrs: dict[str, str] = {}
            if rx is not None:
                mm = rx.search(msg)
                if not mm:
                    continue
                attrs = {k: v for k, v in mm.groupdict().items() if v is not None}
            if what in ("zk_follow_exception", "zk_learner_handler_error"):
                rest = msg.split(literal, 1)[1].strip(" :")
                nxt = entries[n + 1][1] if n + 1 < len(entries) else ""
                cause = rest or (nxt.strip() if nxt and not _LINE.match(nxt) else "")
                if cause:
                    attrs["cause"] = cause.split(" at ")[0][:160]
            local = _local_time(m.group("ts"))
            if local is None:
                break
            at = (local - offset).replace(tzinfo=dt.timezone.utc)
            if lo is not None and at < lo:
                break
            if m.group("myid"):
                attrs["myid"] = m.group("myid")
            out.append(ZkLogLine(what, at, i + 1, raw[:max_excerpt], attrs))
            break
    return out
