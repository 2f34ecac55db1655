"""The top of the approval page (the HITL request's subject and body): who asked, why, who may answer -- and, for
anybody else, that Airflow will refuse their answer and why, before they click -- then the blast radius as a
summary per topic (the full list is on the incident page). Pure: strings in, Markdown out; every value from a
cluster or a person goes through ``markdown.code_span`` (a code span: no link, no HTML) or :func:`plain` (escaped text).

Issue 32: the page reads top-down as a headline (what, where, why, risk), the blast radius summary, the details, and
last -- right above Airflow's Approve and Reject buttons, which Airflow shows to everybody -- who may answer and why
the person who started the run may not (:func:`footer`). Airflow's HITL page renders the body as Markdown without
HTML (no ``<details>``): the details that are long (every partition) are on the incident page, collapsed there."""

from __future__ import annotations

from typing import Mapping, Sequence

from kafka_runbooks.remediate.blast import TopicTotal, headline
from kafka_runbooks.remediate.markdown import code_span as _code

MAX_TOPICS = 25


def who_may_answer(assigned: Sequence[Mapping[str, str]]) -> str:
    return ", ".join(str(u.get("name") or u.get("id")) for u in assigned) or "nobody"


def subject_suffix(starter: str | None, assigned: Sequence[Mapping[str, str]]) -> str:
    """Short: Airflow's list of required actions cuts a long subject (who may answer is in the body, last, above the
    buttons)."""
    return f" (asked by {starter or 'an automatic run'})"


def plain(text: object, most: int | None = None) -> str:
    """A person's or a cluster's text as plain Markdown text (proportional font, not a code span): every Markdown
    character escaped, ``://`` and ``www.`` broken so that nothing becomes a link; cut to ``most`` characters."""
    s = " ".join(str(text).split())
    if most is not None and len(s) > most:
        s = s[: most - 1] + "…"
    s = "".join("\\" + ch if ch in "\\`*_{}[]()#+-.!|<>~&:" else ch for ch in s)
    return s


MAX_WHY = 300


def header(*, starter: str | None, automatic: str | None, why: str, assigned: Sequence[Mapping[str, str]],
           approvers: Sequence[str], incident_url: str | None, what: str | None = None, risk: str | None = None) -> list[str]:
    """The headline: what, where, why, risk, who asked -- a few lines, in plain text (the four-eyes rule is said last,
    above the buttons: :func:`footer`)."""
    asked = plain(starter) if starter else f"nobody: an automatic run ({plain(automatic or 'no person recorded as its starter', 200)})"
    parts = []
    if what:
        parts.append(f"## {plain(what)}")
    whole = " (the whole reason is on the incident page)" if len(" ".join(str(why or "").split())) > MAX_WHY else ""
    parts.append(f"**Why:** {plain(why or 'no reason given', MAX_WHY)}{whole}  \n**Asked by** {asked}."
                 + (f"  \n**Risk:** {risk}" if risk else ""))
    if incident_url:
        parts.append(f"[Incident page]({incident_url}) (timeline, evidence, report, the full blast radius)")
    return parts


def footer(*, starter: str | None, assigned: Sequence[Mapping[str, str]], approvers: Sequence[str]) -> list[str]:
    """Who may answer and who may not, and why -- the last lines of the page, right above Approve and Reject: Airflow
    shows those buttons to everybody, and answers anybody not assigned with a bare "Access Denied"."""
    names = ", ".join(plain(who_may_answer([u])) for u in assigned) or "nobody"
    parts = ["\n---", f"**Who may answer:** {names} (the cluster's approvers"
             + (f", except {plain(starter)} who started this run" if starter else "") + ")."]
    if starter:
        parts.append(f"**{plain(starter)}: you started this run, so you cannot approve it** (four eyes: an approval needs a "
                     f"second person). If you click Approve or Reject, Airflow answers \"Access Denied\" and nothing changes; "
                     f"ask {names}.")
    cannot = ["**If you are not one of them, you cannot answer this request**: Airflow refuses the answer "
              "(\"Access Denied\") and nothing changes."]
    others = [a for a in approvers if a not in {u.get("id") for u in assigned}]
    if others and not starter:
        cannot.append(f"Configured approvers not asked: {plain(', '.join(others))}.")
    cannot.append(f"Approvers are configured per cluster ({_code('approvals.approvers')} in the Variable "
                  f"{_code('kafka_runbooks_clusters')}).")
    parts.append(" ".join(cannot))
    return parts


def blast_summary(totals: Sequence[TopicTotal], counts: Mapping[str, int], incident_url: str | None,
                  topic_count: int | None = None, offline_why: Sequence[str] = ()) -> list[str]:
    """The blast radius first as a table per topic (the worst single step; ``totals``: the first ones, of
    ``topic_count`` in all), over the plan's ``blast.plan_counts``, then where the full list is. ``offline_why``: what
    each OFFLINE count is (already unavailable, or would go offline), said beside it."""
    topic_count = len(totals) if topic_count is None else topic_count
    parts = ["\n### Blast radius (summary)", f"{headline(counts)}. Brokers go down one at a time; per topic, the worst step:"]
    parts += [f"- **OFFLINE:** {x}" for x in offline_why] + ([""] if offline_why else [])
    if totals:
        parts.append("| topic | partitions touched | losing a replica | leaderships moving | coordinators moving | at min ISR | offline | worst while down |")
        parts.append("|---|---|---|---|---|---|---|---|")
        for t in totals[:MAX_TOPICS]:
            at_min = f"{t.at_min_isr}" + ("" if t.min_isr is not None else " (min ISR unknown)")
            parts.append(f"| {_code(t.topic)} | {t.partitions} | {t.losing_replica} | {t.leaderships_moving} | "
                         f"{t.coordinators_moving} | {'**' + at_min + '**' if t.at_min_isr else at_min} | "
                         f"{'**' + str(t.offline) + '**' if t.offline else 0} | broker {t.worst_broker} |")
        if topic_count > min(len(totals), MAX_TOPICS):
            parts.append(f"... and {topic_count - min(len(totals), MAX_TOPICS)} more topics (on the incident page).")
    parts.append("")  # a paragraph of its own, not a last row of the table
    parts.append("Every partition, step by step: " + (f"[on the incident page]({incident_url})" if incident_url else "the plan task's log") + ".")
    return parts
