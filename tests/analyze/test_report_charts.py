"""Issue 31: the report draws what the bundle holds over time, inline (SVG; no script, no external asset): the
under-replicated partitions replayed from a real 0.10.2.1 broker's ISR changes (the lab's hung broker 3, recorded:
tests/analyze/fixtures/real0102) and the GC pauses of a real JDK 17 G1 log (Kafka 2.3.0 in the lab, recorded:
tests/analyze/fixtures/real23)."""

from __future__ import annotations

import datetime as dt
import re

from kafka_runbooks.analyze.charts import gc_chart, isr_chart, isr_series
from kafka_runbooks.analyze.diagnosis import ParsedFile, diagnose
from kafka_runbooks.analyze.diagnosis.report_tables import chart_data
from kafka_runbooks.analyze.parsers import parse_content
from kafka_runbooks.analyze.report_html import render_report

from analyze_helpers import fixture_bytes


def _files():
    return [ParsedFile("hosts/3/server.log", "server_log", 3, result=parse_content(
                "server_log", fixture_bytes("real0102/broker3.server.log.hang")), seq="hosts/3/server.log"),
            ParsedFile("hosts/1/gc.log", "gc_log", 1, result=parse_content(
                "gc_log", fixture_bytes("real23/broker1.kafkaServer-gc.log")), seq="hosts/1/gc.log")]


def test_the_report_charts_isr_changes_and_gc_pauses_inline():
    files = _files()
    data = chart_data(files)
    shrinks = fixture_bytes("real0102/broker3.server.log.hang").decode().count("Shrinking ISR for partition")
    partitions = set(re.findall(r"Shrinking ISR for partition \[([^\]]+)\]", fixture_bytes("real0102/broker3.server.log.hang").decode()))
    assert len(data["isr_events"]) == shrinks and data["isr_omitted"] == 0
    series = isr_series(data["isr_events"])
    # broker 3 dropped its followers one partition after another: each from 3 replicas to 1
    assert [n for _, n, _ in series] == list(range(1, len(partitions) + 1))
    assert series[-1][2] == len(partitions)  # one in-sync replica (3) each
    assert series[0][0] == dt.datetime(2026, 11, 24, 21, 9, 15, 660000, tzinfo=dt.timezone.utc)
    gc_log = fixture_bytes("real23/broker1.kafkaServer-gc.log").decode()
    pauses = [ln for ln in gc_log.splitlines() if re.search(r"\[gc +\] GC\(\d+\) Pause .*ms$", ln)]
    assert len(data["gc_pauses"]) == len(pauses) > 0

    html = render_report(diagnose(files), {"charts": data})
    charts = html[html.index("<h2>Over time</h2>"):]
    assert charts.count("<svg") == 2 and "<script" not in html and "href=" not in charts
    isr_svg, gc_svg = re.findall(r"<svg.*?</svg>", charts, re.S)
    assert "<title>Under-replicated partitions over time" in isr_svg and isr_svg.count("<polyline") == 2
    # a step line: two points per ISR change
    points = re.search(r"<polyline fill='none' stroke='#d62728' stroke-width='2' points='([^']*)'", isr_svg).group(1).split()
    assert len(points) == 2 * shrinks
    assert "GC pauses" in gc_svg and gc_svg.count("<line ") - 2 == len(pauses)  # 2 axes + one bar per pause
    assert "broker 1" in gc_svg


def test_nothing_to_draw_draws_nothing_and_labels_are_escaped():
    assert isr_chart([]) == "" and gc_chart([{"at": None, "seconds": 1.0, "broker_id": 1}]) == ""
    svg = gc_chart([{"at": "2026-11-22T13:57:31.642+00:00", "broker_id": "<b>1</b>", "seconds": 0.5, "kind": "<i>young</i>"}])
    assert "<b>" not in svg and "<i>" not in svg and "&lt;b&gt;1&lt;/b&gt;" in svg
    assert "<h2>Over time</h2>" not in render_report([], {"charts": {"isr_events": [], "gc_pauses": []}})


def _jmx_files():
    """The capture's JMX reads of the lab's three real Kafka 2.3.0 brokers, recorded (tests/analyze/fixtures/real23-jmx):
    brokers 1 and 2 answered; broker 3, hung, gave no answer within 15 s (the manifest's command error)."""
    import json

    manifest = json.loads(fixture_bytes("real23-jmx/manifest-jmx.json"))
    errors = {c["broker_id"]: c["error"] for c in manifest["commands"]}
    files = []
    for b in (1, 2, 3):
        path = f"hosts/{b}/jmx.out"
        files.append(ParsedFile(path, "jmx", b, result=parse_content("jmx", fixture_bytes(f"real23-jmx/broker{b}.jmx.out")),
                                seq=path, command_error=errors[b]))
        files.append(ParsedFile(f"hosts/{b}/server-properties.out", "kafka_config", b, seq=f"hosts/{b}/server-properties.out",
                                result=parse_content("kafka_config", fixture_bytes(f"real23-jmx/broker{b}.server-properties.out"))))
    return files, errors


def test_the_request_queue_is_drawn_per_answering_broker_and_the_silent_one_named():
    files, errors = _jmx_files()
    assert errors[3] == "timeout after 15s" and errors[1] is None and errors[2] is None
    html = render_report(diagnose(files), {"charts": chart_data(files)})
    charts = html[html.index("<h2>Over time</h2>"):]
    (svg,) = [s for s in re.findall(r"<figure class='chart'>.*?</figure>", charts, re.S) if "RequestQueueSize" in s]
    # one polyline per broker whose read answered, one point per reading it took (the capture reads once)
    lines = re.findall(r"<polyline fill='none' stroke='[^']+' stroke-width='2' points='([^']*)'", svg)
    readings = {b: fixture_bytes(f"real23-jmx/broker{b}.jmx.out").decode().count("name=RequestQueueSize:Value,") for b in (1, 2)}
    assert readings == {1: 1, 2: 1}
    assert sorted(len(pts.split()) for pts in lines) == [readings[1], readings[2]]
    assert "broker 1" in svg and "broker 2" in svg and svg.count("<circle") == 2
    # broker 3: named under the chart with why, never drawn (no zero for it)
    caption = re.search(r"<figcaption>(.*?)</figcaption>", svg, re.S).group(1)
    assert "broker 3: no answer from its JMX read (timeout after 15s)" in caption
    assert "broker 3:" not in svg[:svg.index("<figcaption>")] and "broker 3" not in re.findall(r"<svg.*?</svg>", svg, re.S)[0]
    # queued.max.requests: the lab sets none, Kafka's default 500 is the reference line
    assert "queued.max.requests 500: broker(s) 1 (default), 2 (default), 3 (default)" in svg
    # what the bundle does not hold is said, not invented
    assert "ISR size and under-replicated partitions as the cluster reported them over the window are not in the bundle (it holds no health history)" in charts


def test_a_request_queue_with_no_answer_at_all_is_named_not_drawn():
    from kafka_runbooks.analyze.charts import request_queue_chart

    assert request_queue_chart([], []) == ""
    fig = request_queue_chart([], [{"broker_id": "<b>3</b>", "reason": "timeout after 15s"}])
    assert "<svg" not in fig and "<polyline" not in fig and "<b>" not in fig
    assert "no broker's JMX read answered" in fig and "broker &lt;b&gt;3&lt;/b&gt;: no answer from its JMX read (timeout after 15s)" in fig
