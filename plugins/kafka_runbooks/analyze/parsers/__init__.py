"""Pure parsers for captured evidence. Each takes text/bytes and returns a result with `unparsable` reasons."""

from __future__ import annotations

from typing import Any, Callable

from .jstack import JstackDump, parse_jstack, strip_deadlock_section
from .kafka_log import KafkaLog, LogRecord as LogEvent, parse_kafka_log
from .misc import (
    HeapInfo, JmapHisto, OpenFiles, ProcessStat, parse_heap_info, parse_jmap_histo, parse_open_files,
    parse_process_stat,
)
from .sockets import SocketTable, parse_sockets

PARSERS: dict[str, Callable[[bytes | str | None], Any]] = {
    "jstack": parse_jstack,
    "sockets_ss": parse_sockets,
    "sockets_netstat": parse_sockets,
    "server_log": parse_kafka_log,
    "open_files": parse_open_files,
    "process_stat": parse_process_stat,
    "jmap_histo": parse_jmap_histo,
    "heap_info": parse_heap_info,
}
# Kinds that are captured but not parsed here (binary heap dumps are kept for offline analysis).
NOT_PARSED = frozenset({"heap_dump", "disk_free", "zk_mntr", "zk_srvr", "cluster_snapshot"})


def parse_content(kind: str, data: bytes | str | None) -> Any:
    """Dispatch on the manifest `kind`. Returns None for kinds with no parser (see NOT_PARSED)."""
    fn = PARSERS.get(kind)
    return fn(data) if fn else None


__all__ = [
    "PARSERS", "NOT_PARSED", "parse_content", "parse_jstack", "strip_deadlock_section", "parse_kafka_log",
    "parse_sockets", "parse_open_files", "parse_process_stat", "parse_jmap_histo", "parse_heap_info",
    "JstackDump", "KafkaLog", "LogEvent", "SocketTable", "OpenFiles", "ProcessStat", "JmapHisto", "HeapInfo",
]
