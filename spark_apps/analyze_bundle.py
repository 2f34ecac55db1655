"""Analyze one evidence bundle with Spark.

    spark-submit spark_apps/analyze_bundle.py --bundle URI [--out URI] [--kafka-version V]
                 [--split-mb MiB] [--window-minutes 30] [--budget-s 10] [--budget-per-mb-s 1]
                 [--log-scan auto|rg|jvm] [--rg PATH]

URI: a path or file:// URI on storage every executor can read (a shared mount), or s3a:// / hdfs://.

1. survey (executors, one task per log file): sha256, damaged ranges, encoding, layout, line counts at
   split boundaries; in the same task, where the executor has ripgrep (``--log-scan auto``, the default), the
   native scan of that log (analyze/nativescan.py: rg hands over the lines holding a signature literal with the
   two lines under each, the same per-record classifier as the JVM scan, Parquet written by the task);
2. big logs not read natively (``--log-scan jvm``, no rg on the executor, a remote URI, invalid UTF-8): Spark's
   text source, JVM column expressions only (analyze/fastscan.py), rows numbered exactly;
3. everything else (and logs the JVM scan cannot read): one Python task per file, each under a time budget;
4. Parquet written by the executors under <out>/parquet/ (log_events, threads, lock_edges, connections,
   gc_pauses, zk_stats, log_dirs, files);
5. the driver reads back aggregates and a bounded sample, diagnoses, writes findings.json and report.html.

findings.json ``timings``: every ``*_s`` key is a duration in seconds measured on the driver's monotonic clock
inside this run (so none exceeds ``total_s``); ``log_tasks`` holds seconds summed over the log tasks, each
measured on its executor's monotonic clock (``*_cpu_s``: CPU seconds of the task's thread, ``rg_cpu_s``: of
ripgrep), at most the job's time per core; ``split_mb``, ``log_task_count`` and ``log_scan`` say what they
depend on.

Depends only on pyspark and the ``kafka_runbooks`` package (shipped with --py-files for remote masters).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import pickle
import shutil
import sys
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

from kafka_runbooks.analyze import tables
from kafka_runbooks.analyze import uri as U
from kafka_runbooks.analyze.bundle import (findings_document, integrity_problems, load_entry, manifest_entries,
                                           read_manifest)
from kafka_runbooks.analyze.diagnosis import ParsedFile, Window, broker_table, diagnose, file_table, timeline
from kafka_runbooks.analyze.diagnosis.report_tables import chart_data
from kafka_runbooks.analyze.logsummary import SAMPLE
from kafka_runbooks.analyze.nativescan import (combine_pieces, literal_density, plan_log_tasks, plan_riders, rides, run_log_task,
                                               scanned_file)
from kafka_runbooks.analyze.parsers import LOG_KINDS
from kafka_runbooks.analyze.report_html import render_report
from kafka_runbooks.analyze.survey import Survey
from kafka_runbooks.model import ClusterSnapshot, Evidence, Finding, Severity

DEFAULT_SPLIT_MB = None  # chosen from the bundle's log bytes (auto_split_bytes)
MIN_SPLIT = 1 << 20
MAX_SPLIT = 32 << 20
DEFAULT_WINDOW_MIN = 30


def auto_split_bytes(log_bytes: int, cores: int) -> int:
    """The split size for the logs: about four splits per core (no core idles while another finishes the last
    split), at most 32 MiB, at least 1 MiB; a power of two MiB (a multiple or a divisor of the survey's 4 MiB
    chunk)."""
    target = max(log_bytes, 1) / (max(cores, 1) * 4)
    split = MIN_SPLIT
    while split * 2 <= min(target, MAX_SPLIT):
        split *= 2
    return split


def _bytes(e: dict) -> int:
    b = e.get("bytes")
    return b if isinstance(b, int) and b > 0 else 0


def _connection_rows(files: list[ParsedFile], ports: dict, hosts: dict) -> list[dict]:
    """Socket rows per broker, listener port and state (listener ports only when the snapshot knows them), from the
    socket tables the Python tasks parsed (their results are on the driver already; no Spark SQL job, which would
    cost a fresh JVM seconds of planning and code generation for a few thousand rows)."""
    from kafka_runbooks.analyze.diagnosis import broker_addresses_of

    eps: dict[tuple[int, int], list[str | None]] = {}
    for b, ps in ports.items():
        for p in sorted(ps):
            eps[(b, p)] = sorted(broker_addresses_of(b, hosts)) or [None]
    agg: dict[tuple, list] = {}
    for pf in files:
        if pf.kind not in ("sockets_ss", "sockets_netstat") or pf.result is None:
            continue
        for r in pf.result.rows:
            if ports:
                hs = eps.get((pf.broker_id, r.local_port)) if pf.broker_id is not None else None
                if not hs or not any(h is None or r.local_host in ("*", "0.0.0.0", "::") or r.local_host == h for h in hs):
                    continue
            a = agg.setdefault((pf.broker_id, pf.path, r.local_port, r.state), [0, None])
            a[0] += 1
            if r.recv_q is not None:
                a[1] = (a[1] or 0) + r.recv_q
    rows = [{"broker_id": k[0], "path": k[1], "local_port": k[2], "state": k[3], "count": c, "recv_q": q}
            for k, (c, q) in agg.items()]
    rows.sort(key=lambda r: (r["broker_id"] is not None, r["broker_id"] or 0, r["path"], -r["count"]))
    return rows[:500]


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


def _spark_log_summaries(ev, scan: list[tuple[dict, Survey]], pool: ThreadPoolExecutor | None = None) -> list[ParsedFile]:
    """LogSummary per JVM-scanned file from Parquet aggregates: exact counts, first/last SAMPLE events per
    signature, exact per-minute fetch-failure counts. Only aggregates and the bounded sample reach the driver."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    w_asc = W.partitionBy("path", "signature").orderBy(F.col("line").asc())
    w_all = W.partitionBy("path", "signature")
    sample_q = (ev.withColumn("a", F.row_number().over(w_asc)).withColumn("n", F.count(F.lit(1)).over(w_all))
                .where((F.col("a") <= SAMPLE) | (F.col("a") > F.col("n") - SAMPLE)))
    sample_job = pool.submit(sample_q.collect) if pool is not None else None
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
    sample_rows = sample_job.result() if sample_job is not None else sample_q.collect()
    counts = {(r["path"], r["signature"]): r["n"] for r in sample_rows if r["signature"] is not None}
    by_path: dict[str, list] = {}
    for r in sample_rows:
        d = r.asDict()
        d.pop("a", None), d.pop("n", None)
        by_path.setdefault(r["path"], []).append(d)
    minutes: dict[str, list] = {}
    for r in minute_rows:
        minutes.setdefault(r["path"], []).append({k: r[k] for k in ("signature", "leader", "fetcher", "cause", "minute",
                                                                    "count", "first_line", "last_line")})
    return [scanned_file(e, s, {sig: n for (p, sig), n in counts.items() if p == e["path"]}, by_path.get(e["path"], []),
                         minutes.get(e["path"], [])) for e, s in scan]


