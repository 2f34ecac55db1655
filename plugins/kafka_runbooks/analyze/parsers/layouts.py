"""Log line layouts: which log4j/logback pattern a file was written with, and how to read one line of it.

Each layout reads the *header* of a record (timestamp, level, logger, thread) with an anchored, bounded
regular expression plus plain string operations, never a regex that scans the message: a line with a
million blanks costs one pass. Lines that are not headers are continuation lines of the record above
(stack traces, Kafka's config dump, multi-line messages).

``detect(lines)`` picks the layout that reads most of a file's first lines; the file's report says which
layout was used and which share of its lines it explained.

The same layouts are compiled to Spark column expressions by ``analyze/fastscan.py``; ``gate_key`` here is
the pure twin of that expression (the logger's simple class name, read the cheap way) and a test keeps
the two in agreement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple

_TS = r"(?P<ts>[0-9]{4}-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[,.][0-9]{1,9})?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)"
_TS_YY = r"(?P<ts>[0-9]{2}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2})"
_LEVEL = r"(?P<level>TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|SEVERE)"
_LOGGER = r"[A-Za-z_$][A-Za-z0-9_$.]{0,299}"
LOGGER_RE = re.compile(_LOGGER, re.ASCII)

LEVEL_NAMES = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL")
# Where the default timestamp puts the level (1-based), in the layouts whose ERROR/FATAL records are kept for
# the timeline even without a signature ("[yyyy-MM-dd HH:mm:ss,SSS] ERROR" / "yyyy-MM-dd HH:mm:ss,SSS ERROR").
LEVEL_POS = {"kafka": 27, "strimzi": 25}


def level_kept(layout: str | None, line: str) -> bool:
    """An ERROR/FATAL record kept for the timeline (the Spark scan applies the same fixed-position test)."""
    pos = LEVEL_POS.get(layout or "")
    return pos is not None and line[pos - 1:pos + 4] in ("ERROR", "FATAL")


class Header(NamedTuple):  # a tuple: built once per record, the cheapest immutable record in Python
    ts: str  # normalised "YYYY-MM-DDTHH:MM:SS.mmm" (no zone: log4j writes local time)
    level: str
    logger: str | None  # as printed (may be abbreviated: %c{1}, %c{2}, %C{1})
    thread: str | None
    message: str
    zone: str | None = None  # "+0800", "Z" when the layout printed one
    myid: str | None = None  # ZooKeeper's [myid:N]

    @property
    def logger_simple(self) -> str:
        """The logger's simple class name (what signatures are keyed by)."""
        return simple_name(self.logger)


def simple_name(logger: str | None) -> str:
    if not logger:
        return ""
    return logger.rsplit(".", 1)[-1]


def normalise_ts(ts: str) -> tuple[str, str | None]:
    """'2020-04-22 10:43:36,369' -> ('2020-04-22T10:43:36.369', None); '19/07/12 11:01:43' -> ('2019-07-12T11:01:43.000', None)."""
    if len(ts) == 23 and ts[19] in ",." and ts[10] in " T" and ts[20:].isdigit():  # '2020-04-22 10:43:36,369'
        return f"{ts[:10]}T{ts[11:19]}.{ts[20:]}", None
    zone = None
    if "/" in ts[:8]:
        yy, mm, rest = ts[0:2], ts[3:5], ts[6:]
        return f"20{yy}-{mm}-{rest[0:2]}T{rest[3:11]}.000", None
    base = ts[:19].replace(" ", "T")
    frac = "000"
    rest = ts[19:]
    if rest[:1] in (",", "."):
        j = 1
        while j < len(rest) and rest[j].isdigit():
            j += 1
        frac = (rest[1:j] + "000")[:3]
        rest = rest[j:]
    if rest:
        zone = rest
    return f"{base}.{frac}", zone


def _level(lv: str) -> str:
    return {"WARNING": "WARN", "SEVERE": "ERROR"}.get(lv, lv)


