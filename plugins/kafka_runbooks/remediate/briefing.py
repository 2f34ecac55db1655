"""The text on-call reads before approving: diagnosis, key evidence lines, exact plan, blast radius.

Pure: findings and a plan in, Markdown out. Every value that came from the cluster or a captured
file is put inside code spans/blocks so it cannot inject Markdown links or HTML into the approval page.
"""

from __future__ import annotations

import shlex
from typing import Iterable, Sequence

from kafka_runbooks.model import Finding, Plan, Severity

MAX_CITED_FINDINGS = 6
MAX_LISTED_PARTITIONS = 40


def _code(text: object) -> str:
    s = str(text).replace("`", "'").replace("\n", " ")
    return f"`{s}`"


def _block(lines: Iterable[str]) -> str:
    body = "\n".join(str(line).replace("```", "'''") for line in lines)
    return f"```\n{body}\n```"


def _rank(f: Finding) -> tuple[int, str]:
    order = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return (order[f.severity], f.kind)


def approval_body(findings: Sequence[Finding], plan: Plan, *, report_path: str | None, approval_timeout: str) -> str:
    parts: list[str] = ["### Diagnosis"]
    ranked = sorted(findings, key=_rank)
    if not ranked:
        parts.append("_The analysis produced no finding._")
    for f in ranked:
        parts.append(f"- **{f.severity.value.upper()}** {_code(f.kind)}: {_code(f.summary)}")
    parts.append("\n### Key evidence (first citation per finding; all of them are in the report)")
    cited = 0
    for f in ranked:
        for ev in f.evidence[:1]:
            if cited >= MAX_CITED_FINDINGS:
                break
            where = f"{ev.source}:{','.join(map(str, ev.lines[:6]))}" if ev.lines else ev.source
            excerpt = [line for line in ev.excerpt.splitlines() if line.strip()][:8]
            parts.append(f"{_code(where)}" + (f" ({_code(ev.host)})" if ev.host else ""))
            if excerpt:
                parts.append(_block(excerpt))
            cited += 1
    if cited == 0:
        parts.append("_No evidence lines were cited._")
    if report_path:
        parts.append(f"\nFull report: {_code(report_path)}")

    parts.append("\n### Plan (runs only after **Approve**, one broker at a time)")
    for i, step in enumerate(plan.steps, 1):
        parts.append(f"{i}. {_code(step.action)} broker {step.broker_id}: {_code(shlex.join(step.command))} — {step.reason}")
    parts.append("After each restart the run waits until the broker is registered again and back in every ISR; on timeout it stops and changes nothing else.")

    parts.append("\n### Blast radius")
    if plan.blast_radius:
        shown = plan.blast_radius[:MAX_LISTED_PARTITIONS]
        more = len(plan.blast_radius) - len(shown)
        parts.append("Partitions that lose an in-sync replica while the broker is down:")
        parts.append(_block(shown + ((f"... and {more} more",) if more else ())))
    else:
        parts.append("No partition loses an in-sync replica (the broker is already out of every ISR).")

    parts.append(f"\n**Reject**, or no answer within {approval_timeout}, makes no change; the incident stays open with its evidence.")
    return "\n".join(parts)
