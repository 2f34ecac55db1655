"""Analyze one evidence bundle with Spark.

    spark-submit spark_apps/analyze_bundle.py --bundle DIR [--out DIR] [--kafka-version V]

Reads manifest.json, verifies sha256 and parses every file on the executors (one task per manifest
entry), writes the threads / lock_edges / connections / log_events tables as Parquet under
<out>/parquet/, aggregates connection states per broker/port and the log-event timeline with Spark,
then diagnoses on the driver and writes <out>/findings.json and <out>/report.html.

Depends only on pyspark and the `kafka_runbooks` package (ship it with --py-files for remote masters).
The master comes from spark-submit. The bundle directory must be readable from the executors.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys

from kafka_runbooks.analyze.bundle import TABLES, findings_document, load_entry, manifest_entries
from kafka_runbooks.analyze.diagnose import ParsedFile, broker_table, diagnose
from kafka_runbooks.analyze.report_html import render_report
from kafka_runbooks.model import ClusterSnapshot, Evidence, Finding, Severity


def _schemas():
    from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

    def s(*cols):
        return StructType([StructField(n, t, True) for n, t in cols])

    S, I, L, B = StringType(), IntegerType(), LongType(), BooleanType()
    return {
        "threads": s(("path", S), ("broker_id", I), ("name", S), ("line", I), ("source", S), ("state", S),
                     ("state_detail", S), ("tid", S), ("nid", S), ("top_frame", S), ("frames", I),
                     ("awaited_address", S), ("awaited_class", S), ("awaited_kind", S), ("locks_held", I)),
        "lock_edges": s(("path", S), ("broker_id", I), ("waiter", S), ("holder", S), ("address", S), ("class", S),
                        ("kind", S), ("waiter_line", I), ("holder_line", I), ("source", S), ("in_cycle", B)),
        "connections": s(("path", S), ("broker_id", I), ("line", I), ("proto", S), ("state", S), ("recv_q", L),
                         ("send_q", L), ("local_host", S), ("local_port", I), ("peer_host", S), ("peer_port", I),
                         ("pid", I), ("program", S)),
        "log_events": s(("path", S), ("broker_id", I), ("line", I), ("end_line", I), ("timestamp", S), ("level", S),
                        ("logger", S), ("message", S), ("exception", S), ("signature", S), ("attrs_json", S)),
    }


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def _write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _snapshot_info(bundle: str, entries: list[dict]) -> tuple[dict[int, int], dict[int, str], dict[int, str], list[ParsedFile]]:
    """Broker ports, hosts and versions from the bundle's cluster snapshot."""
    ports: dict[int, int] = {}
    hosts: dict[int, str] = {}
    versions: dict[int, str] = {}
    bad: list[ParsedFile] = []
    for e in entries:
        if e["kind"] != "cluster_snapshot":
            continue
        try:
            with open(os.path.join(bundle, e["path"]), encoding="utf-8") as fh:
                snap = ClusterSnapshot.from_dict(json.load(fh))
            for b in snap.brokers:
                ports[b.id] = b.port
                if b.host:
                    hosts[b.id] = b.host
                if b.version:
                    versions[b.id] = b.version
        except Exception as exc:  # noqa: BLE001 - evidence is untrusted
            bad.append(ParsedFile(path=e["path"], kind=e["kind"], problems=[f"cannot load snapshot: {exc.__class__.__name__}: {exc}"]))
    return ports, hosts, versions, bad


