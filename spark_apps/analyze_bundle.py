"""Analyze one evidence bundle with Spark.

    spark-submit spark_apps/analyze_bundle.py --bundle URI [--out URI] [--kafka-version V]
                 [--split-mb 32] [--window-minutes 30] [--budget-s 10] [--budget-per-mb-s 1]

URI: a path or file:// URI on storage every executor can read (a shared mount), or s3a:// / hdfs://.

1. survey (executors, one task per log file): sha256, damaged ranges, encoding, layout, line counts at
   split boundaries;
2. big logs: Spark's text source, JVM column expressions only (analyze/fastscan.py), rows numbered exactly;
3. everything else (and logs the JVM scan cannot read): one Python task per file, each under a time budget;
4. Parquet written by the executors under <out>/parquet/ (log_events, threads, lock_edges, connections,
   gc_pauses, zk_stats, log_dirs, files);
5. the driver reads back aggregates and a bounded sample, diagnoses, writes findings.json and report.html.

Depends only on pyspark and the ``kafka_runbooks`` package (shipped with --py-files for remote masters).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time

from kafka_runbooks.analyze import tables
from kafka_runbooks.analyze import uri as U
from kafka_runbooks.analyze.bundle import (findings_document, integrity_problems, load_entry, manifest_entries,
                                           read_manifest)
from kafka_runbooks.analyze.diagnose import ParsedFile, Window, broker_table, diagnose, file_table, timeline
from kafka_runbooks.analyze.logsummary import SAMPLE, LogSummary, record_of
from kafka_runbooks.analyze.parsers import LOG_KINDS
from kafka_runbooks.analyze.report_html import render_report
from kafka_runbooks.analyze.survey import Survey, survey_file
from kafka_runbooks.model import ClusterSnapshot, Evidence, Finding, Severity

DEFAULT_SPLIT_MB = 32
DEFAULT_WINDOW_MIN = 30


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _parse_time(v) -> dt.datetime | None:
    if not v:
        return None
    try:
        t = dt.datetime.fromisoformat(str(v).replace("Z", "+00:00"))
    except ValueError:
        return None
    return t.astimezone(dt.timezone.utc) if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def incident_window(manifest: dict, minutes: float) -> Window:
    """[trigger time (or capture start) - minutes, capture end]: fetch errors before are earlier episodes."""
    trig = manifest.get("trigger") if isinstance(manifest.get("trigger"), dict) else {}
    det = (trig or {}).get("details") or {}
    at = None
    source = ""
    for k in ("detected_at", "first_seen", "since", "at"):
        at = _parse_time(det.get(k)) if isinstance(det, dict) else None
        if at:
            source = f"trigger {k}"
            break
    if at is None:
        at = _parse_time(manifest.get("created_at"))
        source = "capture start"
    until = _parse_time(manifest.get("finished_at")) or _parse_time(manifest.get("created_at"))
    if at is None:
        return Window(source="none")
    return Window(at - dt.timedelta(minutes=minutes), until + dt.timedelta(minutes=1) if until else None,
                  f"{source} - {minutes:g} min .. capture end")


def _utc_offsets(manifest: dict) -> dict[int, dt.timedelta]:
    out = {}
    for bid, h in (manifest.get("hosts") or {}).items():
        z = (h or {}).get("utc_offset") if isinstance(h, dict) else None
        if isinstance(z, str) and len(z) >= 5 and z[0] in "+-":
            try:
                out[int(bid)] = dt.timedelta(hours=int(z[1:3]), minutes=int(z[-2:])) * (1 if z[0] == "+" else -1)
            except ValueError:
                pass
    return out


def _snapshot_info(bundle_uri: str, entries: list[dict], manifest: dict | None = None):
    """Per broker: its listener ports (every listener of the snapshot's endpoints, and the capture's
    hosts.<id>.broker_ports), its own addresses (snapshot host, endpoints, hosts.<id>.broker_addresses), versions."""
    ports: dict[int, set[int]] = {}
    hosts: dict[int, set[str]] = {}
    versions: dict[int, str] = {}
    bad: list[ParsedFile] = []
    for e in entries:
        if e["kind"] != "cluster_snapshot":
            continue
        try:
            snap = ClusterSnapshot.from_dict(json.loads(U.read_text(U.join(bundle_uri, e["path"]))))
            for b in snap.brokers:
                ports.setdefault(b.id, set()).add(int(b.port))
                if b.host:
                    hosts.setdefault(b.id, set()).add(b.host)
                for ep in b.endpoints or ():
                    hp = str(ep).rsplit("//", 1)[-1]
                    h, _, p = hp.rpartition(":")
                    if p.isdigit():
                        ports[b.id].add(int(p))
                    if h:
                        hosts.setdefault(b.id, set()).add(h.strip("[]"))
                if b.version:
                    versions[b.id] = b.version
        except Exception as exc:  # noqa: BLE001 - evidence is untrusted
            bad.append(ParsedFile(path=e["path"], kind=e["kind"], problems=[f"cannot load snapshot: {exc.__class__.__name__}: {exc}"]))
    for k, h in ((manifest or {}).get("hosts") or {}).items():
        if not isinstance(h, dict) or not str(k).lstrip("-").isdigit():
            continue
        b = int(k)
        for p in h.get("broker_ports") or []:
            if isinstance(p, int) or (isinstance(p, str) and p.isdigit()):
                ports.setdefault(b, set()).add(int(p))
        for a in h.get("broker_addresses") or []:
            if isinstance(a, str) and a:
                hosts.setdefault(b, set()).add(a)
    return ports, hosts, versions, bad


def _spark_log_summaries(ev, scan: list[tuple[dict, Survey]]) -> list[ParsedFile]:
    """LogSummary per JVM-scanned file from Parquet aggregates: exact counts, first/last SAMPLE events per
    signature, exact per-minute fetch-failure counts. Only aggregates and the bounded sample reach the driver."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    w_asc = W.partitionBy("path", "signature").orderBy(F.col("line").asc())
    w_all = W.partitionBy("path", "signature")
    sample_rows = (ev.withColumn("a", F.row_number().over(w_asc)).withColumn("n", F.count(F.lit(1)).over(w_all))
                   .where((F.col("a") <= SAMPLE) | (F.col("a") > F.col("n") - SAMPLE)).collect())
    counts = {(r["path"], r["signature"]): r["n"] for r in sample_rows if r["signature"] is not None}
    attrs = F.col("attrs")
    cause = (F.when(attrs.getItem("client_shutdown").isNotNull(), "client_shutdown")
             .when(attrs.getItem("disconnected_node").isNotNull(), "disconnected")
             .when(attrs.getItem("timeout").isNotNull(), "timeout")
             .when(attrs.getItem("connection_failed").isNotNull(), "connection_failed").otherwise("unknown"))
    minute_rows = (ev.where(F.col("signature").isin("replica_fetch_error", "fetch_session_error"))
                   .groupBy("path", "signature", attrs.getItem("leader").alias("leader"), attrs.getItem("fetcher").alias("fetcher"),
                            cause.alias("cause"), F.substring("ts", 1, 16).alias("minute"))
                   .agg(F.count(F.lit(1)).alias("count"), F.min("line").alias("first_line"), F.max("line").alias("last_line"))
                   .collect())
    by_path: dict[str, list] = {}
    for r in sample_rows:
        d = r.asDict()
        d.pop("a", None), d.pop("n", None)
        by_path.setdefault(r["path"], []).append(d)
    minutes: dict[str, list] = {}
    for r in minute_rows:
        minutes.setdefault(r["path"], []).append({k: r[k] for k in ("signature", "leader", "fetcher", "cause", "minute",
                                                                    "count", "first_line", "last_line")})
    out = []
    for e, s in scan:
        rows = sorted(by_path.get(e["path"], []), key=lambda r: r["line"])
        c = {sig: n for (p, sig), n in counts.items() if p == e["path"]}
        shown = {}
        for r in rows:
            if r["signature"]:
                shown[r["signature"]] = shown.get(r["signature"], 0) + 1
        summary = LogSummary(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                             layout=s.layout, parsed_share=s.sampled_share, share_sampled=True, lines=s.lines,
                             counts=c, events=[record_of(r) for r in rows],
                             omitted={k: c[k] - shown.get(k, 0) for k in c if c[k] > shown.get(k, 0)},
                             minutes=sorted(minutes.get(e["path"], []), key=lambda m: (m["minute"], m["first_line"])),
                             read_by="spark", first_ts=s.first_ts, last_ts=s.last_ts)
        pf = ParsedFile(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                        seq=e.get("seq", ""), server=e.get("server"), bytes=s.size, result=summary)
        if s.nul_runs:
            pf.notes.append(f"{s.nul_runs} damaged range(s) of NUL bytes ({s.nul_bytes} bytes, first at bytes "
                            f"{s.nul_ranges[0][0]}-{s.nul_ranges[0][1] - 1}); the rest was analysed")
        if s.encoding == "utf-8":
            pf.notes.append("non-ASCII UTF-8 content (invalid sequences are matched byte-wise and left as they are)")
        out.append(pf)
    return out


