"""Per-file work of the Spark job, kept in the package so executors only need `kafka_runbooks` + pyspark.

load_entry(bundle_dir, entry) reads one manifest file entry, verifies its sha256, parses it, and returns
(ParsedFile for the driver, rows per table for the DataFrames). It never raises on bad evidence.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from .diagnose import ParsedFile
from .lockgraph import build_wait_for_graph, find_cycles
from .parsers import NOT_PARSED, parse_content

MANIFEST_SCHEMA = "kafka-runbooks/evidence-bundle/v1"
FINDINGS_SCHEMA = "kafka-runbooks/findings/v1"
TABLES = ("threads", "lock_edges", "connections", "log_events")


def manifest_entries(manifest: dict) -> tuple[list[dict], list[str]]:
    """Manifest `files` -> plain dict entries (with a `seq` ordering key from the command's started_at)."""
    problems: list[str] = []
    if manifest.get("schema") != MANIFEST_SCHEMA:
        problems.append(f"manifest schema is {manifest.get('schema')!r}, expected {MANIFEST_SCHEMA!r}")
    started = {}
    for c in manifest.get("commands") or []:
        if isinstance(c, dict):
            for key in ("stdout", "stderr"):
                if c.get(key):
                    started[c[key]] = str(c.get("started_at") or "")
    out = []
    for i, f in enumerate(manifest.get("files") or []):
        if not isinstance(f, dict) or not isinstance(f.get("path"), str):
            problems.append(f"manifest files[{i}] is not an object with a string path")
            continue
        bid = f.get("broker_id")
        try:
            bid = int(bid) if bid is not None else None
        except (TypeError, ValueError):
            problems.append(f"manifest files[{i}] broker_id {bid!r} is not an integer")
            bid = None
        out.append({"path": f["path"], "kind": str(f.get("kind") or ""), "broker_id": bid, "host": f.get("host"),
                    "stream": f.get("stream"), "sha256": f.get("sha256"), "bytes": f.get("bytes"),
                    "seq": started.get(f["path"], "")})
    return out, problems


def _safe_join(bundle_dir: str, rel: str) -> str | None:
    if os.path.isabs(rel) or ".." in rel.replace("\\", "/").split("/"):
        return None
    full = os.path.realpath(os.path.join(bundle_dir, rel))
    root = os.path.realpath(bundle_dir)
    return full if full == root or full.startswith(root + os.sep) else None


def load_entry(bundle_dir: str, e: dict) -> tuple[ParsedFile, dict[str, list[dict]]]:
    pf = ParsedFile(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"), seq=e.get("seq", ""))
    rows: dict[str, list[dict]] = {t: [] for t in TABLES}
    if e.get("stream") == "stderr" or e["kind"] in NOT_PARSED:
        return pf, rows  # stderr and binary/unparsed kinds: integrity is not needed for analysis
    full = _safe_join(bundle_dir, e["path"])
    if full is None:
        pf.problems.append("path escapes the bundle directory")
        return pf, rows
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        pf.problems.append(f"cannot read file: {exc.__class__.__name__}: {exc.strerror or exc}")
        return pf, rows
    pf.bytes = len(data)
    digest = hashlib.sha256(data).hexdigest()
    if e.get("sha256") and str(e["sha256"]).lower() != digest:
        pf.problems.append(f"sha256 mismatch: manifest {e['sha256']}, file {digest}")
        return pf, rows
    if not e.get("sha256"):
        pf.problems.append("manifest has no sha256 for this file (integrity not verified)")
    if e.get("bytes") is not None and e.get("bytes") != len(data):
        pf.problems.append(f"size mismatch: manifest {e.get('bytes')} bytes, file {len(data)} bytes")
    try:
        result = parse_content(e["kind"], data)
    except Exception as exc:  # a parser bug must not lose the whole bundle: report it as unparsable
        pf.problems.append(f"parser error: {exc.__class__.__name__}: {exc}")
        return pf, rows
    if result is None:
        return pf, rows
    base = {"path": e["path"], "broker_id": e.get("broker_id")}
    k = e["kind"]
    if k == "jstack":
        g = build_wait_for_graph(result)
        cyc = {(x.waiter, x.address) for c in find_cycles(g) for x in c.edges}
        for t in result.all_threads():
            aw = t.awaited
            rows["threads"].append({**base, "name": t.name, "line": t.line, "source": t.source, "state": t.state,
                                    "state_detail": t.state_detail, "tid": t.tid, "nid": t.nid,
                                    "top_frame": t.frames[0].text if t.frames else None, "frames": len(t.frames),
                                    "awaited_address": aw.address if aw else None, "awaited_class": aw.cls if aw else None,
                                    "awaited_kind": t.awaited_kind, "locks_held": len(t.held())})
        for x in g.edges:
            rows["lock_edges"].append({**base, "waiter": x.waiter, "holder": x.holder, "address": x.address,
                                       "class": x.cls, "kind": x.kind, "waiter_line": x.waiter_line,
                                       "holder_line": x.holder_line, "source": x.source,
                                       "in_cycle": (x.waiter, x.address) in cyc})
    elif k in ("sockets_ss", "sockets_netstat"):
        for r in result.rows:
            rows["connections"].append({**base, **{f: getattr(r, f) for f in (
                "line", "proto", "state", "recv_q", "send_q", "local_host", "local_port", "peer_host", "peer_port",
                "pid", "program")}})
    elif k == "server_log":
        for ev in result.events:
            rows["log_events"].append({**base, "line": ev.line, "end_line": ev.end_line, "timestamp": ev.timestamp,
                                       "level": ev.level, "logger": ev.logger, "message": ev.message,
                                       "exception": ev.exception, "signature": ev.signature,
                                       "attrs_json": json.dumps(ev.attrs, sort_keys=True)})
        result = result.summary()  # the driver needs signatures only; every event goes to the log_events table
    pf.result = result
    return pf, rows


def findings_document(bundle: str, generated_at: str, findings: list[Any]) -> dict:
    return {"schema": FINDINGS_SCHEMA, "bundle": bundle, "generated_at": generated_at,
            "findings": [f.to_dict() for f in findings]}
