"""Issue 31: the Spark job (spark_apps/analyze_bundle.py) on a capture bundle of recorded evidence draws the report's
charts: the request queue from the capture's real JmxTool reads of the lab's Kafka 2.3.0 brokers (broker 3 hung, its
read timed out: tests/analyze/fixtures/real23-jmx), the under-replicated partitions from a real 0.10.2.1 broker's ISR
changes (real0102) and the GC pauses of a real JDK 17 G1 log (real23). The job runs in the tests' shared
SparkSession (run_in_session)."""

from __future__ import annotations

import json
import re

import pytest

from analyze_helpers import fixture_bytes, make_bundle, run_in_session

pytestmark = pytest.mark.second_lane  # ./run test runs it in its second lane, after the deployed suite (lane balance)


def _bundle(root):
    files = [("hosts/3/server.log", "server_log", 3, fixture_bytes("real0102/broker3.server.log.hang")),
             ("hosts/1/gc.log", "gc_log", 1, fixture_bytes("real23/broker1.kafkaServer-gc.log"))]
    for b in (1, 2, 3):
        files += [(f"hosts/{b}/server-properties.out", "kafka_config", b, fixture_bytes(f"real23-jmx/broker{b}.server-properties.out")),
                  (f"hosts/{b}/jmx.out", "jmx", b, fixture_bytes(f"real23-jmx/broker{b}.jmx.out"))]
    b = make_bundle(root, files)
    # the commands' outcomes as the capture recorded them (broker 3's JmxTool: no answer within its bound)
    recorded = {c["broker_id"]: c["error"] for c in json.loads(fixture_bytes("real23-jmx/manifest-jmx.json"))["commands"]}
    manifest = json.loads((b / "manifest.json").read_text())
    for c in manifest["commands"]:
        if c["kind"] == "jmx":
            c["error"] = recorded[c["broker_id"]]
            c["exit_code"] = None if c["error"] else 0
    (b / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return b


def test_the_spark_report_draws_the_request_queue_isr_and_gc_charts(spark, tmp_path):
    b = _bundle(tmp_path)
    run_in_session(spark, b)
    html = (b / "report.html").read_text()
    charts = html[html.index("<h2>Over time</h2>"):]
    titles = re.findall(r"<svg[^>]*><title>([^<]*)</title>", charts)
    assert [t.split(" (")[0] for t in titles] == ["Under-replicated partitions over time", "Request queue", "GC pauses"], titles
    (rq,) = [s for s in re.findall(r"<figure class='chart'>.*?</figure>", charts, re.S) if "RequestQueueSize" in s]
    assert len(re.findall(r"<polyline ", rq)) == 2 and rq.count("<circle") == 2  # brokers 1 and 2, one read each
    assert "broker 3: no answer from its JMX read (timeout after 15s)" in rq
    assert "queued.max.requests 500" in rq and "<script" not in html
    findings = json.loads((b / "findings.json").read_text())
    assert "request_metrics_unknown" in {f["kind"] for f in findings["findings"]}  # the same silence, as a finding
