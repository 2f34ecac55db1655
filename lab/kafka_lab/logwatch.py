"""Reading what a log gained since a moment (a fault): the lab's logs outlive faults and restarts, and Kafka's log4j
rolls them every hour (DailyRollingFileAppender, '.'yyyy-MM-dd-HH: server.log becomes server.log.2026-11-25-04 at
05:00), so a cursor follows its file across a roll."""

from __future__ import annotations

import os
import re
from pathlib import Path

from .procs import wait_until


class LogCursor:
    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            st = self.path.stat()
            self.offset, self.inode = st.st_size, st.st_ino
        except FileNotFoundError:
            self.offset, self.inode = 0, None

    def _rolled(self) -> Path | None:
        """The file the cursor started in, renamed by a roll (same inode, ``<name>.<date>`` beside it)."""
        for p in self.path.parent.glob(self.path.name + ".*"):
            try:
                if p.stat().st_ino == self.inode:
                    return p
            except FileNotFoundError:
                continue
        return None

    def new(self) -> str:
        """What was written since the cursor was made: the rest of its file, and when that file was rolled, the new
        file from its start."""
        out = b""
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            current = None
        if self.inode is not None and (current is None or current.st_ino != self.inode):
            old = self._rolled()
            if old is not None:
                with open(old, "rb") as fh:
                    fh.seek(self.offset)
                    out += fh.read()
            start = 0
        else:
            start = self.offset
        if current is not None:
            try:
                with open(self.path, "rb") as fh:
                    fh.seek(start)
                    out += fh.read()
            except FileNotFoundError:
                pass
        return out.decode(errors="replace")

    def wait_for(self, pattern: str, timeout: float, flags: int = re.M) -> re.Match:
        rx = re.compile(pattern, flags)
        return wait_until(lambda: rx.search(self.new()), timeout, f"/{pattern}/ in {self.path}", interval=0.25)
