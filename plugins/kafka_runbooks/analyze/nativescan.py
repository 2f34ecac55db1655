"""Big logs read inside the Spark tasks with a native prefilter (ripgrep), the JVM scan as the fallback.

The log phase runs one Spark task per core (``plan_log_tasks``, executor side, pure Python + ``rg``); a task
surveys whole logs (``survey_log``: sha256, damaged ranges, encoding, layout, line count) in a thread beside the
pieces of logs it scans (``scan_piece``). When the file is one the JVM scan would read and ``rg`` is on the
executor, ``rg --fixed-strings --after-context 2`` hands back every line of the piece holding a literal some
signature needs (a superset of the records the JVM gate keeps) with the two lines under it, numbered by rg
itself. Each such line goes through the same per-record code as the JVM scan's classifier (``record_event``,
with the same adjacency rules for the exception line and the marker frame), the piece's log_events rows are
written as one Parquet part file (``source=rg``) and the driver gets only the bounded summary the JVM path
builds from its aggregates (exact counts, first/last SAMPLE rows per signature, exact per-minute fetch-failure
counts), merged over a log's pieces (``combine_pieces``).

When ``rg`` is absent on the executor, the file is not local, not valid UTF-8, or changed while it was read, the
log's scan is given up and the file goes to the JVM scan (``fastscan.py``); both paths give the same rows (tested).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import tempfile
from collections import deque
from typing import Any, Iterator

from . import signatures as S
from . import uri as U
from .logsummary import SAMPLE, LogSummary, event_dict, record_of
from .parsers.layouts import BY_NAME, GATE_STEPS, GATE_SUFFIX, LEVEL_POS, gate_key, gate_keys, level_kept, simple_name
from .parsers.logs import EXCEPTION_HEAD, classify_fields, is_exception_line

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
                 frame: str | None, with_header: bool = False) -> dict[str, Any] | None:
    """A record line (cut at RAW_MAX), the exception line right under it and the marker frame under that (or
    None) -> its log_events row, or None when it is neither a signature nor an ERROR/FATAL record kept for the
    timeline. The one per-record step of both the JVM scan's classifier and the native scan. ``with_header``
    adds the parsed header under ``header`` (not a column: it saves the driver re-reading sampled rows)."""
    h = BY_NAME[layout].header(raw)
    if h is None:
        return None
    simple = simple_name(h.logger)
    hit = classify_fields(simple, h.message, nxt, frame)
    if hit is None and not level_kept(layout, raw):
        return None
    sig, attrs = hit if hit is not None else (None, {})
    exc = nxt.strip()[:2000] if nxt is not None and is_exception_line(nxt) else None
    row = event_dict(path, broker_id, layout, line, h.ts, h.zone, h.level, simple, sig.name if sig else None,
                     sig.versions if sig else None, attrs, raw, exc, line + 1 if exc is not None else None)
    if with_header:
        row["header"] = (h.logger, h.thread, h.message, h.myid)
    return row


_RG_LINE = re.compile(rb"^([0-9]+)([:-])([0-9]+)[:-](.*)$", re.M)
READ = 8 << 20
PIPE_BYTES = 1 << 20
BOM = b"\xef\xbb\xbf"


class RgRun:
    """``rg --fixed-strings --after-context 2 --byte-offset`` over one file from the line starting at byte ``start``
    (``line_base``: the line breaks before it) to its end, or, given ``stop`` (a line start), to the end of the
    second line from ``stop`` on (the lines under the range's last record), read from a pipe while it runs (the scan
    classifies as rg goes; closing it stops rg). Line numbers and byte offsets are the file's own."""

    def __init__(self, rg: str, local_path: str, start: int = 0, line_base: int = 0, stop: int | None = None) -> None:
        # --encoding none: the bytes as they are (rg would strip a UTF-8 BOM at the start of what it reads, a piece's
        # too, and count byte offsets without it); the file's own BOM is dropped in _parse, as Hadoop's line reader
        # under Spark's text source drops it
        argv = [rg, "--no-config", "--no-heading", "--no-filename", "--line-number", "--byte-offset", "--text",
                "--encoding", "none", "--fixed-strings", "--color", "never", "--threads", "1", "--after-context", "2"]
        for lit in literals():
            argv += ["-e", lit]
        self.line_base, self.offset_base = line_base, start
        self.feeder = None
        self.err = tempfile.TemporaryFile(prefix="kafka-runbooks-rg-")
        try:
            if stop is not None:  # rg reads [start, end of the 2nd line from stop) from a pipe a thread fills
                from .survey import line_start_at_or_after

                end = line_start_at_or_after(local_path, line_start_at_or_after(local_path, stop + 1) + 1)
                r, w = os.pipe()
                try:
                    self.proc = subprocess.Popen(argv + ["-"], stdout=subprocess.PIPE, stderr=self.err, stdin=r)
                except BaseException:
                    os.close(w)
                    raise
                finally:
                    os.close(r)
                try:
                    self.feeder = _Feeder(local_path, start, end - start, w)
                except BaseException:  # rg would wait for its input forever
                    os.close(w)
                    self.proc.kill()
                    self.proc.wait()
                    self.proc.stdout.close()
                    raise
            else:  # rg reads the file opened here (a regular file only, whatever its name points to by then)
                with U.open_binary(local_path) as src:
                    fd = src.fileno()
                    if start == 0 and os.path.exists(f"/proc/self/fd/{fd}"):  # by name: rg's faster read
                        self.proc = subprocess.Popen(argv + ["--", f"/proc/self/fd/{fd}"], stdout=subprocess.PIPE,
                                                     stderr=self.err, stdin=subprocess.DEVNULL, pass_fds=(fd,))
                    else:  # from ``start`` on, as its standard input
                        src.seek(start)
                        self.proc = subprocess.Popen(argv + ["-"], stdout=subprocess.PIPE, stderr=self.err, stdin=src)
        except BaseException:
            self.err.close()
            raise
        import fcntl

        if hasattr(fcntl, "F_SETPIPE_SZ"):  # fewer, larger reads (Linux); the default 64 KiB pipe works too
            try:
                fcntl.fcntl(self.proc.stdout.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:
                pass

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.stdout.close()
        self.proc.wait()
        if self.feeder is not None:
            self.feeder.thread.join()  # rg is gone: its pipe is broken, the feeder stops
        self.err.close()

    def lines(self) -> Iterator[tuple[int, bool, int, bytes]]:
        """(line number, matched?, byte offset of the line, content without its line end) of every line rg
        printed: the matches and the two lines after each (the "--" between context groups skipped)."""
        rest = b""
        while True:
            block = self.proc.stdout.read1(READ)
            if not block:
                break
            block = rest + block
            cut = block.rfind(b"\n") + 1
            rest = block[cut:]
            yield from self._parse(block[:cut], self.line_base, self.offset_base)
        if rest:
            yield from self._parse(rest + b"\n", self.line_base, self.offset_base)
        if self.proc.wait() not in (0, 1):  # 1: nothing matched
            self.err.seek(0)
            raise RuntimeError(f"rg failed ({self.proc.returncode}): {self.err.read()[-500:].decode(errors='replace')}")
        if self.feeder is not None:
            self.feeder.join()

    @staticmethod
    def _parse(block: bytes, line_base: int, offset_base: int) -> Iterator[tuple[int, bool, int, bytes]]:
        for n, sep, offset, body in _RG_LINE.findall(block):
            if body[-1:] == b"\r":  # CRLF: Spark's line reader drops both
                body = body[:-1]
            line = int(n) + line_base
            if line == 1 and body[:3] == BOM:
                body = body[3:]
            yield line, sep == b":", int(offset) + offset_base, body


class _Feeder:
    """Copies ``count`` bytes of a file from ``offset`` into a pipe's write end (the kernel copies them:
    sendfile), in a thread, then closes it; stops when the reader has gone."""

    def __init__(self, path: str, offset: int, count: int, w: int) -> None:
        import threading

        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(path, offset, count, w), name="rg-feeder", daemon=True)
        self.thread.start()

    def _run(self, path: str, offset: int, count: int, w: int) -> None:
        try:
            with U.open_binary(path) as src:
                fd, kernel = src.fileno(), True
                while count > 0:
                    n = 0
                    if kernel:
                        try:
                            n = os.sendfile(w, fd, offset, min(count, 1 << 24))
                        except OSError as exc:
                            if exc.errno not in (errno.EINVAL, errno.ENOSYS):  # EPIPE: rg is gone
                                raise
                            kernel = False  # no sendfile into a pipe on this system: copy through Python
                    if not kernel:
                        src.seek(offset)
                        n = os.write(w, src.read(min(count, 1 << 20)))
                    if n == 0:
                        raise OSError(f"{path} ended {count} bytes early")
                    offset += n
                    count -= n
        except BrokenPipeError:
            pass
        except BaseException as exc:  # noqa: BLE001 - raised by the scan: rg saw a short input
            self.error = exc
        finally:
            os.close(w)

    def join(self) -> None:
        """Waits for the thread; raises what stopped it early (rg then read a short input)."""
        self.thread.join()
        if self.error is not None:
            raise FeedError(f"feeding rg failed: {self.error.__class__.__name__}: {self.error}")


