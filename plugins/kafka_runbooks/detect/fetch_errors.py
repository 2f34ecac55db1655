"""Peers' failed replica fetches from a broker's ``server.log``: which broker could not fetch from
which leader, and when.

ADAPTER, TO BE REPLACED: the analysis helper is adding
``kafka_runbooks.analyze.parsers.kafka_log.fetch_errors(text, since=None, until=None, *, broker_id=None,
utc_offset=None)`` (seen on its branch; not on main yet). This adapter has that signature, result
fields and cause words, so the swap is: import theirs here instead of the body below, keep
:data:`UNREACHABLE_CAUSES` (theirs returns every cause, "client_shutdown" included, for the caller to
filter). Until then it calls the parser that exists (``parse_kafka_log``).

The wordings, checked in Kafka 2.3.0's own classes (kafka_2.12-2.3.0.jar, kafka-clients-2.3.0.jar)
and on a real 2.3.0 broker here::

    WARN [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Error in response for fetch request
         (type=FetchRequest, ...) (kafka.server.ReplicaFetcherThread)
    java.io.IOException: Connection to 3 was disconnected before the response was read
    INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Error sending fetch request
         (sessionId=.., epoch=..) to node 3: java.io.IOException: Connection to 3 was disconnected
         before the response was read. (org.apache.kafka.clients.FetchSessionHandler)

and the 0.10 form of the seeds (``[ReplicaFetcherThread-0-219], Error in fetch ...``, the leader
being the thread name's last number). One failure logs both 2.3 lines: they count once.
"Client was shutdown before response was read" is a fetcher being stopped on a leader change --
normal, never counted.

log4j prints the host's local time without a zone: ``utc_offset`` is the host's offset; ``at`` is
returned in UTC; ``since``/``until`` are UTC (naive = UTC).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log

CAUSE_DISCONNECTED = "disconnected"  # "Connection to N was disconnected before the response was read"
CAUSE_CLIENT_SHUTDOWN = "client_shutdown"  # the fetcher itself was being stopped (a leader change): normal
CAUSE_TIMEOUT = "timeout"  # "Failed to connect within N ms", request timeouts
CAUSE_CONNECTION_FAILED = "connection_failed"  # refused / failed connections
CAUSE_UNKNOWN = "unknown"
# causes that mean "the leader did not serve this fetcher"
UNREACHABLE_CAUSES = (CAUSE_DISCONNECTED, CAUSE_TIMEOUT, CAUSE_CONNECTION_FAILED)

_CAUSES = (
    (CAUSE_CLIENT_SHUTDOWN, re.compile(r"Client was shutdown before response was read")),
    (CAUSE_DISCONNECTED, re.compile(r"was disconnected before the response was read")),
    (CAUSE_TIMEOUT, re.compile(r"Failed to connect within \d+ ms|TimeoutException|timed out", re.I)),
    (CAUSE_CONNECTION_FAILED, re.compile(r"Connection to \S+(?: \(id: \d+ rack: \S+\))? failed|Connection refused")),
)
_LEADER_OF_OLD_THREAD = re.compile(r"ReplicaFetcherThread-\d+-(?P<leader>\d+)")
_TS_FORMATS = ("%Y-%m-%d %H:%M:%S,%f", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S,%f", "%Y-%m-%dT%H:%M:%S.%f",
               "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")
MAX_EXCERPT = 300


@dataclass(frozen=True)
class FetchError:
    at: dt.datetime | None  # UTC
    fetcher_broker_id: int | None
    leader_broker_id: int
    line_no: int
    excerpt: str
    cause: str = CAUSE_UNKNOWN


def classify_cause(text: str) -> str:
    for name, rx in _CAUSES:
        if rx.search(text):
            return name
    return CAUSE_UNKNOWN


def parse_log_time(ts: str) -> dt.datetime | None:
    for fmt in _TS_FORMATS:
        try:
            return dt.datetime.strptime(ts, fmt)
        except ValueError:
            continue
    return None


def _utc(t: dt.datetime | None) -> dt.datetime | None:
    if t is None:
        return None
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def fetch_errors(text: str | bytes, since: dt.datetime | None = None, until: dt.datetime | None = None, *,
                 broker_id: int | None = None, utc_offset: dt.timedelta | None = None) -> list[FetchError]:
    """Failed replica fetches with ``since <= at <= until`` (UTC), oldest first, one per failure (the
    INFO + WARN pair of 2.3 counts once), every cause -- filter with :data:`UNREACHABLE_CAUSES`."""
    offset = utc_offset or dt.timedelta(0)
    lo, hi = _utc(since), _utc(until)
    log = parse_kafka_log(text)
    out: list[FetchError] = []
    seen: set[tuple] = set()
    for ev in log.signatures("replica_fetch_error"):
        local = parse_log_time(ev.timestamp)
        if local is None:
            continue
        at = (local - offset).replace(tzinfo=dt.timezone.utc)
        if (lo is not None and at < lo) or (hi is not None and at > hi):
            continue
        leader = ev.attrs.get("remote_broker")
        if leader is None:
            m = _LEADER_OF_OLD_THREAD.search(ev.message)
            leader = m.group("leader") if m else None
        if leader is None or not str(leader).isdigit():
            continue
        fetcher = ev.attrs.get("local_broker")
        fetcher_id = int(fetcher) if fetcher is not None and str(fetcher).isdigit() else broker_id
        # the INFO + WARN pair of one failure: same fetcher thread, same leader, same second
        key = (fetcher_id, ev.attrs.get("fetcher_id"), int(leader), at.replace(microsecond=0))
        if key in seen:
            continue
        seen.add(key)
        line = f"[{ev.timestamp}] {ev.level} {ev.message}"
        if ev.exception and ev.exception not in ev.message:
            line += f" / {ev.exception}"
        out.append(FetchError(at, fetcher_id, int(leader), ev.line, line[:MAX_EXCERPT],
                              classify_cause(" ".join(x for x in (ev.message, ev.exception or "") if x))))
    return out