def _densities(bundle_uri: str, log_entries: list[dict]) -> list[float]:
    """Each log's signature literals per byte, from a few windows the driver reads (the task plan's estimate of its
    classification work; 0 for a log it cannot read: the survey reports it)."""
    return [literal_density(U.join(bundle_uri, e["path"]), _bytes(e)) for e in log_entries]


LOG_SCANS = ("auto", "rg", "jvm")


def _unreadable_manifest(shown: str, generated: str, out_uri: str, exc: Exception) -> dict:
    """The findings of a bundle whose manifest cannot be read: one unparsable finding, written with its report."""
    f = Finding("unparsable", Severity.WARNING, f"manifest.json could not be read: {exc.__class__.__name__}: {exc}",
                evidence=(Evidence("manifest.json", excerpt=str(exc)),),
                details={"path": "manifest.json", "kind": "manifest", "reasons": [str(exc)]})
    doc = findings_document(shown, generated, [f])
    U.write_text(U.join(out_uri, "findings.json"), json.dumps(doc, indent=2))
    U.write_text(U.join(out_uri, "report.html"), render_report([f], {"bundle": shown, "generated_at": generated}))
    return doc


def _python_files_job(sc, par: int, bu: str, bb: float, bps: float, ou: str):
    """The job that parses files in Python tasks, one file per task (run beside the log job)."""
    def python_files(es: list[dict]) -> tuple[list[list[ParsedFile]], tuple[float, float] | None]:
        """-> the ParsedFiles of each entry, in order, and when the job ran (start, end on the monotonic clock)."""
        if not es:
            return [], None
        t0 = time.monotonic()
        per_entry = [pfs for pfs, _ in sc.parallelize(es, max(1, min(len(es), par * 4)))
                     .map(lambda e: load_entry(bu, e, bb, bps, ou)).collect()]
        return per_entry, (t0, time.monotonic())

    return python_files