def run(spark, bundle: str, out: str, kafka_version: str | None = None) -> dict:
    bundle = os.path.abspath(bundle)
    os.makedirs(out, exist_ok=True)
    generated = _now()
    manifest_path = os.path.join(bundle, "manifest.json")
    try:
        with open(manifest_path, encoding="utf-8") as fh:
            manifest = json.load(fh)
        if not isinstance(manifest, dict):
            raise ValueError("manifest is not a JSON object")
    except Exception as exc:  # noqa: BLE001
        f = Finding("unparsable", Severity.WARNING, f"manifest.json could not be read: {exc.__class__.__name__}: {exc}",
                    evidence=(Evidence("manifest.json", excerpt=str(exc)),),
                    details={"path": "manifest.json", "kind": "manifest", "reasons": [str(exc)]})
        doc = findings_document(bundle, generated, [f])
        _write_atomic(os.path.join(out, "findings.json"), json.dumps(doc, indent=2))
        _write_atomic(os.path.join(out, "report.html"), render_report([f], {"bundle": bundle, "generated_at": generated}))
        return doc

    entries, manifest_problems = manifest_entries(manifest)
    sc = spark.sparkContext
    n = max(1, min(len(entries), sc.defaultParallelism * 4))
    bdir = bundle
    parsed = sc.parallelize(entries, n).map(lambda e: load_entry(bdir, e)).cache()
    files: list[ParsedFile] = parsed.map(lambda pr: pr[0]).collect()

    schemas = _schemas()
    dfs = {}
    pq = os.path.join(out, "parquet")
    for t in TABLES:
        names = [f.name for f in schemas[t].fields]
        rdd = parsed.flatMap(lambda pr, t=t: pr[1][t]).map(lambda r, names=names: tuple(r.get(c) for c in names))
        df = spark.createDataFrame(rdd, schemas[t])
        df.write.mode("overwrite").parquet(os.path.join(pq, t))
        dfs[t] = spark.read.parquet(os.path.join(pq, t))

    from pyspark.sql import functions as F

    ports, hosts, snap_versions, bad = _snapshot_info(bundle, entries)
    conns = dfs["connections"]
    if ports:
        # each broker's own listener only: hosts may share a socket table, or have several addresses
        endpoints = spark.createDataFrame(
            [(b, hosts.get(b), p) for b, p in ports.items()], "ep_broker INT, ep_host STRING, ep_port INT")
        conns = conns.join(
            endpoints,
            (conns.broker_id == endpoints.ep_broker) & (conns.local_port == endpoints.ep_port)
            & (endpoints.ep_host.isNull() | conns.local_host.isin("*", "0.0.0.0", "::")
               | (conns.local_host == endpoints.ep_host)),
        )
    conn_rows = (conns.groupBy("broker_id", "local_port", "state")
                 .agg(F.count("*").alias("count"), F.sum("recv_q").alias("recv_q"))
                 .orderBy(F.col("broker_id"), F.col("count").desc()).limit(300).collect())
    connections = [r.asDict() for r in conn_rows]
    tl_rows = (dfs["log_events"].where(F.col("signature").isNotNull() | F.col("level").isin("ERROR", "FATAL"))
               .select("timestamp", "broker_id", "level", "signature", "message", F.col("path").alias("source"), "line")
               .orderBy("timestamp", "broker_id", "line").limit(500).collect())
    timeline = [r.asDict() for r in tl_rows]
    parsed.unpersist()

    files.extend(bad)
    for p in manifest_problems:
        files.append(ParsedFile(path="manifest.json", kind="manifest", problems=[p]))
    findings = diagnose(files, kafka_version=kafka_version, broker_ports=ports, broker_hosts=hosts,
                        broker_versions=snap_versions)
    tables = {"bundle": bundle, "generated_at": generated, "brokers": broker_table(files, ports, hosts),
              "connections": connections, "timeline": timeline,
              "row_counts": {t: dfs[t].count() for t in TABLES}}
    doc = findings_document(bundle, generated, findings)
    _write_atomic(os.path.join(out, "findings.json"), json.dumps(doc, indent=2, default=str))
    title = f"Kafka incident {manifest.get('incident_id', '')} ({manifest.get('cluster', '')})"
    _write_atomic(os.path.join(out, "report.html"), render_report(findings, tables, title=title))
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--out", default=None, help="output directory (default: the bundle directory)")
    ap.add_argument("--kafka-version", default=None, help="broker Kafka version when known from configuration")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("kafka-runbooks-analyze").getOrCreate()
    try:
        doc = run(spark, args.bundle, args.out or args.bundle, args.kafka_version)
    finally:
        spark.stop()
    print(json.dumps({"findings": len(doc["findings"]),
                      "kinds": sorted({f["kind"] for f in doc["findings"]})}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
