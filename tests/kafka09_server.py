"""A protocol-level stand-in for ONE Kafka 0.9.0.1 broker's request path, on loopback, for tests (seed 002).

What it stands for (written after reading Kafka 0.9.0.1's ``kafka.network.SocketServer`` (``Processor.run``),
``kafka.network.RequestChannel.Request``, ``kafka.api.RequestKeys``, ``kafka.api.TopicMetadataRequest``/``Response``
and ``org.apache.kafka.common.protocol.ApiKeys`` at the 0.9.0.1 tag, and ``org.apache.kafka.common.network.Selector``;
no code taken from them):

* Framing: a request is a 4-byte big-endian size, then ``api_key`` int16, ``api_version`` int16, ``correlation_id``
  int32, ``client_id`` string, body; a response is a size, the ``correlation_id``, the body.
* One network processor: every ``poll`` (300 ms at most, like ``selector.poll(300)``) takes at most ONE complete
  request from each connection that is not muted (the Selector's staged receives), in the order the connections were
  accepted; that list is the batch. Each request of the batch is handed over in turn (recorded, the connection muted
  until its answer is sent, as ``selector.mute``).
* An API key 0.9 does not know (anything but 0..16: ``ApiKeys.forId`` indexes an array of 17) throws in the middle
  of that loop: the processor logs ``Processor got uncaught exception.`` with ``java.lang.ArrayIndexOutOfBoundsException:
  N`` (``errors``), and the rest of the batch -- the bad request and every request after it -- is never handed over and
  never answered (``dropped``); no connection is closed (the bad one is not even muted). Requests before it in the
  batch are answered. This is seed 002's "every request of the same batch dropped".
* Metadata (key 3), of any version, is answered in the v0 format (0.9's ``TopicMetadataRequest.readFrom`` reads no
  version-specific field; its response has one format): the brokers given, every topic given (the request's topic
  list is honoured; empty = all), each partition's leader, replicas and ISR.
* ``hang()``: requests are still read, recorded and muted, but never answered -- a broker whose request handlers
  are stuck (incident 001); ``unhang()`` answers the next ones again (what was queued while hung stays unanswered).

What it does NOT do: any other API (Produce, Fetch, offsets, groups...: a known key other than Metadata is
recorded and the connection is closed, a clear "not implemented here", which a real 0.9 broker would answer);
SSL/SASL; several network processors (a real broker has ``num.network.threads``, 3 by default, each with its own
batches: here every connection shares the one processor, the worst case); request queues and quotas; ZooKeeper
(the test writes the registration znode 0.9.0.1 writes: ``registration()``).
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

KNOWN_KEYS = frozenset(range(17))  # ApiKeys at 0.9.0.1: PRODUCE(0) .. LIST_GROUPS(16)
METADATA = 3
POLL_S = 0.3


@dataclass
class Received:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    connection: str
    outcome: str = ""  # "answered", "dropped", "hung", "closed (not implemented here)", "uncaught exception"


@dataclass
class _Conn:
    sock: socket.socket
    name: str
    inbuf: bytearray = field(default_factory=bytearray)
    staged: list = field(default_factory=list)
    outbuf: bytearray = field(default_factory=bytearray)
    muted: bool = False


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


class Kafka09Server:
    """``Kafka09Server(broker_id, brokers={id: (host, port)}, topics={topic: {partition: (leader, replicas, isr)}})``;
    ``start()`` binds 127.0.0.1 on an ephemeral port (``address``), ``stop()`` closes everything. ``brokers`` may be
    filled in after start (``set_cluster``) once every stand-in of a cluster has its port."""

    def __init__(self, broker_id: int, host: str = "127.0.0.1", brokers: dict | None = None, topics: dict | None = None):
        self.broker_id = broker_id
        self.host = host
        self.brokers = dict(brokers or {})
        self.topics = dict(topics or {})
        self.received: list[Received] = []
        self.errors: list[str] = []
        self._hung = False
        self._lock = threading.Lock()
        self._sel = selectors.DefaultSelector()
        self._listen = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listen.bind((host, 0))
        self._listen.listen(64)
        self._listen.setblocking(False)
        self.port = self._listen.getsockname()[1]
        self._conns: list[_Conn] = []
        self._stop = threading.Event()
        self._polling = threading.Event()
        self._polling.set()
        self._held = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kafka09-processor-{broker_id}", daemon=True)

    # ------------------------------------------------------------------ control

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    def set_cluster(self, brokers: dict, topics: dict | None = None) -> None:
        with self._lock:
            self.brokers = dict(brokers)
            if topics is not None:
                self.topics = dict(topics)

    def start(self) -> "Kafka09Server":
        self._sel.register(self._listen, selectors.EVENT_READ, None)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._polling.set()
        self._thread.join(5)
        for c in list(self._conns):
            c.sock.close()
        self._listen.close()
        self._sel.close()

    def hold(self) -> None:
        """Stop polling (a processor busy elsewhere): requests that arrive meanwhile fall into one batch at ``release``."""
        self._polling.clear()
        self._held.wait(5 * POLL_S)  # the poll under way has ended

    def release(self) -> None:
        self._polling.set()

    def hang(self) -> None:
        self._hung = True

    def unhang(self) -> None:
        self._hung = False

    def keys(self) -> set[int]:
        with self._lock:
            return {r.api_key for r in self.received}

    def unknown_keys(self) -> set[int]:
        return self.keys() - KNOWN_KEYS

    def registration(self, timestamp_ms: int | None = None) -> bytes:
        """The registration JSON 0.9.0.1 writes at /brokers/ids/N (ZkUtils.registerBrokerInZk: schema version 2)."""
        return json.dumps({"version": 2, "host": self.host, "port": self.port,
                           "endpoints": [f"PLAINTEXT://{self.host}:{self.port}"], "jmx_port": -1,
                           "timestamp": str(timestamp_ms if timestamp_ms is not None else int(time.time() * 1000))}).encode()

    # ------------------------------------------------------------------ the processor

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._polling.is_set():
                self._held.set()
                self._polling.wait(POLL_S)
                continue
            self._held.clear()
            for key, events in self._sel.select(POLL_S):
                if key.data is None:
                    self._accept()
                    continue
                conn: _Conn = key.data
                if events & selectors.EVENT_READ:
                    self._read(conn)
                if events & selectors.EVENT_WRITE and conn in self._conns:
                    self._write(conn)
            batch = [(c, c.staged.pop(0)) for c in list(self._conns) if c.staged and not c.muted]
            for i, (conn, frame) in enumerate(batch):
                api_key, api_version, correlation_id = struct.unpack(">hhi", frame[:8])
                n = struct.unpack(">h", frame[8:10])[0] if len(frame) >= 10 else -1
                client_id = frame[10:10 + n].decode(errors="replace") if n > 0 else ""
                rec = Received(api_key, api_version, correlation_id, client_id, conn.name)
                with self._lock:
                    self.received.append(rec)
                if api_key not in KNOWN_KEYS:
                    rec.outcome = "uncaught exception"
                    self.errors.append("ERROR Processor got uncaught exception. (kafka.network.Processor)\n"
                                       f"java.lang.ArrayIndexOutOfBoundsException: {api_key}\n"
                                       "\tat org.apache.kafka.common.protocol.ApiKeys.forId(ApiKeys.java:68)")
                    for other, other_frame in batch[i + 1:]:
                        k, v, cid = struct.unpack(">hhi", other_frame[:8])
                        with self._lock:
                            self.received.append(Received(k, v, cid, "", other.name, "dropped"))
                    break
                self._handle(conn, rec, frame)

    def _accept(self) -> None:
        try:
            sock, peer = self._listen.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        conn = _Conn(sock, f"{self.host}:{self.port}-{peer[0]}:{peer[1]}")
        self._conns.append(conn)
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _close(self, conn: _Conn) -> None:
        if conn in self._conns:
            self._conns.remove(conn)
            self._sel.unregister(conn.sock)
            conn.sock.close()

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(conn)
            return
        conn.inbuf += data
        while len(conn.inbuf) >= 4:
            size = struct.unpack(">i", conn.inbuf[:4])[0]
            if size < 8 or size > (100 << 20):  # socket.request.max.bytes: the Selector closes such a connection
                self._close(conn)
                return
            if len(conn.inbuf) < 4 + size:
                break
            conn.staged.append(bytes(conn.inbuf[4:4 + size]))
            del conn.inbuf[:4 + size]

    def _write(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        del conn.outbuf[:sent]
        if not conn.outbuf:
            self._sel.modify(conn.sock, selectors.EVENT_READ, conn)
            conn.muted = False  # completedSends: unmute

    def _handle(self, conn: _Conn, rec: Received, frame: bytes) -> None:
        conn.muted = True
        if self._hung:
            rec.outcome = "hung"
            return
        if rec.api_key != METADATA:
            rec.outcome = "closed (not implemented here)"
            self._close(conn)
            return
        body = self._metadata_v0(frame)
        conn.outbuf += struct.pack(">ii", 4 + len(body), rec.correlation_id) + body
        rec.outcome = "answered"
        self._sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def _metadata_v0(self, frame: bytes) -> bytes:
        n = struct.unpack(">h", frame[8:10])[0]
        pos = 10 + max(n, 0)
        wanted: list[str] = []
        if len(frame) >= pos + 4:
            count = struct.unpack(">i", frame[pos:pos + 4])[0]
            pos += 4
            for _ in range(max(count, 0)):
                ln = struct.unpack(">h", frame[pos:pos + 2])[0]
                wanted.append(frame[pos + 2:pos + 2 + ln].decode())
                pos += 2 + ln
        with self._lock:
            brokers, topics = dict(self.brokers), dict(self.topics)
        out = struct.pack(">i", len(brokers))
        for bid, (host, port) in sorted(brokers.items()):
            out += struct.pack(">i", bid) + _string(host) + struct.pack(">i", port)
        names = wanted or sorted(topics)
        out += struct.pack(">i", len(names))
        for name in names:
            parts = topics.get(name)
            if parts is None:
                out += struct.pack(">h", 3) + _string(name) + struct.pack(">i", 0)  # UNKNOWN_TOPIC_OR_PARTITION
                continue
            out += struct.pack(">h", 0) + _string(name) + struct.pack(">i", len(parts))
            for index, (leader, replicas, isr) in sorted(parts.items()):
                out += struct.pack(">hii", 0, index, leader)
                out += struct.pack(">i", len(replicas)) + b"".join(struct.pack(">i", r) for r in replicas)
                out += struct.pack(">i", len(isr)) + b"".join(struct.pack(">i", r) for r in isr)
        return out
