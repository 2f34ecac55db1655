"""A local HTTP receiver standing where on-call's chat webhook would be (the slot's "webhook" address)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kafka_lab.net import service_ip


class WebhookReceiver:
    def __init__(self, path: str = "/hooks/oncall", fail_first: int = 0) -> None:
        self.path = path
        self.fail_first = fail_first  # answer 503 to this many requests first (a webhook that is down for a while)
        self.refused = 0
        self.received: list[dict] = []
        self.headers: list[dict] = []
        self._cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.refused < receiver.fail_first:
                    receiver.refused += 1
                    self.send_response(503)
                    self.end_headers()
                    return
                ok = self.path == receiver.path
                if ok:
                    with receiver._cond:
                        receiver.received.append(json.loads(body))
                        receiver.headers.append(dict(self.headers))
                        receiver._cond.notify_all()
                self.send_response(200 if ok else 404)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((service_ip("webhook"), 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def connection(self, password: str | None = None) -> str:
        """The Airflow connection (JSON, for AIRFLOW_CONN_*) pointing at this receiver."""
        conn = {"conn_type": "http", "host": service_ip("webhook"), "port": self.port, "schema": "http", "extra": {"path": self.path}}
        if password:
            conn["password"] = password
        return json.dumps(conn)

    def wait_for(self, predicate, timeout_s: float = 60.0) -> dict:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                for msg in self.received:
                    if predicate(msg):
                        return msg
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no matching notification within {timeout_s:g}s; received: {self.received}")
                self._cond.wait(remaining)

    def __enter__(self) -> "WebhookReceiver":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
