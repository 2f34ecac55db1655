"""Log lines of a broker that the health check acts on, read from the tails its host probe fetched. Pure.

    unknown_api_key       a request whose API key the broker does not know (incident 002a):
                            2.3:      ERROR Closing socket for 127.101.1.3:9092-127.101.2.50:44365-8 because of error
                                      org.apache.kafka.common.errors.InvalidRequestException: Unknown API key 60
                            0.9/0.10: ERROR Processor got uncaught exception. (kafka.network.Processor)
                                      java.lang.ArrayIndexOutOfBoundsException: 18
                                          at org.apache.kafka.common.protocol.ApiKeys.forId(ApiKeys.java:68)
                            later:    "Unexpected ApiKeys id `N`", "... best guess of the apiKey is: N"
    group_load_start      "Scheduling loading of offsets and group metadata from __consumer_offsets-7" (0.11+),
                          "Loading offsets and group metadata from [__consumer_offsets,19]" (0.9/0.10)
    group_load_done       "Finished loading offsets and group metadata from __consumer_offsets-7 in 12 milliseconds."
                          "Finished loading offsets from [__consumer_offsets,27] in 1205 milliseconds."
    zk_session_expired    "[ZooKeeperClient Kafka server] Session expired.", "zookeeper state changed (Expired)",
                          "session 0x... has expired"
    log_cleaner_died      (log-cleaner.log) "[kafka-log-cleaner-thread-0]: Error due to"

ADAPTER, TO BE REPLACED: the analysis helper's signature table (``analyze/signatures.py``: invalid_request,
processor_uncaught_exception, group_load_start/done, zk_session_expired, log_cleaner_died) is on its branch;
until it lands this reads the events of the one Kafka log parser on main (``parse_kafka_log``) and names
them with the patterns above. The words (``what``) and ``attrs`` stay when the body is swapped.
"""

from __future__ import annotations

import datetime as dt
import re

from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log
from kafka_runbooks.detect.fetch_errors import parse_log_time
from kafka_runbooks.model import LogLineSeen

_CONN = re.compile(r"(?:Closing socket for|processing request from|connection id) (?P<connection>\S+?-\S+?-\d+)")
_API_KEY = (
    re.compile(r"Unknown API key (?P<api_key>-?\d{1,6})"),
    re.compile(r"Unexpected ApiKeys id .(?P<api_key>-?\d{1,6})."),
    re.compile(r"best guess of the apiKey is: (?P<api_key>-?\d{1,6})"),
)
_AIOOBE = re.compile(r"ArrayIndexOutOfBoundsException: (?P<api_key>-?\d{1,6})")
_LOAD_START = re.compile(r"(?:Scheduling loading of offsets and group metadata from __consumer_offsets-(?P<p1>\d+)"
                         r"|Loading offsets and group metadata from \[__consumer_offsets,(?P<p2>\d+)\])")
_LOAD_DONE = re.compile(r"Finished loading offsets (?:and group metadata )?from (?:__consumer_offsets-(?P<p1>\d+)|\[__consumer_offsets,(?P<p2>\d+)\])"
                        r" in (?P<millis>\d+) milliseconds")
_EXPIRED = re.compile(r"Session expired|state changed \(Expired\)|session 0x[0-9a-f]+ has expired")
_CLEANER_DIED = re.compile(r"\[kafka-log-cleaner-thread-(?P<thread>\d+)\]:? Error due to")
MAX_EXCERPT = 300


def _client(connection: str) -> tuple[str | None, str | None]:
    """'127.101.1.3:9092-127.101.2.50:44365-8' -> ('127.101.2.50', '44365')."""
    parts = connection.split("-")
    if len(parts) >= 2:
        host, _, port = parts[1].rpartition(":")
        return host or None, port or None
    return None, None


def lines_of_interest(text: str | bytes, since: dt.datetime | None = None, *, utc_offset: dt.timedelta | None = None,
                      source: str = "server.log") -> list[LogLineSeen]:
    """The lines above with ``at >= since`` (UTC), oldest first. One failed request logged twice by 2.3
    (``Closing socket for X`` and ``Exception while processing request from X``) counts once."""
    offset = utc_offset or dt.timedelta(0)
    lo = since.astimezone(dt.timezone.utc) if since is not None and since.tzinfo else (since.replace(tzinfo=dt.timezone.utc) if since else None)
    out: list[LogLineSeen] = []
    seen_connections: set[str] = set()
    for ev in parse_kafka_log(text).events:
        local = parse_log_time(ev.timestamp)
        if local is None:
            continue
        at = (local - offset).replace(tzinfo=dt.timezone.utc)
        if lo is not None and at < lo:
            continue
        body = " ".join([ev.message, ev.exception or "", *ev.continuation[:3]])
        what, attrs = _classify(ev.message, ev.exception or "", body)
        if what is None:
            continue
        if what == "unknown_api_key":
            conn = attrs.get("connection")
            if conn:
                if conn in seen_connections:
                    continue
                seen_connections.add(conn)
        excerpt = f"[{ev.timestamp}] {ev.level} {ev.message}" + (f" / {ev.exception}" if ev.exception and ev.exception not in ev.message else "")
        out.append(LogLineSeen(what, at.isoformat(timespec="milliseconds").replace("+00:00", "Z"), ev.line, excerpt[:MAX_EXCERPT],
                               attrs, source))
    return out


def _classify(message: str, exception: str, body: str) -> tuple[str | None, dict[str, str]]:
    for rx in _API_KEY:
        m = rx.search(body)
        if m and ("Closing socket" in message or "processing request" in message or "Processor" in message or "InvalidRequest" in body):
            attrs = {"api_key": m.group("api_key"), "form": "invalid_request"}
            return "unknown_api_key", _with_connection(attrs, message)
    if "Processor got uncaught exception" in message:
        m = _AIOOBE.search(exception)
        if m and "ApiKeys.forId" in body:
            return "unknown_api_key", {"api_key": m.group("api_key"), "form": "processor_uncaught_exception"}
        return "unknown_api_key", {"form": "processor_uncaught_exception", "exception": exception[:160]}
    m = _LOAD_START.search(message)
    if m:
        return "group_load_start", {"partition": m.group("p1") or m.group("p2")}
    m = _LOAD_DONE.search(message)
    if m:
        return "group_load_done", {"partition": m.group("p1") or m.group("p2"), "millis": m.group("millis")}
    if _EXPIRED.search(message):
        return "zk_session_expired", {}
    m = _CLEANER_DIED.search(message)
    if m:
        return "log_cleaner_died", {"thread": m.group("thread"), "cause": exception[:160]}
    return None, {}


def _with_connection(attrs: dict[str, str], message: str) -> dict[str, str]:
    m = _CONN.search(message)
    if m:
        attrs["connection"] = m.group("connection")
        host, port = _client(m.group("connection"))
        if host:
            attrs["client_host"] = host
        if port:
            attrs["client_port"] = port
    return attrs
