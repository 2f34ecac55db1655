"""Helpers shared by the parsers: decoding untrusted bytes and recording why content was not parsed.

Every parser takes text or bytes (never a path) and returns a result object with an ``unparsable``
list of human-readable reasons. Parsers never raise on bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_ALLOWED_CONTROL = {"\t", "\n", "\r", "\f", "\v"}
MAX_SAMPLES = 20  # unparsed-line samples kept per result (the count is always exact)


def decode(data: bytes | str | None) -> tuple[str, list[str]]:
    """Decode captured output. Returns (text, problems); problems is non-empty for empty or binary input."""
    if data is None:
        return "", ["empty input (no data)"]
    if isinstance(data, bytes):
        if b"\x00" in data[:65536]:
            return "", [f"binary content: NUL bytes in {len(data)} bytes of input"]
        text = data.decode("utf-8", errors="replace")
    else:
        text = data
    if not text.strip():
        return "", ["empty input" if not text else "input contains only whitespace"]
    sample = text[:65536]
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ord(ch) < 32 and ch not in _ALLOWED_CONTROL))
    if bad > max(8, len(sample) // 20):
        return "", [f"binary content: {bad} undecodable/control characters in the first {len(sample)} characters"]
    return text, []


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