class FeedError(RuntimeError):
    """rg was fed less than its piece: the file shrank or could not be read while it was scanned."""


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
    from .parsed_file import ParsedFile

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


def _with_next_two(lines: Iterator[tuple[int, bool, int, bytes]]
                   ) -> Iterator[tuple[int, int, bytes, bytes | None, bytes | None]]:
    """(line number, byte offset, content, line n+1, line n+2) for every matched line of rg's output: rg prints a
    match's after-context lines right after it, so the two entries that follow are its next lines when numbered
    so."""
    prev2 = prev1 = None
    for cur in lines:
        if prev2 is not None and prev2[1]:
            yield _next_two(prev2, prev1, cur)
        prev2, prev1 = prev1, cur
    if prev2 is not None and prev2[1]:
        yield _next_two(prev2, prev1, None)
    if prev1 is not None and prev1[1]:
        yield _next_two(prev1, None, None)


def _next_two(m, a, b) -> tuple[int, int, bytes, bytes | None, bytes | None]:
    n = m[0]
    b1 = a[3] if a is not None and a[0] == n + 1 else None
    b2 = b[3] if b1 is not None and b is not None and b[0] == n + 2 else None
    return n, m[2], m[3], b1, b2


def scan_file(rg: "str | RgRun", local_path: str, path: str, broker_id: int | None, layout: str, out_uri: str, key: str,
              written: list[str] | None = None, byte_range: tuple[int, int | None] = (0, None)):
    """rg over one file (``rg``: the binary, or a run already started) -> (counts, sample rows, minute rows) of the
    records whose line starts in ``byte_range`` [from, to) (to None: the end); the rows are written as one Parquet
    part file of log_events (source=rg), whose location is appended to ``written``. None when the file is not
    valid UTF-8 (the JVM scan reads it instead)."""
    run = rg if isinstance(rg, RgRun) else RgRun(rg, local_path)
    import pyarrow.parquet as pq

    from .tables import SCHEMAS, arrow_table, table_dir

    schema = SCHEMAS["log_events"]
    agg = _Summary()
    keep = record_gate(layout)
    d = table_dir(out_uri, "log_events", "rg")
    name = f"part-{__import__('hashlib').sha256(key.encode()).hexdigest()[:20]}.parquet"
    target = None
    writer = None
    batch: list[dict] = []

    def flush() -> None:
        nonlocal writer, target
        if not batch:
            return
        t = arrow_table(batch, schema)
        if writer is None:
            if U.is_local(d):
                os.makedirs(U.local_path(d), mode=U.DIR_MODE, exist_ok=True)
                target = os.path.join(U.local_path(d), name)
                writer = pq.ParquetWriter(target, schema)
                os.chmod(target, U.FILE_MODE)  # the bundle owner's only, whatever this executor's umask
            else:
                fs, p = U._arrow_fs(d)
                fs.create_dir(p, recursive=True)
                target = f"{p}/{name}"
                writer = pq.ParquetWriter(target, schema, filesystem=fs)
            if written is not None:
                written.append(target)
        writer.write_table(t)
        batch.clear()

    lo, hi = byte_range
    try:
        for n, offset, body, b1, b2 in _with_next_two(run.lines()):
            if offset < lo:
                continue
            if hi is not None and offset >= hi:
                break  # matches come in file order: the range is done (closing the run stops rg)
            raw = body.decode("utf-8")
            if not keep(raw):
                continue
            nxt = frame = None
            if b1 is not None:
                s1 = b1.decode("utf-8")
                if line_kind(layout, s1) == "exc":
                    nxt = s1[:RAW_MAX]
                    if b2 is not None:
                        s2 = b2.decode("utf-8")
                        if line_kind(layout, s2) == "marker":
                            frame = s2[:RAW_MAX]
            row = record_event(layout, path, broker_id, n, raw[:RAW_MAX], nxt, frame, with_header=True)
            if row is not None:
                agg.add(row)
                batch.append(row)
                if len(batch) >= BATCH:
                    flush()
        flush()
    except UnicodeDecodeError:
        if writer is not None:
            writer.close()
            writer = None
            _remove(target, d)
            if written is not None and target in written:
                written.remove(target)
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
        try:
            fs.delete_file(target)
        except FileNotFoundError:
            pass


