"""Kafka's own JmxTool: which JMX figures the product reads, how it is run, and reading its answer. Pure.

The figures are incident 003's list (request queues, request/response queue times, failed requests, bytes and
requests in) plus, for replicas out of their ISR, each replica's log end offset and its fetcher's lag
(``replica_names``). JmxTool runs on the broker's host over SSH (the distribution the broker runs; nothing to
install), once (``--one-time true``), ``--report-format csv``. Every name is spelled out: with an object-name
*pattern* and ``--attributes`` Kafka 2.3's JmxTool dies with a NullPointerException (``names.elem`` is null,
JmxTool.scala:194, measured on the lab). An object name that does not exist is left out of the answer, silently:
the reader reports it as *unknown* (``JmxReading.missing``), never as a value.

What the reader expects (recorded from the real tool: ``tests/detect/fixtures/jmxtool_*``):

* Kafka 2.x, ``--report-format csv``: one ``<key>,"<value>"`` line per attribute, the first being
  ``time,"<epoch ms>"`` (keys are ``<object name>:<attribute>``; object names hold unquoted commas, so the value is
  after the last ``,"``)::

      time,"1795553235973"
      kafka.network:type=RequestChannel,name=RequestQueueSize:Value,"0"

* the original format (every version; the only one before ``--report-format``): a quoted header
  ``"time","<key>",...`` then one row per reporting interval; the newest complete row is read.

Anything else in the answer (a JVM warning, ``Trying to connect ...`` when stderr is merged) is skipped; an answer
with no value at all is a problem that names its first line.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kafka_runbooks.config import jvm_sizes
from kafka_runbooks.host.argv import validate_abs_path, validate_port
from kafka_runbooks.model import RequestMetrics

REQUEST_QUEUE = "kafka.network:type=RequestChannel,name=RequestQueueSize"
RESPONSE_QUEUE = "kafka.network:type=RequestChannel,name=ResponseQueueSize"
FAILED_PRODUCE = "kafka.server:type=BrokerTopicMetrics,name=FailedProduceRequestsPerSec"
FAILED_FETCH = "kafka.server:type=BrokerTopicMetrics,name=FailedFetchRequestsPerSec"
BYTES_IN = "kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec"
PRODUCE_REQUESTS = "kafka.server:type=BrokerTopicMetrics,name=TotalProduceRequestsPerSec"
FETCH_REQUESTS = "kafka.server:type=BrokerTopicMetrics,name=TotalFetchRequestsPerSec"
REQUEST_TYPES = ("Produce", "FetchConsumer", "FetchFollower")
TIMES = ("TotalTimeMs", "RequestQueueTimeMs", "ResponseQueueTimeMs")
DEFAULT_QUEUED_MAX_REQUESTS = 500


def request_metric(name: str, request: str) -> str:
    return f"kafka.network:type=RequestMetrics,name={name},request={request}"


OBJECT_NAMES: tuple[str, ...] = (
    REQUEST_QUEUE, RESPONSE_QUEUE, FAILED_PRODUCE, FAILED_FETCH, BYTES_IN, PRODUCE_REQUESTS, FETCH_REQUESTS,
    *(request_metric(t, r) for t in TIMES for r in REQUEST_TYPES),
)
ATTRIBUTES = ("Value", "Count", "OneMinuteRate", "Mean", "99thPercentile", "Max")
# the figures a reading must hold to say anything about the request path: without them the queue is "unknown"
REQUIRED = (f"{REQUEST_QUEUE}:Value",)

_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


# --------------------------------------------------------------------------- per-replica figures (stuck followers)

def log_end_offset(topic: str, partition: int) -> str:
    """The replica's own log end offset (every broker hosting the partition; 0.10 and 2.x)."""
    return f"kafka.log:type=Log,name=LogEndOffset,topic={_topic(topic)},partition={int(partition)}"


def fetcher_lag(fetcher_id: int, leader: int, topic: str, partition: int) -> str:
    """The follower's fetcher lag for the partition: registered while a ``ReplicaFetcherThread-<f>-<leader>`` fetches
    it, removed when the partition leaves the fetcher (0.10 and 2.x)."""
    return (f"kafka.server:type=FetcherLagMetrics,name=ConsumerLag,clientId=ReplicaFetcherThread-{int(fetcher_id)}-{int(leader)},"
            f"topic={_topic(topic)},partition={int(partition)}")


def _topic(topic: str) -> str:
    if not _TOPIC.fullmatch(topic):
        raise ValueError(f"not a Kafka topic name: {topic!r}")
    return topic


def replica_names(topic: str, partition: int, leader: int, fetchers: int) -> tuple[str, ...]:
    """What the follower is asked about one partition: its log end offset, and its fetcher lag under every fetcher id
    it could use (``num.replica.fetchers``; Kafka picks one by a hash of the topic and partition)."""
    return (log_end_offset(topic, partition), *(fetcher_lag(f, leader, topic, partition) for f in range(max(1, min(int(fetchers), 16)))))


