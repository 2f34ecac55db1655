"""Big logs read inside the Spark tasks with a native prefilter (ripgrep), the JVM scan as the fallback.

One Spark task per log file (executor side, pure Python + ``rg``): the survey streams the file (sha256, damaged
ranges, encoding, layout, line count); then, when the file is one the JVM scan would read and ``rg`` is on the
executor, ``rg --fixed-strings --after-context 2`` hands back every line holding a literal some signature needs
(a superset of the records the JVM gate keeps) with the two lines under it, numbered by rg itself. Each such
line goes through the same per-record code as the JVM scan's classifier (``record_event``, with the same
adjacency rules for the exception line and the marker frame), the task writes its log_events rows as one
Parquet part file (``source=rg``) and hands the driver only the bounded summary the JVM path builds from its
aggregates (exact counts, first/last SAMPLE rows per signature, exact per-minute fetch-failure counts).

When ``rg`` is absent on the executor, the file is not local, or it is not valid UTF-8, the task returns the
survey alone and the file goes to the JVM scan (``fastscan.py``); both paths give the same rows (tested).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import deque
from typing import Any, Iterator

from . import signatures as S
from . import uri as U
from .logsummary import SAMPLE, LogSummary, event_row, record_of
from .parsers.layouts import BY_NAME, GATE_STEPS, GATE_SUFFIX, LEVEL_POS, gate_key, gate_keys, level_kept
from .parsers.logs import EXCEPTION_HEAD, LogRecord, classify, is_exception_line

RAW_MAX = 2000  # the JVM scan keeps the first 2000 characters of a line (fastscan.RAW_MAX)
EXC_WORDS = ("Exception", "Error", "Throwable")
FETCH = ("replica_fetch_error", "fetch_session_error")
BATCH = 50_000


def literals() -> list[str]:
    """Strings of which every record the classifier can keep holds at least one: a literal of each signature
    read in the message, the logger of each signature read on the exception line, ERROR and FATAL."""
    out = {"ERROR", "FATAL"}
    for s in S.SIGNATURES:
        if s.on == "exception" or not s.literals:
            out.update(s.loggers)
        else:
            out.add(max(s.literals, key=len))
    return sorted(out)


def prefilter_table(layout: str) -> tuple[list[str], dict[str, list[str]]]:
    """The JVM scan's record prefilter (fastscan._possible_sql), as data: (gate keys of loggers with a signature
    read on the exception line: always kept, gate key -> the first literal of each of its message signatures)."""
    suffix = GATE_SUFFIX.get(layout, "")
    by_logger: dict[str, set[str]] = {}
    for sig in S.SIGNATURES:
        for lg in sig.loggers:
            by_logger.setdefault(lg, set()).add("" if sig.on == "exception" else sig.literals[0])
    always = sorted(lg + suffix for lg, lits in by_logger.items() if "" in lits)
    lists = {lg + suffix: sorted(lits) for lg, lits in by_logger.items() if "" not in lits}
    return always, lists


def record_gate(layout: str):
    """line -> does the JVM scan hand this line to the classifier as a record (its gate and prefilter,
    fastscan._gate_sql and _possible_sql, in Python)? The native scan skips the header parse of the others, so
    both scans classify the same records."""
    lay = BY_NAME[layout]
    if layout not in GATE_STEPS:
        return lambda line: True
    cand = gate_keys(layout, S.ALL_LOGGERS)
    always, lists = prefilter_table(layout)
    always_set = set(always)
    pos = LEVEL_POS.get(layout)
    markers = [lit for _, lit, _ in S.FRAME_MARKERS]

    def keep(line: str) -> bool:
        c = line[:1]
        if not c or c not in lay.first_chars:
            return False  # not a record header (its kind would not be 'rec')
        k = gate_key(layout, line)
        level = pos is not None and line[pos - 1:pos + 4] in ("ERROR", "FATAL")
        if not (k in cand or level or (c in (" ", "\t") and any(m in line for m in markers))):
            return False
        if k in always_set or level:
            return True
        return any(lit in line for lit in lists.get(k, ()))

    return keep


def find_rg(rg: str | None) -> str | None:
    """The ripgrep binary on this executor (None: not found, or the native scan is off)."""
    if not rg:
        return None
    return shutil.which(rg)


def line_kind(layout: str, line: str) -> str:
    """The JVM scan's kind of a line (fastscan._gate_sql): rec / exc / marker, or '' when the gate drops it as
    a continuation line. Only used on lines under a record."""
    c = line[:1]
    if c and c in BY_NAME[layout].first_chars:
        return "rec"
    if c in (" ", "\t"):
        return "marker" if c and any(lit in line for _, lit, _ in S.FRAME_MARKERS) else ""
    if c and any(w in line for w in EXC_WORDS) and EXCEPTION_HEAD.match(line):
        return "exc"
    return ""


def record_event(layout: str, path: str, broker_id: int | None, line: int, raw: str, nxt: str | None,
                 frame: str | None) -> dict[str, Any] | None:
    """A record line (cut at RAW_MAX), the exception line right under it and the marker frame under that (or
    None) -> its log_events row, or None when it is neither a signature nor an ERROR/FATAL record kept for the
    timeline. The one per-record step of both the JVM scan's classifier and the native scan."""
    h = BY_NAME[layout].header(raw)
    if h is None:
        return None
    r = LogRecord(line=line, end_line=line, ts=h.ts, level=h.level, logger=h.logger, thread=h.thread,
                  message=h.message, zone=h.zone, myid=h.myid, raw=raw)
    classify(r, nxt, frame)
    if nxt is not None and r.exception is None and is_exception_line(nxt):
        r.exception, r.exception_line = nxt.strip()[:2000], line + 1
    if not r.signature and not level_kept(layout, raw):
        return None
    return event_row(r, layout, path, broker_id)


