"""Peers' failed replica fetches from a broker's ``server.log``: which broker could not fetch from
which leader, and when.

ADAPTER, TO BE REPLACED: the analysis helper is adding
``kafka_runbooks.analyze.parsers.kafka_log.fetch_errors(text, since=None, until=None)`` with this
same signature and result fields; when it is on main, :func:`fetch_errors` below becomes a re-export
of it (keeping :func:`classify_cause` if the upstream one does not say why a fetch failed).
Until then this calls the parser that exists (``parse_kafka_log``) and adds what detection needs.

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

Times are the log's own (the broker host's local time, naive); callers convert their window
into that time with the host's UTC offset.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log

# causes that mean "the leader did not serve this fetcher"
UNREACHABLE_CAUSES = ("disconnected_before_response", "connect_timeout", "connection_failed", "request_timeout")

_CAUSES = (
    ("shutdown", re.compile(r"Client was shutdown before response was read")),
    ("disconnected_before_response", re.compile(r"was disconnected before the response was read")),
    ("connect_timeout", re.compile(r"Failed to connect within \d+ ms")),
    ("connection_failed", re.compile(r"Connection to \S+(?: \(id: \d+ rack: \S+\))? failed|Connection refused")),
    ("request_timeout", re.compile(r"TimeoutException|timed out", re.I)),
)
_LEADER_OF_OLD_THREAD = re.compile(r"ReplicaFetcherThread-\d+-(?P<leader>\d+)")
_TS_FORMATS = ("%Y-%m-%d %H:%M:%S,%f", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S,%f", "%Y-%m-%dT%H:%M:%S.%f",
               "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S")
MAX_EXCERPT = 300


@dataclass(frozen=True)
class FetchError:
    at: dt.datetime  # as printed in the log (naive, the host's local time)
    fetcher_broker_id: int | None
    leader_broker_id: int
    line_no: int
    excerpt: str
    cause: str | None = None


def classify_cause(text: str) -> str | None:
    for name, rx in _CAUSES:
        if rx.search(text):
            return name
    return None


def parse_log_time(ts: str) -> dt.datetime | None:
    for fmt in _TS_FORMATS:
        try:
            return dt.datetime.strptime(ts, fmt)
        except ValueError:
            continue
    return None


def fetch_errors(text: str | bytes, since: dt.datetime | None = None, until: dt.datetime | None = None) -> list[FetchError]:
    """Failed fetches whose cause says the leader did not serve (see UNREACHABLE_CAUSES), with
    ``since <= at <= until`` (naive datetimes in the log's time), oldest first, one per failure."""
    log = parse_kafka_log(text)
    out: list[FetchError] = []
    seen: set[tuple] = set()
    for ev in log.signatures("replica_fetch_error"):
        at = parse_log_time(ev.timestamp)
        if at is None or (since is not None and at < since) or (until is not None and at > until):
            continue
        detail = " ".join(x for x in (ev.message, ev.exception or "") if x)
        cause = classify_cause(detail)
        if cause not in UNREACHABLE_CAUSES:
            continue
        leader = ev.attrs.get("remote_broker")
        if leader is None:
            m = _LEADER_OF_OLD_THREAD.search(ev.message)
            leader = m.group("leader") if m else None
        if leader is None or not str(leader).isdigit():
            continue
        fetcher = ev.attrs.get("local_broker")
        fetcher_id = int(fetcher) if fetcher is not None and str(fetcher).isdigit() else None
        # the INFO + WARN pair of one failure: same fetcher thread, same leader, same second
        key = (fetcher_id, ev.attrs.get("fetcher_id"), int(leader), at.replace(microsecond=0))
        if key in seen:
            continue
        seen.add(key)
        line = f"[{ev.timestamp}] {ev.level} {ev.message}"
        if ev.exception and ev.exception not in ev.message:
            line += f" / {ev.exception}"
        out.append(FetchError(at, fetcher_id, int(leader), ev.line, line[:MAX_EXCERPT], cause))
    return out
