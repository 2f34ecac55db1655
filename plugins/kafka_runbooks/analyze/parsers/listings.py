"""Listings of Kafka log directories (``du -sb <logdir>/*``, ``du -sk``, ``ls -l[a] <partition dir>``,
``ls -lR <logdir>``) -> segment count and bytes per partition (incident 002: a compacted partition that
grew to 2,000+ segments when the log cleaner died), and the direct Kafka checks a capture records
(``kafka_probe`` JSON) and Kafka's JmxTool output (``jmx``). Pure.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from .base import decode_evidence, iter_lines

_PARTITION = re.compile(r"(?:^|/)(?P<topic>[A-Za-z0-9._-]{1,249})-(?P<partition>[0-9]{1,9})/?$", re.ASCII)
_DU = re.compile(r"^(?P<size>[0-9]{1,20}(?:\.[0-9]{1,3})?[KMGT]?)\s{1,20}(?P<path>\S.{0,4095})$", re.ASCII)
_LS = re.compile(r"^[-dlcbps][rwxsStT-]{9}[.+@]?\s{1,10}[0-9]{1,9}\s{1,10}\S{1,64}\s{1,10}\S{1,64}\s{1,10}(?P<size>[0-9]{1,20})\s{1,10}"
                 r"(?P<date>\S{1,40}(?:\s{1,10}\S{1,40}){1,3})\s{1,10}(?P<name>\S{1,255})$", re.ASCII)
_LS_DIR = re.compile(r"^(?P<dir>\S.{0,4095}):$")
_SEGMENT = re.compile(r"^(?P<base>[0-9]{20})\.(?P<ext>log|index|timeindex|snapshot|txnindex)(?:\.(?:deleted|cleaned|swap))?$", re.ASCII)
_UNITS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


@dataclass
class PartitionDir:
    name: str  # topic-partition
    topic: str
    partition: int
    bytes: int | None = None  # from du
    segments: int = 0  # .log files seen in an ls listing
    log_bytes: int = 0
    oldest_base: int | None = None
    newest_base: int | None = None
    line: int = 0


@dataclass
class Listing:
    partitions: dict[str, PartitionDir] = field(default_factory=dict)
    unit: str = "bytes"
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def largest(self, n: int = 10) -> list[PartitionDir]:
        return sorted(self.partitions.values(), key=lambda p: -(p.bytes or p.log_bytes))[:n]


def _size(v: str, unit_k: bool) -> int:
    m = v[-1] if v[-1] in "KMGT" else ""
    num = float(v[:-1] if m else v)
    return int(num * _UNITS[m] * (1024 if unit_k and not m else 1))


def parse_listing(data: bytes | str | None, du_unit: str = "bytes") -> Listing:
    """``du_unit``: "bytes" for ``du -sb``, "k" for plain ``du -s``/``du -sk`` (1 KiB blocks)."""
    d = decode_evidence(data)
    out = Listing(unit=du_unit)
    if d.problems:
        out.unparsable.extend(d.problems)
        return out
    cur_dir = None
    for i, ln in iter_lines(d.text):
        s = ln.rstrip()
        if not s.strip() or s.startswith("total "):
            continue
        m = _LS_DIR.match(s)
        if m:
            cur_dir = m.group("dir")
            continue
        m = _LS.match(s)
        if m:
            seg = _SEGMENT.match(m.group("name"))
            pm = _PARTITION.search(cur_dir or "") if cur_dir else None
            if seg and seg.group("ext") == "log":
                key = f"{pm.group('topic')}-{pm.group('partition')}" if pm else "?"
                p = out.partitions.get(key) or out.partitions.setdefault(
                    key, PartitionDir(key, pm.group("topic") if pm else "?", int(pm.group("partition")) if pm else -1, line=i))
                base = int(seg.group("base"))
                p.segments += 1
                p.log_bytes += int(m.group("size"))
                p.oldest_base = base if p.oldest_base is None else min(p.oldest_base, base)
                p.newest_base = base if p.newest_base is None else max(p.newest_base, base)
            continue
        m = _DU.match(s)
        if m:
            pm = _PARTITION.search(m.group("path"))
            if pm:
                key = f"{pm.group('topic')}-{pm.group('partition')}"
                p = out.partitions.setdefault(key, PartitionDir(key, pm.group("topic"), int(pm.group("partition")), line=i))
                p.bytes = _size(m.group("size"), du_unit == "k")
    if not out.partitions:
        out.unparsable.append("no partition directories recognised (expected `du -sb <logdir>/*` or `ls -l <partition dir>`)")
    return out


def segments_per_partition(listing: Listing) -> dict[str, int]:
    return {k: p.segments for k, p in listing.partitions.items() if p.segments}


# ---------------------------------------------------------------- kafka_probe (JSON, docs/CONTRACTS.md)


@dataclass
class ProbeResult:
    at: str
    ok: bool
    latency_ms: float | None
    error: str | None
    check: str


@dataclass
class KafkaProbe:
    broker_id: int | None = None
    endpoint: str | None = None
    results: list[ProbeResult] = field(default_factory=list)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    @property
    def failures(self) -> list[ProbeResult]:
        return [r for r in self.results if not r.ok]

    @property
    def all_failed(self) -> bool:
        return bool(self.results) and all(not r.ok for r in self.results)

    @property
    def timeouts(self) -> list[ProbeResult]:
        return [r for r in self.results if not r.ok and is_timeout(r.error)]


def is_timeout(error: str | None) -> bool:
    """A check error that is a timeout: 'Request timed out', TimeoutException, librdkafka's _TIMED_OUT."""
    e = (error or "").lower()
    return "timed out" in e or "timeout" in e or "timed_out" in e