# ---------------------------------------------------------------- layout readers


def _split_logger_suffix(rest: str) -> tuple[str, str | None]:
    """'msg (kafka.log.Log)' -> ('msg', 'kafka.log.Log'); no valid trailing '(logger)' -> (rest, None)."""
    r = rest.rstrip()
    if not r.endswith(")"):
        return rest, None
    k = r.rfind("(")
    if k < 0:
        return rest, None
    cand = r[k + 1:-1]
    if cand and LOGGER_RE.fullmatch(cand):
        return r[:k].rstrip(), cand
    return rest, None


_KAFKA = re.compile(r"\[" + _TS + r"\] {1,10}" + _LEVEL + r" {1,10}", re.ASCII)


def _read_kafka(line: str) -> Header | None:
    m = _KAFKA.match(line)
    if not m:
        return None
    msg, logger = _split_logger_suffix(line[m.end():])
    ts, zone = normalise_ts(m.group("ts"))
    return Header(ts, _level(m.group("level")), logger, None, msg, zone)


_ISO_LEVEL = re.compile(_TS + r" {1,10}" + _LEVEL + r" {1,10}", re.ASCII)


def _read_strimzi(line: str) -> Header | None:
    """%d{ISO8601} %p %m (%c) [%t]%n"""
    m = _ISO_LEVEL.match(line)
    if not m:
        return None
    rest = line[m.end():].rstrip()
    if not rest.endswith("]"):
        return None
    k = rest.rfind(" [")
    if k < 0:
        return None
    msg, logger = _split_logger_suffix(rest[:k])
    if logger is None:
        return None
    ts, zone = normalise_ts(m.group("ts"))
    return Header(ts, _level(m.group("level")), logger, rest[k + 2:-1], msg, zone)


_THREAD_LOGGER = re.compile(_TS + r" {1,10}" + _LEVEL + r" {1,10}\[(?P<thread>[^\]\n]{0,300})\] {1,10}(?P<logger>" + _LOGGER
                            + r")(?::(?P<lineno>[0-9]{1,7}))? {1,5}- ", re.ASCII)


def _read_thread_logger(line: str) -> Header | None:
    """%d %p [%t] %c - %m%n   and   %d %p [%t] %c{1}:%L - %m%n"""
    m = _THREAD_LOGGER.match(line)
    if not m:
        return None
    ts, zone = normalise_ts(m.group("ts"))
    return Header(ts, _level(m.group("level")), m.group("logger"), m.group("thread"), line[m.end():], zone)


_CLASS_LINE = re.compile(_TS + r" {1,10}" + _LEVEL + r" {1,10}(?P<logger>" + _LOGGER + r"):(?P<lineno>[0-9]{1,7}) {1,5}- ",
                         re.ASCII)


def _read_class_line(line: str) -> Header | None:
    """%d{yyyy-MM-dd HH:mm:ss} %-5p %c{1}:%L - %m%n"""
    m = _CLASS_LINE.match(line)
    if not m:
        return None
    ts, zone = normalise_ts(m.group("ts"))
    return Header(ts, _level(m.group("level")), m.group("logger"), None, line[m.end():], zone)


_LOGGER_COLON = re.compile(r"(?:" + _TS.replace("?P<ts>", "?P<ts>") + r"|" + _TS_YY.replace("?P<ts>", "?P<ts2>") + r") {1,10}"
                           + _LEVEL + r" {1,10}(?P<logger>" + _LOGGER + r"): ", re.ASCII)


def _read_logger_colon(line: str) -> Header | None:
    """%d %p %c{2}: %m%n  (Hadoop/Spark style, e.g. '19/07/12 11:01:43 INFO group.GroupMetadataManager: ...')"""
    m = _LOGGER_COLON.match(line)
    if not m:
        return None
    ts, zone = normalise_ts(m.group("ts") or m.group("ts2"))
    return Header(ts, _level(m.group("level")), m.group("logger"), None, line[m.end():], zone)


