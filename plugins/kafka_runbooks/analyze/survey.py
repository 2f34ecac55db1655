"""One streaming pass over an evidence file, run on the executors before the Spark scan (pure Python).

It verifies integrity (sha256, size), finds damaged ranges (NUL runs) and the encoding, detects the log
layout from the head of the file, estimates the parsed share from its head and tail, and counts line
breaks up to every split boundary so the Spark scan can give every row its exact line number:

    Spark's text source splits a file at multiples of ``split_bytes``; a split starting at byte s > 0 begins
    with line number  count('\\n' in bytes[:s]) + 2  (it skips the line that straddles s, which the previous
    split reads to its end).

Files the JVM scan cannot number or read correctly (UTF-16, lone CR line ends, a CRLF cut by a split
boundary, no known layout) are routed to the pure-Python parser instead.
"""

from __future__ import annotations

import codecs
import hashlib
from dataclasses import dataclass, field
from typing import Any

from . import uri as U
from .parsers.base import decode_evidence, split_lines
from .parsers.layouts import detect
from .parsers.logs import parse_lines

try:  # counts line breaks three times faster than bytes.count, and outside Python's lock (the scan runs beside it)
    import numpy as _np
except ImportError:  # pragma: no cover - numpy comes with pyarrow/pandas; bytes.count gives the same counts
    _np = None

CHUNK = 4 << 20
SAMPLE = 256 << 10
MAX_RANGES = 50


@dataclass
class Survey:
    path: str
    uri: str
    size: int = 0
    sha256: str | None = None
    encoding: str = "ascii"  # ascii | utf-8 | utf-16 | binary
    nul_ranges: list[tuple[int, int]] = field(default_factory=list)
    nul_runs: int = 0
    nul_bytes: int = 0
    lone_cr: bool = False
    bad_utf8: bool = False  # invalid UTF-8 sequences: the pure parser reads the file (it reports the replaced bytes)
    crlf_cut: bool = False
    newlines: int = 0
    ends_with_newline: bool = True
    first_line_of_split: dict[int, int] = field(default_factory=dict)  # split start -> its first line number
    layout: str | None = None
    sampled_share: float | None = None
    first_ts: str | None = None  # first record time in the head, last record time in the tail
    last_ts: str | None = None
    error: str | None = None

    @property
    def lines(self) -> int:
        return self.newlines + (0 if self.ends_with_newline or self.size == 0 else 1)

    def spark_readable(self) -> bool:
        return (self.error is None and self.encoding in ("ascii", "utf-8") and self.layout is not None
                and not self.lone_cr and not self.bad_utf8 and not self.crlf_cut and self.nul_bytes * 2 < max(self.size, 1))

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["first_line_of_split"] = {str(k): v for k, v in self.first_line_of_split.items()}
        d["nul_ranges"] = [list(r) for r in self.nul_ranges]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Survey":
        s = cls(path=d["path"], uri=d["uri"])
        for k, v in d.items():
            if k == "first_line_of_split":
                s.first_line_of_split = {int(a): int(b) for a, b in v.items()}
            elif k == "nul_ranges":
                s.nul_ranges = [tuple(r) for r in v]
            elif hasattr(s, k):
                setattr(s, k, v)
        return s


def survey_file(path: str, file_uri: str, split_bytes: int, want_layout: bool = True) -> Survey:
    """Stream the file once. Never raises: an unreadable file comes back with ``error`` set."""
    s = Survey(path=path, uri=file_uri)
    if split_bytes % CHUNK and CHUNK % split_bytes:
        raise ValueError("split_bytes must be a multiple (or divisor) of the 4 MiB read chunk")
    h = hashlib.sha256()
    head = b""
    tail = b""
    prev_last = b""
    pos = 0
    nl = 0
    non_ascii = False
    next_split = split_bytes
    utf8 = codecs.getincrementaldecoder("utf-8")()
    try:
        with U.open_binary(file_uri) as fh:
            while True:
                chunk = fh.read(CHUNK)
                if not chunk:
                    break
                h.update(chunk)
                if len(head) < SAMPLE:
                    head += chunk[:SAMPLE - len(head)]
                tail = chunk[-SAMPLE:] if len(chunk) >= SAMPLE else (tail + chunk)[-SAMPLE:]
                end = pos + len(chunk)
                # line-break counts at every split boundary inside this chunk
                start = 0
                view = _np.frombuffer(chunk, _np.uint8) if _np is not None else None
                while next_split <= end:
                    cut = next_split - pos
                    nl += _newlines(chunk, view, start, cut)
                    start = cut
                    s.first_line_of_split[next_split] = nl + 2
                    if cut > 0 and chunk[cut - 1:cut] == b"\r" and chunk[cut:cut + 1] == b"\n":
                        s.crlf_cut = True
                    elif cut == 0 and prev_last == b"\r" and chunk[:1] == b"\n":
                        s.crlf_cut = True
                    next_split += split_bytes
                nl += _newlines(chunk, view, start, len(chunk))
                if b"\x00" in chunk:
                    _nul_runs(chunk, pos, s)
                if b"\r" in chunk and chunk.count(b"\r") != chunk.count(b"\r\n") + (1 if chunk.endswith(b"\r") else 0):
                    s.lone_cr = True
                if not non_ascii and not chunk.isascii():
                    non_ascii = True
                if non_ascii and not s.bad_utf8:  # ASCII files never pay for this
                    try:
                        utf8.decode(chunk)
                    except UnicodeDecodeError:
                        s.bad_utf8 = True
                prev_last = chunk[-1:]
                pos = end
    except OSError as exc:
        s.error = f"cannot read: {exc.__class__.__name__}: {exc}"
        return s
    s.size, s.sha256, s.newlines = pos, h.hexdigest(), nl
    if non_ascii and not s.bad_utf8:
        try:
            utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            s.bad_utf8 = True
    s.ends_with_newline = prev_last in (b"\n", b"")
    s.first_line_of_split = {k: v for k, v in s.first_line_of_split.items() if k < pos}
    _encoding_and_layout(s, head, tail, non_ascii, want_layout)
    return s


