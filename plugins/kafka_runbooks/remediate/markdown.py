"""Markdown that cannot be injected: every value from a cluster, a captured file or a person goes into a code span or
a code block (no link, no HTML). Pure; shared by the approval text (``briefing.py``, ``asking.py``)."""

from __future__ import annotations

from typing import Iterable


def code_span(text: object) -> str:
    s = str(text).replace("`", "'").replace("\n", " ")
    return f"`{s}`"


def code_block(lines: Iterable[str]) -> str:
    body = "\n".join(str(line).replace("```", "'''") for line in lines)
    return f"```\n{body}\n```"
