"""What the product itself did and does on a cluster, for the health check (``detect/activity.py``): the maintenance
lock's holder, and the remediations whose ledgers (``remediate/ledger.py``) show them acting within the window.

A remediation acts from its first step (``step_started``) to its end (``completed``, ``halted``, ``refused``,
``gave_up``); it is *running* while the run that holds the cluster's maintenance lock is one of its runs. A ledger that
stopped without an end and whose run no longer holds the lock ended at its last entry (a worker that died loses the
lock with its ZooKeeper session).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.detect.activity import Activity
from kafka_runbooks.remediate import ledger as L

ENDS = (L.COMPLETED, L.HALTED, "refused", "gave_up")


def activity_of(record: Mapping[str, Any], entries: Iterable[Mapping[str, Any]], lock_runs: Iterable[str]) -> Activity | None:
    """One record's remediation as an Activity, or None when it never acted (planned, waiting, rejected). Pure."""
    entries = [e for e in entries if e.get("at")]
    acting = [e for e in entries if e.get("event") in (L.STEP_STARTED, L.APPROVAL_USED)]
    if not acting:
        return None
    planned = next((e for e in reversed(entries) if e.get("event") == L.PLANNED), {})
    plan = planned.get("plan") or {}
    kind = str(plan.get("kind") or (record.get("trigger") or {}).get("kind") or "remediation")
    brokers = tuple(sorted({int(s["broker_id"]) for s in plan.get("steps") or () if "broker_id" in s} | set(record.get("broker_ids") or ())))
    runs = {str(e.get("run_id")) for e in entries if e.get("run_id")}
    holding = bool(runs & set(lock_runs))
    last_start = max(e["at"] for e in acting)
    ended = [e["at"] for e in entries if e.get("event") in ENDS and e["at"] >= last_start]
    end = None if holding else (max(ended) if ended else max(e["at"] for e in entries))
    return Activity(record=str(record.get("id")), kind=kind, brokers=brokers, started=min(e["at"] for e in acting), ended=end,
                    run=sorted(runs)[-1] if runs else None, holds_lock=holding)


def product_activity(config, zk=None, *, now: dt.datetime | None = None) -> list[Activity]:
    """The cluster's remediations acting now or within ``leadership.window_s``. ``zk``: an open kazoo client (the lock's
    holders are read on it); without one the lock is not read and only ledgers count."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.lock import holders

    now = now or clock.now()
    since = clock.iso(now - dt.timedelta(seconds=config.leadership.window_s))
    lock_runs = [str(h.get("run")) for h in (holders(zk, config.name) if zk is not None else []) if h.get("run")]
    out = []
    for record in IncidentStore(config).records(config.name):
        if record.get("closed_at") and str(record["closed_at"]) < since:
            continue
        a = activity_of(record, L.Ledger(config, record["id"]).entries(), lock_runs)
        if a is not None and (a.running or (a.ended or "") >= since):
            out.append(a)
    return out
