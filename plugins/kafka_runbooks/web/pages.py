"""The incidents pages, rendered on the server (no script). Pure: what ``incidents.py`` read in, HTML out.

Everything that came from a cluster, a capture, a person or a run is attacker-influenced (a znode, a log line, a
reason typed in a form): it goes through :func:`e` (HTML-escaped, quotes too) or :func:`q` (one URL path segment),
never into markup or a URL raw.
"""

from __future__ import annotations

import html
import json
import urllib.parse
from typing import Any, Iterable, Mapping, Sequence

from kafka_runbooks.remediate.blast import TopicBlast, headline, rows_from, summarize
from kafka_runbooks.state.incidents import NEEDS_PERSON
from kafka_runbooks.web.incidents import ACTIVE, IncidentView, RunRef, is_remediation

PREFIX = "/kafka-runbooks"
DETAILS_CHARS = 600

CSS = """
body{font-family:system-ui,sans-serif;margin:1rem;color:#1a202c;background:#fff}
h1{font-size:1.4rem} h2{font-size:1.15rem;margin-top:1.6rem} h3{font-size:1rem}
table{border-collapse:collapse;margin:.5rem 0;width:100%} th,td{border:1px solid #cbd5e0;padding:.25rem .5rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#edf2f7} code,pre{font-family:ui-monospace,monospace;font-size:.85rem} pre{white-space:pre-wrap;background:#f7fafc;padding:.4rem}
.needs_person{background:#fed7d7;font-weight:600} .status{padding:0 .3rem;border-radius:3px;background:#e2e8f0}
.status.needs_person{background:#c53030;color:#fff} .status.open,.status.responding{background:#dd6b20;color:#fff}
.status.closed,.status.resolved{background:#38a169;color:#fff}
.banner{border:2px solid #c53030;background:#fff5f5;padding:.6rem;margin:.6rem 0}
.muted{color:#718096} .timeline td.at{white-space:nowrap} nav a{margin-right:1rem}
.watch{margin:.3rem 0 .6rem 0} .warning{border:2px solid #dd6b20;background:#fffaf0;padding:.4rem;margin:.3rem 0;font-weight:600}
"""

HEALTH_DAG_PREFIX = "kafka_health_check_"



def e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def q(value: Any) -> str:
    return urllib.parse.quote(str(value), safe="")


def page(title: str, body: str) -> str:
    """The whole page. A link to Airflow's own pages opens in the top window (``target=_top``), never a second Airflow
    UI inside a frame; a link to another page of this app stays where it is (Airflow 3.3 frames a run's Incident tab
    with a sandbox that allows no top navigation: there, only this app's own links can work). Only markup written here
    has ``<a `` in it: everything else is escaped."""
    html_ = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title><style>{CSS}</style></head>"
             f"<body><nav><a href='{PREFIX}/incidents'>All incidents</a><a href='{PREFIX}/fleet'>Fleet overview</a></nav>"
             f"{body}</body></html>")
    return html_.replace("<a href='/dags/", "<a target='_top' href='/dags/").replace("<a href='/dag_runs", "<a target='_top' href='/dag_runs")


def who(actor: Any) -> str:
    """A person's name as recorded, or what a run is in words: ``dag:kafka_health_check_lab/run:scheduled__...`` is
    "scheduled health check", ``dag:kafka_incident_response/run:...`` "incident response (automatic)"."""
    a = "" if actor is None else str(actor)
    if not a.startswith("dag:") or "/run:" not in a:
        return a
    dag, run = a[len("dag:"):].split("/run:", 1)
    if dag.startswith(HEALTH_DAG_PREFIX):
        if run.startswith("manual__"):
            return "health check (started by hand)"
        if run.startswith("asset_triggered__"):
            return "health check (ZooKeeper change)"
        return "scheduled health check"
    return f"{dag.removeprefix('kafka_').replace('_', ' ')} (automatic run)"


def incident_url(cluster: str, incident_id: str) -> str:
    return f"{PREFIX}/incidents/{q(cluster)}/{q(incident_id)}"


def run_url(run: RunRef) -> str:
    """The run's page in Airflow's UI (the run list filtered by its id when the DAG is not known)."""
    if run.dag_id:
        return f"/dags/{q(run.dag_id)}/runs/{q(run.run_id)}"
    return f"/dag_runs?run_id_pattern={urllib.parse.quote(run.run_id, safe='')}"


def status(value: Any) -> str:
    return f"<span class='status {e(value)}'>{e(value)}</span>"


def _kind(record: Mapping[str, Any]) -> str:
    return str((record.get("trigger") or {}).get("kind") or "")


