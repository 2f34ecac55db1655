"""The controller's log lines about leadership, read from ``controller.log`` tails. Pure.

Kafka 2.3.0's own wordings (``kafka.controller.KafkaController``), seen on the lab's brokers::

    [..] INFO [Controller id=1] Processing automatic preferred replica leader election (kafka.controller.KafkaController)
    [..] INFO [Controller id=1] Starting preferred replica leader election for partitions orders-2,__consumer_offsets-3
    [..] WARN [Controller id=1] Partition orders-2 failed to complete preferred replica leader election to 3. Leader is still 1
    [..] INFO [Controller id=1] Newly added brokers: 3, deleted brokers: , bounced brokers: , all live brokers: 1,2,3
    [..] INFO [Controller id=1] 1 successfully elected as the controller. Epoch incremented to 4 and epoch zk version is now 4

The controller logs "Processing automatic ..." (0.10: "checking need to trigger partition rebalance", at TRACE) at every
``leader.imbalance.check.interval.seconds`` whether or not anything moves; an automatic election is a "Starting
preferred replica leader election" line logged by the same controller within ``AUTO_PAIR_S`` after it, or after the
previous automatic one: 0.10 elects the partitions of one check one at a time, a line each, over seconds on a busy
controller (a manual one -- the znode, the Admin API -- has none before it).

The lines are classified by the analysis' one signature table (``analyze/signatures.py``: auto_preferred_election,
preferred_election, preferred_election_failed, broker_change, controller_elected), through the Kafka log parser.
"""

from __future__ import annotations

import datetime as dt
import re

from kafka_runbooks.analyze.parsers.kafka_log import parse_kafka_log
from kafka_runbooks.model import LogLineSeen

AUTO_CHECK = "auto_preferred_election"  # the controller's periodic imbalance check
ELECTION = "preferred_election"  # a preferred election started (attrs["automatic"] = "true"/"false")
ELECTION_FAILED = "preferred_election_failed"
BROKER_CHANGE = "broker_change"
CONTROLLER_ELECTED = "controller_elected"
AUTO_PAIR_S = 2.0
MAX_EXCERPT = 400

WANTED = (AUTO_CHECK, ELECTION, ELECTION_FAILED, BROKER_CHANGE, CONTROLLER_ELECTED)
_CONTROLLER_ID = re.compile(r"\[Controller (?:id=)?(\d{1,10})\]")  # 2.x "[Controller id=1]", 0.10 "[Controller 1]:"


_TOPIC_AND_PARTITION = re.compile(r"\[([^,\[\]\s]{1,249}),(\d{1,9})\]")  # 0.10's TopicAndPartition: "[orders,2]"


def _partitions(raw: str) -> str:
    """"orders-2,__consumer_offsets-3", Kafka's Set(...) form or 0.10's "[orders,2],[__consumer_offsets,3]" ->
    "orders-2,__consumer_offsets-3"."""
    pairs = _TOPIC_AND_PARTITION.findall(raw)
    if pairs:
        return ",".join(f"{t}-{p}" for t, p in pairs)
    return ",".join(p for p in re.split(r"[\s,\[\]]+", raw.replace("Set(", "").replace(")", "")) if p)


def controller_events(text: str | bytes, since: dt.datetime | None = None, *, utc_offset: dt.timedelta | None = None,
                      source: str = "controller.log", broker_id: int | None = None) -> list[LogLineSeen]:
    """The lines above with ``at >= since`` (UTC), oldest first; elections marked automatic or not."""
    offset = utc_offset or dt.timedelta(0)
    lo = None
    if since is not None:
        lo = since.astimezone(dt.timezone.utc) if since.tzinfo else since.replace(tzinfo=dt.timezone.utc)
    out: list[LogLineSeen] = []
    last_auto: dict[str, dt.datetime] = {}
    for ev in parse_kafka_log(text).events:
        what = ev.signature
        if what not in WANTED:
            continue
        m = _CONTROLLER_ID.search(ev.message)
        attrs = {k: v for k, v in (ev.attrs or {}).items() if v is not None}
        if m:
            attrs["controller"] = m.group(1)
        attrs.setdefault("controller", attrs.get("broker", "?"))
        if what == ELECTION_FAILED and "topic" in attrs:
            attrs["partition"] = f"{attrs.pop('topic')}-{attrs['partition']}"
        at = ev.at(offset)
        if at is None:
            continue
        if what == AUTO_CHECK:
            last_auto[attrs["controller"]] = at
        if what == ELECTION:
            attrs["partitions"] = _partitions(attrs.get("partitions", ""))
            prev = last_auto.get(attrs["controller"])
            automatic = prev is not None and 0 <= (at - prev).total_seconds() <= AUTO_PAIR_S
            attrs["automatic"] = "true" if automatic else "false"
            if automatic:
                last_auto[attrs["controller"]] = at  # the check's next partition (0.10) pairs with this one
        if broker_id is not None:
            attrs["host_broker"] = str(broker_id)
        if lo is not None and at < lo:
            continue
        excerpt = f"[{ev.timestamp}] {ev.level} {ev.message}"
        out.append(LogLineSeen(what, at.isoformat(timespec="milliseconds").replace("+00:00", "Z"), ev.line,
                               excerpt[:MAX_EXCERPT], attrs, source))
    return out
