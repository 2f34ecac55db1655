"""Log lines of a broker that the health check acts on, read from the tails its host probe fetched. Pure.

    unknown_api_key       a request whose API key the broker does not know (incident 002a):
                            2.3:      ERROR Closing socket for 127.101.1.3:9092-127.101.2.50:44365-8 because of error
                                      org.apache.kafka.common.errors.InvalidRequestException: Unknown API key 60
                            0.9-0.10.0: ERROR Processor got uncaught exception. (kafka.network.Processor)
                                      java.lang.ArrayIndexOutOfBoundsException: 18
                                          at org.apache.kafka.common.protocol.ApiKeys.forId(ApiKeys.java:68)
                            0.10.1-0.11: ERROR Closing socket for 127.106.1.3:9092-127.106.2.50:37185 because of error
                                      ...InvalidRequestException: Error getting request for apiKey: 32 and apiVersion: 0
                                      Caused by: ...IllegalArgumentException: Unexpected ApiKeys id `32`, ...
                            others:   "... best guess of the apiKey is: N"
    group_load_start      "Scheduling loading of offsets and group metadata from __consumer_offsets-7" (0.11+),
                          "Loading offsets and group metadata from [__consumer_offsets,19]" (0.9 - 0.10.1),
                          "Loading offsets and group metadata from __consumer_offsets-0" (0.10.2)
    group_load_done       "Finished loading offsets and group metadata from __consumer_offsets-7 in 12 milliseconds."
                          "Finished loading offsets from [__consumer_offsets,27] in 1205 milliseconds." (0.9 - 0.10.1),
                          "Finished loading offsets from __consumer_offsets-0 in 231 milliseconds." (0.10.2)
    group_load_failed     "Error loading offsets from __consumer_offsets-16" (0.10.2+; the exception on the next lines),
                          (0.9 - 0.10.1 log "Error in loading offsets from [__consumer_offsets,16]": no recording, not read)
    zk_session_expired    "[ZooKeeperClient Kafka server] Session expired.", "zookeeper state changed (Expired)",
                          "session 0x... has expired"
    log_cleaner_died      (log-cleaner.log) "[kafka-log-cleaner-thread-0]: Error due to"
    fetcher_fenced        "Partition orders-0 has an older epoch (0) than the current leader. Will await the new LeaderAndIsr
                          state before resuming fetching." (2.1+: the follower's fetcher dropped the partition)
    fetch_partition_failed  "Partition orders-0 marked as failed"
    leader_and_isr_ignored  (state-change.log) "Ignoring LeaderAndIsr request from controller 1 ... for partition orders-0
                          since its associated leader epoch 12 matches the current leader epoch" (2.3+),
                          "Broker 1 ignoring LeaderAndIsr request from controller 3 ... for partition [orders,0] since its
                          associated leader epoch 2 is not higher than the current leader epoch 2" (0.10.1 - 0.11; 1.0 - 2.2
                          alike): only the equal case (a lower request epoch is an old request, harmless)
    leader_and_isr_failed (server.log, 2.1 - 2.3) "[KafkaApi-3] Error when handling request: clientId=1, correlationId=1,
                          api=LEADER_AND_ISR, body={...,broker_epoch=N,...}" with the exception under it ("Epoch N larger
                          than current broker epoch M", a ZooKeeper SessionExpiredException): the partitions it follows in
                          that request, and the request's broker epoch (detect/replicas.py counts it only while it is the
                          broker's current registration: the controller does not send a failed request again)

The names come from the analysis' one signature table (``analyze/signatures.py``: invalid_request,
processor_uncaught_exception, group_load_start/done/failed, zk_session_expired, log_cleaner_died, the replica lines,
control_request_failed), read through the
one Kafka log parser; this module only maps them to the words above and keeps one line per failed request.
"""

from __future__ import annotations

import datetime as dt

from kafka_runbooks.analyze.parsers.kafka_log import parse, request_partitions
from kafka_runbooks.model import LogLineSeen

MAX_EXCERPT = 300
REPLICA_LINES = ("fetcher_fenced", "fetch_partition_failed", "leader_and_isr_ignored", "leader_and_isr_failed")  # detect/replicas.py
_WANTED = ("invalid_request", "processor_uncaught_exception", "group_load_start", "group_load_done", "group_load_failed",
           "zk_session_expired", "log_cleaner_died", "control_request_failed", *REPLICA_LINES)
MAX_PARTITIONS = 2000  # of one failed LeaderAndIsr (a bigger broker's request: the first ones, and "partitions_cut")