_BRACKETED = re.compile(r"\[" + _TS + r"\] {0,10}\[" + _LEVEL + r" {0,5}\] {0,10}\[(?P<thread>[^\]\n]{0,300})\] {0,10}\[(?P<logger>"
                        + _LOGGER + r")\] {0,5}- ", re.ASCII)


def _read_bracketed(line: str) -> Header | None:
    """[%d] [%p] [%t] [%c] - %m%n"""
    m = _BRACKETED.match(line)
    if not m:
        return None
    ts, zone = normalise_ts(m.group("ts"))
    return Header(ts, _level(m.group("level")), m.group("logger"), m.group("thread"), line[m.end():], zone)


_ZK = re.compile(_TS + r" {1,10}(?:\[myid:(?P<myid>[0-9]{0,10})\] {1,10})?- {1,10}" + _LEVEL + r" {1,10}\[", re.ASCII)


def _read_zookeeper(line: str) -> Header | None:
    """%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n  (and the same without [myid:])"""
    m = _ZK.match(line)
    if not m:
        return None
    rest = line[m.end():]
    k = rest.find("] - ")
    if k < 0:
        if not rest.rstrip().endswith("]"):
            return None
        k, msg = len(rest.rstrip()) - 1, ""
    else:
        msg = rest[k + 4:]
    inner = rest[:k]
    at = inner.rfind("@")
    colon = inner.rfind(":", 0, at) if at > 0 else -1
    if at > 0 and colon >= 0:
        thread, cls = inner[:colon], inner[colon + 1:at]
    else:
        thread, cls = inner, None
    ts, zone = normalise_ts(m.group("ts"))
    return Header(ts, _level(m.group("level")), cls, thread, msg, zone, m.group("myid"))


# ---------------------------------------------------------------- the table


@dataclass(frozen=True)
class Layout:
    name: str
    pattern: str  # the log4j ConversionPattern it stands for
    example: str
    read: Callable[[str], Header | None]
    first_chars: str  # characters a header line may start with (a cheap pre-check, also used by Spark)

    def header(self, line: str) -> Header | None:
        if not line or line[0] not in self.first_chars:
            return None
        return self.read(line)


DIGITS = "0123456789"
LAYOUTS: tuple[Layout, ...] = (
    Layout("kafka", "[%d] %p %m (%c)%n",
           "[2020-04-22 10:43:36,369] WARN [ReplicaFetcherThread-1-219], Error in fetch ... (kafka.server.ReplicaFetcherThread)",
           _read_kafka, "["),
    Layout("zookeeper_myid", "%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n",
           "2023-09-01 04:02:01,662 [myid:13] - WARN  [QuorumPeer[myid=13](plain=...):Follower@128] - Exception when following the leader",
           _read_zookeeper, DIGITS),
    Layout("zookeeper", "%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n",
           "2016-03-21 22:58:33,362 - WARN  [QuorumPeer[myid=3]/0:0:0:0:0:0:0:0:2181:Follower@89] - Exception when following the leader",
           _read_zookeeper, DIGITS),
    Layout("strimzi", "%d{ISO8601} %p %m (%c) [%t]%n",
           "2021-04-28 16:33:35,757 INFO Cleaner 0: Beginning cleaning of log __consumer_offsets-36. (kafka.log.LogCleaner) [kafka-log-cleaner-thread-0]",
           _read_strimzi, DIGITS),
    Layout("thread_logger", "%d %p [%t] %c - %m%n  or  %d %p [%t] %c{1}:%L - %m%n",
           "2015-05-19 16:52:48,758 ERROR [kafka-log-cleaner-thread-0] kafka.log.LogCleaner - [kafka-log-cleaner-thread-0], Error due to",
           _read_thread_logger, DIGITS),
    Layout("class_line", "%d{yyyy-MM-dd HH:mm:ss} %-5p %c{1}:%L - %m%n",
           "2016-08-02 05:38:14 INFO  GroupMetadataManager:68 - [Group Metadata Manager on Broker 0]: Finished loading offsets from [__consumer_offsets,44] in 1 milliseconds.",
           _read_class_line, DIGITS),
    Layout("logger_colon", "%d{yy/MM/dd HH:mm:ss} %p %c{2}: %m%n",
           "19/07/12 11:01:43 INFO group.GroupMetadataManager: [GroupMetadataManager brokerId=0] Scheduling loading of offsets and group metadata from __consumer_offsets-0",
           _read_logger_colon, DIGITS),
    Layout("bracketed", "[%d] [%p] [%t] [%c] - %m%n",
           "[2023-01-05 10:00:00,000] [INFO] [main] [kafka.server.KafkaServer] - [KafkaServer id=1] started",
           _read_bracketed, "["),
)
BY_NAME = {l.name: l for l in LAYOUTS}
DETECT_SAMPLE = 400


