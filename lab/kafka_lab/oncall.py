"""The on-call webhook of a deployment: an HTTP receiver that keeps every page it is sent, one JSON line each.

    python -m kafka_lab.oncall --host 127.S.2.73 --port 8090 --path /hooks/oncall --out DIR/pages.jsonl

It stands where a chat room's incoming webhook would be (the product posts to it through the Airflow connection
named by the cluster's ``approvals.oncall_conn_id``). A POST to another path is answered 404 and not kept.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MAX_BODY = 1024 * 1024


def read_pages(path: str | os.PathLike) -> list[dict]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line)["page"] for line in lines if line.strip()]


def serve(host: str, port: int, path: str, out: Path) -> None:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != path or length > MAX_BODY:
                self.send_response(404 if self.path != path else 413)
                self.end_headers()
                return
            body = self.rfile.read(length)
            try:
                page = json.loads(body)
            except ValueError:
                self.send_response(400)
                self.end_headers()
                return
            with lock, open(out, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"page": page, "received_at": time.time()}) + "\n")
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    print(f"on-call webhook on http://{host}:{port}{path} -> {out}", flush=True)
    server.serve_forever()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", default="/hooks/oncall")
    p.add_argument("--out", type=Path, required=True)
    a = p.parse_args(argv)
    serve(a.host, a.port, a.path, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
