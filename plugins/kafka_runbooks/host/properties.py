"""The one Java .properties reader (server.properties, zoo.cfg), the subset Kafka's and ZooKeeper's files use: the key
ends at the first ``=``, ``:`` or blank (``java.util.Properties.load``'s rule), blanks around the separator and the
value are trimmed, ``#`` and ``!`` start a comment line; no line continuations or escapes. Pure.

``blank_separates=False`` (the analysis of a captured file) does not take a blank as the separator, so that a line
of prose is not read as a key and its value: only ``=`` and ``:`` end a key there."""

from __future__ import annotations

import re

_LINE = re.compile(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$")
_LINE_NO_BLANK = re.compile(r"^([^=:\s]+)\s*[=:]\s*(.*)$")


def property_line(line: str, *, blank_separates: bool = True) -> tuple[str, str] | None:
    """(key, value) of one line; None for a blank line, a comment, or a line without a separator."""
    s = line.strip()
    if not s or s[0] in "#!":
        return None
    m = (_LINE if blank_separates else _LINE_NO_BLANK).match(s)
    return (m.group(1), m.group(2).strip()) if m else None


def parse_properties(text: str) -> dict[str, str]:
    """Every key's value (the last one wins, as in Java)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        kv = property_line(line)
        if kv:
            out[kv[0]] = kv[1]
    return out
