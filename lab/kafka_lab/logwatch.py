"""Reading what a log gained since a moment (a fault): the lab's logs outlive faults and restarts."""

from __future__ import annotations

import re
from pathlib import Path

from .procs import wait_until


class LogCursor:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def new(self) -> str:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                return fh.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for(self, pattern: str, timeout: float, flags: int = re.M) -> re.Match:
        rx = re.compile(pattern, flags)
        return wait_until(lambda: rx.search(self.new()), timeout, f"/{pattern}/ in {self.path}", interval=0.25)
