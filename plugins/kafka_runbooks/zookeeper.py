"""ZooKeeper clients without Airflow: kazoo clients for an ensemble, and the one four-letter-word client.

Sessions are read-write only (a read-only server could serve stale ISR data); kazoo retries
connecting and commands (``zk.retry``). Four-letter words (``srvr``, ``mntr``, ``cons``): ZooKeeper
answers the word on a plain TCP connection and closes it. Never use ``ruok`` for health: it
answers ``imok`` without quorum. ``hooks/zookeeper.py`` builds these from an Airflow connection.
"""

from __future__ import annotations

import contextlib
import socket
from typing import Iterator


FOUR_LETTER_WORDS = ("srvr", "mntr", "cons", "stat", "wchs", "conf", "envi", "isro")
MAX_FOUR_LETTER_BYTES = 4 << 20


def parse_hosts(hosts: str) -> list[tuple[str, int]]:
    """``"h1:2181,h2:2182"`` → ``[("h1", 2181), ("h2", 2182)]``; a host without a port gets 2181."""
    out = []
    text = (hosts or "").strip()
    if not text or "/" in text:
        raise ValueError(f"bad ZooKeeper hosts {hosts!r}: expected 'host:port,host:port'")
    for part in text.split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep:
            host, port = part.strip(), "2181"
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad ZooKeeper hosts {hosts!r}: {part!r} is not 'host:port'")
        out.append((host.strip("[]"), int(port)))
    return out


def validate_chroot(chroot: str | None) -> str:
    chroot = (chroot or "").strip().rstrip("/")
    if chroot and (not chroot.startswith("/") or any(part in (".", "..", "") for part in chroot[1:].split("/"))):
        raise ValueError(f"bad ZooKeeper chroot {chroot!r}: expected an absolute path like '/kafka'")
    return chroot


def kazoo_client(hosts: str, chroot: str | None = None, *, timeout_s: float = 10.0, tries: int = 3):
    """An unstarted KazooClient for ``hosts`` under ``chroot``."""
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    parse_hosts(hosts)
    return KazooClient(
        hosts=hosts.strip() + validate_chroot(chroot),
        timeout=timeout_s,
        read_only=False,
        connection_retry=KazooRetry(max_tries=tries, delay=0.2, backoff=2, max_delay=5.0),
        command_retry=KazooRetry(max_tries=tries, delay=0.2, backoff=2, max_delay=5.0),
    )


@contextlib.contextmanager
def zk_session(client) -> Iterator:
    """Starts an (unstarted) KazooClient and always stops and closes it."""
    client.start()
    try:
        yield client
    finally:
        client.stop()
        client.close()


def four_letter(host: str, port: int, word: str, timeout_s: float = 2.0) -> str:
    """Send one four-letter word; the server's whole answer (bounded), decoded leniently.
    Raises OSError when the server cannot be reached or does not answer in time."""
    if word not in FOUR_LETTER_WORDS:
        raise ValueError(f"unsupported four-letter word {word!r}")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.settimeout(timeout_s)
        s.sendall(word.encode("ascii"))
        chunks, size = [], 0
        while size < MAX_FOUR_LETTER_BYTES:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
            size += len(b)
    return b"".join(chunks).decode("utf-8", "replace")
