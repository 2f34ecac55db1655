"""Helpers shared by the parsers: decoding untrusted bytes, time budgets, recording what was not parsed.

Every parser takes text or bytes (never a path) and returns a result object with an ``unparsable``
list of human-readable reasons. Parsers never raise on bad input; they do raise ``BudgetExceeded``
when the caller's time budget (see :func:`budget`) runs out, so the caller can report the file.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import time
from dataclasses import dataclass, field

_ALLOWED_CONTROL = {"\t", "\n", "\r", "\f", "\v", "\x1b"}
MAX_SAMPLES = 20  # unparsed-line samples kept per result (the count is always exact)
MAX_RANGES = 50  # damaged byte ranges listed per file (the count is always exact)


# ---------------------------------------------------------------- time budget


class BudgetExceeded(Exception):
    """The per-file time budget ran out; the message says where."""


_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("kafka_runbooks_parse_deadline", default=None)


@contextlib.contextmanager
def budget(seconds: float | None):
    """Run the parsers inside with a deadline (None: no deadline). Nested budgets keep the earliest."""
    if seconds is None:
        yield
        return
    new = time.monotonic() + float(seconds)
    old = _DEADLINE.get()
    token = _DEADLINE.set(new if old is None else min(old, new))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def check_budget(where: str = "") -> None:
    """Raise BudgetExceeded when the current deadline has passed (cheap: call it every few thousand lines)."""
    d = _DEADLINE.get()
    if d is not None and time.monotonic() > d:
        raise BudgetExceeded(f"time budget exceeded{' at ' + where if where else ''}")


# ---------------------------------------------------------------- decoding


@dataclass
class Decoded:
    text: str
    encoding: str = "utf-8"
    problems: list[str] = field(default_factory=list)  # fatal: nothing usable (empty, binary)
    notes: list[str] = field(default_factory=list)  # non-fatal: damaged ranges removed, bytes replaced
    damaged: list[tuple[int, int]] = field(default_factory=list)  # [start, end) byte ranges of NUL runs removed
    damaged_count: int = 0
    replaced: int = 0  # invalid byte sequences replaced with U+FFFD


def _looks_utf16(data: bytes) -> str | None:
    if data.startswith(codecs.BOM_UTF16_LE):
        return "utf-16"
    if data.startswith(codecs.BOM_UTF16_BE):
        return "utf-16"
    head = data[:4096]
    if len(head) >= 16:
        even, odd = head[0::2], head[1::2]
        if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
            return "utf-16-le"
        if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
            return "utf-16-be"
    return None


def _nul_runs(data: bytes) -> list[tuple[int, int]]:
    runs, i, n = [], data.find(b"\x00"), len(data)
    while i != -1:
        j = i
        while j < n and data[j] == 0:
            j += 1
        runs.append((i, j))
        i = data.find(b"\x00", j)
    return runs


EMPTY_NO_DATA, EMPTY_INPUT, EMPTY_WHITESPACE = "empty input (no data)", "empty input", "input contains only whitespace"
EMPTY_REASONS = frozenset({EMPTY_NO_DATA, EMPTY_INPUT, EMPTY_WHITESPACE})


def decode_evidence(data: bytes | str | None) -> Decoded:
    """Decode captured output, keeping every valid part.

    UTF-16 (with or without a BOM, as Windows JVMs write dumps) is decoded; runs of NUL bytes (a file
    zero-filled after a crash, a damaged range) are removed and reported as byte ranges; invalid UTF-8
    is replaced with U+FFFD and counted. Only empty or binary input is a fatal problem.
    """
    if data is None:
        return Decoded("", problems=[EMPTY_NO_DATA])
    if isinstance(data, str):
        text, enc, dec = data, "str", Decoded("")
    else:
        dec = Decoded("")
        enc = _looks_utf16(data)
        if enc:
            text = data.decode(enc, errors="replace")
            dec.notes.append(f"decoded as {enc.upper()} ({len(data)} bytes)")
        else:
            enc = "utf-8"
            if b"\x00" in data:
                runs = _nul_runs(data)
                dec.damaged_count = len(runs)
                dec.damaged = runs[:MAX_RANGES]
                total = sum(b - a for a, b in runs)
                if total * 2 > len(data):
                    return Decoded("", problems=[f"binary content: {total} of {len(data)} bytes are NUL"],
                                   damaged=dec.damaged, damaged_count=len(runs))
                data = data.replace(b"\x00", b"")
                first = ", ".join(f"bytes {a}-{b - 1}" for a, b in runs[:3])
                dec.notes.append(f"{len(runs)} damaged range(s) of NUL bytes removed ({total} bytes; {first}"
                                 f"{', ...' if len(runs) > 3 else ''}); the rest was analysed")
            if data.isascii():
                text = data.decode("ascii")
            else:
                text = data.decode("utf-8", errors="replace")
                bad = text.count("\ufffd") - data.count("\ufffd".encode())
                if bad > 0:
                    dec.replaced = bad
                    at = _first_invalid_utf8(data)
                    dec.notes.append(f"{bad} invalid UTF-8 byte sequence(s) replaced with U+FFFD"
                                     + (f" (first at byte {at})" if at is not None else ""))
    dec.text, dec.encoding = text, enc
    if not text.strip():
        dec.problems.append(EMPTY_INPUT if not text else EMPTY_WHITESPACE)
        dec.text = ""
        return dec
    sample = text[:65536]
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ord(ch) < 32 and ch not in _ALLOWED_CONTROL))
    if bad > max(8, len(sample) // 5):
        dec.problems.append(f"binary content: {bad} undecodable/control characters in the first {len(sample)} characters")
        dec.text = ""
    return dec


def _first_invalid_utf8(data: bytes) -> int | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return None


def decode(data: bytes | str | None) -> tuple[str, list[str]]:
    """Decode captured output. Returns (text, problems); problems is non-empty for empty or binary input.

    Damaged (NUL) ranges are removed and invalid UTF-8 replaced; use :func:`decode_evidence` for the notes.
    """
    d = decode_evidence(data)
    return d.text, d.problems


# ---------------------------------------------------------------- unparsed lines


@dataclass
class UnparsedLine:
    line: int  # 1-based
    text: str

    def to_dict(self) -> dict:
        return {"line": self.line, "text": self.text}


@dataclass
class LineTally:
    """Counts unrecognised lines exactly, keeps the first MAX_SAMPLES of them."""

    count: int = 0
    samples: list[UnparsedLine] = field(default_factory=list)

    def add(self, line: int, text: str) -> None:
        self.count += 1
        if len(self.samples) < MAX_SAMPLES:
            self.samples.append(UnparsedLine(line, text[:500]))


def split_lines(text: str) -> list[str]:
    """Lines as Spark's text source and `wc -l` count them: split on LF, a trailing CR dropped.

    (str.splitlines would also split on form feeds, U+2028 and friends and shift every line number.)
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def iter_lines(text: str):
    """(1-based line number, line without its line break) for every line; budget checked as it goes."""
    for i, ln in enumerate(split_lines(text), start=1):
        if not i & 0xFFF:
            check_budget(f"line {i}")
        yield i, ln
