"""Fleet analytics: every analysed bundle under a base location -> one Parquet dataset partitioned by cluster
and date, and the answers to on-call's standing questions (runbooks/fleet-analytics.md).

    spark-submit spark_apps/fleet_analytics.py --base URI --out URI [--days 30] [--analyze-missing]
                 [--today YYYY-MM-DD]

Input: ``<base>/**/manifest.json`` bundles (as captured: ``<bundle_base>/<cluster>/<incident>/<capture>/``) with
the analysis' outputs beside them (findings.json, parquet/). ``--analyze-missing`` runs the bundle analysis
(spark_apps/analyze_bundle.py) on bundles that have none yet.

Output under ``<out>``:
- ``findings/cluster=<c>/date=<d>/``   one row per finding (kind, severity, broker, summary, details_json, incident)
- ``log_events/``, ``connections/``, ``lock_edges/``, ``zk_stats/``, ``gc_pauses/``  the bundles' tables, with
  cluster, date and incident_id added, partitioned by cluster and date
- ``zk_drops/``                          one row per ZooKeeper follower drop (server, time, hour, rejoin ms)
- ``answers.json``                       the on-call queries' results (also printed)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time

from kafka_runbooks.analyze import tables as T
from kafka_runbooks.analyze import uri as U
from kafka_runbooks.findings import canonical  # reports written before one name per kind hold old spellings

FLEET_TABLES = ("log_events", "connections", "lock_edges", "zk_stats", "gc_pauses")


def _bundles(base: str) -> list[dict]:
    out = []
    for m in U.list_manifests(base):
        d = m[: -len("/manifest.json")]
        try:
            man = json.loads(U.read_text(m))
        except Exception as exc:  # noqa: BLE001 - untrusted
            out.append({"dir": d, "error": f"manifest unreadable: {exc}"})
            continue
        created = str(man.get("created_at") or "")[:10] or "unknown"
        out.append({"dir": d, "cluster": str(man.get("cluster") or "unknown"), "incident_id": str(man.get("incident_id") or ""),
                    "capture_id": man.get("capture_id"), "date": created, "analysed": U.exists(U.join(d, "findings.json"))})
    return out


def _finding_rows(b: dict) -> list[tuple]:
    doc = json.loads(U.read_text(U.join(b["dir"], "findings.json")))
    rows = []
    for f in doc.get("findings") or []:
        bids = f.get("broker_ids") or [None]
        for bid in bids:
            rows.append((b["cluster"], b["date"], b["incident_id"], b["dir"], canonical(f.get("kind") or ""), f.get("severity"),
                         bid, f.get("summary"), json.dumps(f.get("details") or {}, sort_keys=True, default=str)[:20000],
                         doc.get("generated_at")))
    return rows


def _drop_rows(b: dict) -> list[tuple]:
    doc = json.loads(U.read_text(U.join(b["dir"], "findings.json")))
    rows = []
    for f in doc.get("findings") or []:
        if canonical(f.get("kind") or "") != "zookeeper_follower_dropped":
            continue
        for d in (f.get("details") or {}).get("drops") or []:
            at = str(d.get("at") or "")
            if "leader_side" in d:
                continue
            rows.append((b["cluster"], at[:10] or b["date"], b["incident_id"], str(d.get("server")), at,
                         int(at[11:13]) if len(at) >= 13 and at[11:13].isdigit() else None,
                         d.get("rejoined_after_ms"), d.get("zone"), d.get("file"), d.get("line")))
    return rows


QUERIES = {
    "close_wait_and_deadlocks_by_broker": """
        SELECT cluster, broker_id, kind, count(DISTINCT incident_id) AS incidents, count(*) AS findings,
               min(date) AS first_date, max(date) AS last_date
        FROM fleet_findings
        WHERE kind IN ('broker_socket_pileup', 'jvm_deadlock') AND date >= '{since}'
        GROUP BY cluster, broker_id, kind
        ORDER BY incidents DESC, cluster, broker_id""",
    "zk_follower_drops_by_server_and_hour": """
        SELECT cluster, server, hour, count(*) AS drops, min(at) AS first, max(at) AS last,
               percentile_approx(rejoined_after_ms, 0.5) AS median_rejoin_ms, first(zone, true) AS zone
        FROM fleet_zk_drops
        WHERE date >= '{since}'
        GROUP BY cluster, server, hour
        ORDER BY cluster, server, hour""",
}


def run(spark, base: str, out: str, days: int = 30, analyze_missing: bool = False, today: str | None = None) -> dict:
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    base_uri, out_uri = U.to_uri(base), U.to_uri(out)
    bundles = _bundles(base_uri)
    skipped = [b for b in bundles if b.get("error")]
    good = [b for b in bundles if not b.get("error")]
    if analyze_missing:
        import os

        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import analyze_bundle  # the per-bundle job, run in this session

        for b in good:
            if not b["analysed"]:
                analyze_bundle.run(spark, b["dir"])
                b["analysed"] = True
    analysed = [b for b in good if b["analysed"]]
    skipped += [dict(b, error="not analysed (no findings.json)") for b in good if not b["analysed"]]

    fschema = ("cluster STRING, date STRING, incident_id STRING, bundle STRING, kind STRING, severity STRING, "
               "broker_id INT, summary STRING, details_json STRING, generated_at STRING")
    frows = [r for b in analysed for r in _finding_rows(b)]
    findings = spark.createDataFrame(frows, fschema)
    findings.write.mode("overwrite").partitionBy("cluster", "date").parquet(U.join(out_uri, "findings"))
    drows = [r for b in analysed for r in _drop_rows(b)]
    dschema = ("cluster STRING, date STRING, incident_id STRING, server STRING, at STRING, hour INT, "
               "rejoined_after_ms LONG, zone STRING, source STRING, line LONG")
    drops = spark.createDataFrame(drows, dschema)
    drops.write.mode("overwrite").partitionBy("cluster", "date").parquet(U.join(out_uri, "zk_drops"))
    for table in FLEET_TABLES:
        parts = []
        for b in analysed:
            d = U.join(U.join(b["dir"], "parquet"), table)
            if not U.exists(d):
                continue
            df = spark.read.schema(T.spark_schema(table)).parquet(d) if table != "log_events" else spark.read.parquet(d)
            parts.append(df.withColumn("cluster", F.lit(b["cluster"])).withColumn("date", F.lit(b["date"]))
                         .withColumn("incident_id", F.lit(b["incident_id"])).withColumn("bundle", F.lit(b["dir"])))
        if not parts:
            continue
        df = parts[0]
        for p in parts[1:]:
            df = df.unionByName(p, allowMissingColumns=True)
        df.write.mode("overwrite").partitionBy("cluster", "date").parquet(U.join(out_uri, table))

    # answer the questions from the dataset just written (as an analyst would)
    spark.read.parquet(U.join(out_uri, "findings")).createOrReplaceTempView("fleet_findings")
    spark.read.schema(dschema).parquet(U.join(out_uri, "zk_drops")).createOrReplaceTempView("fleet_zk_drops")
    day = dt.date.fromisoformat(today) if today else dt.datetime.now(dt.timezone.utc).date()
    since = (day - dt.timedelta(days=days)).isoformat()
    answers = {name: [r.asDict() for r in spark.sql(q.format(since=since)).collect()] for name, q in QUERIES.items()}
    doc = {"schema": "kafka-runbooks/fleet/v1", "base": base_uri, "out": out_uri, "since": since, "days": days,
           "bundles": len(bundles), "analysed": len(analysed), "skipped": [{"dir": b["dir"], "why": b["error"]} for b in skipped],
           "answers": answers, "queries": {k: " ".join(q.split()) for k, q in QUERIES.items()},
           "elapsed_s": round(time.monotonic() - t0, 3)}
    U.write_text(U.join(out_uri, "answers.json"), json.dumps(doc, indent=2, default=str))
    return doc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="bundle base location (path, file://, s3a://, hdfs://)")
    ap.add_argument("--out", required=True, help="fleet dataset location")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--analyze-missing", action="store_true")
    ap.add_argument("--today", default=None, help="YYYY-MM-DD (default: today, UTC)")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("kafka-runbooks-fleet-analytics").getOrCreate()
    try:
        doc = run(spark, args.base, args.out, args.days, args.analyze_missing, args.today)
    finally:
        spark.stop()
    print(json.dumps({"bundles": doc["bundles"], "analysed": doc["analysed"], "answers": doc["answers"]}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