def _finding(record: Mapping[str, Any]) -> str:
    trigger = record.get("trigger") or {}
    return str(trigger.get("summary") or record.get("reason") or "")


# ---------------------------------------------------------------------------------------------- list


def list_page(clusters: Mapping[str, Sequence[Mapping[str, Any]]], errors: Mapping[str, str],
              watch: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """Every cluster's active and recent records; needs_person ones in a banner at the top. ``watch``: per cluster,
    whether anything looks (``web/watch.py``): its last check, its health DAG paused or not, the triggerer."""
    watch = watch or {}
    parts = ["<h1>Kafka incidents</h1>"]
    waiting = [(c, r) for c, rs in clusters.items() for r in rs if r.get("status") == NEEDS_PERSON]
    if waiting:
        parts.append(f"<div class='banner' id='needs-person'><strong>{len(waiting)} incident(s) need a person</strong><ul>")
        for c, r in waiting:
            parts.append(f"<li><a href='{incident_url(c, r['id'])}'>{e(r['id'])}</a> ({e(c)}): {e(r.get('status_reason') or r.get('reason'))}</li>")
        parts.append("</ul></div>")
    for name in sorted(set(clusters) | set(errors)):
        parts.append(f"<h2 id='cluster-{e(name)}'>Cluster {e(name)}</h2>")
        if name in watch:
            parts.append(_watch_block(watch[name]))
        if name in errors:
            parts.append(f"<p class='banner'>cannot read this cluster's state: {e(errors[name])}</p>")
            continue
        records = clusters.get(name) or []
        active = [r for r in records if r.get("status") in ACTIVE]
        parts.append(f"<p>{len(active)} open, {len(records) - len(active)} recent ended.</p>")
        if records:
            parts.append(_records_table(name, records))
    return page("Kafka incidents", "".join(parts))


def _watch_block(w: Mapping[str, Any]) -> str:
    out = [f"<div class='watch' data-watched='{'no' if w.get('warnings') else 'yes'}'>"]
    out += [f"<p class='warning'>NOT WATCHED? {e(x)}</p>" for x in w.get("warnings") or ()]
    out += [f"<span class='muted'>{e(x)}</span><br>" for x in w.get("lines") or ()]
    out.append("</div>")
    return "".join(out)


def _records_table(cluster: str, records: Iterable[Mapping[str, Any]]) -> str:
    rows = ["<table class='incidents'><tr><th>Incident</th><th>Status</th><th>What</th><th>Finding / reason</th><th>Brokers</th>"
            "<th>Opened</th><th>By</th><th>Ended</th></tr>"]
    for r in records:
        what = ("remediation: " if is_remediation(r) else "") + _kind(r)
        cls = " class='needs_person'" if r.get("status") == NEEDS_PERSON else ""
        rows.append(
            f"<tr{cls} data-status='{e(r.get('status'))}'><td><a href='{incident_url(cluster, r['id'])}'>{e(r['id'])}</a></td>"
            f"<td>{status(r.get('status'))}</td><td>{e(what)}</td><td>{e(_short(_finding(r), 300))}"
            + (f"<br><span class='analysis'>analysis: {e(', '.join(_analysis(r)))}</span>" if _analysis(r) else "")
            + (f"<br><span class='muted'>{e(_short(r.get('status_reason'), 300))}</span>" if r.get("status_reason") else "")
            + f"</td><td>{e(', '.join(str(b) for b in r.get('broker_ids') or []))}</td><td>{e(r.get('opened_at'))}</td>"
            f"<td>{e(who(r.get('opened_by')))}</td><td>{e(r.get('closed_at') or '')}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _analysis(record: Mapping[str, Any], most: int = 5) -> list[str]:
    """The kinds of the analysis' findings (what the evidence showed, e.g. jvm_deadlock behind a broker_unresponsive
    trigger), each once, in the analysis' order; at most ``most`` and how many more."""
    kinds: list[str] = []
    for f in record.get("findings") or []:
        k = str((f or {}).get("kind") or "") if isinstance(f, Mapping) else ""
        if k and k not in kinds:
            kinds.append(k)
    return kinds[:most] + ([f"{len(kinds) - most} more"] if len(kinds) > most else [])


def _short(value: Any, n: int) -> str:
    s = "" if value is None else str(value)
    return s if len(s) <= n else s[: n - 1] + "…"


# ---------------------------------------------------------------------------------------------- one record


def detail_page(cluster: str, view: IncidentView, bundles: Sequence[tuple[Mapping[str, Any], list[dict], str | None]],
                report_available: bool, report_problem: str | None) -> str:
    """``bundles``: (index entry, its files from the manifest, why they cannot be listed). The page's sections in
    order: the facts, the report and the findings, the mitigation, the runs, the plan, the audit trail, the notes and
    the evidence bundles."""
    r = view.record
    iid = str(r.get("id"))
    base = incident_url(cluster, iid)
    parts = _facts_section(cluster, view) + _report_section(r, base, report_available, report_problem)
    if isinstance(r.get("mitigation"), dict):
        parts.append(mitigation_section(r["mitigation"]))
    parts += _runs_section(view)
    plan = r.get("plan")
    if isinstance(plan, dict) and plan.get("steps"):
        parts.append(_plan_section(plan, r.get("blast_summary"), view.plan_detail))
    parts += _audit_section(view.audit)
    notes = r.get("notes") or []
    if notes:
        parts.append("<h2>Notes</h2><ul>" + "".join(f"<li>{e(n.get('at'))}: {e(n.get('text'))}</li>" for n in notes) + "</ul>")
    parts += _bundles_section(base, bundles)
    return page(f"{iid} ({cluster})", "".join(parts))


def _facts_section(cluster: str, view: IncidentView) -> list[str]:
    r = view.record
    parts = [f"<h1>{'Remediation' if is_remediation(r) else 'Incident'} <code>{e(str(r.get('id')))}</code></h1>"]
    if r.get("status") == NEEDS_PERSON:
        parts.append(f"<div class='banner' id='needs-person'><strong>Needs a person</strong> since {e(r.get('needs_person_since'))}: "
                     f"{e(r.get('status_reason'))}</div>")
    parts.append("<table class='facts'>")
    facts = [("Cluster", e(cluster)), ("Status", status(r.get("status"))), ("Kind", e(_kind(r))),
             ("Finding / reason", e(_finding(r))), ("Brokers", e(", ".join(str(b) for b in r.get("broker_ids") or []))),
             ("Opened", f"{e(r.get('opened_at'))} by {e(who(r.get('opened_by')))}"), ("Ended", e(r.get("closed_at") or "—")),
             ("Resolution", e(r.get("resolution") or r.get("status_reason") or "—")),
             ("Who acted", e(", ".join(dict.fromkeys(who(a) for a in view.actors))))]
    parts += [f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts]
    parts.append("</table>")
    return parts


def _report_section(r: Mapping[str, Any], base: str, report_available: bool, report_problem: str | None) -> list[str]:
    parts = ["<h2>Report</h2>"]
    if report_available:
        parts.append(f"<p><a id='report-link' href='{base}/report'>Open the analysis report</a></p>")
    else:
        parts.append(f"<p class='muted'>{e(report_problem)}</p>")
    findings = r.get("findings") or []
    if findings:
        parts.append("<table><tr><th>Severity</th><th>Finding</th><th>Summary</th></tr>")
        for f in findings[:50]:
            parts.append(f"<tr><td>{e(f.get('severity'))}</td><td>{e(f.get('kind'))}</td><td>{e(_short(f.get('summary'), 500))}</td></tr>")
        parts.append("</table>")
    return parts


def _runs_section(view: IncidentView) -> list[str]:
    parts = ["<h2>Runs</h2>"]
    if view.runs:
        parts.append("<ul class='runs'>")
        for run in view.runs:
            name = f"{run.dag_id} / {run.run_id}" if run.dag_id else f"run {run.run_id} (its DAG is not recorded: the link searches every DAG)"
            parts.append(f"<li><a href='{e(run_url(run))}'>{e(name)}</a> <span class='muted'>({e(run.why)})</span></li>")
        parts.append("</ul>")
    else:
        parts.append("<p class='muted'>no DAG run recorded</p>")
    return parts


def _audit_section(audit: Sequence[Mapping[str, Any]]) -> list[str]:
    parts = ["<h2>Audit trail</h2><table class='timeline'><tr><th>At</th><th>Who</th><th>Action</th><th>Outcome</th><th>Details</th></tr>"]
    for a in audit:
        details = a.get("details") or {}
        extra = []
        if a.get("host"):
            extra.append(f"host {a['host']}")
        if a.get("command"):
            extra.append("command " + " ".join(str(x) for x in a["command"]))
        text = json.dumps(details, sort_keys=True, default=str) if details else ""
        parts.append(f"<tr><td class='at'>{e(a.get('at'))}</td><td>{e(who(a.get('actor')))}</td><td>{e(a.get('action'))}</td>"
                     f"<td>{e(a.get('outcome'))}</td><td>{e('; '.join(extra))}"
                     + (f"<details><summary>{e(_short(text, 120))}</summary><pre>{e(_short(text, 20000))}</pre></details>" if text else "")
                     + "</td></tr>")
    parts.append("</table>")
    return parts


def _bundles_section(base: str, bundles: Sequence[tuple[Mapping[str, Any], list[dict], str | None]]) -> list[str]:
    parts = ["<h2>Evidence bundles</h2>"]
    if not bundles:
        parts.append("<p class='muted'>no bundle captured</p>")
    for entry, files, why in bundles:
        cap = entry.get("capture_id") or str(entry.get("location", "")).rstrip("/").rsplit("/", 1)[-1]
        parts.append(f"<h3>{e(cap)} <span class='muted'>({e(entry.get('status'))}, {e(entry.get('files'))} files, "
                     f"{e(entry.get('bytes'))} bytes, manifest sha256 {e(str(entry.get('manifest_sha256') or '')[:16])})</span></h3>")
        if why:
            parts.append(f"<p class='muted'>{e(why)}</p>")
            continue
        parts.append("<table class='files'><tr><th>File</th><th>Kind</th><th>Host</th><th>Bytes</th><th>sha256</th></tr>")
        for f in files:
            parts.append(f"<tr><td><a href='{base}/files/{q(cap)}/{'/'.join(q(p) for p in str(f['path']).split('/'))}'>{e(f['path'])}</a></td>"
                         f"<td>{e(f.get('kind'))}</td><td>{e(f.get('host') or '')}</td><td>{e(f.get('bytes') or '')}</td>"
                         f"<td><code>{e(str(f.get('sha256') or '')[:16])}</code></td></tr>")
        parts.append("</table>")
    return parts


def mitigation_section(m: Mapping[str, Any]) -> str:
    """Mitigate first: what the move of leadership off the broker did and when (``runbook/mitigate.py``'s ``on_incident``);
    one that did not happen, with its reason's stable ``code`` beside its outcome."""
    parts = ["<h2 id='mitigation'>Mitigation</h2>"]
    if m.get("outcome") == "moved":
        t = m.get("timing") or {}
        parts.append(f"<p>Leadership of {len(m.get('moved') or [])} partition(s) moved off broker {e(m.get('broker_id'))} "
                     f"from {e(m.get('started_at'))} to {e(m.get('ended_at'))} (approved by {e(who(m.get('approved_by')))}; "
                     f"reassignment {e(t.get('reassign_s'))} s, election {e(t.get('elect_s'))} s, leaders moved "
                     f"{e(t.get('moved_s'))} s after). Its JVM was not touched: the capture's dumps were taken after.</p>")
        by_leader: dict[Any, list[str]] = {}
        for name, leader in sorted((m.get("new_leaders") or {}).items()):
            by_leader.setdefault(leader, []).append(name)
        parts.append("<ul>" + "".join(f"<li>to broker {e(b)}: {e(', '.join(ps))}</li>" for b, ps in sorted(by_leader.items(), key=str))
                     + "".join(f"<li>stays unavailable until the restart: {e(n)} ({e(why)})</li>"
                               for n, why in sorted((m.get("stays_offline") or {}).items())) + "</ul>")
    else:
        code = f" (code <code>{e(m['code'])}</code>)" if m.get("code") else ""  # the engine's stable reason code
        parts.append(f"<p>The move of leadership was {e(m.get('outcome'))}{code} ({e(m.get('started_at'))} – {e(m.get('ended_at'))}); "
                     "the broker's JVM was not touched and the capture went on:</p><pre>"
                     + e("\n".join(str(x) for x in m.get("reason") or [])) + "</pre>")
    if m.get("record_id"):
        parts.append(f"<p class='muted'>its own record: <code>{e(m['record_id'])}</code></p>")
    return "\n".join(parts)


def blast_table(rows: Sequence[TopicBlast]) -> str:
    out = ["<table class='blast'><tr><th>While broker is down</th><th>Topic</th><th>Partitions</th><th>Losing a replica</th>"
           "<th>Leaderships moving</th><th>Coordinators moving</th><th>At min ISR</th><th>Offline</th></tr>"]
    for r in rows:
        out.append(f"<tr><td>{e(r.broker_id)}</td><td>{e(r.topic)}</td><td>{e(r.partitions)}</td><td>{e(r.losing_replica)}</td>"
                   f"<td>{e(r.leaderships_moving)}</td><td>{e(r.coordinators_moving)}</td>"
                   f"<td>{e(r.at_min_isr)}{'' if r.min_isr is not None else ' (min ISR unknown)'}</td><td>{e(r.offline)}</td></tr>")
    out.append("</table>")
    return "".join(out)


def _plan_section(plan: Mapping[str, Any], summary: Any, detail: Any = None) -> str:
    """The plan with its whole blast radius and every refusal: from its detail (``state/plans.py``) when kept, else
    what the record holds (a plan recorded before the detail was kept: its own lines)."""
    import dataclasses

    from kafka_runbooks.model import Plan

    p = Plan.from_dict(plan)
    if detail is not None:
        p = dataclasses.replace(p, detail=detail)
    rows = rows_from(summary) if summary and detail is None else summarize(p)
    parts = [f"<h2>Plan and blast radius</h2><p>{e(p.kind)}: order {e(list(p.broker_order))}; {e(headline(rows))}.</p>"]
    if p.refusals:
        every = [f"broker {b}: {x}" for b, xs in sorted(detail.refusals.items()) for x in xs] if detail is not None else []
        general = [x for x in p.refusals if not x.startswith("broker ")]
        shown = general + every if every else list(p.refusals)
        parts.append(f"<p class='banner'>refused: {e(len(shown))} reason(s)</p><ul>"
                     + "".join(f"<li>{e(x)}</li>" for x in shown) + "</ul>")
    parts.append(blast_table(rows))
    if p.blast_sha256 and detail is None:
        parts.append("<p class='muted'>the whole blast radius of this plan was not found in the state database: each step "
                     "shows its first lines of each kind</p>")
    for s in p.steps:
        lines = detail.effects.get(s.broker_id, s.blast_radius) if detail is not None else s.blast_radius
        parts.append(f"<details><summary>broker {e(s.broker_id)}: {e(s.reason)} — {s.partitions_touched} partition(s)</summary>"
                     f"<pre>{e(chr(10).join(lines))}</pre></details>")
    return "".join(parts)


def fleet_page(doc: Mapping[str, Any]) -> str:
    """The fleet overview (``GET /api/fleet``) as a page: per cluster its last check, open incidents and remediations,
    approvals waiting."""
    parts = [f"<h1>Fleet overview</h1><p class='muted'>as of {e(doc.get('generated_at'))}; "
             f"<a href='{PREFIX}/api/fleet'>as JSON</a></p>",
             "<table class='fleet'><tr><th>Cluster</th><th>Last check</th><th>Open incidents</th><th>Open remediations</th>"
             "<th>Waiting for approval</th></tr>"]
    for c in doc.get("clusters") or []:
        name = c.get("cluster")
        if c.get("error"):
            parts.append(f"<tr><td>{e(name)}</td><td colspan=4 class='banner'>{e(c['error'])}</td></tr>")
            continue
        age = c.get("last_check_age_s")
        last = (f"{e(c.get('last_check'))} ({e(int(age // 60))} min ago)" if c.get("last_check") and age is not None
                else "<span class='warning'>never</span>")

        def items(rs):
            return "<br>".join(f"<a href='{incident_url(name, r['id'])}'>{e(r['id'])}</a> {status(r.get('status'))} "
                               f"{e(r.get('kind'))} {e(', '.join(map(str, r.get('broker_ids') or [])))}" for r in rs) or "none"

        waiting = "<br>".join(f"<a href='{incident_url(name, w['record_id'])}'>{e(w['record_id'])}</a>: {e(w.get('dag_id'))} "
                              f"asks {e(', '.join(w.get('assigned') or []))} ({e(w.get('waiting_s'))} s)"
                              for w in c.get("waiting_for_approval") or []) or "none"
        parts.append(f"<tr><td><a href='{PREFIX}/incidents#cluster-{q(name)}'>{e(name)}</a></td><td>{last}</td>"
                     f"<td>{items(c.get('open_incidents') or [])}</td><td>{items(c.get('open_remediations') or [])}</td>"
                     f"<td>{waiting}</td></tr>")
    parts.append("</table>")
    return page("Fleet overview", "".join(parts))


def runs_page(dag_id: str, run_id: str, found: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """The records a run belongs to (when not exactly one: the page lists them)."""
    body = [f"<h1>Run <code>{e(dag_id)}</code> / <code>{e(run_id)}</code></h1>"]
    if not found:
        body.append("<p>No incident or remediation record of a configured cluster names this run (yet).</p>")
    else:
        body.append("<ul>" + "".join(f"<li><a href='{incident_url(c, r['id'])}'>{e(r['id'])}</a> ({e(c)}, {status(r.get('status'))})</li>"
                                      for c, r in found) + "</ul>")
    return page(f"run {run_id}", "".join(body))
