"""One self-contained HTML report (inline CSS, no scripts, no external assets). Pure.

Everything that comes from evidence is hostile (thread names, log lines, hostnames): every value goes
through html.escape.
"""

from __future__ import annotations

import html
from typing import Any, Iterable, Mapping

from ..model import Finding
from .charts import gc_chart, isr_chart, request_queue_chart

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5rem;color:#1b1f23;max-width:1300px}
h1{font-size:1.5rem}h2{font-size:1.2rem;border-bottom:1px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}th,td{border:1px solid #ccc;padding:.25rem .5rem;
text-align:left;vertical-align:top}th{background:#f3f4f6}pre{background:#f6f8fa;padding:.5rem;overflow-x:auto;
font-size:.8rem;white-space:pre-wrap;word-break:break-all}.critical{color:#fff;background:#b42318}
.warning{background:#fedf89}.info{background:#d1e9ff}.sev{padding:.05rem .4rem;border-radius:.2rem;font-weight:600}
.muted{color:#667085}code{font-size:.85rem}figure.chart{margin:.5rem 0}figcaption{font-size:.85rem;color:#667085}
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v), quote=True)


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _states(d: Mapping[str, int] | None) -> str:
    if not d:
        return ""
    return _e(", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])))


NOT_IN_BUNDLE = ("ISR size and under-replicated partitions as the cluster reported them over the window are not in the "
                 "bundle (it holds no health history{snapshot}): the under-replicated line, when drawn, is replayed from "
                 "the brokers' own ISR changes in their logs")


def _charts(c: Mapping[str, Any]) -> list[str]:
    """The 'Over time' section (inline SVG): ISR changes, the request queue, GC pauses, when the bundle has them; and
    which of the series the report would draw the bundle does not hold."""
    drawn = [x for x in (isr_chart(c.get("isr_events") or [], int(c.get("isr_omitted") or 0)),
                         request_queue_chart(c.get("request_queue") or [], c.get("request_queue_unanswered") or [],
                                             c.get("queued_max_requests") or {}),
                         gc_chart(c.get("gc_pauses") or [])) if x]
    if not drawn:
        return []
    snapshot = "; its snapshot.json is one instant, at the capture" if c.get("has_snapshot") else ""
    return ["<h2>Over time</h2>", *drawn, f"<p class='muted'>{_e(NOT_IN_BUNDLE.format(snapshot=snapshot))}</p>"]


def render_report(findings: list[Finding], tables: Mapping[str, Any] | None = None, title: str = "Kafka incident analysis") -> str:
    """findings + tables {"bundle", "generated_at", "brokers": [...], "timeline": [...], "connections": [...],
    "charts": report_tables.chart_data(...)} -> HTML."""
    t = dict(tables or {})
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>",
             "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">",
             f"<style>{_CSS}</style></head><body>", f"<h1>{_e(title)}</h1>"]
    if t.get("bundle"):
        parts.append(f"<p class='muted'>Bundle <code>{_e(t['bundle'])}</code>, generated {_e(t.get('generated_at'))}</p>")

    parts += _summary_section(findings)
    parts += _charts_section(t)
    parts += _deadlock_sections(findings)
    parts += _broker_sections(t)
    parts += _files_section(t)
    parts += _timeline_section(t)
    parts += _evidence_section(findings)
    parts += _unparsable_section(findings)
    parts.append("</body></html>")
    return "\n".join(parts)


def _summary_section(findings: list[Finding]) -> list[str]:
    """The findings, one row each."""
    parts: list[str] = []
    # summary
    parts.append("<h2>Summary</h2>")
    if findings:
        parts.append(_table(["severity", "kind", "brokers", "summary"], [
            [f"<span class='sev {_e(f.severity.value)}'>{_e(f.severity.value)}</span>", _e(f.kind),
             _e(", ".join(map(str, f.broker_ids))), _e(f.summary)] for f in findings]))
    else:
        parts.append("<p>No findings.</p>")
    return parts


def _charts_section(t: Mapping[str, Any]) -> list[str]:
    """Over time (inline SVG): ISR changes, the request queue, GC pauses -- and what the bundle does not hold."""
    return _charts(t.get("charts") or {})


def _deadlock_sections(findings: list[Finding]) -> list[str]:
    """Each deadlock's lock cycle, its progress across the dumps, the known bugs of its version, the advice."""
    parts: list[str] = []
    # deadlocks: lock cycle tables + advice
    for f in (x for x in findings if x.kind == "jvm_deadlock"):
        d = f.details
        parts.append(f"<h2>Lock cycle on broker {_e(', '.join(map(str, f.broker_ids)))}</h2>")
        parts.append(_table(["thread", "waits for lock", "class", "held by", "in cycle"], [
            [_e(c.get("thread")), f"<code>{_e(c.get('waiting_for', {}).get('address'))}</code>",
             _e(c.get("waiting_for", {}).get("class")), _e(c.get("held_by")), "yes" if c.get("in_cycle") else "blocked behind it"]
            for c in d.get("cycle", [])]))
        parts.append(f"<p>Progress across {_e(d.get('dumps'))} dump(s): <b>{_e(d.get('progress'))}</b>"
                     + (f" <span class='muted'>({_e('; '.join(d.get('progress_notes') or []))})</span>" if d.get("progress_notes") else "")
                     + f". Kafka version: {_e(d.get('kafka_version') or 'unknown')}.</p>")
        bugs = d.get("known_bugs") or []
        if bugs:
            parts.append(_table(["bug", "title", "fixed in", "status"], [
                [f"<a href='{_e(b.get('url'))}'>{_e(b.get('id'))}</a>", _e(b.get("title")), _e(", ".join(b.get("fixed_in", []))),
                 _e(b.get("status"))] for b in bugs]))
        ruled = d.get("ruled_out_bugs") or []
        if ruled:
            parts.append("<p class='muted'>Ruled out by version: " + _e(", ".join(f"{b['id']} ({b['status']})" for b in ruled)) + "</p>")
        if d.get("advice"):
            parts.append(f"<p><b>Advice:</b> {_e(d['advice'])}</p>")
    return parts


def _broker_sections(t: Mapping[str, Any]) -> list[str]:
    """The brokers' process figures and their connection states."""
    parts: list[str] = []
    # brokers
    brokers = t.get("brokers") or []
    if brokers:
        parts.append("<h2>Brokers</h2>")
        parts.append(_table(["broker", "pid", "uptime (s)", "RSS (KiB)", "open files", "heap used/total (KiB)",
                             "connections on broker port", "threads blocked / total", "Kafka version"], [
            [_e(b.get("broker_id")), _e(b.get("pid")), _e(b.get("uptime_s")), _e(b.get("rss_kb")), _e(b.get("open_files")),
             _e(f"{b.get('heap_used_kb')}/{b.get('heap_total_kb')}" if b.get("heap_total_kb") else ""),
             _states(b.get("connection_states")),
             _e(f"{b.get('threads_blocked')}/{b.get('threads_total')}" if b.get("threads_total") is not None else ""),
             _e(b.get("kafka_version"))] for b in brokers]))
    conns = t.get("connections") or []
    if conns:
        parts.append("<h2>Connection states (per broker, local port)</h2>")
        parts.append(_table(["broker", "local port", "state", "count", "Recv-Q bytes"], [
            [_e(c.get("broker_id")), _e(c.get("local_port")), _e(c.get("state")), _e(c.get("count")), _e(c.get("recv_q"))]
            for c in conns]))
    return parts


def _files_section(t: Mapping[str, Any]) -> list[str]:
    """How each file was read."""
    parts: list[str] = []
    # how each file was read
    ft = t.get("files") or []
    if ft:
        parts.append("<h2>Evidence read</h2>")
        if t.get("window"):
            parts.append(f"<p class='muted'>Incident window: {_e(t['window'])}</p>")
        parts.append(_table(["file", "kind", "broker", "bytes", "layout", "parsed share", "read by", "problems / notes"], [
            [f"<code>{_e(r.get('path'))}</code>", _e(r.get("kind")), _e(r.get("broker_id")), _e(r.get("bytes")),
             _e(r.get("layout")),
             _e("" if r.get("parsed_share") is None else f"{r['parsed_share']:.1%}" + (" (sampled)" if r.get("share_sampled") else "")),
             _e(r.get("read_by")), _e("; ".join(x for x in (r.get("problems"), r.get("notes")) if x))] for r in ft]))
    return parts


def _timeline_section(t: Mapping[str, Any]) -> list[str]:
    """The key log events in time order."""
    parts: list[str] = []
    # timeline
    tl = t.get("timeline") or []
    parts.append("<h2>Timeline of key log events</h2>")
    if tl:
        parts.append(_table(["time", "broker", "level", "event", "message", "source"], [
            [_e(r.get("timestamp")), _e(r.get("broker_id")), _e(r.get("level")), _e(r.get("signature")),
             _e(r.get("message")), f"<code>{_e(r.get('source'))}:{_e(r.get('line'))}</code>"] for r in tl]))
    else:
        parts.append("<p class='muted'>No key log events.</p>")
    return parts


def _evidence_section(findings: list[Finding]) -> list[str]:
    """Every finding's cited lines (the unparsable files have their own table)."""
    parts: list[str] = []
    # evidence
    parts.append("<h2>Evidence</h2>")
    for f in findings:
        if f.kind == "unparsable":
            continue
        for ev in f.evidence:
            cite = f"{ev.source}:{','.join(map(str, ev.lines))}" if ev.lines else ev.source
            parts.append(f"<h3>{_e(f.kind)} — <code>{_e(cite)}</code></h3><pre>{_e(ev.excerpt)}</pre>")
    return parts


def _unparsable_section(findings: list[Finding]) -> list[str]:
    """The files that could not be parsed, with why."""
    parts: list[str] = []
    # unparsable
    unp = [f for f in findings if f.kind == "unparsable"]
    parts.append("<h2>Unparsable evidence</h2>")
    if unp:
        parts.append(_table(["file", "kind", "reasons"], [
            [f"<code>{_e(f.details.get('path'))}</code>", _e(f.details.get("kind")), _e("; ".join(f.details.get("reasons", [])))]
            for f in unp]))
    else:
        parts.append("<p class='muted'>None: every captured file was parsed.</p>")
    return parts