def detect(lines: Iterable[str]) -> tuple[Layout | None, int, int]:
    """(best layout, headers it read, non-blank lines sampled) over the first DETECT_SAMPLE non-blank lines.

    ZooKeeper's two layouts share a reader: the one with [myid:] wins when any sampled header carries it.
    """
    counts = {l.name: 0 for l in LAYOUTS}
    myid = 0
    sampled = 0
    for ln in lines:
        if not ln.strip():
            continue
        sampled += 1
        for l in LAYOUTS:
            if l.name == "zookeeper":
                continue  # counted with zookeeper_myid
            h = l.header(ln)
            if h is not None:
                counts[l.name] += 1
                if l.name == "zookeeper_myid" and h.myid is not None:
                    myid += 1
        if sampled >= DETECT_SAMPLE:
            break
    zk = counts.pop("zookeeper_myid")
    counts["zookeeper_myid" if myid else "zookeeper"] = zk
    best = max(LAYOUTS, key=lambda l: (counts.get(l.name, 0), -LAYOUTS.index(l)))
    n = counts.get(best.name, 0)
    return (best if n else None), n, sampled


# ---------------------------------------------------------------- the cheap gate key (Spark twin)


def _si(s: str, delim: str, count: int) -> str:
    """Spark's substring_index for count 1 / -1 (the whole string when delim is absent)."""
    return s.split(delim, 1)[0] if count > 0 else s.rsplit(delim, 1)[-1]


# per layout: the chain of (delimiter, count) substring_index steps that leaves the logger's simple name
GATE_STEPS: dict[str, tuple[tuple[str, int], ...]] = {
    "kafka": (("(", -1), (".", -1)),  # "...(kafka.log.Log)" -> "Log)"
    "strimzi": (("(", -1), (")", 1), (".", -1)),
    "zookeeper": (("@", 1), (":", -1), (".", -1)),
    "zookeeper_myid": (("@", 1), (":", -1), (".", -1)),
    "thread_logger": ((" - ", 1), ("] ", -1), (":", 1), (".", -1)),
    "class_line": ((" - ", 1), (" ", -1), (":", 1), (".", -1)),
    "logger_colon": ((": ", 1), (" ", -1), (".", -1)),
    "bracketed": (("] - ", 1), ("[", -1), (".", -1)),
}
GATE_SUFFIX = {"kafka": ")"}  # the kafka layout's key keeps the closing parenthesis of "(logger)"


def gate_key(layout: str, line: str) -> str:
    """The logger's simple class name read the way the Spark scan reads it (substring_index, no regex).

    Must agree with ``fastscan`` (it builds the same chain from GATE_STEPS) and, on header lines, with
    ``Header.logger_simple`` + GATE_SUFFIX (a test keeps them in agreement on real logs).
    """
    key = line
    for delim, count in GATE_STEPS.get(layout, ()):
        key = _si(key, delim, count)
    return key if layout in GATE_STEPS else ""


def gate_keys(layout: str, simple_names) -> set[str]:
    suffix = GATE_SUFFIX.get(layout, "")
    return {n + suffix for n in simple_names}
