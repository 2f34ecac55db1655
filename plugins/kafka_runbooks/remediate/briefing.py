"""The text on-call reads before approving: diagnosis, key evidence lines, exact plan, blast radius.

Pure: findings and a plan in, Markdown out. Every value that came from the cluster or a captured
file is put inside code spans/blocks so it cannot inject Markdown links or HTML into the approval page.
"""

from __future__ import annotations

import shlex
from typing import Mapping, Sequence

from kafka_runbooks.model import Finding, Plan, Severity
from kafka_runbooks.remediate.asking import blast_summary
from kafka_runbooks.remediate.blast import plan_counts, plan_topics, step_counts
from kafka_runbooks.remediate.markdown import code_block as _block
from kafka_runbooks.remediate.markdown import code_span as _code

MAX_CITED_FINDINGS = 6
MAX_LISTED_PARTITIONS = 40


def _rank(f: Finding) -> tuple[int, str]:
    order = {Severity.CRITICAL: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return (order[f.severity], f.kind)


def _findings_section(findings: Sequence[Finding], report_path: str | None) -> list[str]:
    parts: list[str] = ["### Diagnosis"]
    ranked = sorted(findings, key=_rank)
    if not ranked:
        parts.append("_No analysis findings (a maintenance restart, or the analysis found nothing)._")
    for f in ranked:
        parts.append(f"- **{f.severity.value.upper()}** {_code(f.kind)}: {_code(f.summary)}")
    if ranked:
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
    if ranked and cited == 0:
        parts.append("_No evidence lines were cited._")
    if report_path and report_path.startswith(("http://", "https://", "/kafka-runbooks/")) and not set(report_path) & set("()[]<> `"):
        parts.append(f"\nFull report: [open the report]({report_path})")  # a URL the product built (web/ serves it)
    elif report_path:
        parts.append(f"\nFull report: {_code(report_path)}")
    return parts


def approval_body(
    findings: Sequence[Finding],
    plan: Plan,
    *,
    report_path: str | None,
    approval_timeout: str,
    commands: Mapping[int, Mapping[str, Sequence[str]]] | None = None,
    digest: str | None = None,
    gates: Sequence[str] = (),
    binding: Mapping | None = None,
    started_by: str | None = None,
    header: Sequence[str] = (),
    min_isr: Mapping[str, int | None] | None = None,
    incident_url: str | None = None,
    footer: Sequence[str] = (),
) -> str:
    """``commands``: broker -> {"stop": argv, "start": argv, "kill": argv} as the configuration gives them
    now (shown; the executor builds them again from the configuration when it runs and refuses if they differ).
    ``binding``: ``digest.execution_binding`` -- what the approval binds besides the plan (shown, sealed).
    ``header``: who asked, why, who may answer (``asking.header``), shown first; then the blast radius summary per
    topic (``min_isr``: per topic, for "at min ISR"), whose full list is on ``incident_url``; then the details; then
    ``footer`` (``asking.footer``: who may answer, right above the buttons)."""
    commands = commands or {}
    if plan.kind == "preferred_election":
        parts = list(header) + ["\n## Details"] + _findings_section(findings, report_path)
        return "\n".join(parts + _election_section(plan, approval_timeout, digest, gates) + _binding_section(binding, started_by)
                         + list(footer))
    if plan.kind == "demote":
        parts = list(header) + ["\n## Details"] + _findings_section(findings, report_path)
        return "\n".join(parts + _demote_section(plan, approval_timeout, digest, gates) + _binding_section(binding, started_by)
                         + list(footer))
    totals, topic_count = plan_topics(plan, min_isr)
    parts = (list(header) + blast_summary(totals, plan_counts(plan, min_isr), incident_url, topic_count,
                                          offline_why=offline_reasons(plan, min_isr))
             + ["\n## Details"] + _findings_section(findings, report_path))
    parts.append(f"\n### Plan: {_code(plan.kind)} of cluster {_code(plan.cluster)} (runs only after **Approve**, one broker at a time)")
    if plan.completed:
        parts.append(f"Already restarted by this roll (never restarted again): {_code(list(plan.completed))}")
    if plan.not_serving:
        parts.append("Not serving, on direct evidence (restarted first; the last-in-sync-replica rule is waived for them):")
        parts.append(_block(f"broker {b}: {why}" for b, why in sorted(plan.not_serving.items())))
    for i, step in enumerate(plan.steps, 1):
        parts.append(f"{i}. {_code(step.action)} broker {step.broker_id}: {_code(step.reason)}")
        argv = commands.get(step.broker_id, {})
        for which in ("stop", "start", "kill"):
            if argv.get(which):
                parts.append(f"   - {which}: {_code(shlex.join(argv[which]))}")
        if step.refusals:
            parts.append(f"   - **refused** ({step.refusals_total} reason(s)):")
            shown = list(step.refusals[:MAX_LISTED_PARTITIONS])
            more = step.refusals_total - len(shown)
            parts.append(_block(shown + ([f"... and {more} more (every one on the incident page)"] if more > 0 else [])))
        c = step_counts(step, min_isr)
        if c["partitions"]:
            parts.append(f"   - while broker {step.broker_id} is down: {c['partitions']} partition(s) of "
                         f"{c['topics']} topic(s): {c['losing_replica']} lose an in-sync replica, {c['leaderships_moving']} "
                         f"leaderships move, {c['at_min_isr']} at min ISR" + (f", **{c['offline']} OFFLINE**" if c["offline"] else ""))
            parts += _offline_section(step, c["offline"])
        else:
            parts.append(f"   - while broker {step.broker_id} is down: no partition loses an in-sync replica")
    if gates:
        parts.append("\nAfter each start the run waits, bounded, for: " + "; ".join(gates) + ". Any gate failing halts the run and pages on-call.")
    if plan.warnings:
        parts.append("\n### Warnings")
        parts.append(_block(plan.warnings))
    parts.append("\n### Bound to")
    parts.append(
        f"plan digest {_code(digest or '?')}, computed at {_code(plan.computed_at)} from cluster state "
        f"{_code((plan.state_digest or '?')[:16])} (controller {_code(plan.controller_id)}, epoch {_code(plan.controller_epoch)}). "
        "This approval is good for this run and this plan only; every stop is checked again on fresh state."
    )
    parts += _binding_section(binding, started_by)
    parts.append(f"\n**Reject**, or no answer within {approval_timeout}, makes no change.")
    return "\n".join(parts + list(footer))


def what(plan: Plan) -> str:
    """The headline's "what, where": "Restart broker 3 of cluster lab" / "Restart brokers 1, 2, 3 of cluster lab, one at
    a time" / "Preferred-replica election on cluster lab"."""
    if plan.kind == "preferred_election":
        return f"Preferred-replica election on cluster {plan.cluster}"
    if plan.kind == "demote":
        return f"Move leadership off broker {(plan.conditions or {}).get('broker_id')} of cluster {plan.cluster} now"
    order = [s.broker_id for s in plan.steps if s.action != "gate_broker"]
    # a resumed step whose broker registered again after an earlier run's stop: not stopped, its gates only
    gated = [s.broker_id for s in plan.steps if s.action == "gate_broker"]
    only = (f"gates only (no stop: registered again after an earlier run's stop) for broker{'s' if len(gated) > 1 else ''} "
            f"{', '.join(map(str, gated))}")
    if not order and gated:
        return f"{only[0].upper()}{only[1:]} of cluster {plan.cluster}"
    if len(order) == 1:
        text = f"Restart broker {order[0]} of cluster {plan.cluster}"
    else:
        text = f"Restart brokers {', '.join(map(str, order))} of cluster {plan.cluster}, one at a time"
    return text + (f"; {only}" if gated else "")


def risk(plan: Plan, min_isr: Mapping[str, int | None] | None = None) -> str:
    """The headline's risk: the blast radius in one sentence (``blast.headline``), offline partitions said plainly."""
    from kafka_runbooks.remediate.blast import headline, plan_counts  # deferred: loaded on first use, not when a DAG file is parsed

    if plan.kind == "preferred_election":
        return f"leadership of {sum(len(b.partitions) for b in plan.batches)} partition(s) moves, in batches"
    if plan.kind == "demote":
        c = plan.conditions or {}
        return (f"leadership of {len(c.get('moves') or {})} partition(s) moves to serving in-sync replicas; "
                f"{len(c.get('stays_offline') or {})} stay unavailable until the restart; nothing is stopped")
    counts = plan_counts(plan, min_isr)
    text = headline(counts)
    if counts.get("offline"):
        already = all(s.broker_id in plan.not_serving for s in plan.steps if step_offline(s, min_isr))
        text += (" (already unavailable now: see OFFLINE below)" if already else " (see OFFLINE below)")
    return text


def step_offline(step, min_isr: Mapping[str, int | None] | None = None) -> int:
    from kafka_runbooks.remediate.blast import step_counts  # deferred: loaded on first use, not when a DAG file is parsed

    return step_counts(step, min_isr)["offline"]


def offline_reasons(plan: Plan, min_isr: Mapping[str, int | None] | None = None) -> list[str]:
    """Why each step's OFFLINE count is what it is, in words: a broker proven not serving (``plan.not_serving``) that is
    the only in-sync replica of a partition leaves it ALREADY unavailable -- nothing answers for it now, the restart is
    what brings it back; any other broker would take it offline."""
    from kafka_runbooks.remediate.asking import plain  # deferred: loaded on first use, not when a DAG file is parsed

    out = []
    for s in plan.steps:
        n = step_offline(s, min_isr)
        if not n:
            continue
        if s.broker_id in plan.not_serving:
            out.append(f"{n} partition(s) are ALREADY unavailable, not made so by this plan: broker {s.broker_id} is not "
                       f"serving ({plain(plan.not_serving[s.broker_id], 200)}) and it alone leads them (their only in-sync "
                       f"replica). They stay offline until it is back; the restart is what brings them back.")
        else:
            out.append(f"{n} partition(s) go offline while broker {s.broker_id} is down: it is their only in-sync replica.")
    return out


def _offline_section(step, count: int) -> list[str]:
    """The partitions the step takes offline, by name: its broker is their only live in-sync replica (a stuck leader
    whose ISR shrank to itself), so they are unavailable for the whole restart -- nothing moves them or keeps them up."""
    from kafka_runbooks.remediate.blast import offline_names  # deferred: loaded on first use, not when a DAG file is parsed

    if not count:
        return []
    names = offline_names(step.blast_radius)[:MAX_LISTED_PARTITIONS]
    more = count - len(names)
    return [f"   - **OFFLINE for the whole restart** ({count} partition(s): broker {step.broker_id} is their only live in-sync "
            "replica; with unclean leader election off no other replica may lead them; no client can use them until it is "
            "back): "
            + ", ".join(_code(n) for n in names) + (f" and {more} more (every one on the incident page)" if more > 0 else "")]


def _binding_section(binding: Mapping | None, started_by: str | None) -> list[str]:
    """What else the approval binds: a change to any of it after Approve refuses the run, naming it."""
    if not binding:
        return []
    hosts = binding.get("hosts") or {}
    gates = binding.get("gates") or {}
    canary = binding.get("canary") or {}
    return [
        "Also bound (a change to any of it after **Approve** refuses the run, naming what changed): "
        f"hosts {_code(', '.join(f'{b}={h}' for b, h in hosts.items()))}; gates {_code(', '.join(f'{k}={v}' for k, v in gates.items()))}; "
        f"canary {_code('on' if canary.get('enabled') else 'off')}; approvers {_code(binding.get('approvers'))}; "
        f"seal key connection {_code(binding.get('seal_key_conn_id'))}."
        + (f" Started by: {_code(started_by)}." if started_by else ""),
    ]


def _demote_section(plan: Plan, approval_timeout: str, digest: str | None, gates: Sequence[str]) -> list[str]:
    """Mitigate first (``remediate/demote.py``): what moves where, what stays down, the JVM left alone."""
    c = plan.conditions
    b = c.get("broker_id")
    parts = [f"\n### Plan: move leadership off broker {_code(b)} now (cluster {_code(plan.cluster)}; runs only after **Approve**)",
             f"Broker {b}'s JVM is not touched: the capture takes its dumps afterwards, then the restart is planned and "
             "approved on its own. Nothing is stopped or restarted here.",
             _block(plan.blast_radius)]
    if plan.not_serving:
        parts.append("Not serving, on direct evidence:")
        parts.append(_block(f"broker {x}: {why}" for x, why in sorted(plan.not_serving.items())))
    if gates:
        parts.append("\nThen it waits, bounded, for: " + "; ".join(gates) + ". Otherwise it halts and pages on-call.")
    parts.append("\n### Bound to")
    parts.append(f"plan digest {_code(digest or '?')}, computed at {_code(plan.computed_at)}. Only these partitions, in "
                 "exactly these new replica orders, are moved; the original order is written back after the restart.")
    parts.append(f"\n**Reject**, or no answer within {approval_timeout}, moves nothing; the capture goes on.")
    return parts


def _election_section(plan: Plan, approval_timeout: str, digest: str | None, gates: Sequence[str]) -> list[str]:
    """A deferred preferred election (``remediate/election.py``): its batches, the conditions it waits for."""
    c = plan.conditions
    parts = [f"\n### Plan: {_code(plan.kind)} of cluster {_code(plan.cluster)} (runs only after **Approve**, then waits)",
             "It waits, without holding a worker, until: brokers " + _code(c.get("brokers")) + " are in the ISR of every "
             f"partition they host and their ZooKeeper sessions are at least {_code(c.get('stable_s'))} s old; the quiet window "
             f"{_code(c.get('window') or 'any time')} is open" + (f", bytes in/s <= {_code(c.get('max_bytes_in_per_s'))}" if c.get("max_bytes_in_per_s") is not None else "")
             + (f", requests/s <= {_code(c.get('max_requests_per_s'))}" if c.get("max_requests_per_s") is not None else "")
             + f"; nobody holds the maintenance lock. It gives up at {_code(c.get('deadline_at'))} and changes nothing then.",
             f"Method: {_code(c.get('method'))}. Batches, each under the maintenance lock:"]
    if c.get("already_elected"):
        parts.insert(1, f"**Resumes a halted election**: {len(c['already_elected'])} partition(s) its converged batches elected are "
                        "left out and never elected again; the rest below was planned on the cluster's state now.")
    for i, step in enumerate(plan.batches, 1):
        shown = list(step.partitions[:MAX_LISTED_PARTITIONS])
        more = len(step.partitions) - len(shown)
        parts.append(f"{i}. {_code(step.reason)}")
        parts.append(_block(shown + ([f"... and {more} more"] if more else [])))
        if step.refusals:
            parts.append("   - **refused**:")
            parts.append(_block(step.refusals))
    if gates:
        parts.append("\nAfter each batch it waits, bounded, for: " + "; ".join(gates) + ". Otherwise it halts and pages on-call.")
    if plan.warnings:
        parts.append("\n### Warnings")
        parts.append(_block(plan.warnings))
    parts.append("\n### Bound to")
    parts.append(f"plan digest {_code(digest or '?')}, computed at {_code(plan.computed_at)} from cluster state "
                 f"{_code((plan.state_digest or '?')[:16])}. Partitions already led by their preferred replica when a batch "
                 "runs are skipped; no partition outside the plan is touched.")
    parts.append(f"\n**Reject**, or no answer within {approval_timeout}, makes no change.")
    return parts
