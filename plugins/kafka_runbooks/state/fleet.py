"""The fleet overview: per cluster, its last health check, its open incidents and the runs waiting for a person's
approval -- read from the state database only (no ZooKeeper, no Airflow metadata), so it answers even when a
cluster does not. :func:`read_facts` queries, :func:`overview` (pure) shapes; ``web/`` serves it as JSON.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import sqlalchemy as sa

from kafka_runbooks import clock
from kafka_runbooks.state import schema as S
from kafka_runbooks.state.history import DETECTIONS
from kafka_runbooks.state.incidents import NEEDS_PERSON, OPEN, RESPONDING

# records of the incident store that are not incidents: a roll's, an election's, the election schedule's own record
NOT_INCIDENTS = ("rolling_restart", "preferred_election", "election_schedule")
OPEN_STATUSES = (OPEN, RESPONDING, NEEDS_PERSON)


def read_facts(db, clusters: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What the database knows about each of ``clusters``: {"health": state row, "records": open records,
    "approvals": approval markers asked for and not yet answered}."""
    clusters = list(clusters)
    out: dict[str, dict[str, Any]] = {c: {"health": None, "records": [], "approvals": []} for c in clusters}
    if not clusters:
        return out
    i, h, a = S.incident, S.health_state, S.approval
    with db.read() as c:
        for r in c.execute(sa.select(h.c.cluster, h.c.updated_at, h.c.state)
                           .where(h.c.cluster.in_(clusters), h.c.name == DETECTIONS)):
            out[r.cluster]["health"] = {"updated_at": r.updated_at, "state": r.state or {}}
        for r in c.execute(sa.select(i.c.cluster, i.c.record).where(i.c.cluster.in_(clusters), i.c.status.in_(OPEN_STATUSES))
                           .order_by(i.c.opened_at, i.c.id)):
            out[r.cluster]["records"].append(r.record)
        q = (sa.select(i.c.cluster, a.c.record_id, a.c.dag_id, a.c.run_id, a.c.task_id, a.c.try_number, a.c.requested_at,
                       a.c.request)
             .join(i, i.c.id == a.c.record_id)
             .where(i.c.cluster.in_(clusters), a.c.request.is_not(None), a.c.decision.is_(None))
             .order_by(a.c.requested_at))
        for r in c.execute(q):
            out[r.cluster]["approvals"].append(dict(r._mapping))
    return out


def overview(facts: Mapping[str, Mapping[str, Any]], approval_timeout_s: Mapping[str, float], now: str) -> list[dict[str, Any]]:
    """One entry per cluster, in name order. Pure.

    An approval request counts as waiting until its cluster's ``approvals.timeout_s`` has passed (then Airflow
    answers Reject for the person); the records of rolls, elections and the schedule are remediations, not incidents."""
    at = clock.parse(now)
    out = []
    for name in sorted(facts):
        f = facts[name]
        health = f.get("health") or {}
        state = health.get("state") or {}
        last = state.get("last_check")
        incidents = [r for r in f.get("records") or () if ((r.get("trigger") or {}).get("kind")) not in NOT_INCIDENTS]
        remediations = [r for r in f.get("records") or () if ((r.get("trigger") or {}).get("kind")) in NOT_INCIDENTS
                        and (r.get("trigger") or {}).get("kind") != "election_schedule"]
        timeout = float(approval_timeout_s.get(name) or 0)
        waiting = []
        for ap in f.get("approvals") or ():
            asked = ap.get("requested_at")
            age = (at - clock.parse(asked)).total_seconds() if asked else None
            if timeout and age is not None and age > timeout:
                continue  # timed out: Airflow has answered Reject (or the run is gone)
            request = ap.get("request") or {}
            waiting.append({
                "record_id": ap["record_id"], "dag_id": ap["dag_id"], "run_id": ap["run_id"], "task_id": ap.get("task_id"),
                "try_number": ap["try_number"], "requested_at": asked, "waiting_s": round(age, 1) if age is not None else None,
                "assigned": list(request.get("assigned") or []), "started_by": (request.get("decision") or {}).get("starter"),
                "plan_digest": (request.get("decision") or {}).get("plan_digest"),
            })
        out.append({
            "cluster": name,
            "last_check": last,
            "last_check_age_s": round((at - clock.parse(last)).total_seconds(), 1) if last else None,
            "checks": state.get("checks"),
            "streaks": sorted((state.get("streaks") or {}).keys()),
            "open_incidents": [_incident(r) for r in incidents],
            "open_remediations": [_incident(r) for r in remediations],
            "waiting_for_approval": waiting,
        })
    return out


def _incident(r: Mapping[str, Any]) -> dict[str, Any]:
    trigger = r.get("trigger") or {}
    return {"id": r.get("id"), "status": r.get("status"), "kind": trigger.get("kind"), "severity": trigger.get("severity"),
            "broker_ids": list(r.get("broker_ids") or []), "opened_at": r.get("opened_at"), "reason": str(r.get("reason") or "")[:500],
            "status_reason": r.get("status_reason"), "response_run": r.get("response_run")}


def fleet_overview(configs: Iterable[Any], now: str | None = None) -> dict[str, Any]:
    """The overview of every cluster in ``configs`` (``ClusterConfig``s), each read from its own state database (one
    query set per database). A database that cannot be read gives its clusters an ``error``, not the others."""
    from kafka_runbooks.state import state_of

    now = now or clock.now_iso()
    groups: dict[Any, list[Any]] = {}
    entries: list[dict[str, Any]] = []
    for config in configs:
        try:
            groups.setdefault(state_of(config), []).append(config)
        except Exception as exc:  # noqa: BLE001 - its connection cannot be resolved: said, the others go on
            entries.append({"cluster": config.name, "error": f"{type(exc).__name__}: {exc}"})
    for db, members in groups.items():
        try:
            facts = read_facts(db, [c.name for c in members])
        except Exception as exc:  # noqa: BLE001 - an unreachable database
            entries += [{"cluster": c.name, "error": f"state database {db.safe_url}: {type(exc).__name__}: {exc}"} for c in members]
            continue
        entries += overview(facts, {c.name: c.approvals.timeout_s for c in members}, now)
    return {"generated_at": now, "clusters": sorted(entries, key=lambda e: e["cluster"])}