def _log_job(sc, par: int, log_entries: list[dict], py_first: list[dict], riders: list[int], args: tuple,
             densities, timings: dict) -> tuple[list, dict[int, list[ParsedFile]], dict[str, list[str]]]:
    """Step 1: survey the logs and read them natively where the executor can: one task per core, of equal work (a
    log cut into pieces where a task's share ends), so no core idles while another reads the last log; the small
    other files (``riders``, indexes into ``py_first``) are parsed in the same tasks. ``args``: (bundle URI, split,
    out URI, rg or None, rg required, budget_s, budget_per_mb_s). -> (survey, ParsedFiles of the riders by their
    ``py_first`` index, notes by path)."""
    bu, split, ou, rg_exe, need_rg, bb, bps = args
    t = time.monotonic()
    tasks = plan_log_tasks([_bytes(e) for e in log_entries], par, rg_exe is not None, densities)
    timings["plan_s"] = round(time.monotonic() - t, 3)
    work = [[("log", w, log_entries[w[0]]) for w in task] for task in tasks]
    for k, ks in enumerate(plan_riders(len(work), [_bytes(py_first[riders[j]]) for j in range(len(riders))])):
        work[k].extend(("file", riders[j], py_first[riders[j]]) for j in ks)
    # a task's results travel pickled and compressed (their sample rows are text: ~20x smaller), under Spark's
    # direct result size (spark.task.maxDirectResultSize, 1 MiB): a bigger one goes through the block manager
    blobs = (sc.parallelize(work, len(work))
             .map(lambda task: zlib.compress(pickle.dumps(run_log_task(task, bu, split, ou, rg_exe, need_rg, bb, bps),
                                                          pickle.HIGHEST_PROTOCOL), 1))
             .collect())
    done = [r for blob in blobs for r in pickle.loads(zlib.decompress(blob))]
    timings["log_job_s"] = round(time.monotonic() - t, 3)
    parts: dict[int, list] = {}
    costs: dict[str, float] = {}
    parsed: list[tuple[int, list[ParsedFile]]] = []
    for kind, w, r in done:
        if kind == "file":
            parsed.append((w, r["files"]))
        else:
            parts.setdefault(w[0], []).append(r)
        for c, v in r["cost"].items():
            costs[c] = costs.get(c, 0.0) + v
    surveys = []
    scan_notes: dict[str, list[str]] = {}
    for i, e in enumerate(log_entries):  # back in manifest order
        sd, res = combine_pieces(e, parts[i], ou)
        surveys.append((e, sd, res))
        given_up = [p["problem"] for p in parts[i] if p.get("problem")]
        if given_up:
            scan_notes[e["path"]] = [f"native scan given up, read again: {x}" for x in given_up]
    timings["log_tasks"] = {k: round(v, 3) for k, v in sorted(costs.items())}  # summed over the logs' tasks
    timings["log_task_count"] = len(tasks)
    return surveys, dict(parsed), scan_notes