# --------------------------------------------------------------------------- running it

def jmx_url(host: str, port: int) -> str:
    return f"service:jmx:rmi:///jndi/rmi://{host}:{int(port)}/jmxrmi"


# JmxTool before 2.0 (KAFKA-6611) has no --one-time and exits on it; it prints a header and a row every
# --reporting-interval, forever, and with --attributes only when every object named has every attribute asked (an
# absent fetcher-lag name would hold every row back: so no --attributes there). This constant script runs the tool
# (its arguments, never part of the script), passes its first two lines on and stops it: the JVM ignores SIGPIPE, so
# a pipe into head would leave it running.
FIRST_ROW_SCRIPT = ('coproc JMX { exec "$@"; }; IFS= read -r head <&"${JMX[0]}" && IFS= read -r row <&"${JMX[0]}"; rc=$?; '
                    'kill "$JMX_PID" 2>/dev/null; wait "$JMX_PID" 2>/dev/null; printf "%s\\n%s\\n" "$head" "$row"; exit $rc')
REPORTING_INTERVAL_MS = 3_600_000  # the tool is stopped after its first row


# A short-lived client on a broker's host, maybe a sick one: one GC thread and the first JIT tier instead of the broker's
# G1 defaults that kafka-run-class.sh applies (measured on the lab, Kafka 2.3.0, JDK 17: 1.9 -> 1.3 CPU-seconds a run),
# and the JVM started directly on the distribution's libs/ instead of through kafka-run-class.sh, whose classpath loop
# alone cost 0.4 CPU-seconds a run (lab, the health check's object names: 1.41 -> 1.01 CPU-seconds a run, 5 runs each).
LIGHT_JVM = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"


def heap_options(heap: str) -> tuple[str, ...]:
    """``leadership.jmx_heap`` as JVM options (it reaches a command line on the broker's host): sizes only
    (``config.jvm_sizes``); raises ``config.ConfigError`` (a ValueError) naming the setting otherwise."""
    return jvm_sizes(heap, "leadership.jmx_heap")


def jmxtool_argv(kafka_home: str, url: str, heap: str = "-Xmx64m", extra_names: Iterable[str] = (), version=None) -> tuple[str, ...]:
    """Kafka's JmxTool, once, in a JVM of its own started as kafka-run-class.sh would start it (the distribution's
    ``libs/*`` as the classpath -- every Kafka version's launcher puts exactly those jars on it for a tool --, its
    ``config/tools-log4j.properties``), without that script: ``java`` from the PATH, as the capture's jstack and jcmd.
    No JMX agent of its own (``KAFKA_JMX_OPTS`` and ``JMX_PORT`` of the launcher are not applied), no CLASSPATH from
    the environment.
    ``version`` (``kafka_runbooks.versions.KafkaVersion``): ``--one-time`` CSV where every broker has it (2.0+), else
    (0.10, or unknown) the original format until its first row (``FIRST_ROW_SCRIPT``); every object name is the same
    in 0.10.2.1 (tests/analyze/fixtures/real0102/jmxtool.csv, recorded from the lab's broker)."""
    one_time = version is not None and version.has("jmxtool_one_time")
    home = kafka_home.rstrip("/")
    argv = ["env", "-u", "JMX_PORT", "-u", "CLASSPATH", "java", *heap_options(heap), *LIGHT_JVM.split(),
            f"-Dlog4j.configuration=file:{home}/config/tools-log4j.properties", "-cp", f"{home}/libs/*",
            "kafka.tools.JmxTool", "--jmx-url", url]
    if one_time:
        argv += ["--one-time", "true", "--report-format", "csv", "--attributes", ",".join(ATTRIBUTES)]
    else:
        argv += ["--reporting-interval", str(REPORTING_INTERVAL_MS)]
    for name in (*OBJECT_NAMES, *extra_names):
        argv += ["--object-name", name]
    return tuple(argv) if one_time else ("bash", "-c", FIRST_ROW_SCRIPT, "jmxtool", *argv)


_JMX_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:_-]{0,252}$")


@dataclass(frozen=True)
class JmxRead:
    """One JmxTool read of one broker, as the health check and the capture run it over SSH on the broker's host:
    ``argv`` bounded by ``timeout_s``, or ``argv`` None and ``unavailable`` saying why nothing can be read."""

    argv: tuple[str, ...] | None
    timeout_s: float
    url: str | None = None
    unavailable: str | None = None


