"""What a person reads in the task log while a restart runs, and after it: one line per phase and gate per broker
(what it waits on, how much is left, passed in N s), kills and timeouts said as such; a one-line summary of a refused
plan; the readable plan of a dry run; the summary of a finished run. The same for a preferred-replica election: one
line per batch and gate (which target broker, how many partitions, waiting on what and how long is left, passed in
N s), the deferred wait's line per check, and the summary of what was elected and what imbalance is left. Pure: audit entries, plans and results in,
text out. The executor says each audit entry through :func:`say` (``log``), so the log and the audit trail never
disagree. SSH and ZooKeeper connection chatter is moved to DEBUG (:func:`quiet_connection_noise`).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

from kafka_runbooks.model import Plan

MAX_NAMED = 5


def _s(value: Any) -> str:
    try:
        return f"{float(value):.1f} s"
    except (TypeError, ValueError):
        return "? s"


def _some(names: Sequence[Any], total: int | None = None) -> str:
    names = [str(n) for n in names]
    total = len(names) if total is None else total
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {total - MAX_NAMED} more" if total > MAX_NAMED else "")


def _left(d: Mapping[str, Any]) -> str:
    """", X s left" (the gate's time before its timeout), when the entry says it."""
    return f", {_s(d.get('left_s'))} left" if d.get("left_s") is not None else ""


def line(action: str, outcome: str, details: Mapping[str, Any] | None = None) -> str | None:
    """The readable line of one audit entry of a restart (None: nothing a person needs there)."""
    d = dict(details or {})
    b = d.get("broker_id")
    who = f"broker {b}: " if b is not None else ""
    if action == "maintenance_lock":
        return {"acquired": "maintenance lock taken (no other change runs on this cluster until it is released)",
                "released": "maintenance lock released", "busy": f"REFUSED: the maintenance lock is held by {d.get('holders')}"}.get(outcome)
    if action == "host_identity":
        return f"{who}host identity checked" if outcome == "ok" else f"{who}REFUSED, wrong host: {d.get('reason')}"
    if action == "safety_check":
        if outcome == "ok":
            return f"{who}safety check on fresh state passed"
        return f"{who}safety check on fresh state REFUSED: {'; '.join(map(str, (d.get('refusals') or [])[:3]))}"
    if action == "safety_check_before_stop":
        if outcome == "ok":
            return f"{who}checked again right before the stop: ok (controller {d.get('controller')}); stopping (controlled shutdown)"
        return f"{who}checked again right before the stop: REFUSED ({'; '.join(map(str, (d.get('refusals') or [])[:3]))}); nothing was stopped"
    if action == "stop_broker":
        return (f"{who}stop command returned in {_s(d.get('duration_s'))}; waiting for the process to exit" if outcome == "ok"
                else f"{who}stop command FAILED (exit {d.get('exit_code')}: {d.get('error') or 'no error text'})")
    if action == "kill_broker":
        return f"{who}STOP TIMED OUT: {d.get('why')}; KILLED with kill_command ({outcome})"
    if action == "broker_stopped":
        how = "killed" if d.get("killed") else f"controlled shutdown {d.get('controlled_shutdown')}"
        return f"{who}stopped in {_s(d.get('seconds'))} ({how}); starting"
    if action == "start_broker":
        return (f"{who}start command returned in {_s(d.get('duration_s'))}; waiting for its ZooKeeper registration" if outcome == "ok"
                else f"{who}start command FAILED (exit {d.get('exit_code')}: {d.get('error') or 'no error text'})")
    if action == "broker_registered":
        secs = d.get("seconds") or {}
        return f"{who}registered again with a new ZooKeeper session ({_s(secs.get('start_register'))} after the start); gate in-sync: waiting"
    if action == "in_sync_progress":
        rec = d.get("log_recovery") or {}
        extra = f"; log recovery: {', '.join(f'{k} {v}' for k, v in sorted(rec.items()))}" if rec else ""
        names = [str(w).split(": ", 1)[0] for w in d.get("waiting_for") or []]
        return (f"{who}gate in-sync: waiting, {d.get('still_missing')} partition(s) still out of the ISR "
                f"({_some(names, d.get('still_missing'))}){extra}{_left(d)}")
    if action == "gate_in_sync":
        return f"{who}gate in-sync PASSED in {_s(d.get('seconds'))}: back in the ISR of all {d.get('partitions')} partition(s)"
    if action == "coordinator_progress":
        seen = d.get("answered") or {}
        answered = f"; answered {', '.join(f'{n} ({k})' for n, k in sorted(seen.items()))}" if seen else ""
        return (f"{who}gate coordinator: waiting, {d.get('still_pending')} offsets partition(s) still loading or not "
                f"answering from a loaded coordinator ({_some(d.get('waiting_for') or [], d.get('still_pending'))}){answered}{_left(d)}")
    if action == "canary_progress":
        return (f"{who}gate canary: waiting, {d.get('failed_rounds')} round(s) failed so far, last {d.get('last_failure')}"
                f"{_left(d)}")
    if action == "gate_coordinator":
        late = d.get("not_corroborated") or []
        return (f"{who}gate coordinator PASSED in {_s(d.get('seconds'))}: {len(d.get('probed') or [])} offsets partition(s) "
                "answer from a loaded coordinator" + (f" (no 'Finished loading' line yet for {_some(late)})" if late else ""))
    if action == "gate_canary":
        return f"{who}gate canary PASSED in {_s(d.get('seconds'))}: produce+consume round trip {d.get('round_trip_ms')} ms"
    if action == "restart_broker":
        if outcome == "skipped":
            return f"{who}skipped: {d.get('why')}"
        t = d.get("timing") or {}
        killed = (d.get("report") or {}).get("killed")
        return f"{who}DONE in {_s(t.get('total_s'))}" + (" (it had to be KILLED after the stop timeout)" if killed else "")
    if action == "gates_only" and outcome == "ok":
        t = d.get("timing") or {}
        return f"{who}DONE in {_s(t.get('total_s'))}: gates only (registered again since an earlier run's stop; not restarted again)"
    if action == "halt":
        if d.get("batch") is not None and d.get("phase") is None:  # an election's halt
            return f"HALTED at batch {d.get('batch')}: {d.get('reason')}"
        return f"HALTED{' at broker ' + str(b) if b is not None else ''}: {d.get('phase')}: {d.get('reason')}"
    return election_line(action, outcome, d)


def say(log: logging.Logger, action: str, outcome: str, details: Mapping[str, Any] | None = None) -> None:
    text = line(action, outcome, details)
    if text:
        bad = outcome not in ("ok", "acquired", "released", "waiting", "skipped") or action in ("kill_broker", "halt")
        log.log(logging.WARNING if bad else logging.INFO, "%s", text)


def quiet_connection_noise() -> None:
    """SSH and ZooKeeper connection chatter at DEBUG (``hooks/quiet.py``)."""
    from kafka_runbooks.hooks.quiet import quiet_connection_noise as quiet  # deferred: loaded on first use, not when a DAG file is parsed

    quiet()


# ---------------------------------------------------------------------------------------------- plans and runs


def refusal_summary(plan: Plan) -> str:
    """One line: how many steps are refused and the main reasons ("refused: 3 of 3 steps -- broker 2 is down ...")."""
    refused_steps = [s for s in plan.steps if s.refusals]
    general = [r for r in plan.refusals if not any(r.startswith(f"broker {s.broker_id}: ") for s in plan.steps)]
    reasons: list[str] = []
    for r in general:
        if r not in reasons:
            reasons.append(r)
    for s in refused_steps:
        offline = [r for r in s.refusals if "offline" in r]
        first = f"broker {s.broker_id}: " + (f"{len(offline)} partition(s) would go offline" if offline else s.refusals[0])
        more = s.refusals_total - (len(offline) if offline else 1)
        reasons.append(first + (f" (+{more} more reason(s))" if more > 0 else ""))
    head = f"refused: {len(refused_steps)} of {len(plan.steps)} step(s)" if plan.steps else "refused"
    shown = "; ".join(r if len(r) <= 200 else r[:199] + "…" for r in reasons[:4])
    return f"{head} -- {shown}" + (f"; and {len(reasons) - 4} more" if len(reasons) > 4 else "")


def dry_run_refusal(plan: Plan) -> str:
    """A dry run's refusal as loud as a real one: "would be refused: <the one-line summary>"."""
    return "would be " + refusal_summary(plan)


def _plan_head(plan: Plan, dry_run: bool) -> list[str]:
    """The note's first lines: what the plan is and what happened -- a dry run whose plan would be refused says so
    first, in the same words as a refusal (issue 32 point 2)."""
    if dry_run and plan.refused:
        return [f"**{plan.kind} of {plan.cluster}: DRY RUN -- WOULD BE REFUSED; nothing was asked and nothing changed**", "",
                dry_run_refusal(plan), ""]
    what = "DRY RUN -- nothing was asked and nothing changed" if dry_run else ("REFUSED -- nothing changed" if plan.refused else "to be approved")
    return [f"**{plan.kind} of {plan.cluster}: {what}**", ""] + ([refusal_summary(plan), ""] if plan.refused else [])


def plan_note(plan: Plan, digest: str, *, dry_run: bool, incident_url: str | None = None) -> str:
    """The readable plan (Markdown), for the run's note and the log of a dry run or a refused plan."""
    from kafka_runbooks.remediate.blast import headline, plan_counts, step_counts  # deferred: loaded on first use, not when a DAG file is parsed

    out = _plan_head(plan, dry_run)
    out.append(f"Order: {list(plan.broker_order)}" + (f"; already done: {list(plan.completed)}" if plan.completed else "")
               + f"; digest {digest[:16]}")
    out.append("")  # a paragraph each: Markdown (the run's note) would run the two lines together
    out.append(f"Blast radius: {headline(plan_counts(plan))}.")
    for i, s in enumerate(plan.steps, 1):
        c = step_counts(s)
        out.append(f"{i}. broker {s.broker_id}: {s.reason} -- {c['losing_replica']} partition(s) lose a replica, "
                   f"{c['leaderships_moving']} leadership(s) move" + _offline_said(s, c["offline"])
                   + (f"; REFUSED ({s.refusals_total} reason(s))" if s.refusals else ""))
    for w in plan.warnings[:5]:
        out.append(f"- warning: {w}")
    if incident_url:
        out.append(f"\nIncident page: {incident_url}")
    return "\n".join(out)


def _offline_said(step, count: int, shown: int = 10) -> str:
    """"; 2 OFFLINE for the whole restart (orders-2, orders-5)": partitions whose only live in-sync replica is the step's
    broker are never counted as kept up."""
    from kafka_runbooks.remediate.blast import offline_names  # deferred: loaded on first use, not when a DAG file is parsed

    if not count:
        return ""
    names = offline_names(step.blast_radius)[:shown]
    return (f"; {count} OFFLINE for the whole restart (" + ", ".join(names)
            + (f" and {count - len(names)} more" if count > len(names) else "") + ")")


ELECTION_DAG = "kafka_preferred_election"


def election_hint(paused: bool | None, url: str | None = None) -> str:
    """Where to go about leftover imbalance: the election DAG, linked (Markdown) when its page's URL is known, and
    whether it is paused -- the product's DAGs arrive paused, and a paused DAG's run waits for good."""
    name = f"[{ELECTION_DAG}]({url})" if url and not set(url) & set("()[]<> `") else ELECTION_DAG
    state = (" (it is PAUSED: unpause it first, or its run waits)" if paused else "" if paused is False
             else " (unpause it first if it is paused: the product's DAGs arrive paused)")
    return f"run {name} to move leadership back{state}"


def run_summary(kind: str, cluster: str, result: Mapping[str, Any] | None, *, outcome: str,
                imbalance: Sequence[str] = (), incident_url: str | None = None, election: str | None = None) -> str:
    """What a run did, how long it took, what it left (e.g. leadership off its preferred replicas). ``election``:
    :func:`election_hint` (default: unknown whether the election DAG is paused)."""
    result = dict(result or {})
    out = [f"{kind} of {cluster}: {outcome}"]
    timings = result.get("timings") or []
    if result.get("restarted") is not None:
        out.append(f"restarted {list(result.get('restarted') or [])} in {_s(result.get('wall_s'))}, approved by {result.get('approved_by')}")
    for t in timings:
        parts = [f"{k[:-2].replace('_', ' ')} {_s(v)}" for k, v in t.items() if k.endswith("_s") and k != "total_s"]
        out.append(f"  broker {t.get('broker_id')}: {_s(t.get('total_s'))} ({', '.join(parts)})" + "".join(f"; {x}" for x in _stop_said(t)))
    if imbalance:
        out.append(f"left: {len(imbalance)} partition(s) led by a broker other than their preferred replica "
                   f"({_some(list(imbalance))}); {election or election_hint(None)}")
    elif result.get("restarted"):
        out.append("left: every partition led by its preferred replica")
    if incident_url:
        out.append(f"incident page: {incident_url}")
    return "\n".join(out)


def _stop_said(timing: Mapping[str, Any]) -> list[str]:
    """What a step's stop did that a person must know: a stop command that failed or timed out, a kill, a controlled
    shutdown that failed or was not logged."""
    said = []
    if timing.get("stop_command") not in (None, "ok"):
        said.append(f"stop command {timing['stop_command']}")
    if timing.get("killed"):
        said.append("KILLED: its process outlived the stop command")
    if timing.get("controlled_shutdown") not in (None, "succeeded"):
        said.append(f"controlled shutdown {timing['controlled_shutdown']}")
    return said


def not_preferred(snapshot) -> list[str]:
    """Partitions whose leader is not their preferred (first) replica."""
    if snapshot is None:
        return []
    return sorted(p.name for p in snapshot.partitions if p.replicas and p.leader >= 0 and p.leader != p.replicas[0])


def not_preferred_by_broker(snapshot) -> dict[int, list[str]]:
    """The partitions not led by their preferred (first) replica, by that preferred broker."""
    out: dict[int, list[str]] = {}
    for p in sorted(snapshot.partitions, key=lambda p: p.name) if snapshot is not None else ():
        if p.replicas and p.leader >= 0 and p.leader != p.replicas[0]:
            out.setdefault(p.replicas[0], []).append(p.name)
    return out


def lines(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The readable lines of a record's audit trail (for a close-out or a page)."""
    out = []
    for e in entries:
        text = line(str(e.get("action")), str(e.get("outcome")), e.get("details") or {})
        if text:
            out.append(text)
    return out


# ---------------------------------------------------------------------------------------------- the election


def _batch(d: Mapping[str, Any]) -> str:
    of = f" of {d['batches']}" if d.get("batches") else ""
    to = f" -> broker {d['broker_id']}" if d.get("broker_id") is not None else ""
    return f"batch {d.get('batch')}{of}{to}: "


def election_line(action: str, outcome: str, details: Mapping[str, Any] | None = None) -> str | None:
    """The readable line of one audit entry of a preferred-replica election (``remediate/election_run.py``): per batch,
    which target broker and how many partitions, each check and gate, what a wait waits on and how long is left."""
    d = dict(details or {})
    at = _batch(d)
    if action == "batch_check":
        if outcome != "ok":
            return f"{at}REFUSED on fresh state: {'; '.join(map(str, (d.get('refusals') or [])[:3]))}; nothing of this batch was elected"
        if not d.get("partitions"):
            return None  # nothing left to elect in it: the skipped line says so
        return (f"{at}{d['partitions']} partition(s) to move to their preferred leader; fresh state checked: broker "
                f"{d.get('broker_id')} registered with a stable session, in their ISR, answering a direct check")
    if action == "elect_batch":
        if outcome == "skipped":
            return f"{at}skipped: {d.get('why')}"
        how = f"through {d['znode']}" if d.get("znode") else "through ElectLeaders (Admin API)"
        return (f"{at}{len(d.get('partitions') or [])} partition(s) handed to the controller {how}, taken in "
                f"{_s(d.get('controller_s'))}; gate convergence: waiting")
    if action == "convergence_progress":
        left = f", {_s(d.get('left_s'))} left" if d.get("left_s") is not None else ""
        waiting = [str(w) for w in d.get("waiting_for") or []]
        return f"{at}gate convergence: waiting{left}: {'; '.join(waiting[:3])}" + (f"; and {len(waiting) - 3} more" if len(waiting) > 3 else "")
    if action == "convergence":
        said = [f"{at}gate convergence PASSED in {_s(d.get('total_s'))}: {d.get('partitions')} partition(s) led by "
                f"broker {d.get('broker_id')}, every broker's own metadata agrees (after {_s(d.get('converged_s'))})"]
        if d.get("canary_rounds"):
            said.append(f"canary {d['canary_rounds']} round(s), {d.get('canary_failures', 0)} failed")
        if d.get("queue_checks"):
            said.append("request queues not saturated")
        coord = d.get("coordinator") or {}
        if coord:
            said.append(f"gate coordinator PASSED in {_s(coord.get('seconds'))} ({len(coord.get('probed') or [])} offsets "
                        "partition(s) answer from a loaded coordinator)")
        return "; ".join(said) + f"; batch done in {_s(d.get('batch_s'))}"
    if action == "election_wait":
        if outcome == "ok":
            return f"wait: ready after {d.get('checks')} check(s); first waited for: {'; '.join(map(str, (d.get('waited_for') or [])[:3])) or 'nothing'}"
        return f"wait: GAVE UP after {d.get('checks')} check(s): {d.get('reason')}"
    return None


def ready_line(cluster: str, checks: int, waited_for: Sequence[str]) -> str:
    """The deferred wait's last line: nothing stands in the way any more."""
    first = "; ".join(waited_for) if waited_for else "nothing (ready at the first check)"
    return f"preferred election of {cluster}: ready after {checks} check(s); it first waited for: {first}"


def wait_line(cluster: str, checks: int, why: Sequence[str], left_s: float | None) -> str:
    """The deferred wait's line per check (the triggerer's log): what it still waits on, how long until it gives up."""
    left = f"{_s(left_s)} left until the deadline" if left_s is not None else "no deadline"
    return f"preferred election of {cluster}: waiting (check {checks}, {left}): " + "; ".join(why)


def election_summary(cluster: str, result: Mapping[str, Any] | None, *, imbalance: Mapping[int, Sequence[str]] | None = None,
                     brokers: Sequence[int] = (), incident_url: str | None = None) -> str:
    """What an election did (per batch: target, partitions, how long), what it elected, and the imbalance it left."""
    result = dict(result or {})
    elected = list(result.get("elected") or [])
    timings = result.get("timings") or []
    out = [f"preferred election of {cluster}: DONE, every batch converged",
           f"elected {len(elected)} partition(s) in {len(timings)} of {result.get('batches')} batch(es) in {_s(result.get('wall_s'))}, "
           f"approved by {result.get('approved_by')}; canary failures {result.get('canary_failures', 0)}"]
    per_target: dict[Any, int] = {}
    for t in timings:
        per_target[t.get("broker_id")] = per_target.get(t.get("broker_id"), 0) + int(t.get("partitions") or 0)
        out.append(f"  batch {t.get('batch')} -> broker {t.get('broker_id')}: {t.get('partitions')} partition(s), "
                   f"controller {_s(t.get('elect_s'))}, converged {_s(t.get('converged_s'))}, done in {_s(t.get('batch_s'))}")
    if per_target:
        out.append("elected: " + ", ".join(f"broker {b} now leads {n} more partition(s)" for b, n in per_target.items())
                   + f" ({_some(elected)})")
    else:
        out.append("elected: nothing (every partition was already led by its preferred replica)")
    if imbalance:
        total = sum(len(v) for v in imbalance.values())
        scope = f"; this election moved leadership to brokers {list(brokers)} only" if brokers else ""
        out.append(f"left: {total} partition(s) still led by a broker other than their preferred replica: "
                   + ", ".join(f"broker {b} is the preferred leader of {len(names)} of them ({_some(names)})"
                               for b, names in sorted(imbalance.items())) + scope)
    else:
        out.append("left: every partition led by its preferred replica")
    if incident_url:
        out.append(f"incident page: {incident_url}")
    return "\n".join(out)


def election_plan_note(plan: Plan, digest: str, *, dry_run: bool) -> str:
    """An election's readable plan (Markdown) for the run's note: per batch, the target broker and its partitions; what
    it would wait for."""
    out = _plan_head(plan, dry_run)
    total = sum(len(b.partitions) for b in plan.batches)
    out.append(f"{total} partition(s) in {len(plan.batches)} batch(es); digest {digest[:16]}")
    for i, b in enumerate(plan.batches, 1):
        out.append(f"{i}. broker {b.target}: {len(b.partitions)} partition(s) ({_some(list(b.partitions))})")
    c = plan.conditions or {}
    window = ", ".join(c.get("window") or []) or "any time"
    out.append(f"Waits for: brokers {c.get('brokers')} in every ISR, their ZooKeeper session older than {c.get('stable_s')} s, "
               f"the quiet window ({window}); gives up after {c.get('deadline_s')} s")
    return "\n".join(out)