def _sort_surveyed(surveys: list) -> tuple[list, list, list[dict], list[ParsedFile]]:
    """Each surveyed log: read by the Spark job (natively, or ``scan`` by the JVM scan), handed to the Python path
    (not Spark-readable; and a broker stdout's thread dumps), or ``early``: unreadable or not the captured file.
    -> (scan, read, py_then, early)."""
    scan: list[tuple[dict, Survey]] = []
    read: list[tuple[dict, Survey, ParsedFile | None]] = []  # every log read by the Spark job, in manifest order
    py_then: list[dict] = []
    early: list[ParsedFile] = []
    for e, sd, res in surveys:
        s = Survey.from_dict(sd)
        native = scanned_file(e, s, *res) if res is not None else None
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
            read.append((e, s, native))
            if native is None:
                scan.append((e, s))
            if e["kind"] == "kafka_stdout":  # kill -3 thread dumps land in the broker's stdout: read them too
                py_then.append(dict(e, kind="jstack", embedded_in=e["kind"]))
        else:
            py_then.append(e)
    return scan, read, py_then, early


def _jvm_scan(spark, scan: list, bundle_uri: str, split: int, pq: str, timings: dict):
    """Step 3: the JVM scan of the big logs not read natively: their log_events, written by the executors (the
    frame, persisted, for the aggregates; None without such logs)."""
    from kafka_runbooks.analyze import fastscan  # pyspark's: loaded when a job runs, not when the module is read

    t = time.monotonic()
    events_df = None
    if scan:
        events_df = fastscan.events_frame(spark, [fastscan.ScanFile(e["path"], U.join(bundle_uri, e["path"]), e.get("broker_id"),
                                                                    s.layout, s.first_line_of_split) for e, s in scan], split)
    timings["scan_build_s"] = round(time.monotonic() - t, 3)
    if events_df is not None:
        from pyspark import StorageLevel  # pyspark is the executor's: imported where the scan runs

        events_df = events_df.persist(StorageLevel.MEMORY_AND_DISK)  # signature rows only: small; aggregated below
        events_df.write.mode("overwrite").parquet(U.join(U.join(pq, "log_events"), "source=spark"))
    timings["scan_s"] = round(time.monotonic() - t, 3)
    return events_df


def _logs_and_split(entries: list[dict], split_mb: float | None, par: int) -> tuple[list[dict], int]:
    """The logs the Spark job reads, and the bytes a task's share of them ends at."""
    log_entries = [e for e in entries if e["kind"] in LOG_KINDS and e.get("stream") != "stderr" and U.safe_relative(e["path"])]
    if split_mb is None:
        split = auto_split_bytes(sum(int(e.get("bytes") or 0) for e in log_entries if isinstance(e.get("bytes"), int)), par)
    else:
        split = int(split_mb * (1 << 20))
    return log_entries, split


def _aggregates(events_df, scan: list, read: list, pool: ThreadPoolExecutor, files: list[ParsedFile], ports: dict,
                hosts: dict, timings: dict) -> list[dict]:
    """Step 4, on the driver: the summaries of the JVM-scanned logs (added to ``files`` in the order of ``read``),
    and the connection table (side by side)."""
    t = time.monotonic()
    jvm_read = iter(())
    if events_df is not None:
        jvm_read = iter(_spark_log_summaries(events_df, scan, pool))  # in scan order, i.e. the order of `read`
        events_df.unpersist()
    files.extend(native if native is not None else next(jvm_read) for e, _, native in read)
    conn_rows = _connection_rows(files, ports, hosts)
    pool.shutdown()
    timings["aggregates_s"] = round(time.monotonic() - t, 3)
    return conn_rows