def jmx_read(config, broker, extra_names: Iterable[str] = (), version=None) -> JmxRead:
    """The one way the product reads a broker's JMX: ``leadership.jmx_host`` (else the broker's registered host), the
    JMX port of its registration, the cluster's ``kafka_home``, ``leadership.jmx_heap`` and ``jmx_timeout_s``.
    Raises ``host.argv.UnsafeValueError`` for a hostile port or path."""
    h = config.leadership
    host = h.jmx_host or broker.host
    if not broker.jmx_port:
        return JmxRead(None, h.jmx_timeout_s, unavailable="no JMX port in its registration (start it with JMX_PORT)")
    if not host or not _JMX_HOST.fullmatch(host):
        return JmxRead(None, h.jmx_timeout_s, unavailable=f"no usable JMX host ({host!r})")
    url = jmx_url(host, validate_port(broker.jmx_port))
    kafka_home = validate_abs_path(config.kafka_home, "kafka_home")
    try:
        heap_options(h.jmx_heap)
    except ValueError as exc:
        return JmxRead(None, h.jmx_timeout_s, url, unavailable=str(exc))
    return JmxRead(jmxtool_argv(kafka_home, url, h.jmx_heap, extra_names, version), h.jmx_timeout_s, url)


# --------------------------------------------------------------------------- reading it

@dataclass(frozen=True)
class JmxReading:
    """What one JmxTool answer said: ``values`` ("<object name>:<attribute>" -> number), the broker's clock when it
    answered (``time`` in ms, None when the answer had no time), and the problems met reading it."""

    values: Mapping[str, float] = field(default_factory=dict)
    time_ms: int | None = None
    problems: tuple[str, ...] = ()
    form: str | None = None  # "csv" | "original" | None (nothing recognisable)

    def missing(self, wanted: Iterable[str]) -> list[str]:
        return [k for k in wanted if k not in self.values]


def _number(text: str) -> float | None:
    try:
        v = float(text)
    except ValueError:
        return None
    return v if v == v and v not in (float("inf"), float("-inf")) else None  # NaN and infinities are not figures


def _row(line: str) -> list[str]:
    return next(csv.reader(io.StringIO(line)))


def parse_jmxtool_output(text: str | bytes) -> JmxReading:
    """Either form above -> a JmxReading. Never raises."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return JmxReading(problems=("JmxTool printed nothing",))
    if any(ln.startswith('"time"') for ln in lines):
        return _original(lines)
    values: dict[str, float] = {}
    time_ms: int | None = None
    skipped = 0
    for ln in lines:
        key, sep, rest = ln.rpartition(',"')
        if not sep or not rest.endswith('"') or not key:
            skipped += 1
            continue
        v = _number(rest[:-1])
        if key == "time":
            time_ms = int(v) if v is not None else None
        elif v is not None:
            values[key] = v
    if not values:
        return JmxReading(time_ms=time_ms, problems=(f"no JmxTool values in its answer: {lines[0][:200]!r}",), form="csv" if time_ms else None)
    return JmxReading(values, time_ms, (), "csv")


def _original(lines: list[str]) -> JmxReading:
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"time"'))
    header = [c.strip() for c in _row(lines[start])]
    newest: list[str] | None = None
    for ln in lines[start + 1:]:
        try:
            cells = _row(ln)
        except (csv.Error, StopIteration):
            continue
        if len(cells) == len(header) and _number(cells[0]) is not None:
            newest = cells
    if newest is None:
        return JmxReading(problems=("JmxTool printed its header but no row of values",), form="original")
    values = {k: v for k, cell in zip(header[1:], newest[1:]) for v in [_number(cell)] if v is not None}
    t = _number(newest[0])
    return JmxReading(values, int(t) if t is not None else None, (), "original")


def metrics_from(broker_id: int, at: str | None, reading: JmxReading, error: str | None = None) -> RequestMetrics:
    """A broker's RequestMetrics from a reading: ``ok`` only when the request path's required figures are there; an
    answer without them says which are missing (the figures are *unknown*, never zero)."""
    if error is not None:
        return RequestMetrics(broker_id, ok=False, at=at, values=dict(reading.values), error=error)
    missing = reading.missing(REQUIRED)
    if reading.problems or missing:
        why = "; ".join(reading.problems) or f"JmxTool answered without {', '.join(missing)}: unknown"
        return RequestMetrics(broker_id, ok=False, at=at, values=dict(reading.values), error=why)
    return RequestMetrics(broker_id, ok=True, at=at, values=dict(reading.values))


def metrics_summary(m: RequestMetrics) -> Mapping[str, float | None]:
    """The figures kept in the history per check."""
    return {
        "request_queue": m.get(REQUEST_QUEUE, "Value"),
        "response_queue": m.get(RESPONSE_QUEUE, "Value"),
        "failed_produce_rate": m.get(FAILED_PRODUCE, "OneMinuteRate"),
        "failed_fetch_rate": m.get(FAILED_FETCH, "OneMinuteRate"),
        "bytes_in_rate": m.get(BYTES_IN, "OneMinuteRate"),
        "request_rate": _sum(m.get(PRODUCE_REQUESTS, "OneMinuteRate"), m.get(FETCH_REQUESTS, "OneMinuteRate")),
        "produce_queue_ms_p99": m.get(request_metric("RequestQueueTimeMs", "Produce"), "99thPercentile"),
    }


def _sum(*xs: float | None) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) if vals else None
