"""ZooKeeper clients without Airflow: kazoo clients for an ensemble, and the one four-letter-word client.

Sessions are read-write only (a read-only server could serve stale ISR data); kazoo retries
connecting and commands (``zk.retry``). Four-letter words (``srvr``, ``mntr``, ``cons``): ZooKeeper
answers the word on a plain TCP connection and closes it. Never use ``ruok`` for health: it
answers ``imok`` without quorum. ``hooks/zookeeper.py`` builds these from an Airflow connection.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import struct
import time
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


def server_version(host: str, port: int, timeout_s: float = 2.0) -> tuple[int, int, int] | None:
    """The version ``srvr`` reports ("Zookeeper version: 3.8.0-5a02a05e..., built on ..."); None when unknown (no
    answer, or ``srvr`` not in the server's 4lw whitelist)."""
    try:
        text = four_letter(host, port, "srvr", timeout_s)
    except OSError:
        return None
    found = re.search(r"^Zookeeper version: (\d+)\.(\d+)\.(\d+)", text, re.M)
    return tuple(int(n) for n in found.groups()) if found else None


# --------------------------------------------------------------------------- many reads at once

class MultiReadFailed(Exception):
    """The server refused a multiRead request (``PipelinedReader`` then reads one znode per request)."""


class PipelinedReader:
    """Reads many znodes over a ZooKeeper session of its own, pipelined on one socket by the calling thread.

    kazoo sends one request per turn of its connection thread's loop, woken through a socket pair for every call, and
    reads each reply with a select and two receives: ~100k partition states took 8 s at 50,050 partitions and 262 s at
    100,000 on this loaded 2-core machine, most of it threads handing the GIL to each other. Here requests are
    serialized in batches (kazoo's own packet classes), kept ``window`` in flight and replies are parsed from large
    receives, all in one thread. Only reads, no watches, no auth (the product's ZooKeeper connections have none).

        with PipelinedReader.beside(zk) as r:           # the server of a started KazooClient, its chroot
            r.children("/brokers/topics") -> [..] or None
            r.get_many(paths) -> {path: (bytes, ZnodeStat) or (None, None) when missing}
            r.get_many(paths, parse) -> {path: parse(path, bytes or None, ZnodeStat or None)}, parsed while the server
                                        answers the next requests

    A lost connection, a refused session or a reply that is not ZooKeeper's raises ``kazoo.exceptions.ConnectionLoss``.

    On ZooKeeper >= 3.6 (asked with ``srvr``) ``get_many`` reads ``MULTI_READ_OPS`` znodes per multiRead request: the
    server spends ~65 us of CPU per single getData (5 threads hand each request on), which bounds the 100,000 partition
    states at ~6 s; batched, ~0.3 s. 3.4/3.5 do not know multiRead and close the session, hence the version gate; a
    multiRead refused before any answer, or answered with a request-level error, falls back to single reads on a new
    session (a per-op error is that znode's, as for a single read: NoNode is a missing znode).
    """

    MAX_FRAME = 64 << 20
    WINDOW = 2000  # znodes in flight (ZooKeeper throttles a connection at 1,000 outstanding requests by default: it
    # stops reading it, which only slows the sender)
    MULTI_READ = 22  # opcode (ZooKeeper 3.6+): reads answered one by one in one reply, each op its own error
    MULTI_READ_OPS = 100  # getData per multiRead: a Kafka state znode's reply is ~250 bytes, ~25 KB a request, far
    # under jute.maxbuffer (1 MB); a znode's data is itself bounded by it, so a frame stays < 1 MB + the batch's rest

    def __init__(self, server: tuple[str, int], chroot: str = "", *, timeout_s: float = 10.0, last_zxid: int = 0) -> None:
        self.server = server
        self.chroot = validate_chroot(chroot)
        self.timeout_s = float(timeout_s)
        self.last_zxid = int(last_zxid)
        self._sock: socket.socket | None = None
        self._xid = 0
        self.multi_read: bool | None = None  # unknown until the first get_many asks the server's version

    @classmethod
    def beside(cls, zk, timeout_s: float = 10.0) -> "PipelinedReader":
        """A reader on the server a started KazooClient is connected to (so it sees at least what that session saw)."""
        server = None
        try:
            server = zk._connection._socket.getpeername()[:2]  # kazoo 2.11: the live connection's socket
        except (AttributeError, OSError):
            pass
        if server is None:
            server = zk.hosts[0]
        return cls((server[0], int(server[1])), zk.chroot or "", timeout_s=timeout_s, last_zxid=getattr(zk, "last_zxid", 0) or 0)

    # ---------------------------------------------------------------- session
    def __enter__(self) -> "PipelinedReader":
        self.open()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        from kazoo.exceptions import ConnectionLoss
        from kazoo.protocol.serialization import Connect, int_struct

        try:
            self._sock = socket.create_connection(self.server, timeout=self.timeout_s)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            body = Connect(0, self.last_zxid, int(self.timeout_s * 1000), 0, b"\x00" * 16, False).serialize()
            self._sock.sendall(int_struct.pack(len(body)) + body)
            frame = self._read_frame_blocking()
        except OSError as exc:
            self.close()
            raise ConnectionLoss(f"ZooKeeper {self.server[0]}:{self.server[1]}: {exc}") from exc
        reply, _ = Connect.deserialize(frame, 0)
        if reply.time_out <= 0:
            self.close()
            raise ConnectionLoss(f"ZooKeeper {self.server[0]}:{self.server[1]} refused the session")

    def _read_frame_blocking(self) -> bytes:
        from kazoo.protocol.serialization import int_struct

        head = self._recv_exactly(4)
        length = int_struct.unpack(head)[0]
        if not 0 <= length <= self.MAX_FRAME:
            raise OSError(f"bad frame length {length}")
        return self._recv_exactly(length)

    def _recv_exactly(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(n - len(buf))
            if not chunk:
                raise OSError("connection closed by the server")
            buf += chunk
        return bytes(buf)

    def close(self) -> None:
        if self._sock is None:
            return
        from kazoo.protocol.serialization import Close, int_int_struct, int_struct

        try:
            self._sock.setblocking(True)
            self._sock.settimeout(1.0)
            self._xid += 1
            body = int_int_struct.pack(self._xid, Close.type)
            self._sock.sendall(int_struct.pack(len(body)) + body)
        except OSError:
            pass
        finally:
            self._sock.close()
            self._sock = None

    # ---------------------------------------------------------------- reads
    def children(self, path: str) -> list[str] | None:
        from kazoo.protocol.serialization import GetChildren

        (result,) = self._pipeline(GetChildren, [path]).values()
        return result

    def get_many(self, paths, parse=None) -> dict:
        """{path: (data, stat)}, ``(None, None)`` for a missing znode; with ``parse``: {path: parse(path, data, stat)},
        called as the replies come in, while the server answers the requests sent after them."""
        from kazoo.protocol.serialization import GetData

        paths = list(paths)
        if self.multi_read is None:
            self.multi_read = (server_version(*self.server, timeout_s=min(self.timeout_s, 2.0)) or (0,)) >= (3, 6)
        if self.multi_read:
            try:
                return self._pipeline(GetData, paths, parse, ops=self.MULTI_READ_OPS)
            except MultiReadFailed:
                self.multi_read = False
                self.open()
        return self._pipeline(GetData, paths, parse)

    def _pipeline(self, request_cls, paths: list[str], parse=None, ops: int = 1) -> dict:
        """Sends ``request_cls`` (GetData or GetChildren) for every path, ``WINDOW`` znodes in flight, one per request or
        (``ops`` > 1, GetData) ``ops`` per multiRead request; returns {path: reply}.

        Each turn sends the requests that replace the replies just received and only then parses those replies (the
        caller's ``parse`` included): the server works on the new requests meanwhile, instead of waiting for them
        (``_Exchange``). A lost connection closes the reader: ``MultiReadFailed`` for a multiRead refused before any
        answer, ``ConnectionLoss`` otherwise."""
        from kazoo.exceptions import ConnectionLoss

        if self._sock is None:
            raise ConnectionLoss("the reader is not open")
        exchange = _Exchange(self, request_cls, paths, parse, ops)
        try:
            return exchange.run()
        except MultiReadFailed:
            self.close()
            raise
        except OSError as exc:
            self.close()
            if exchange.multi and not exchange.answered:
                raise MultiReadFailed(str(exc)) from exc
            raise ConnectionLoss(f"ZooKeeper {self.server[0]}:{self.server[1]}: {exc}") from exc


class _Exchange:
    """One pipelined exchange of ``PipelinedReader._pipeline``: the requests in flight by xid, the bytes waiting to be
    sent and received, and the replies received but not yet handed to the caller's ``parse``. Its steps: ``fill`` the
    window with requests, ``flush`` what the socket takes, ``deliver`` the replies, ``receive`` and cut frames
    (``frame``: one reply, ``multi_reply``: a multiRead's replies)."""

    REQUEST_HEAD = struct.Struct("!iiii")  # frame length, xid, op type, path length; then the path and watch=0
    MULTI_HEAD = struct.Struct("!iii")  # frame length, xid, MULTI_READ; then per op: op header, path length, path, 0
    OP_HEAD = struct.Struct("!i?i")  # a multi op's header: type, done, error; (-1, True, -1) ends the list
    OP_END = OP_HEAD.pack(-1, True, -1)

    def __init__(self, reader: PipelinedReader, request_cls, paths: list[str], parse, ops: int) -> None:
        from kazoo.exceptions import EXCEPTIONS, NoNodeError
        from kazoo.protocol.states import ZnodeStat
        from kazoo.protocol.serialization import int_struct, reply_header_struct, stat_struct

        self.reader, self.request_cls, self.paths, self.parse, self.ops = reader, request_cls, paths, parse, ops
        self.get_data = request_cls.type == 4
        self.multi = ops > 1
        self.missing = (None, None) if self.get_data else None
        self.window = max(1, reader.WINDOW // ops)
        self.int_struct, self.reply_header_struct, self.stat_struct = int_struct, reply_header_struct, stat_struct
        self.znode_stat, self.exceptions, self.no_node = ZnodeStat, EXCEPTIONS, NoNodeError.code
        self.out: dict = {}
        self.by_xid: dict[int, list[str]] = {}
        self.sent = 0
        self.answered = 0  # replies received: a multiRead refused before any answer is the server not knowing it
        self.pending = bytearray()
        self.inbuf = bytearray()
        self.received = memoryview(bytearray(1 << 20))  # every receive lands here: recv(1 MB) would map a fresh 1 MB each time
        self.replies: list = []  # (path, reply) received, not yet handed to ``parse``
        self.view: memoryview | None = None
        self.sock = reader._sock
        self.last_progress = time.monotonic()

    def run(self) -> dict:
        sock = self.sock
        sock.setblocking(False)
        self.last_progress = time.monotonic()
        while True:
            self.fill()
            self.flush()
            self.deliver()
            if self.sent == len(self.paths) and not self.by_xid:
                return self.out
            readable, _, _ = select.select([sock], [sock] if self.pending else [], [], 1.0)
            if readable:
                self.receive()
            if time.monotonic() - self.last_progress > self.reader.timeout_s:
                raise OSError(f"no progress for {self.reader.timeout_s:g} s")

    def encode(self, path: str) -> bytes:
        chroot = self.reader.chroot
        return (chroot + path if path != "/" else (chroot or "/")).encode("utf-8")

    def fill(self) -> None:
        """Serializes requests until the window is full (or 1 MB waits to be sent)."""
        reader, paths, ops, pending, by_xid, int_struct = self.reader, self.paths, self.ops, self.pending, self.by_xid, self.int_struct
        while self.sent < len(paths) and len(by_xid) < self.window and len(pending) < (1 << 20):
            reader._xid = reader._xid % 2147483647 + 1
            group = paths[self.sent:self.sent + ops]
            if self.multi:
                body = bytearray()
                for path in group:
                    encoded = self.encode(path)
                    body += self.OP_HEAD.pack(4, False, -1) + int_struct.pack(len(encoded)) + encoded + b"\x00"
                body += self.OP_END
                pending += self.MULTI_HEAD.pack(len(body) + 8, reader._xid, reader.MULTI_READ) + body
            else:
                encoded = self.encode(group[0])
                pending += self.REQUEST_HEAD.pack(len(encoded) + 13, reader._xid, self.request_cls.type, len(encoded))
                pending += encoded
                pending += b"\x00"
            by_xid[reader._xid] = group
            self.sent += len(group)

    def flush(self) -> None:
        if self.pending:
            try:
                del self.pending[:self.sock.send(self.pending)]
                self.last_progress = time.monotonic()
            except BlockingIOError:  # the socket's buffer is full: sent when select says it may be
                pass

    def deliver(self) -> None:
        out, parse = self.out, self.parse
        for path, reply in self.replies:
            out[path] = reply if parse is None else parse(path, *reply)
        self.replies.clear()

    def receive(self) -> None:
        """One receive; every whole frame in the buffer read (``frame``), the rest kept for the next."""
        inbuf, int_struct, head_size = self.inbuf, self.int_struct, self.reply_header_struct.size
        nbytes = self.sock.recv_into(self.received)
        if not nbytes:
            raise OSError("connection closed by the server")
        inbuf += self.received[:nbytes]
        self.last_progress = time.monotonic()
        pos = 0
        self.view = memoryview(inbuf)  # data copied once, from here
        try:
            while len(inbuf) - pos >= 4:
                length = int_struct.unpack_from(inbuf, pos)[0]
                if not head_size <= length <= self.reader.MAX_FRAME:
                    raise OSError(f"bad frame length {length}")
                if len(inbuf) - pos - 4 < length:
                    break
                start = pos + 4
                pos = start + length
                self.frame(start, pos, length)
        finally:
            self.view.release()
            self.view = None
        del inbuf[:pos]

    def frame(self, start: int, end: int, length: int) -> None:
        """The reply frame at ``inbuf[start:end]`` (header and body), matched to its request by xid."""
        xid, _zxid, err = self.reply_header_struct.unpack_from(self.inbuf, start)
        if xid < 0:  # a ping or a watch event: none asked for
            return
        group = self.by_xid.pop(xid, None)
        if group is None:
            raise OSError(f"a reply to xid {xid}, which was not asked")
        self.answered += 1
        body = start + self.reply_header_struct.size
        if self.multi:
            if err:
                raise MultiReadFailed(f"ZooKeeper error {err}")
            self.multi_reply(group, body, end, length)
        elif err:
            self.error(group[0], err)
        elif self.get_data:
            self.data_reply(group[0], body, end)
        else:
            self.replies.append((group[0], self.request_cls.deserialize(bytes(self.view[body:end]), 0)))

    def multi_reply(self, group: list[str], at: int, end: int, length: int) -> None:
        op_size = self.OP_HEAD.size
        for path in group:
            if at + op_size > end:
                raise OSError(f"a multiRead reply of {length} bytes is too short")
            op, done, op_err = self.OP_HEAD.unpack_from(self.inbuf, at)
            if done:
                raise OSError(f"a multiRead reply ends before {path}")
            if op == 4:
                at = self.data_reply(path, at + op_size, end)
            elif op == -1:  # an error result: its code, again after the header
                self.error(path, op_err)
                at += op_size + 4
            else:
                raise OSError(f"a multiRead reply answers {path} with op {op}")

    def data_reply(self, path: str, body: int, end: int) -> int:
        """Appends the GetData reply at ``body`` (GetData.deserialize without copying the frame); its end."""
        inbuf, stat_size = self.inbuf, self.stat_struct.size
        n = self.int_struct.unpack_from(inbuf, body)[0]
        data_end = body + 4 + (n if n > 0 else 0)
        if data_end + stat_size > end:
            raise OSError(f"a GetData reply for {path} is too short")
        self.replies.append((path, (bytes(self.view[body + 4:data_end]) if n >= 0 else None,
                                    self.znode_stat._make(self.stat_struct.unpack_from(inbuf, data_end)))))
        return data_end + stat_size

    def error(self, path: str, err: int) -> None:
        if err != self.no_node:
            raise self.exceptions[err](f"{path}: ZooKeeper error {err}")
        self.replies.append((path, self.missing))