def parse_kafka_probe(data: bytes | str | None) -> KafkaProbe:
    d = decode_evidence(data)
    p = KafkaProbe()
    if d.problems:
        p.unparsable.extend(d.problems)
        return p
    try:
        doc = json.loads(d.text)
    except ValueError as exc:
        p.unparsable.append(f"not JSON: {exc}")
        return p
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        p.unparsable.append("expected an object with a 'results' list (schema kafka-runbooks/kafka-probe/v1)")
        return p
    try:
        p.broker_id = int(doc["broker_id"]) if doc.get("broker_id") is not None else None
    except (TypeError, ValueError):
        p.unparsable.append(f"broker_id {doc.get('broker_id')!r} is not an integer")
    p.endpoint = str(doc.get("endpoint") or "") or None
    for i, r in enumerate(doc["results"]):
        if not isinstance(r, dict) or "ok" not in r:
            p.unparsable.append(f"results[{i}] has no 'ok'")
            continue
        lat = r.get("latency_ms")
        p.results.append(ProbeResult(str(r.get("at") or ""), bool(r["ok"]), float(lat) if isinstance(lat, (int, float)) else None,
                                     str(r["error"]) if r.get("error") else None, str(r.get("check") or "metadata")))
    return p


@dataclass
class KafkaChecks:
    """kafka-checks.json of the capture (kind kafka_checks, bundle root): ``[KafkaCheck.to_dict() + {"during_capture":
    "start"|"end"}]`` for every captured broker -> one KafkaProbe per broker."""

    probes: dict[int, KafkaProbe] = field(default_factory=dict)
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable


def parse_kafka_checks(data: bytes | str | None) -> KafkaChecks:
    d = decode_evidence(data)
    out = KafkaChecks()
    if d.problems:
        out.unparsable.extend(d.problems)
        return out
    try:
        doc = json.loads(d.text)
    except ValueError as exc:
        out.unparsable.append(f"not JSON: {exc}")
        return out
    if isinstance(doc, dict) and isinstance(doc.get("checks"), list):
        doc = doc["checks"]
    if not isinstance(doc, list):
        out.unparsable.append("expected a list of KafkaCheck objects (model.KafkaCheck.to_dict())")
        return out
    for i, c in enumerate(doc):
        if not isinstance(c, dict) or "ok" not in c or c.get("broker_id") is None:
            out.unparsable.append(f"[{i}] has no 'broker_id' and 'ok'")
            continue
        try:
            b = int(c["broker_id"])
        except (TypeError, ValueError):
            out.unparsable.append(f"[{i}] broker_id {c.get('broker_id')!r} is not an integer")
            continue
        p = out.probes.setdefault(b, KafkaProbe(broker_id=b, endpoint=str(c.get("endpoint") or "") or None))
        lat = c.get("latency_ms")
        err = " ".join(str(x) for x in (c.get("error_code"), c.get("error")) if x) or None
        p.results.append(ProbeResult(str(c.get("at") or ""), bool(c["ok"]), float(lat) if isinstance(lat, (int, float)) else None,
                                     err, "direct" + (f" ({c['during_capture']} of capture)" if c.get("during_capture") else "")))
    return out


# ---------------------------------------------------------------- JmxTool output (kind "jmx")


@dataclass
class JmxSeries:
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # {"time": ms, "<attr>": value}
    unparsable: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unparsable

    def series(self, needle: str) -> list[tuple[int, float]]:
        cols = [c for c in self.columns if needle in c]
        out = []
        for r in self.rows:
            for c in cols:
                v = r.get(c)
                if isinstance(v, (int, float)):
                    out.append((int(r.get("time") or 0), float(v)))
        return out


def parse_jmx(data: bytes | str | None) -> JmxSeries:
    """``kafka-run-class.sh kafka.tools.JmxTool --object-name ... [--reporting-interval N]``: a CSV header
    ("time","kafka.network:type=RequestChannel,name=RequestQueueSize:Value") then one row per interval; or, as the
    capture takes it from Kafka 2.0 on (``--one-time true --report-format csv``), one ``time,"<ms>"`` line then one
    ``<object name>:<attribute>,"<value>"`` line per figure: one row (read by ``host.jmxtool.parse_jmxtool_output``)."""
    d = decode_evidence(data)
    j = JmxSeries()
    if d.problems:
        j.unparsable.extend(d.problems)
        return j
    if not re.search(r'^\s*"time"', d.text, re.M) and re.search(r'^\s*time,"', d.text, re.M):
        from kafka_runbooks.host.jmxtool import parse_jmxtool_output

        reading = parse_jmxtool_output(d.text)
        if reading.problems:
            j.unparsable.extend(reading.problems)
            return j
        j.columns = ["time", *reading.values]
        j.rows.append({"time": reading.time_ms, **reading.values})
        return j
    header = None
    for _, ln in iter_lines(d.text):
        s = ln.strip()
        if not s or s.startswith("Trying to connect") or s.startswith("Retrieving") or s.startswith("Using"):
            continue
        cells = _csv(s)
        if header is None:
            if cells and cells[0].strip('"') == "time":
                header = [c.strip('"') for c in cells]
                j.columns = header
            continue
        if len(cells) != len(header):
            continue
        row: dict[str, Any] = {}
        for k, v in zip(header, cells):
            v = v.strip('"')
            try:
                row[k] = int(v) if re.fullmatch(r"-?[0-9]{1,19}", v) else float(v)
            except ValueError:
                row[k] = v
        j.rows.append(row)
    if header is None:
        j.unparsable.append("no JmxTool CSV header (\"time\",...)")
    return j


def _csv(s: str) -> list[str]:
    out, cur, q = [], [], False
    for ch in s:
        if ch == '"':
            q = not q
            cur.append(ch)
        elif ch == "," and not q:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def probe_failures_by_broker(probes: list[KafkaProbe]) -> dict[int, list[ProbeResult]]:
    out: dict[int, list[ProbeResult]] = defaultdict(list)
    for p in probes:
        if p.broker_id is not None:
            out[p.broker_id].extend(p.failures)
    return out