def _python_files(first: tuple, then: tuple, riding: dict[int, list[ParsedFile]], own: list[int], n_first: int,
                  timings: dict) -> list[ParsedFile]:
    """The files parsed by the Python path, in manifest order: the first job's (and the riders', by their index
    among the first), then the second job's; and how long the Python jobs ran."""
    (own_files, first_span), (then_files, then_span) = first, then
    by_entry = {**riding, **dict(zip(own, own_files))}
    files = [pf for k in range(n_first) for pf in by_entry[k]] + [pf for pfs in then_files for pf in pfs]
    spans = [x for x in (first_span, then_span) if x is not None]
    # from the first Python job's start to the last one's end (they overlap the survey and the scan above)
    timings["python_files_s"] = round(max(b for _, b in spans) - min(a for a, _ in spans), 3) if spans else 0.0
    return files


def _annotate(files: list[ParsedFile], scan_notes: dict[str, list[str]], entries: list[dict], manifest_problems) -> None:
    """The scan's notes and the manifest's optional marks on each file; the manifest's own problems as a file."""
    for pf in files:
        pf.notes.extend(scan_notes.get(pf.path, ()))
    optional = {e["path"] for e in entries if e.get("optional")}
    for pf in files:
        pf.optional = pf.path in optional
    for p in manifest_problems:
        files.append(ParsedFile(path="manifest.json", kind="manifest", problems=[p]))


def _write_findings(files: list[ParsedFile], manifest: dict, facts: tuple, conn_rows: list[dict], shown: str,
                    generated: str, bundle_uri: str, out_uri: str, window_minutes: float, kafka_version: str | None,
                    timings: dict, t_start: float) -> dict:
    """Step 5: the findings of every parsed file, written as findings.json and report.html. ``facts``: (broker
    ports, broker hosts, versions from the snapshot)."""
    ports, hosts, snap_versions = facts
    window = incident_window(manifest, window_minutes)
    findings = diagnose(files, kafka_version=kafka_version, broker_ports=ports, broker_hosts=hosts,
                        broker_versions=snap_versions, window=window, utc_offsets=_utc_offsets(manifest),
                        zk_zones={str(k): str(v.get("zone")) for k, v in (manifest.get("zookeeper") or {}).items()
                                  if isinstance(v, dict) and v.get("zone")})
    timings["total_s"] = round(time.monotonic() - t_start, 3)
    ftable = file_table(files)
    report_tables = {"bundle": shown, "generated_at": generated, "brokers": broker_table(files, ports, hosts),
                     "connections": conn_rows, "timeline": timeline(files), "files": ftable, "window": window.describe(),
                     "timings": timings, "charts": chart_data(files)}
    doc = findings_document(shown, generated, findings, bundle_uri=bundle_uri, window=window.describe(), files=ftable, timings=timings,
                            incident_id=manifest.get("incident_id"), cluster=manifest.get("cluster"))
    U.write_text(U.join(out_uri, "findings.json"), json.dumps(doc, indent=2, default=str))
    title = f"Kafka incident {manifest.get('incident_id', '')} ({manifest.get('cluster', '')})"
    U.write_text(U.join(out_uri, "report.html"), render_report(findings, report_tables, title=title))
    return doc


def run(spark, bundle: str, out: str | None = None, kafka_version: str | None = None, *,
        split_mb: float | None = DEFAULT_SPLIT_MB, window_minutes: float = DEFAULT_WINDOW_MIN,
        budget_s: float = 10.0, budget_per_mb_s: float = 1.0, log_scan: str = "auto", rg: str = "rg") -> dict:
    """``log_scan``: ``auto`` reads big logs with ripgrep inside the Spark tasks where the executor has ``rg``
    (the JVM scan otherwise), ``rg`` requires it (a task fails without it), ``jvm`` is the pure Spark path.
    Everything it writes is the bundle owner's only (``_owner_only``)."""
    with _owner_only(spark):
        doc = _run(spark, bundle, out, kafka_version, split_mb=split_mb, window_minutes=window_minutes, budget_s=budget_s,
                   budget_per_mb_s=budget_per_mb_s, log_scan=log_scan, rg=rg)
    out_uri = U.to_uri(out) if out else U.to_uri(bundle)
    U.restrict_tree(U.join(out_uri, "parquet"))  # part files the JVM executors wrote under a umask not ours
    return doc


