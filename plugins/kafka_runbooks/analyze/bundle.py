"""Per-file work of the Spark job that runs in Python (small evidence files, and logs the JVM scan cannot
read), kept in the package so executors only need ``kafka_runbooks`` + pyspark.

``load_entry(bundle_uri, entry, budget)`` reads one manifest entry, verifies its sha256, parses it under a
time budget and returns ([ParsedFile], rows per Parquet table). It never raises on bad evidence: problems
become ``ParsedFile.problems`` (and "unparsable" findings).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from . import uri as U
from .parsed_file import ParsedFile
from .lockgraph import build_wait_for_graph, find_cycles
from .logsummary import event_rows, summarize
from .parsers import LOG_KINDS, NOT_PARSED, parse_content
from .parsers.base import BudgetExceeded, budget
from .parsers.logs import parse_log

MANIFEST_SCHEMA = "kafka-runbooks/evidence-bundle/v1"
# the kinds the capture takes only where the file exists (its other logs, configuration files); a manifest entry's own
# "optional": true says the same for any file
OPTIONAL_KINDS = frozenset({"controller_log", "state_change_log", "log_cleaner_log", "kafka_stdout", "gc_log", "log",
                            "kafka_config", "zk_config", "zk_log"})
FINDINGS_SCHEMA = "kafka-runbooks/findings/v1"  # extended in place (optional fields added), never broken
from .tables import TABLES, write_part  # noqa: E402
BUDGET_BASE_S = 10.0
BUDGET_PER_MB_S = 1.0


def file_budget(size: int | None, base: float = BUDGET_BASE_S, per_mb: float = BUDGET_PER_MB_S) -> float:
    return base + per_mb * (size or 0) / 1e6


def manifest_entries(manifest: dict) -> tuple[list[dict], list[str]]:
    """Manifest `files` -> plain dict entries (with a `seq` ordering key from the command's started_at)."""
    problems: list[str] = []
    if manifest.get("schema") != MANIFEST_SCHEMA:
        problems.append(f"manifest schema is {manifest.get('schema')!r}, expected {MANIFEST_SCHEMA!r}")
    started, failed = {}, {}
    for c in manifest.get("commands") or []:
        if isinstance(c, dict):
            for key in ("stdout", "stderr"):
                if c.get(key):
                    started[c[key]] = str(c.get("started_at") or "")
                    if c.get("error") or c.get("exit_code") not in (0, None):
                        failed[c[key]] = str(c.get("error") or f"exit {c.get('exit_code')}")
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
                    "seq": started.get(f["path"], f.get("captured_at") or ""), "server": f.get("server"),
                    "optional": f.get("optional") is True or str(f.get("kind") or "") in OPTIONAL_KINDS,
                    "command_error": failed.get(f["path"])})
    return out, problems


def integrity_problems(e: dict, size: int, digest: str | None) -> list[str]:
    out = []
    if e.get("sha256") and digest and str(e["sha256"]).lower() != digest:
        out.append(f"sha256 mismatch: manifest {e['sha256']}, file {digest}")
    if not e.get("sha256"):
        out.append("manifest has no sha256 for this file (integrity not verified)")
    if e.get("bytes") is not None and e.get("bytes") != size:
        out.append(f"size mismatch: manifest {e.get('bytes')} bytes, file {size} bytes")
    return out


def _pf(e: dict, kind: str | None = None) -> ParsedFile:
    return ParsedFile(path=e["path"], kind=kind or e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                      seq=e.get("seq", ""), server=e.get("server"), optional=bool(e.get("optional")),
                      command_error=e.get("command_error"))


def empty_rows() -> dict[str, list[dict]]:
    return {t: [] for t in TABLES}


def load_entry(bundle_uri: str, e: dict, budget_base_s: float = BUDGET_BASE_S,
               budget_per_mb_s: float = BUDGET_PER_MB_S, out_uri: str | None = None) -> tuple[list[ParsedFile], dict[str, list[dict]]]:
    """With ``out_uri`` the rows are written there as Parquet part files by this (executor) task and not returned."""
    pfs, rows = _load_entry(bundle_uri, e, budget_base_s, budget_per_mb_s)
    if out_uri is None:
        return pfs, rows
    for table, rs in rows.items():
        write_part(out_uri, table, rs, f"{e['path']}#{table}")
    return pfs, {}


