"""Lab client load: keeps connections to every broker, like the applications in incident 001.

Each connection sends a request every ``interval`` seconds (Metadata v0 / Heartbeat v0, alternating, up to
``max_in_flight`` pipelined as Kafka clients do). When the oldest request has waited longer than ``timeout``
seconds the connection is closed and a new one is opened -- which is how sockets pile up in CLOSE_WAIT on a
broker that stopped reading.

    python -m kafka_lab.clients --brokers 127.0.0.11:9092,127.0.0.12:9092 [--conns 4]
"""

from __future__ import annotations

import argparse
import itertools
import select
import signal
import socket
import struct
import sys
import threading
import time


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def metadata_v0(corr: int, client_id: str) -> bytes:
    body = struct.pack(">hhi", 3, 0, corr) + _string(client_id) + struct.pack(">i", 0)
    return struct.pack(">i", len(body)) + body


def heartbeat_v0(corr: int, client_id: str, group: str, member: str) -> bytes:
    body = struct.pack(">hhi", 12, 0, corr) + _string(client_id) + _string(group) + struct.pack(">i", 1) + _string(member)
    return struct.pack(">i", len(body)) + body


class Connection(threading.Thread):
    def __init__(self, host: str, port: int, n: int, interval: float, timeout: float, max_in_flight: int, stop: threading.Event):
        super().__init__(name=f"lab-client-{host}-{n}", daemon=True)
        self.addr = (host, port)
        self.client_id = f"lab-client-{n}"
        self.interval, self.timeout, self.max_in_flight, self.stop = interval, timeout, max_in_flight, stop
        self.corr = itertools.count(1)
        self.stats = {"ok": 0, "timeouts": 0, "errors": 0, "connects": 0}

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.session()
            except OSError:
                self.stats["errors"] += 1
                self.stop.wait(0.5)

    def session(self) -> None:
        s = socket.create_connection(self.addr, timeout=self.timeout)
        s.setblocking(False)
        self.stats["connects"] += 1
        inflight: dict[int, float] = {}
        buf = b""
        next_send = 0.0
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                if inflight and now - min(inflight.values()) > self.timeout:
                    self.stats["timeouts"] += 1
                    return  # close and reconnect, like a client's request.timeout.ms
                if now >= next_send and len(inflight) < self.max_in_flight:
                    corr = next(self.corr)
                    if corr % 2:
                        req = metadata_v0(corr, self.client_id)
                    else:
                        req = heartbeat_v0(corr, self.client_id, "lab-consumers", self.client_id)
                    s.sendall(req)
                    inflight[corr] = now
                    next_send = now + self.interval
                r, _, _ = select.select([s], [], [], 0.05)
                if r:
                    data = s.recv(65536)
                    if not data:
                        return
                    buf += data
                    while len(buf) >= 4:
                        (size,) = struct.unpack(">i", buf[:4])
                        if len(buf) < 4 + size:
                            break
                        (corr,) = struct.unpack(">i", buf[4:8])
                        inflight.pop(corr, None)
                        self.stats["ok"] += 1
                        buf = buf[4 + size:]
        finally:
            s.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kafka_lab.clients")
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--max-in-flight", type=int, default=5)
    ap.add_argument("--state", default="", help="lab state dir (only to mark the process as the lab's)")
    a = ap.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    conns = []
    for hp in a.brokers.split(","):
        host, port = hp.rsplit(":", 1)
        for n in range(a.conns):
            c = Connection(host, int(port), n, a.interval, a.timeout, a.max_in_flight, stop)
            c.start()
            conns.append(c)
    while not stop.wait(10):
        summary = {c.addr[0]: {} for c in conns}
        for c in conns:
            for k, v in c.stats.items():
                summary[c.addr[0]][k] = summary[c.addr[0]].get(k, 0) + v
        print(time.strftime("%H:%M:%S"), summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