def _client(connection: str) -> tuple[str | None, str | None]:
    """'127.101.1.3:9092-127.101.2.50:44365-8' -> ('127.101.2.50', '44365')."""
    parts = connection.split("-")
    if len(parts) >= 2:
        host, _, port = parts[1].rpartition(":")
        return host or None, port or None
    return None, None


def _what(signature: str, a: dict[str, str], exception: str, message: str = "") -> tuple[str | None, dict[str, str]]:
    if signature == "invalid_request":
        if "api_key" not in a:
            return None, {}  # a request the broker could not parse for another reason
        attrs = {"api_key": a["api_key"], "form": "invalid_request"}
        conn = a.get("connection")
        if conn:
            attrs["connection"] = conn
            host, port = _client(conn)
            if host:
                attrs["client_host"] = host
            if port:
                attrs["client_port"] = port
        return "unknown_api_key", attrs
    if signature == "processor_uncaught_exception":
        key = a.get("api_key") or (a.get("api_key_aioobe") if "api_key_frame" in a else None)
        if key is not None:
            return "unknown_api_key", {"api_key": key, "form": "processor_uncaught_exception"}
        return "unknown_api_key", {"form": "processor_uncaught_exception", "exception": exception[:160]}
    if signature == "group_load_start":
        return "group_load_start", {"partition": a["partition"]}
    if signature == "group_load_done":
        return "group_load_done", {"partition": a["partition"], "millis": a["millis"]}
    if signature == "group_load_failed":
        return "group_load_failed", {"partition": a["partition"], "cause": exception.splitlines()[0][:160] if exception else ""}
    if signature == "zk_session_expired":
        return "zk_session_expired", {}
    if signature == "leader_and_isr_ignored" and a.get("current_epoch") not in (None, a.get("epoch")):
        return None, {}  # an old request (a lower leader epoch): the broker already applied a newer state
    if signature == "control_request_failed":
        if a.get("api") != "LEADER_AND_ISR":
            return None, {}  # UpdateMetadata / StopReplica: no fetcher depends on them
        followed = [f"{t}-{p}" for t, p, leader in request_partitions(message) if str(leader) != a.get("broker")]
        out = {k: a[k] for k in ("controller", "correlation", "request_broker_epoch", "current_broker_epoch", "cause") if a.get(k)}
        out["partitions"] = ",".join(followed[:MAX_PARTITIONS])
        if len(followed) > MAX_PARTITIONS:
            out["partitions_cut"] = str(len(followed))
        return "leader_and_isr_failed", out
    if signature in REPLICA_LINES:
        out = {"partition_name": f"{a.get('topic')}-{a.get('partition')}"}
        out.update({k: a[k] for k in ("leader", "epoch", "controller") if a.get(k) is not None})
        return signature, out
    if signature == "log_cleaner_died":
        return "log_cleaner_died", {"thread": a.get("thread", ""), "cause": exception[:160]}
    return None, {}


def lines_of_interest(text: str | bytes, since: dt.datetime | None = None, *, utc_offset: dt.timedelta | None = None,
                      source: str = "server.log", only: tuple[str, ...] | None = None) -> list[LogLineSeen]:
    """The lines above with ``at >= since`` (UTC), oldest first (``only``: just these kinds). One failed request logged
    more than once (the same connection id) counts once."""
    lo = since.astimezone(dt.timezone.utc) if since is not None and since.tzinfo else (since.replace(tzinfo=dt.timezone.utc) if since else None)
    out: list[LogLineSeen] = []
    seen_connections: set[str] = set()
    for r in parse(text):
        if r.signature not in _WANTED:
            continue
        at = r.at(utc_offset)
        if at is None or (lo is not None and at < lo):
            continue
        what, attrs = _what(r.signature, r.attrs, r.exception or "", r.message)
        if what is None or (only is not None and what not in only):
            continue
        conn = attrs.get("connection")
        if conn:
            if conn in seen_connections:
                continue
            seen_connections.add(conn)
        message = r.message.split(", body=", 1)[0] + f" (broker epoch {attrs.get('request_broker_epoch', '?')})" \
            if what == "leader_and_isr_failed" else r.message  # its body (every partition state) is in attrs
        excerpt = f"[{r.timestamp}] {r.level} {message}" + (f" / {r.exception}" if r.exception and r.exception not in r.message else "")
        out.append(LogLineSeen(what, at.isoformat(timespec="milliseconds").replace("+00:00", "Z"), r.line, excerpt[:MAX_EXCERPT],
                               attrs, source))
    return out
