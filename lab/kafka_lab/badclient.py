"""Incident 002a's drill: a client sends a request whose API key the broker does not know.

A raw Kafka request header (v1: api_key, api_version, correlation_id, client_id) with no body, sent from the lab's
own source address (``service_ip("lab_bad_client")``) so the broker's log and socket table name it. Kafka 2.3 knows
API keys 0..44: the default, 60, is DescribeCluster (added in Kafka 2.8).
"""

from __future__ import annotations

import socket
import struct
import time

from .net import KAFKA_CLIENT_PORT, broker_ip, service_ip

DEFAULT_API_KEY = 60
# the lab's health.bad_request_window_s: the drill's client sends every few seconds, so a short window finds it, and
# the lab's reset() waits it out once the client is stopped (the healthy baseline has no bad-client lines in it)
BAD_REQUEST_WINDOW_S = 20.0
CLIENT_ID = "kafka-lab-bad-client"


def request_bytes(api_key: int, api_version: int = 0, correlation_id: int = 1, client_id: str = CLIENT_ID) -> bytes:
    cid = client_id.encode()
    body = struct.pack(">hhi", api_key, api_version, correlation_id) + struct.pack(">h", len(cid)) + cid
    return struct.pack(">i", len(body)) + body


def send(b: int, api_key: int = DEFAULT_API_KEY, api_version: int = 0, timeout: float = 10.0) -> dict:
    """Sends the request to broker b's CLIENT listener; returns what happened (the broker closes the socket)."""
    src = service_ip("lab_bad_client")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect((broker_ip(b), KAFKA_CLIENT_PORT))
        local = s.getsockname()
        t0 = time.monotonic()
        s.sendall(request_bytes(api_key, api_version))
        received = b""
        closed = False
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    closed = True
                    break
                received += chunk
        except socket.timeout:
            pass
        except ConnectionResetError:
            closed = True
        return {"broker": b, "source": f"{local[0]}:{local[1]}", "api_key": api_key, "api_version": api_version,
                "client_id": CLIENT_ID, "closed_by_broker": closed, "response_bytes": len(received),
                "seconds": round(time.monotonic() - t0, 3)}
    finally:
        s.close()


def run_forever(b: int, api_key: int, interval_s: float, hold: bool, state: str) -> None:
    """A misbehaving client that keeps trying, as a real one with a too-new library does: the bad request every
    ``interval_s``, and (``hold``) one idle connection of its own kept open to the broker meanwhile, which the
    broker's socket table shows (``state`` only marks the process as the lab's)."""
    held = None
    while True:
        if hold and held is None:
            held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                held.bind((service_ip("lab_bad_client"), 0))
                held.connect((broker_ip(b), KAFKA_CLIENT_PORT))
            except OSError:
                held.close()
                held = None
        try:
            send(b, api_key)
        except OSError:
            pass
        time.sleep(interval_s)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m kafka_lab.badclient")
    ap.add_argument("--broker", type=int, required=True)
    ap.add_argument("--api-key", type=int, default=DEFAULT_API_KEY)
    ap.add_argument("--interval", type=float, default=5.0)
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--state", required=True)
    a = ap.parse_args(argv)
    run_forever(a.broker, a.api_key, a.interval, a.hold, a.state)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