SPAN = 1 << 20  # a piece of a log is [lo, hi) in 1/SPAN parts of its size
Work = tuple  # (log index, lo, hi): the piece [lo, hi) of a log; (log index, None, None): its survey


def run_log_task(items: list[tuple[str, Any, dict]], bundle_uri: str, split_bytes: int, out_uri: str,
                 rg: str | None, require_rg: bool, budget_s: float, budget_per_mb_s: float
                 ) -> list[tuple[str, Any, dict[str, Any]]]:
    """One Spark task of the log phase (executor side). ``items``: ("log", work, entry) for a log's survey or
    piece (``plan_log_tasks``), ("file", k, entry) for another file it carries. The surveys run in a thread
    (their sha256 and reads leave Python's lock), the pieces one after the other beside them, then the other
    files, each parsed under its time budget with its rows written as Parquet (bundle.load_entry).
    -> (kind, work or k, result) for each: ``survey_log``'s, ``scan_piece``'s or {files: ParsedFiles, cost}."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.monotonic()
    surveys = [(w, e) for kind, w, e in items if kind == "log" and w[1] is None]
    pool = ThreadPoolExecutor(1, thread_name_prefix="survey") if surveys else None
    try:
        pending = [(w, pool.submit(survey_log, e, U.join(bundle_uri, e["path"]), split_bytes)) for w, e in surveys]
        out = [("log", w, scan_piece(e, U.join(bundle_uri, e["path"]), out_uri, rg, require_rg, w[1], w[2]))
               for kind, w, e in items if kind == "log" and w[1] is not None]
        for kind, k, e in items:
            if kind == "file":
                from .bundle import load_entry

                t = time.monotonic()
                pfs, _ = load_entry(bundle_uri, e, budget_s, budget_per_mb_s, out_uri)
                out.append(("file", k, {"files": pfs, "cost": {"parse_s": time.monotonic() - t}}))
        out += [("log", w, f.result()) for w, f in pending]  # after the scans: their own errors are not hidden
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if out:
        out[0][2]["cost"]["task_s"] = time.monotonic() - t0
    return out


def survey_log(e: dict, file_uri: str, split_bytes: int) -> dict[str, Any]:
    """A log's survey (survey.survey_file: one pass, never raises) -> {survey: dict, cost}."""
    import time

    from .survey import survey_file

    t, c = time.monotonic(), time.thread_time()
    s = survey_file(e["path"], file_uri, split_bytes)
    return {"survey": s.to_dict(), "cost": {"survey_s": time.monotonic() - t, "survey_cpu_s": time.thread_time() - c}}


