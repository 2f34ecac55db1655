"""Reading what a ZooKeeper server says: its four-letter words and its log lines. Pure.

The words are parsed by the analysis' parsers (``analyze/parsers/zookeeper.py``: ``parse_mntr``,
``parse_srvr``, ``parse_properties``) and the log lines named by its one signature table
(``zk_follow_exception``, ``zk_election_took``, ...); this module folds them into the probe's figures.

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
from typing import Any

from kafka_runbooks.analyze.parsers.logs import parse_log
from kafka_runbooks.analyze.parsers.zookeeper import parse_mntr, parse_properties, parse_srvr

NOT_SERVING = "This ZooKeeper instance is not currently serving requests"


def _int(v: str | None) -> int | None:
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def stats(srvr: str | None, mntr: str | None, cons: str | None) -> tuple[dict[str, Any], list[str]]:
    """The figures of one server from whichever of its words answered: (``model.ZooKeeperProbe`` fields, problems).
    ``connections`` is as the server counts them, the asking connection included."""
    texts = [t for t in (srvr, mntr, cons) if t]
    if any(NOT_SERVING in t for t in texts):
        return {"serving": False}, ["the server answers that it is not currently serving requests (no quorum, "
                                    "or it is electing a leader)"]
    problems = []
    s = parse_srvr(srvr) if srvr is not None else None
    m = parse_mntr(mntr) if mntr is not None else None
    if s is not None and not s.ok:
        problems.append("srvr answered nothing recognisable" + (f": {srvr.strip()[:120]!r}" if srvr.strip() else ""))
    if m is not None and not m.ok:
        problems.append("mntr answered nothing recognisable (is it in 4lw.commands.whitelist?)"
                        + (f": {mntr.strip()[:120]!r}" if mntr.strip() else ""))

    def pick(attr: str, mntr_first: bool = True):
        order = (m, s) if mntr_first else (s, m)
        for x in order:
            if x is not None and getattr(x, attr) is not None:
                return getattr(x, attr)
        return None

    mode = pick("mode")
    raw = m.raw if m is not None else {}
    return {
        "serving": bool(mode),
        "mode": mode,
        "zxid": pick("zxid", mntr_first=False),
        "connections": pick("connections"),
        "packets_received": pick("packets_received"),
        "packets_sent": pick("packets_sent"),
        "outstanding": pick("outstanding"),
        "latency_avg_ms": pick("latency_avg"),
        "latency_max_ms": pick("latency_max"),
        "uptime_ms": _int(raw.get("zk_uptime")),
        "elections": _int(raw.get("zk_cnt_election_time")),
        "learners": m.learners if m is not None else None,
        "synced_followers": m.synced_followers if m is not None else None,
        "pending_syncs": _int(raw.get("zk_pending_syncs")),
        "version": (pick("version") or "").split(",")[0].strip() or None,
    }, problems


def properties(text: str) -> dict[str, str]:
    """zoo.cfg / server.properties: key=value lines (# and ! comments)."""
    return parse_properties(text).values


# ------------------------------------------------------------------ the server's log

# the analysis' signatures this module reports (zk_peer_state only when the state is "looking")
WANTED = ("zk_follow_exception", "zk_disconnected_from_leader", "zk_peer_state", "zk_election_took",
          "zk_transaction_timeout", "zk_learner_closed", "zk_learner_handler_error")


# an entry glued to the previous one on one physical line (as blogs print them: seed 004); split before parsing
_GLUED = re.compile(r" (?=\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} \[myid:\d*\] - [A-Z]+ )")


@dataclass(frozen=True)
class ZkLogLine:
    what: str
    at: dt.datetime  # UTC
    line_no: int
    excerpt: str
    attrs: dict[str, str] = field(default_factory=dict)


def _cause(r) -> str:
    if r.attrs.get("cause"):
        return r.attrs["cause"]
    for literal in ("Exception when following the leader", "Unexpected exception in LearnerHandler"):
        if literal in r.message:
            rest = r.message.split(literal, 1)[1].strip(" :")
            if rest:
                return rest
    return (r.exception or "").strip()


def log_lines(text: str, since: dt.datetime | None = None, *, utc_offset: dt.timedelta | None = None,
              max_excerpt: int = 300) -> list[ZkLogLine]:
    """The lines of a follower dropping out (and of the leader dropping it), oldest first, with
    ``at >= since`` (UTC). The cause of ``Exception when following the leader`` is the exception line
    under it (3.8) or the rest of its own line (seed 004)."""
    lo = since.astimezone(dt.timezone.utc) if since is not None and since.tzinfo else (since.replace(tzinfo=dt.timezone.utc) if since else None)
    out: list[ZkLogLine] = []
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    for r in parse_log("\n".join(part for raw in text.splitlines() for part in _GLUED.split(raw))).records:
        if r.signature not in WANTED:
            continue
        attrs = {k: v for k, v in r.attrs.items() if v is not None}
        if r.signature == "zk_peer_state":
            if not attrs.get("state", "").startswith("looking"):
                continue
            attrs["state"] = "looking"
        if r.signature in ("zk_follow_exception", "zk_learner_handler_error"):
            cause = _cause(r)
            if cause:
                attrs["cause"] = cause.split(" at ")[0][:160]
        at = r.at(utc_offset)
        if at is None or (lo is not None and at < lo):
            continue
        if r.myid:
            attrs["myid"] = r.myid
        out.append(ZkLogLine(r.signature, at, r.line, (r.raw or r.message)[:max_excerpt], attrs))
    return out