def _owner_only(spark):
    """What this job writes is the bundle owner's only, as the bundle is (files 0600, directories 0700): this driver's
    umask while it runs (findings.json, report.html), Hadoop's for the JVM writers (``fs.permissions.umask-mode``: the
    driver's and, through the job's configuration, the executors'); the executors' Python workers make their part files
    0600 themselves (analyze/tables.py, analyze/nativescan.py); ``restrict_tree`` at the end covers any other writer."""
    spark.conf.set("fs.permissions.umask-mode", "077")
    spark.sparkContext._jsc.hadoopConfiguration().set("fs.permissions.umask-mode", "077")
    return U.owner_only()


def _run(spark, bundle: str, out: str | None, kafka_version: str | None, *, split_mb: float | None,
         window_minutes: float, budget_s: float, budget_per_mb_s: float, log_scan: str, rg: str) -> dict:
    from kafka_runbooks.analyze import fastscan  # pyspark's: loaded when a job runs, not when the module is read

    if log_scan not in LOG_SCANS:
        raise ValueError(f"log_scan must be one of {LOG_SCANS}, not {log_scan!r}")

    t_start = time.monotonic()
    bundle_uri = U.to_uri(bundle)
    out_uri = U.to_uri(out) if out else bundle_uri
    shown = U.local_path(bundle_uri) if U.is_local(bundle_uri) else bundle_uri  # as given: a path stays a path
    generated = _now()
    timings: dict[str, float] = {}
    try:
        manifest = read_manifest(bundle_uri)
    except Exception as exc:  # noqa: BLE001
        return _unreadable_manifest(shown, generated, out_uri, exc)

    entries, manifest_problems = manifest_entries(manifest)
    sc = spark.sparkContext
    par = sc.defaultParallelism
    log_entries, split = _logs_and_split(entries, split_mb, par)
    fastscan.configure(spark, split)
    timings["split_mb"] = round(split / (1 << 20), 4)
    rg_exe = None if log_scan == "jvm" else rg
    # Independent jobs run side by side (Spark schedules concurrent jobs of one application): the Python tasks
    # of the small files overlap the survey and the JVM scan; results are put back in the order of a serial run.
    pool = ThreadPoolExecutor(max_workers=6, thread_name_prefix="analyze-job")
    tables.clear(out_uri)
    python_files = _python_files_job(sc, par, bundle_uri, budget_s, budget_per_mb_s, out_uri)

    # the other files: the small ones ride in the log tasks, the others get tasks of their own (started now)
    py_first = [e for e in entries if e not in log_entries]
    riders = [k for k, e in enumerate(py_first) if log_entries and rides(_bytes(e))]
    own = sorted(set(range(len(py_first))) - set(riders))
    py_first_job = pool.submit(python_files, [py_first[k] for k in own])
    ports, hosts, snap_versions, bad = _snapshot_info(bundle_uri, entries, manifest)
    pq = U.join(out_uri, "parquet")
    # planning the JVM scan beside the survey only pays when the JVM scan will likely run (it costs driver CPU)
    jvm_likely = log_scan == "jvm" or (log_scan == "auto" and not shutil.which(rg))
    warm = (pool.submit(fastscan.warm_up, spark, [U.join(bundle_uri, e["path"]) for e in log_entries], split)
            if log_entries and jvm_likely else None)

    # 1. the log job (the riders parsed in its tasks)
    t = time.monotonic()
    surveys, riding, scan_notes = [], {}, {}
    if log_entries:
        densities = _densities(bundle_uri, log_entries) if rg_exe and U.is_local(bundle_uri) else None
        args = (bundle_uri, split, out_uri, rg_exe, log_scan == "rg", budget_s, budget_per_mb_s)
        surveys, riding, scan_notes = _log_job(sc, par, log_entries, py_first, riders, args, densities, timings)
    timings["survey_s"] = round(time.monotonic() - t, 3)
    scan, read, py_then, early = _sort_surveyed(surveys)
    # 2. python path: each task parses one file and writes its rows as Parquet part files (beside the scan)
    py_then_job = pool.submit(python_files, py_then)

    # 3. the JVM scan
    if warm is not None:
        warm.result()
    timings["log_scan"] = {"rg": sum(1 for *_, n in read if n is not None), "jvm": len(scan)}
    events_df = _jvm_scan(spark, scan, bundle_uri, split, pq, timings)
    files = _python_files(py_first_job.result(), py_then_job.result(), riding, own, len(py_first), timings)
    tables.write_part(out_uri, "files", [{"path": e["path"], "kind": e["kind"], "broker_id": e.get("broker_id"),
                                          "bytes": s.size, "read_by": "spark", "layout": s.layout,
                                          "parsed_share": s.sampled_share} for e, s, _ in read], "spark-files")
    tables.ensure_tables(out_uri)

    # 4. driver: aggregates for the JVM-scanned logs, and the connection table (side by side)
    conn_rows = _aggregates(events_df, scan, read, pool, files, ports, hosts, timings)

    # 5. findings and report
    files.extend(early)
    files.extend(bad)
    _annotate(files, scan_notes, entries, manifest_problems)
    return _write_findings(files, manifest, (ports, hosts, snap_versions), conn_rows, shown, generated, bundle_uri,
                           out_uri, window_minutes, kafka_version, timings, t_start)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", required=True, help="bundle directory: path, file://, s3a:// or hdfs:// URI")
    ap.add_argument("--out", default=None, help="output location (default: the bundle)")
    ap.add_argument("--kafka-version", default=None, help="broker Kafka version when known from configuration")
    ap.add_argument("--split-mb", type=float, default=DEFAULT_SPLIT_MB,
                    help="Spark split size for big logs in MiB: a multiple or a divisor of 4 (e.g. 32, or 0.0625 = 64 KiB); "
                         "default: about four splits per core, 1 to 32 MiB")
    ap.add_argument("--window-minutes", type=float, default=DEFAULT_WINDOW_MIN,
                    help="incident window before the trigger/capture: older fetch errors are earlier episodes")
    ap.add_argument("--budget-s", type=float, default=10.0, help="per-file parse budget, base seconds")
    ap.add_argument("--budget-per-mb-s", type=float, default=1.0, help="per-file parse budget, seconds per MB")
    ap.add_argument("--log-scan", choices=LOG_SCANS, default="auto",
                    help="big logs: auto = ripgrep inside the Spark tasks where the executor has it, else the JVM scan; "
                         "rg = require ripgrep; jvm = the pure Spark (JVM) scan")
    ap.add_argument("--rg", default="rg", help="the ripgrep binary on the executors (a name on their PATH or a path)")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("kafka-runbooks-analyze").getOrCreate()
    try:
        doc = run(spark, args.bundle, args.out, args.kafka_version or None, split_mb=args.split_mb,
                  window_minutes=args.window_minutes, budget_s=args.budget_s, budget_per_mb_s=args.budget_per_mb_s,
                  log_scan=args.log_scan, rg=args.rg)
    finally:
        spark.stop()
    print(json.dumps({"findings": len(doc["findings"]), "kinds": sorted({f["kind"] for f in doc["findings"]}),
                      "timings": doc.get("timings")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