def run(spark, bundle: str, out: str | None = None, kafka_version: str | None = None, *,
        split_mb: float = DEFAULT_SPLIT_MB, window_minutes: float = DEFAULT_WINDOW_MIN,
        budget_s: float = 10.0, budget_per_mb_s: float = 1.0) -> dict:
    from kafka_runbooks.analyze import fastscan

    t_start = time.monotonic()
    bundle_uri = U.to_uri(bundle)
    out_uri = U.to_uri(out) if out else bundle_uri
    shown = U.local_path(bundle_uri) if U.is_local(bundle_uri) else bundle_uri  # as given: a path stays a path
    generated = _now()
    timings: dict[str, float] = {}
    try:
        manifest = read_manifest(bundle_uri)
    except Exception as exc:  # noqa: BLE001
        f = Finding("unparsable", Severity.WARNING, f"manifest.json could not be read: {exc.__class__.__name__}: {exc}",
                    evidence=(Evidence("manifest.json", excerpt=str(exc)),),
                    details={"path": "manifest.json", "kind": "manifest", "reasons": [str(exc)]})
        doc = findings_document(shown, generated, [f])
        U.write_text(U.join(out_uri, "findings.json"), json.dumps(doc, indent=2))
        U.write_text(U.join(out_uri, "report.html"), render_report([f], {"bundle": shown, "generated_at": generated}))
        return doc

    entries, manifest_problems = manifest_entries(manifest)
    sc = spark.sparkContext
    split = int(split_mb * (1 << 20))
    fastscan.configure(spark, split)
    par = sc.defaultParallelism

    # 1. survey the logs
    t = time.monotonic()
    log_entries = [e for e in entries if e["kind"] in LOG_KINDS and e.get("stream") != "stderr" and U.safe_relative(e["path"])]
    bu = bundle_uri
    surveys = []
    if log_entries:
        surveys = (sc.parallelize(log_entries, max(1, min(len(log_entries), par * 4)))
                   .map(lambda e: (e, survey_file(e["path"], U.join(bu, e["path"]), split).to_dict())).collect())
    timings["survey_s"] = round(time.monotonic() - t, 3)
    scan: list[tuple[dict, Survey]] = []
    py_entries = [e for e in entries if e not in log_entries]
    early: list[ParsedFile] = []
    file_rows: list[dict] = []
    for e, sd in surveys:
        s = Survey.from_dict(sd)
        if s.error:
            early.append(ParsedFile(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                                    problems=[s.error]))
            continue
        probs = integrity_problems(e, s.size, s.sha256)
        if any(p.startswith("sha256 mismatch") for p in probs):
            early.append(ParsedFile(path=e["path"], kind=e["kind"], broker_id=e.get("broker_id"), host=e.get("host"),
                                    problems=probs, bytes=s.size))
            continue
        if s.spark_readable():
            scan.append((e, s))
            if e["kind"] == "kafka_stdout":  # kill -3 thread dumps land in the broker's stdout: read them too
                py_entries.append(dict(e, kind="jstack", embedded_in=e["kind"]))
        else:
            py_entries.append(e)
    # 2. python path: each task parses one file and writes its rows as Parquet part files
    t = time.monotonic()
    tables.clear(out_uri)
    bb, bps, ou = budget_s, budget_per_mb_s, out_uri
    files: list[ParsedFile] = []
    if py_entries:
        files = [pf for pfs, _ in sc.parallelize(py_entries, max(1, min(len(py_entries), par * 4)))
                 .map(lambda e: load_entry(bu, e, bb, bps, ou)).collect() for pf in pfs]
    timings["python_files_s"] = round(time.monotonic() - t, 3)

    # 3. the JVM scan: log_events of the big logs, written by the executors
    t = time.monotonic()
    pq = U.join(out_uri, "parquet")
    from pyspark.sql import functions as F

    events_df = fastscan.events_frame(spark, [fastscan.ScanFile(e["path"], U.join(bundle_uri, e["path"]), e.get("broker_id"),
                                                                s.layout, s.first_line_of_split) for e, s in scan], split)
    timings["scan_build_s"] = round(time.monotonic() - t, 3)
    if events_df is not None:
        from pyspark import StorageLevel

        events_df = events_df.persist(StorageLevel.MEMORY_AND_DISK)  # signature rows only: small; aggregated below
        events_df.write.mode("overwrite").parquet(U.join(U.join(pq, "log_events"), "source=spark"))
    tables.write_part(out_uri, "files", [{"path": e["path"], "kind": e["kind"], "broker_id": e.get("broker_id"),
                                          "bytes": s.size, "read_by": "spark", "layout": s.layout,
                                          "parsed_share": s.sampled_share} for e, s in scan], "spark-files")
    tables.ensure_tables(out_uri)
    timings["scan_s"] = round(time.monotonic() - t, 3)

    # 4. driver: aggregates for the JVM-scanned logs
    t = time.monotonic()
    if events_df is not None:
        files.extend(_spark_log_summaries(events_df, scan))
        events_df.unpersist()
    timings["aggregates_s"] = round(time.monotonic() - t, 3)
    conn_rows = []
    cdf = spark.read.schema(tables.spark_schema("connections")).parquet(U.join(pq, "connections"))
    ports, hosts, snap_versions, bad = _snapshot_info(bundle_uri, entries, manifest)
    if ports:
        from kafka_runbooks.analyze.diagnose import broker_addresses_of

        eps = [(b, h, p) for b, ps in ports.items() for p in sorted(ps)
               for h in (sorted(broker_addresses_of(b, hosts)) or [None])]
        endpoints = spark.createDataFrame(eps, "ep_broker INT, ep_host STRING, ep_port INT")
        cdf = cdf.join(endpoints, (cdf.broker_id == endpoints.ep_broker) & (cdf.local_port == endpoints.ep_port)
                       & (endpoints.ep_host.isNull() | cdf.local_host.isin("*", "0.0.0.0", "::") | (cdf.local_host == endpoints.ep_host)),
                       "left_semi")
    conn_rows = [r.asDict() for r in cdf.groupBy("broker_id", "path", "local_port", "state")
                 .agg(F.count(F.lit(1)).alias("count"), F.sum("recv_q").alias("recv_q"))
                 .orderBy(F.col("broker_id"), F.col("path"), F.col("count").desc()).limit(500).collect()]

    # 5. findings and report
    files.extend(early)
    files.extend(bad)
    for p in manifest_problems:
        files.append(ParsedFile(path="manifest.json", kind="manifest", problems=[p]))
    window = incident_window(manifest, window_minutes)
    findings = diagnose(files, kafka_version=kafka_version, broker_ports=ports, broker_hosts=hosts,
                        broker_versions=snap_versions, window=window, utc_offsets=_utc_offsets(manifest),
                        zk_zones={str(k): str(v.get("zone")) for k, v in (manifest.get("zookeeper") or {}).items()
                                  if isinstance(v, dict) and v.get("zone")})
    timings["total_s"] = round(time.monotonic() - t_start, 3)
    ftable = file_table(files)
    report_tables = {"bundle": shown, "generated_at": generated, "brokers": broker_table(files, ports, hosts),
              "connections": conn_rows, "timeline": timeline(files), "files": ftable, "window": window.describe(),
              "timings": timings}
    doc = findings_document(shown, generated, findings, bundle_uri=bundle_uri, window=window.describe(), files=ftable, timings=timings,
                            incident_id=manifest.get("incident_id"), cluster=manifest.get("cluster"))
    U.write_text(U.join(out_uri, "findings.json"), json.dumps(doc, indent=2, default=str))
    title = f"Kafka incident {manifest.get('incident_id', '')} ({manifest.get('cluster', '')})"
    U.write_text(U.join(out_uri, "report.html"), render_report(findings, report_tables, title=title))
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True, help="bundle directory: path, file://, s3a:// or hdfs:// URI")
    ap.add_argument("--out", default=None, help="output location (default: the bundle)")
    ap.add_argument("--kafka-version", default=None, help="broker Kafka version when known from configuration")
    ap.add_argument("--split-mb", type=float, default=DEFAULT_SPLIT_MB,
                    help="Spark split size for big logs in MiB: a multiple or a divisor of 4 (e.g. 32, or 0.0625 = 64 KiB)")
    ap.add_argument("--window-minutes", type=float, default=DEFAULT_WINDOW_MIN,
                    help="incident window before the trigger/capture: older fetch errors are earlier episodes")
    ap.add_argument("--budget-s", type=float, default=10.0, help="per-file parse budget, base seconds")
    ap.add_argument("--budget-per-mb-s", type=float, default=1.0, help="per-file parse budget, seconds per MB")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("kafka-runbooks-analyze").getOrCreate()
    try:
        doc = run(spark, args.bundle, args.out, args.kafka_version or None, split_mb=args.split_mb,
                  window_minutes=args.window_minutes, budget_s=args.budget_s, budget_per_mb_s=args.budget_per_mb_s)
    finally:
        spark.stop()
    print(json.dumps({"findings": len(doc["findings"]), "kinds": sorted({f["kind"] for f in doc["findings"]}),
                      "timings": doc.get("timings")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