_RG_LINE = re.compile(rb"^([0-9]+)([:-])(.*)$", re.M)
READ = 8 << 20


class RgRun:
    """``rg --fixed-strings --after-context 2`` over one file, writing to a temporary file: started before the
    survey so the two read the file side by side (rg in its own process), read back afterwards."""

    def __init__(self, rg: str, local_path: str) -> None:
        argv = [rg, "--no-config", "--no-heading", "--no-filename", "--line-number", "--text", "--fixed-strings",
                "--color", "never", "--threads", "1", "--after-context", "2"]
        for lit in literals():
            argv += ["-e", lit]
        argv += ["--", local_path]
        self.out = tempfile.TemporaryFile(prefix="kafka-runbooks-rg-")
        self.err = tempfile.TemporaryFile(prefix="kafka-runbooks-rg-")
        self.proc = subprocess.Popen(argv, stdout=self.out, stderr=self.err, stdin=subprocess.DEVNULL)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.out.close()
        self.err.close()

    def lines(self) -> Iterator[tuple[int, bool, bytes]]:
        """(line number, matched?, content without its line end) of every line rg printed: the matches and the
        two lines after each (the "--" between context groups skipped)."""
        if self.proc.wait() not in (0, 1):  # 1: nothing matched
            self.err.seek(0)
            raise RuntimeError(f"rg failed ({self.proc.returncode}): {self.err.read()[-500:].decode(errors='replace')}")
        self.out.seek(0)
        rest = b""
        while True:
            block = self.out.read(READ)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            yield from self._parse(block[:cut])
        if rest:
            yield from self._parse(rest + b"\n")

    @staticmethod
    def _parse(block: bytes) -> Iterator[tuple[int, bool, bytes]]:
        for m in _RG_LINE.finditer(block):
            body = m.group(3)
            if body[-1:] == b"\r":  # CRLF: Spark's line reader drops both
                body = body[:-1]
            yield int(m.group(1)), m.group(2) == b":", body


