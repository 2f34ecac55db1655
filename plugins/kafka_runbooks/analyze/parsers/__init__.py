"""Pure parsers for captured evidence. Each takes text/bytes and returns a result with `unparsable` reasons.

``parse_content(kind, data)`` dispatches on the manifest ``kind`` (docs/CONTRACTS.md has the vocabulary).
"""

from __future__ import annotations

from typing import Any, Callable

from .dumplog import DumpLog, parse_dump_log
from .gc_log import GcLog, parse_gc_log
from .jstack import JstackDump, ThreadDumps, parse_jstack, parse_thread_dumps, strip_deadlock_section
from .kafka_log import KafkaLog, parse_kafka_log
from .listings import (
    JmxSeries, KafkaChecks, KafkaProbe, Listing, parse_jmx, parse_kafka_checks, parse_kafka_probe, parse_listing,
)
from .logs import LogParse, LogRecord, parse_log
from .misc import (
    HeapInfo, JmapHisto, OpenFiles, ProcessStat, ProcState, parse_heap_info, parse_jmap_histo, parse_open_files,
    parse_proc_stat, parse_process_stat,
)
from .sockets import SocketTable, parse_sockets
from .zookeeper import Properties, ZkCons, ZkStats, parse_cons, parse_mntr, parse_properties, parse_srvr

LogEvent = LogRecord  # the name older callers used

# Log files: read by Spark's text source when big (analyze/fastscan.py), else by parse_log.
LOG_KINDS = frozenset({"server_log", "controller_log", "state_change_log", "log_cleaner_log", "kafka_stdout", "zk_log",
                       "log"})

PARSERS: dict[str, Callable[[bytes | str | None], Any]] = {
    "jstack": parse_thread_dumps,
    "jstack_jhsdb": parse_thread_dumps,  # the Serviceability Agent's format: read where it matches jstack's
    "thread_dump_json": parse_thread_dumps,
    "sockets_ss": parse_sockets,
    "sockets_netstat": parse_sockets,
    "open_files": parse_open_files,
    "process_stat": parse_process_stat,
    "jmap_histo": parse_jmap_histo,
    "heap_info": parse_heap_info,
    "gc_log": parse_gc_log,
    "zk_mntr": parse_mntr,
    "zk_srvr": parse_srvr,
    "zk_cons": parse_cons,
    "zk_config": parse_properties,
    "kafka_config": parse_properties,
    "dump_log": parse_dump_log,
    "log_dir_listing": parse_listing,
    "kafka_probe": parse_kafka_probe,
    "kafka_checks": parse_kafka_checks,
    "process_state": parse_proc_stat,
    "proc_threads": parse_proc_stat,
    "jmx": parse_jmx,
}
PARSERS.update({k: parse_log for k in LOG_KINDS})
# Kinds that are captured but not parsed here (binary heap dumps are kept for offline analysis).
# "aux": the capture's helper commands' own output (mkdir, rm, kill -QUIT messages).
NOT_PARSED = frozenset({"heap_dump", "disk_free", "cluster_snapshot", "aux"})


def parse_content(kind: str, data: bytes | str | None) -> Any:
    """Dispatch on the manifest `kind`. Returns None for kinds with no parser (see NOT_PARSED)."""
    fn = PARSERS.get(kind)
    return fn(data) if fn else None


__all__ = [
    "PARSERS", "NOT_PARSED", "LOG_KINDS", "parse_content", "parse_jstack", "parse_thread_dumps", "strip_deadlock_section",
    "parse_kafka_log", "parse_log", "parse_sockets", "parse_open_files", "parse_process_stat", "parse_jmap_histo",
    "parse_heap_info", "parse_gc_log", "parse_mntr", "parse_srvr", "parse_cons", "parse_properties", "parse_dump_log",
    "parse_listing", "parse_kafka_probe", "parse_kafka_checks", "parse_proc_stat", "parse_jmx", "KafkaChecks", "ProcState", "JstackDump", "ThreadDumps", "KafkaLog", "LogEvent", "LogRecord",
    "LogParse", "SocketTable", "OpenFiles", "ProcessStat", "JmapHisto", "HeapInfo", "GcLog", "ZkStats", "ZkCons",
    "Properties", "DumpLog", "Listing", "KafkaProbe", "JmxSeries",
]