def _encoding_and_layout(s: Survey, head: bytes, tail: bytes, non_ascii: bool, want_layout: bool) -> None:
    """The file's encoding (read from its head) and, for text, its log layout and the times of its first and last
    records (from its head and its tail), into ``s``."""
    pos = s.size
    dec = decode_evidence(head)
    if dec.encoding.startswith("utf-16"):
        s.encoding = "utf-16"
    elif dec.problems and dec.problems[0].startswith("binary"):
        s.encoding = "binary"
    else:
        s.encoding = "utf-8" if non_ascii else "ascii"
    if want_layout and s.encoding in ("ascii", "utf-8", "utf-16") and not dec.problems:
        layout, lines = _detect_head(dec)
        s.layout = layout.name if layout else None
        if layout is not None:
            sample = lines[:-1] if len(head) == SAMPLE else lines  # the last line of the head may be cut
            tail_lines = split_lines(decode_evidence(tail).text)[1:] if pos > SAMPLE else []
            p = parse_lines(sample + tail_lines, layout.name)
            s.sampled_share = round(p.parsed_share, 4)
            s.first_ts = next((r.ts for r in p.records if r.ts), None)
            s.last_ts = next((r.ts for r in reversed(p.records) if r.ts), None)


def newlines_before(local_path: str, end: int) -> int:
    """The number of line breaks in a file's first ``end`` bytes."""
    n = 0
    with U.open_binary(local_path) as fh:
        while end > 0:
            chunk = fh.read(min(CHUNK, end))
            if not chunk:
                break
            n += _newlines(chunk, _np.frombuffer(chunk, _np.uint8) if _np is not None else None, 0, len(chunk))
            end -= len(chunk)
    return n


def line_start_at_or_after(local_path: str, pos: int) -> int:
    """The offset of the first line of a file that starts at or after byte ``pos`` (the file's size if none)."""
    if pos <= 0:
        return 0
    with U.open_binary(local_path) as fh:
        fh.seek(pos - 1)
        at = pos - 1
        while True:
            block = fh.read(1 << 20)
            if not block:
                return at
            k = block.find(b"\n")
            if k >= 0:
                return at + k + 1
            at += len(block)


def _newlines(chunk: bytes, view, start: int, end: int) -> int:
    if view is None:
        return chunk.count(b"\n", start, end)
    return int(_np.count_nonzero(view[start:end] == 10))


def _detect_head(dec):
    lines = split_lines(dec.text)
    layout, _, _ = detect(lines)
    return layout, lines


def head_layout(file_uri: str) -> str | None:
    """The layout the survey will find for this file, read from its head alone (None: none, or not text), so a
    scan can start before the survey's whole pass has ended."""
    with U.open_binary(file_uri) as fh:
        dec = decode_evidence(fh.read(SAMPLE))
    if dec.problems:
        return None
    layout, _ = _detect_head(dec)
    return layout.name if layout else None


def _nul_runs(chunk: bytes, base: int, s: Survey) -> None:
    i = chunk.find(b"\x00")
    n = len(chunk)
    while i != -1:
        j = i
        while j < n and chunk[j] == 0:
            j += 1
        s.nul_bytes += j - i
        if s.nul_ranges and s.nul_ranges[-1][1] == base + i:  # a run continuing from the previous chunk
            s.nul_ranges[-1] = (s.nul_ranges[-1][0], base + j)
        else:
            s.nul_runs += 1
            if len(s.nul_ranges) < MAX_RANGES:
                s.nul_ranges.append((base + i, base + j))
        i = chunk.find(b"\x00", j)
