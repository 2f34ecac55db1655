"""What capture writes, analyze must read: the same commands run here for real, parsed by the analyzer."""

from __future__ import annotations

import os
import subprocess

from kafka_runbooks.analyze.diagnosis import ParsedFile, broker_table, diagnose
from kafka_runbooks.analyze.parsers import parse_content
from kafka_runbooks.host import commands as C
from kafka_runbooks.config import CaptureSettings


def _run(cmd: C.CaptureCommand) -> bytes:
    return subprocess.run(list(cmd.argv), capture_output=True, check=True, timeout=cmd.timeout).stdout


def test_open_files_listing_is_counted():
    out = _run(C.open_files_command(os.getpid(), CaptureSettings()))
    parsed = parse_content("open_files", out)
    entries = out.decode().split()
    assert len(entries) >= 3 and all(e.startswith(f"/proc/{os.getpid()}/fd/") for e in entries)
    assert parsed.ok and parsed.count == len(entries)


def test_process_stat_line_is_parsed():
    parsed = parse_content("process_stat", _run(C.process_stat_command(os.getpid(), 10)))
    assert parsed.ok and parsed.pid == os.getpid() and parsed.rss_kb > 0


def test_ss_output_is_parsed():
    parsed = parse_content("sockets_ss", _run(C.sockets_command(10)))
    assert parsed.ok and parsed.rows


SHARED_TABLE = b"""State      Recv-Q Send-Q Local Address:Port  Peer Address:Port Process
CLOSE-WAIT 120    0      127.0.0.13:9092     127.0.0.1:40001
CLOSE-WAIT 130    0      127.0.0.13:9092     127.0.0.1:40002
CLOSE-WAIT 140    0      127.0.0.13:9092     127.0.0.1:40003
CLOSE-WAIT 150    0      127.0.0.13:9092     127.0.0.1:40004
CLOSE-WAIT 160    0      127.0.0.13:9092     127.0.0.1:40005
CLOSE-WAIT 170    0      127.0.0.13:9092     127.0.0.1:40006
ESTAB      0      0      127.0.0.11:9092     127.0.0.1:40100
ESTAB      0      0      127.0.0.11:9092     127.0.0.1:40101
"""


def test_connections_are_counted_on_each_brokers_own_address():
    """Two brokers' hosts that see one socket table (or a multi-homed host) must not share counts."""
    files = [ParsedFile(f"hosts/{b}/sockets-ss.out", "sockets_ss", b, result=parse_content("sockets_ss", SHARED_TABLE)) for b in (1, 3)]
    hosts = {1: "127.0.0.11", 3: "127.0.0.13"}
    rows = {r["broker_id"]: r["connection_states"] for r in broker_table(files, {1: 9092, 3: 9092}, hosts)}
    assert rows[1] == {"ESTABLISHED": 2} and rows[3] == {"CLOSE_WAIT": 6}
    pileups = [f for f in diagnose(files, broker_ports={1: 9092, 3: 9092}, broker_hosts=hosts) if f.kind == "broker_socket_pileup"]
    assert [f.broker_ids for f in pileups] == [(3,)]
