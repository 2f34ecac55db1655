"""The top of the approval page (the HITL request's subject and body): who asked, why, who may answer -- and, for
anybody else, that Airflow will refuse their answer and why, before they click -- then the blast radius as a
summary per topic (the full list is on the incident page). Pure: strings in, Markdown out; every value from a
cluster or a person goes through ``markdown.code_span`` (a code span: no link, no HTML)."""

from __future__ import annotations

from typing import Mapping, Sequence

from kafka_runbooks.remediate.blast import TopicTotal, headline
from kafka_runbooks.remediate.markdown import code_span as _code

MAX_TOPICS = 25


def who_may_answer(assigned: Sequence[Mapping[str, str]]) -> str:
    return ", ".join(str(u.get("name") or u.get("id")) for u in assigned) or "nobody"


def subject_suffix(starter: str | None, assigned: Sequence[Mapping[str, str]]) -> str:
    return f" (asked by {starter or 'an automatic run'}; only {who_may_answer(assigned)} may answer)"


def header(*, starter: str | None, automatic: str | None, why: str, assigned: Sequence[Mapping[str, str]],
           approvers: Sequence[str], incident_url: str | None) -> list[str]:
    """Who asked, why, who may answer and who may not (the four-eyes rule, said before anybody clicks)."""
    asked = _code(starter) if starter else f"nobody: {_code(automatic or 'an automatic run')}"
    parts = [f"**Asked by** {asked}. **Why:** {_code(why or 'no reason given')}"]
    parts.append(f"**Who may answer:** {', '.join(_code(who_may_answer([u])) for u in assigned) or 'nobody'} "
                 "(the cluster's approvers" + (f", except {_code(starter)} who started this run" if starter else "") + ").")
    cannot = [f"**If you are not one of them, you cannot answer this request**: Airflow refuses the answer "
              "(\"Access Denied\") and nothing changes."]
    if starter:
        cannot.append(f"{_code(starter)} started this run and may not approve it: an approval needs a second person "
                      "(four eyes).")
    others = [a for a in approvers if a not in {u.get("id") for u in assigned}]
    if others and not starter:
        cannot.append(f"Configured approvers not asked: {_code(', '.join(others))}.")
    cannot.append(f"Approvers are configured per cluster ({_code('approvals.approvers')} in the Variable "
                  f"{_code('kafka_runbooks_clusters')}).")
    parts.append(" ".join(cannot))
    if incident_url:
        parts.append(f"[Incident page]({incident_url}) (timeline, evidence, report, the full blast radius)")
    return parts


def blast_summary(totals: Sequence[TopicTotal], counts: Mapping[str, int], incident_url: str | None,
                  topic_count: int | None = None) -> list[str]:
    """The blast radius first as a table per topic (the worst single step; ``totals``: the first ones, of
    ``topic_count`` in all), over the plan's ``blast.plan_counts``, then where the full list is."""
    topic_count = len(totals) if topic_count is None else topic_count
    parts = ["\n### Blast radius (summary)", f"{headline(counts)}. Brokers go down one at a time; per topic, the worst step:"]
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
    parts.append("Every partition, step by step: " + (f"[on the incident page]({incident_url})" if incident_url else "the plan task's log") + ".")
    return parts
