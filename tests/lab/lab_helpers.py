"""Helpers for the lab tests: log cursors (what a log gained since a fault), socket tables, jstack over SSH."""

from __future__ import annotations

import re
import subprocess

from kafka_lab.logwatch import LogCursor  # noqa: F401 - re-exported for the tests
from kafka_runbooks.analyze.parsers.sockets import SocketRow, parse_sockets


def sockets(ip: str, port: int) -> list[SocketRow]:
    """TCP sockets whose local end is ip:port (server side), parsed by the product's one socket-table parser."""
    out = subprocess.run(["ss", "-Htan"], capture_output=True, text=True, check=True, timeout=30).stdout
    return [r for r in parse_sockets(out).rows if r.local_host == ip and r.local_port == port and r.state != "LISTEN"]


def listening(ip: str, port: int) -> bool:
    out = subprocess.run(["ss", "-Htln"], capture_output=True, text=True, check=True, timeout=30).stdout
    return any(r.local_host == ip and r.local_port == port for r in parse_sockets(out).rows)


def jstack(lab, b: int) -> str:
    """jstack of broker b, run as the host's user over SSH with the pinned host key."""
    rc, out, err = lab.ssh(b, ["jstack", str(lab.broker_pid(b))], timeout=60)
    assert rc == 0, err
    return out


def thread_blocks(dump: str) -> dict[str, str]:
    """{thread name: its block of the dump} from the thread list (not the deadlock report)."""
    head = dump.split("\nFound one Java-level deadlock:", 1)[0]
    return {m.group(1): m.group(0) for m in re.finditer(r'^"([^"]+)" #\d+.*?(?=^"|\Z)', head, re.S | re.M)}


def led_by(parts: dict, b: int) -> dict:
    return {k: v for k, v in parts.items() if v["leader"] == b}