class _Summary:
    """The bounded aggregates the JVM path reads back from Parquet, built while the rows stream by."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: dict[str | None, list[dict]] = {}
        self.last: dict[str | None, deque] = {}
        self.minutes: dict[tuple, dict[str, Any]] = {}

    def add(self, row: dict[str, Any]) -> None:
        sig = row["signature"]
        if sig is not None:
            self.counts[sig] = self.counts.get(sig, 0) + 1
        f = self.first.setdefault(sig, [])
        if len(f) < SAMPLE:
            f.append(row)
        else:
            self.last.setdefault(sig, deque(maxlen=SAMPLE)).append(row)
        if sig in FETCH:
            a = row["attrs"]
            cause = ("client_shutdown" if a.get("client_shutdown") is not None else "disconnected"
                     if a.get("disconnected_node") is not None else "timeout" if a.get("timeout") is not None
                     else "connection_failed" if a.get("connection_failed") is not None else "unknown")
            k = (sig, a.get("leader"), a.get("fetcher"), cause, row["ts"][:16] if row["ts"] is not None else None)
            m = self.minutes.get(k)
            if m is None:
                self.minutes[k] = {"signature": k[0], "leader": k[1], "fetcher": k[2], "cause": k[3], "minute": k[4],
                                   "count": 1, "first_line": row["line"], "last_line": row["line"]}
            else:
                m["count"] += 1
                m["first_line"] = min(m["first_line"], row["line"])
                m["last_line"] = max(m["last_line"], row["line"])

    def sample(self) -> list[dict[str, Any]]:
        return [r for sig, f in self.first.items() for r in f + list(self.last.get(sig, ()))]


def scanned_file(e: dict, s, counts: dict[str, int], sample: list[dict[str, Any]], minutes: list[dict[str, Any]]):
    """The ParsedFile of a big log read by the Spark job (either scan): its bounded summary, with the survey's
    layout, sampled share, line count, first/last times and damage notes."""
    from .diagnose import ParsedFile

    rows = sorted(sample, key=lambda r: r["line"])
    shown: dict[str, int] = {}
    for r in rows:
        if r["signature"]:
            shown[r["signature"]] = shown.get(r["signature"], 0) + 1
    summary = LogSummary(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                         layout=s.layout, parsed_share=s.sampled_share, share_sampled=True, lines=s.lines,
                         counts=dict(counts), events=[record_of(r) for r in rows],
                         omitted={k: counts[k] - shown.get(k, 0) for k in counts if counts[k] > shown.get(k, 0)},
                         minutes=sorted(minutes, key=lambda m: (m["minute"], m["first_line"])),
                         read_by="spark", first_ts=s.first_ts, last_ts=s.last_ts)
    pf = ParsedFile(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                    seq=e.get("seq", ""), server=e.get("server"), bytes=s.size, result=summary)
    if s.nul_runs:
        pf.notes.append(f"{s.nul_runs} damaged range(s) of NUL bytes ({s.nul_bytes} bytes, first at bytes "
                        f"{s.nul_ranges[0][0]}-{s.nul_ranges[0][1] - 1}); the rest was analysed")
    if s.encoding == "utf-8":
        pf.notes.append("non-ASCII UTF-8 content (invalid sequences are matched byte-wise and left as they are)")
    return pf


def scan_file(rg: "str | RgRun", local_path: str, path: str, broker_id: int | None, layout: str, out_uri: str, key: str):
    """rg over one whole file (``rg``: the binary, or a run already started) -> (counts, sample rows, minute rows);
    the rows are written as one Parquet part file of log_events (source=rg). None when the file is not valid
    UTF-8 (the JVM scan reads it instead)."""
    run = rg if isinstance(rg, RgRun) else RgRun(rg, local_path)
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .tables import SCHEMAS, table_dir

    schema = SCHEMAS["log_events"]
    cols = [f.name for f in schema]
    agg = _Summary()
    keep = record_gate(layout)
    d = table_dir(out_uri, "log_events", "rg")
    name = f"part-{__import__('hashlib').sha256(key.encode()).hexdigest()[:20]}.parquet"
    target = None
    writer = None
    batch: list[dict] = []
    window: dict[int, bytes] = {}
    pending: deque[int] = deque()

    def flush() -> None:
        nonlocal writer, target
        if not batch:
            return
        t = pa.Table.from_pydict({c: ([list(r[c].items()) for r in batch] if c == "attrs" else [r[c] for r in batch])
                                  for c in cols}, schema=schema)
        if writer is None:
            if U.is_local(d):
                os.makedirs(U.local_path(d), exist_ok=True)
                target = os.path.join(U.local_path(d), name)
                writer = pq.ParquetWriter(target, schema)
            else:
                fs, p = U._arrow_fs(d)
                fs.create_dir(p, recursive=True)
                target = f"{p}/{name}"
                writer = pq.ParquetWriter(target, schema, filesystem=fs)
        writer.write_table(t)
        batch.clear()

    def text(b: bytes | None) -> str | None:
        return None if b is None else b.decode("utf-8")

    def settle(n: int) -> None:
        raw = text(window[n])
        if not keep(raw):
            return
        nxt = frame = None
        b1 = window.get(n + 1)
        if b1 is not None:
            s1 = text(b1)
            if line_kind(layout, s1) == "exc":
                nxt = s1[:RAW_MAX]
                b2 = window.get(n + 2)
                if b2 is not None:
                    s2 = text(b2)
                    if line_kind(layout, s2) == "marker":
                        frame = s2[:RAW_MAX]
        row = record_event(layout, path, broker_id, n, raw[:RAW_MAX], nxt, frame)
        if row is not None:
            agg.add(row)
            batch.append(row)
            if len(batch) >= BATCH:
                flush()

    try:
        for n, matched, body in run.lines():
            window[n] = body
            while pending and pending[0] + 2 <= n:
                settle(pending.popleft())
            if matched:
                pending.append(n)
            if len(window) > 64:
                low = (pending[0] if pending else n) - 2
                for k in [k for k in window if k < low]:
                    del window[k]
        while pending:
            settle(pending.popleft())
        flush()
    except UnicodeDecodeError:
        if writer is not None:
            writer.close()
            writer = None
            _remove(target, d)
        return None
    finally:
        if writer is not None:
            writer.close()
        run.close()
    return agg.counts, agg.sample(), list(agg.minutes.values())


def _remove(target: str | None, d: str) -> None:
    if target is None:
        return
    if U.is_local(d):
        try:
            os.unlink(target)
        except OSError:
            pass
    else:
        fs, _ = U._arrow_fs(d)
        fs.delete_file(target)


def survey_and_scan(e: dict, file_uri: str, split_bytes: int, out_uri: str, rg: str | None, require_rg: bool = False):
    """One log file on an executor: its survey, and (rg found, file local and readable by the JVM scan) its
    native scan. -> (entry, survey dict, (counts, sample rows, minute rows) or None: None sends the file to the
    JVM scan, the task's seconds: wall and CPU of the survey and of the classification, rg's CPU). The driver
    makes the ParsedFile (``scanned_file``): the executor need not import the diagnosis."""
    from .survey import Survey, survey_file

    import resource
    import time

    t0, c0, k0 = time.monotonic(), time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    cost: dict[str, float] = {}
    exe = find_rg(rg) if rg else None
    if rg and (exe is None or not U.is_local(file_uri)) and require_rg:
        raise RuntimeError(f"log scan 'rg' asked for, but {rg!r} was not found on this executor's PATH"
                           if exe is None else f"log scan 'rg' needs a local or shared-mount file, not {file_uri}")
    run = RgRun(exe, U.local_path(file_uri)) if exe and U.is_local(file_uri) else None  # beside the survey
    res = None
    try:
        s: Survey = survey_file(e["path"], file_uri, split_bytes)
        cost["survey_s"], cost["survey_cpu_s"] = time.monotonic() - t0, time.process_time() - c0
        sha_mismatch = bool(e.get("sha256") and s.sha256 and str(e["sha256"]).lower() != s.sha256)  # reported, not read
        if run is not None and s.spark_readable() and not sha_mismatch:
            t1, c1 = time.monotonic(), time.process_time()
            res = scan_file(run, U.local_path(file_uri), e["path"], e.get("broker_id"), s.layout, out_uri, f"{e['path']}#rg")
            cost["classify_s"], cost["classify_cpu_s"] = time.monotonic() - t1, time.process_time() - c1
    finally:
        if run is not None:
            run.close()
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cost["rg_cpu_s"] = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
    cost["task_s"] = time.monotonic() - t0
    return e, s.to_dict(), res, cost
