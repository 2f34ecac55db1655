"""One evidence file as the analysis read it. Apart from the diagnosis: the executors make these and need not import it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ParsedFile:
    path: str  # bundle-relative
    kind: str
    broker_id: int | None = None
    host: str | None = None
    result: Any = None  # parser result (LogSummary for logs), None when not parsed
    problems: list[str] = field(default_factory=list)  # problems before/while parsing (missing file, sha256, budget)
    seq: str = ""  # ordering key among files of one kind (command started_at, else path)
    bytes: int = 0
    notes: list[str] = field(default_factory=list)  # non-fatal remarks (no sha256 in the manifest, ...)
    server: str | None = None  # ZooKeeper server id/address for zk_* kinds
    embedded: bool = False  # thread dumps found inside another file (kafkaServer.out)
    parse_s: float | None = None
    duplicate_of: str | None = None  # a log whose records repeat another log of the broker (read once)
    optional: bool = False  # the capture takes it only where it exists (other logs, configuration): empty is not a problem
    command_error: str | None = None  # how the command that wrote it failed, as the manifest records it ("timeout after 15s")

    @property
    def reasons(self) -> list[str]:
        return list(self.problems) + list(getattr(self.result, "unparsable", []) or [])