def scan_piece(e: dict, file_uri: str, out_uri: str, rg: str | None, require_rg: bool = False, lo: int = 0,
               hi: int = SPAN) -> dict[str, Any]:
    """The native scan of one piece of a log on an executor: the bytes [lo, hi) in 1/SPAN parts of its size, cut
    at the first lines starting there (rg found, file local): the records whose line starts in the piece, rg fed
    the piece and the two lines under it (line numbers offset by the line breaks before it), on the layout of the
    file's head. -> {span, scan: (counts, sample rows, minute rows) or None (not scanned: the file goes to the JVM
    scan), layout, written: its Parquet parts, size: the file's bytes it was cut by, problem: why a scan was given
    up (the file shrank or changed size while it was read) or None, cost}. The driver puts a log's pieces and survey together
    (``combine_pieces``) and makes the ParsedFile (``scanned_file``): the executor need not import the diagnosis."""
    import resource
    import time

    from .survey import head_layout, line_start_at_or_after, newlines_before
    from .tables import table_dir

    if not 0 <= lo < hi <= SPAN:
        raise ValueError(f"a piece is 0 <= lo < hi <= {SPAN}, not [{lo}, {hi})")
    t0, c0, k0 = time.monotonic(), time.thread_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    exe = find_rg(rg) if rg else None
    if rg and (exe is None or not U.is_local(file_uri)) and require_rg:
        raise RuntimeError(f"log scan 'rg' asked for, but {rg!r} was not found on this executor's PATH"
                           if exe is None else f"log scan 'rg' needs a local or shared-mount file, not {file_uri}")
    size = 0
    try:
        layout = head_layout(file_uri) if exe and U.is_local(file_uri) else None
        size = os.path.getsize(U.local_path(file_uri)) if layout else 0
    except OSError:
        layout = None  # the survey reports why it cannot be read
    res, written, problem = None, [], None
    if layout is not None:
        local = U.local_path(file_uri)
        start = line_start_at_or_after(local, size * lo // SPAN)
        stop = line_start_at_or_after(local, size * hi // SPAN) if hi < SPAN else None
        run = RgRun(exe, local, start, newlines_before(local, start) if start else 0, stop)
        try:
            res = scan_file(run, local, e["path"], e.get("broker_id"), layout, out_uri, f"{e['path']}#rg#{lo}",
                            written, (start, stop))
        except FeedError as exc:  # the file shrank: its scan is given up, the survey reports the file
            problem = str(exc)
            for target in written:
                _remove(target, table_dir(out_uri, "log_events", "rg"))
            res, written = None, []
        finally:
            run.close()
        if res is not None and os.path.getsize(local) != size:
            problem = f"{e['path']} changed size while it was scanned ({size} -> {os.path.getsize(local)} bytes)"
    k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cost = {"classify_s": time.monotonic() - t0, "classify_cpu_s": time.thread_time() - c0,
            "rg_cpu_s": (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)}
    return {"span": (lo, hi), "size": size, "scan": res, "layout": layout, "written": written, "problem": problem,
            "cost": cost}


# The plan's cost model, in bytes of a scan's work (fitted here on the bench's three 333 MB logs, scanned and surveyed
# apart: a scan costs 0.66 ns per byte and 14.6 us per line holding a literal, a survey 1.26 ns per byte, sha256
# most of it; the plan counts literals, about one per such line).
SURVEY_COST = 1.9
HIT_COST = 22_000
MIN_TASK = 32 << 20  # log bytes worth a Spark task of their own (a task costs ~30 ms of a core here)
MIN_PIECE = 8 << 20  # no piece smaller: each restarts rg and counts the line breaks before it (0.2 ns a byte)
SAMPLE_WINDOWS = 16


def literal_density(file_uri: str, size: int) -> float:
    """Signature literals per byte of a log (a line holding two counts twice), estimated from SAMPLE_WINDOWS
    windows spread over it, each 1/2048 of the log (8 to 32 kB): the plan's estimate of a log's classification
    work. 0 for a log under MIN_PIECE (its work is too small to weigh), and for one that cannot be read (the
    survey reports it). ``size`` (the manifest's) is checked against the file's."""
    if size < MIN_PIECE:
        return 0.0
    try:
        with U.open_binary(file_uri) as fh:
            size = min(size, os.fstat(fh.fileno()).st_size)
            if size < MIN_PIECE:
                return 0.0
            window = min(max(size >> 11, 8 << 10), 32 << 10)
            windows = []
            for k in range(SAMPLE_WINDOWS):
                fh.seek((size - window) * k // (SAMPLE_WINDOWS - 1))
                windows.append(fh.read(window))
    except (OSError, ValueError, OverflowError):
        return 0.0
    sample = b"\n".join(windows)  # no literal made of two windows
    read = sum(map(len, windows))
    return sum(sample.count(lit.encode()) for lit in literals()) / read if read else 0.0


def plan_log_tasks(sizes: list[int], cores: int, native: bool, densities: list[float] | None = None
                   ) -> list[list[Work]]:
    """The Spark tasks that survey and scan the logs of a bundle (``sizes``: their bytes, from the manifest;
    ``densities``: literals per byte, ``literal_density``) -> per task, its work: a log's survey
    (i, None, None) or a piece of it (i, lo, hi), [lo, hi) in 1/SPAN parts of the log.

    Natively scanned logs: one task per core (one round of tasks: a round costs more than the imbalance it could
    absorb), fewer for a small bundle (MIN_TASK log bytes a task). In a task the surveys run in a thread beside its scans, so the plan balances the two chains: the
    surveys are never cut (sha256 runs from a file's start to its end), each goes to the task with the fewest;
    the scans, costliest first, are laid end to end and cut into equal shares (McNaughton's wrap-around rule), no
    piece smaller than MIN_PIECE. Without the native scan a task only surveys: one per log, the small ones sharing
    a task."""
    dens = densities or [0.0] * len(sizes)
    size = [max(x, 0) for x in sizes]
    scan = [size[i] * (1 + max(dens[i], 0.0) * HIT_COST) for i in range(len(size))]
    order = sorted(range(len(size)), key=lambda i: -(size[i] * SURVEY_COST + scan[i]))
    if not native:
        tasks: list[list[Work]] = []
        group, group_bytes = [], 0
        for i in order:
            if size[i] >= MIN_TASK:
                tasks.append([(i, None, None)])
            else:
                if group and group_bytes + size[i] > MIN_TASK:
                    tasks.append(group)
                    group, group_bytes = [], 0
                group.append((i, None, None))
                group_bytes += size[i]
        return tasks + ([group] if group else [])
    n = max(1, min(max(cores, 1), sum(size) // MIN_TASK))
    tasks: list[list[Work]] = [[] for _ in range(n)]
    load = [0.0] * n
    for i in order:  # the surveys, never cut: each to the task with the fewest
        t = min(range(n), key=lambda k: load[k])
        tasks[t].append((i, None, None))
        load[t] += size[i] * SURVEY_COST
    # the scans, laid end to end and cut into equal shares (the surveys run in threads of their own: each task's
    # scan is one chain of Python work, which no core can share)
    bound = [sum(scan) * (t + 1) / n for t in range(n)]
    at, t = 0.0, 0
    for i in order:
        per_byte = scan[i] / size[i] if size[i] else 1.0
        begin, at = at, at + scan[i]
        lo, done = 0, 0
        while t < n - 1 and at > bound[t]:
            want = (bound[t] - begin) / per_byte  # the bytes of this log task t would read
            choices = [done, size[i]]
            if done + MIN_PIECE <= size[i] - MIN_PIECE:
                choices.append(min(max(want, done + MIN_PIECE), size[i] - MIN_PIECE))
            b = min(choices, key=lambda x: abs(x - want))
            if b == size[i]:  # the log ends in task t
                break
            if b > done:
                hi = min(max(round(b * SPAN / size[i]), lo + 1), SPAN - 1)
                tasks[t].append((i, lo, hi))
                lo, done = hi, size[i] * hi // SPAN
            t += 1
        tasks[t].append((i, lo, SPAN))
    return [w for w in tasks if w]


RIDE_MAX = MIN_PIECE  # a bigger file of another kind gets a task of its own, which Spark gives the first free core


def rides(size: int) -> bool:
    """Whether a file of another kind (jstack, sockets, GC log, ...) of ``size`` bytes is parsed in a log task."""
    return size <= RIDE_MAX


def plan_riders(n: int, sizes: list[int]) -> list[list[int]]:
    """The small files that ride in the log phase's ``n`` tasks (a job of their own would queue behind the log tasks
    or hold a core they need) -> per task, the indexes of the files it parses after its log work: biggest first, each
    to the task with the fewest riding bytes (the last task on a tie)."""
    tasks: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for k in sorted(range(len(sizes)), key=lambda k: -sizes[k]):
        t = min(range(n - 1, -1, -1), key=lambda t: load[t])
        tasks[t].append(k)
        load[t] += sizes[k]
    return tasks


def combine_pieces(e: dict, parts: list[dict[str, Any]], out_uri: str):
    """One log's survey and native scan from its works' results (``survey_log``, ``scan_piece``) -> (survey dict,
    (counts, sample rows, minute rows) or None). The scan counts only when its pieces cover the file, each was
    scanned, all were cut by the size the survey read, and the survey owns it (sha256 as in the manifest, readable
    by the JVM scan, the layout the pieces read): otherwise its Parquet parts are removed and the file is read
    another way."""
    from .survey import Survey
    from .tables import table_dir

    sd = next(p["survey"] for p in parts if "survey" in p)
    pieces = sorted((p for p in parts if "span" in p), key=lambda p: p["span"][0])
    if not pieces:
        return sd, None
    s = Survey.from_dict(sd)
    sha_mismatch = bool(e.get("sha256") and s.sha256 and str(e["sha256"]).lower() != s.sha256)  # reported, not read
    spans = [p["span"] for p in pieces]
    tiled = [a for a, _ in spans] == [0] + [z for _, z in spans[:-1]] and spans[-1][1] == SPAN
    owned = (tiled and all(p["scan"] is not None and p["problem"] is None for p in pieces) and not sha_mismatch
             and s.spark_readable() and all(p["layout"] == s.layout and p["size"] == s.size for p in pieces))
    if not owned:
        d = table_dir(out_uri, "log_events", "rg")
        for p in pieces:
            for target in p["written"]:
                _remove(target, d)
        return sd, None
    return sd, merge_scans([p["scan"] for p in pieces])


def merge_scans(scans: list[tuple[dict, list, list]]) -> tuple[dict, list, list]:
    """Pieces' (counts, sample rows, minute rows) -> the file's: counts summed, the first and last SAMPLE rows
    per signature (each piece kept its own first and last SAMPLE, so the file's are among them), minute rows
    merged by minute key."""
    counts: dict[str, int] = {}
    by_sig: dict[str | None, list[dict]] = {}
    minutes: dict[tuple, dict[str, Any]] = {}
    for c, sample, mins in scans:
        for k, v in c.items():
            counts[k] = counts.get(k, 0) + v
        for r in sample:
            by_sig.setdefault(r["signature"], []).append(r)
        for m in mins:
            k = (m["signature"], m["leader"], m["fetcher"], m["cause"], m["minute"])
            have = minutes.get(k)
            if have is None:
                minutes[k] = dict(m)
            else:
                have["count"] += m["count"]
                have["first_line"] = min(have["first_line"], m["first_line"])
                have["last_line"] = max(have["last_line"], m["last_line"])
    sample = []
    for rows in by_sig.values():
        rows.sort(key=lambda r: r["line"])
        sample.extend(rows if len(rows) <= 2 * SAMPLE else rows[:SAMPLE] + rows[-SAMPLE:])
    return counts, sample, list(minutes.values())