def _load_entry(bundle_uri: str, e: dict, budget_base_s: float, budget_per_mb_s: float) -> tuple[list[ParsedFile], dict[str, list[dict]]]:
    pf = _pf(e)
    rows = empty_rows()
    if e.get("stream") == "stderr" or e["kind"] in NOT_PARSED:
        return [pf], rows
    if not U.safe_relative(e["path"]):
        pf.problems.append("path escapes the bundle directory")
        return [pf], rows
    try:
        data = U.read_bytes(U.join(bundle_uri, e["path"]))
    except OSError as exc:
        pf.problems.append(f"cannot read file: {exc.__class__.__name__}: {getattr(exc, 'strerror', None) or exc}")
        return [pf], rows
    pf.bytes = len(data)
    digest = hashlib.sha256(data).hexdigest()
    probs = integrity_problems(e, len(data), digest)
    if any(p.startswith("sha256 mismatch") for p in probs):
        pf.problems.extend(probs)
        return [pf], rows
    pf.notes.extend(p for p in probs)
    limit = file_budget(len(data), budget_base_s, budget_per_mb_s)
    t0 = time.monotonic()
    out = [pf]
    try:
        with budget(limit):
            if e["kind"] in LOG_KINDS:
                p = parse_log(data)
                pf.result = summarize(p, e["path"], e["kind"], e.get("broker_id"), e.get("host"))
                rows["log_events"] = event_rows(p, e["path"], e.get("broker_id"))
                if e["kind"] == "kafka_stdout":  # kill -3 dumps land in the broker's stdout
                    td = parse_content("jstack", data)
                    if has_dumps(td):
                        tf = _pf(e, "jstack")
                        tf.result = td
                        tf.embedded = True
                        out.append(tf)
            else:
                pf.result = parse_content(e["kind"], data)
                if e.get("embedded_in"):  # thread dumps looked for inside another file (kafkaServer.out)
                    pf.embedded = True
                    if not has_dumps(pf.result):
                        return [], rows  # none there: normal, nothing to report
                if e["kind"] == "kafka_checks":  # one file for every broker: a kafka_probe per broker
                    for b, probe in sorted(pf.result.probes.items()):
                        pp = _pf(dict(e, broker_id=b), "kafka_probe")
                        pp.result = probe
                        pp.embedded = True
                        out.append(pp)
    except BudgetExceeded as exc:
        pf.result = None
        pf.problems.append(f"parsing stopped: {exc} (budget {limit:.0f} s for {len(data)} bytes); the rest of the bundle was analysed")
        return [pf], empty_rows()
    except Exception as exc:  # a parser bug must not lose the whole bundle: report it as unparsable
        pf.result = None
        pf.problems.append(f"parser error: {exc.__class__.__name__}: {exc}")
        return [pf], empty_rows()
    pf.parse_s = round(time.monotonic() - t0, 3)
    for f in out:
        _table_rows(f, rows)
    rows["files"].append(file_row(pf, "python"))
    return out, rows


def has_dumps(td) -> bool:
    """A thread-dump result with at least one thread or a deadlock report in it."""
    return any(d.all_threads() or d.deadlocks for d in getattr(td, "dumps", None) or [])


def file_row(pf: ParsedFile, read_by: str, layout: str | None = None, share: float | None = None) -> dict:
    res = pf.result
    return {"path": pf.path, "kind": pf.kind, "broker_id": pf.broker_id, "bytes": pf.bytes, "read_by": read_by,
            "layout": layout or getattr(res, "layout", None),
            "parsed_share": share if share is not None else getattr(res, "parsed_share", None),
            "problems": "; ".join(pf.reasons) or None, "parse_s": pf.parse_s}


def _table_rows(pf: ParsedFile, rows: dict[str, list[dict]]) -> None:
    base = {"path": pf.path, "broker_id": pf.broker_id}
    r = pf.result
    k = pf.kind
    if r is None:
        return
    if k in ("jstack", "thread_dump_json"):
        for d in r.dumps:
            g = build_wait_for_graph(d)
            cyc = {(x.waiter_key, x.address) for c in find_cycles(g) for x in c.edges}
            for t in d.all_threads():
                aw = t.awaited
                rows["threads"].append({**base, "dump": d.index, "name": t.name, "key": t.key, "line": t.line,
                                        "source": t.source, "state": t.state, "state_detail": t.state_detail, "tid": t.tid,
                                        "nid": t.nid, "top_frame": t.frames[0].text if t.frames else None,
                                        "frames": len(t.frames), "awaited_address": aw.address if aw else None,
                                        "awaited_class": aw.cls if aw else None, "awaited_kind": t.awaited_kind,
                                        "locks_held": len(t.held()), "serves_requests": t.serves_requests,
                                        "virtual": t.virtual, "carrying": t.carrying, "carrier": t.carrier})
            for x in g.edges:
                rows["lock_edges"].append({**base, "dump": d.index, "waiter": x.waiter, "holder": x.holder,
                                           "waiter_key": x.waiter_key, "holder_key": x.holder_key, "address": x.address,
                                           "class": x.cls, "kind": x.kind, "waiter_line": x.waiter_line,
                                           "holder_line": x.holder_line, "source": x.source,
                                           "in_cycle": (x.waiter_key, x.address) in cyc})
    elif k in ("sockets_ss", "sockets_netstat"):
        for s in r.rows:
            rows["connections"].append({**base, **{f: getattr(s, f) for f in (
                "line", "proto", "state", "recv_q", "send_q", "local_host", "local_port", "peer_host", "peer_port",
                "pid", "program")}, "captured": pf.seq})
    elif k == "gc_log":
        for p in r.pauses + r.stopped:
            rows["gc_pauses"].append({**base, "line": p.line, "at": p.at, "uptime_s": p.uptime_s, "seconds": p.seconds,
                                      "kind": p.kind, "cause": p.cause})
    elif k in ("zk_mntr", "zk_srvr"):
        rows["zk_stats"].append({**base, "server": pf.server, "word": k[3:], "captured": pf.seq,
                                 **{f: v for f, v in r.to_dict().items() if f != "zxid_hex"},
                                 "zxid": r.zxid})
    elif k == "log_dir_listing":
        for p in r.partitions.values():
            rows["log_dirs"].append({**base, "partition": p.name, "topic": p.topic, "bytes": p.bytes,
                                     "segments": p.segments, "log_bytes": p.log_bytes, "line": p.line})


def findings_document(bundle: str, generated_at: str, findings: list[Any], **extra: Any) -> dict:
    return {"schema": FINDINGS_SCHEMA, "bundle": bundle, "generated_at": generated_at,
            "findings": [f.to_dict() for f in findings], **extra}


def read_manifest(bundle_uri: str) -> dict:
    doc = json.loads(U.read_text(U.join(bundle_uri, "manifest.json")))
    if not isinstance(doc, dict):
        raise ValueError("manifest is not a JSON object")
    return doc
