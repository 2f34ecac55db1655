"""When a detection becomes an incident, and when an incident ends by itself. Pure.

The health check keeps one *streak* per problem and set of brokers (``problem:3`` -- the kinds of
one problem share it, e.g. a paused broker that is first ``broker_unresponsive`` and then, once its
session expired, ``broker_unregistered_alive``). Each check:

* a finding present: its streak counts one more consecutive check. When it has held for
  ``health.consecutive_checks`` checks and its current kind opens incidents, an incident opens and
  a response starts -- unless a response for the same problem and broker is RUNNING right now
  (dedupe only then: the detection is noted on that incident instead);
* a streak whose incident ended ``needs_person`` (rejected, refused, failed) stays attached to it
  while the problem lasts (a person owns it; nothing piles up), and no longer holds anything back:
  once the problem clears, the next detection opens a new incident;
* a streak whose incident was ``closed`` (the response said it fixed it) but whose finding is
  still there starts over: if it holds again for the consecutive checks, a new incident opens;
* a finding absent: the streak's consecutive count drops to 0; after ``health.clear_checks``
  absent checks in a row the streak ends and its incident (unless a response is running) resolves.

State is plain JSON (stored by :class:`~kafka_runbooks.detect.history.HistoryStore`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import HealthSettings
from kafka_runbooks.detect.detectors import OPENS_INCIDENT, problem_of, subject_of
from kafka_runbooks.incidents.store import CLOSED, NEEDS_PERSON, OPEN, RESPONDING, TERMINAL
from kafka_runbooks.model import Finding, Severity

# kinds that count toward a streak without opening an incident themselves
STREAK_ONLY = ("broker_check_failed",)


@dataclass(frozen=True)
class Action:
    """What the health operator must do, and why (the reason goes to the audit)."""

    kind: str  # "open" | "note" | "resolve" | "restart_streak"
    key: str
    reason: str
    finding: Finding | None = None
    incident_id: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)


def streak_key(f: Finding) -> str:
    subject = subject_of(f)
    return f"{problem_of(f)}:" + ",".join(str(b) for b in sorted(f.broker_ids)) + (f"@{subject}" if subject else "")


def tracked(f: Finding) -> bool:
    return f.kind in OPENS_INCIDENT or f.kind in STREAK_ONLY


def step(
    state: Mapping[str, Any],
    findings: Iterable[Finding],
    incidents: Mapping[str, Mapping[str, Any]],
    running: Iterable[str],
    settings: HealthSettings,
    at: str,
    unobserved: Iterable[str] = (),
) -> tuple[dict[str, Any], list[Action]]:
    """One health check: (the new state, the actions to take).

    ``incidents``: the cluster's incident records by id; ``running``: ids of incidents whose
    response run is running now (queued or running in Airflow); ``unobserved``: problems this check could not see
    (a run started by the serving watch reads no JMX: ``follower_stuck``): their streaks are neither counted nor
    marked absent."""
    running = set(running)
    unobserved = set(unobserved)
    streaks: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (state.get("streaks") or {}).items()}
    actions: list[Action] = []
    present: dict[str, Finding] = {}
    for f in findings:
        if tracked(f):
            key = streak_key(f)
            # one finding per key per check: the incident-opening kind wins over a streak-only one
            if key not in present or (present[key].kind in STREAK_ONLY and f.kind not in STREAK_ONLY):
                present[key] = f

    for key, f in present.items():
        st = streaks.get(key)
        if st is not None and _gap_s(st.get("last_seen"), at) > settings.episode_gap_s:
            actions.append(Action("restart_streak", key, f"not checked since {st.get('last_seen')} (> {settings.episode_gap_s:g} s): "
                                  "a new episode", f, st.get("incident_id")))
            st = None
        st = st or {"first_seen": at, "count": 0, "incident_id": None}
        st.update(problem=problem_of(f), broker_ids=sorted(f.broker_ids), kind=f.kind, last_seen=at, absent=0)
        st["count"] = int(st.get("count", 0)) + 1
        linked = incidents.get(st.get("incident_id") or "")
        if linked is not None and linked.get("status") == CLOSED and str(linked.get("closed_at") or "") < at:
            actions.append(Action("restart_streak", key, f"incident {linked['id']} was closed as fixed at "
                                  f"{linked.get('closed_at')} but {f.kind} is still seen: counting again", f, linked["id"]))
            st.update(first_seen=at, count=1, incident_id=None)
            linked = None
        if linked is not None and linked.get("status") not in TERMINAL:
            actions.append(Action("note", key, f"still seen ({st['count']} checks in a row)", f, linked["id"],
                                  {"status": linked.get("status")}))
        elif f.kind in OPENS_INCIDENT and st["count"] >= settings.consecutive_checks:
            busy = _running_for(f, incidents, running)
            if busy is not None:
                actions.append(Action("note", key, f"detected again while response {busy.get('response_run')} runs", f,
                                      busy["id"], {"status": busy.get("status")}))
                st["incident_id"] = busy["id"]
            else:
                actions.append(Action("open", key, f"{f.kind} held for {st['count']} consecutive checks "
                                      f"(since {st['first_seen']}; threshold {settings.consecutive_checks})", f))
        streaks[key] = st

    for key in [k for k in streaks if k not in present]:
        st = streaks[key]
        if st.get("problem") in unobserved:
            continue
        st["count"] = 0
        st["absent"] = int(st.get("absent", 0)) + 1
        if st["absent"] < settings.clear_checks:
            continue
        linked = incidents.get(st.get("incident_id") or "")
        if linked is not None and linked["id"] in running:
            continue  # the response ends it
        if linked is not None and linked.get("status") not in TERMINAL:
            actions.append(Action("resolve", key, f"{st.get('kind')} not seen for {st['absent']} consecutive checks "
                                  f"(last seen {st.get('last_seen')}; threshold {settings.clear_checks})",
                                  None, linked["id"], {"was": linked.get("status")}))
        del streaks[key]

    return {"streaks": streaks, "last_check": at, "checks": int(state.get("checks", 0)) + 1}, actions


def pending(state: Mapping[str, Any], settings: HealthSettings) -> list[str]:
    """Streaks seen but not yet for the consecutive checks, with no incident: worth a re-check soon -- and streaks that
    held long enough but only as a streak-only kind (a direct check failing, nothing corroborating it yet: the serving
    watch's rounds count as a check, ``count_watch``), for the corroboration the re-check usually brings."""
    return sorted(k for k, st in (state.get("streaks") or {}).items()
                  if not st.get("incident_id") and int(st.get("count", 0)) > 0
                  and (int(st.get("count", 0)) < settings.consecutive_checks or st.get("kind") in STREAK_ONLY))


def count_watch(state: Mapping[str, Any], not_answering: Mapping[int, str], settings: HealthSettings) -> tuple[dict[str, Any], list[str]]:
    """The serving watch's observation (``triggers/serving.py``) as one check of the brokers it names: ``{broker id:
    when the watch saw it not answering for health.serving_failures rounds in a row}``. Each counts one
    ``broker_check_failed`` on its ``broker_not_serving`` streak -- what a health check whose direct check of that
    broker fails with nothing corroborating it yet counts -- once per watch event (``watch_at``), and touches no other
    streak (the watch looked at nothing else). The health check's own finding then counts the next; an incident still
    opens only on a corroborated kind (``broker_unresponsive``...), as ever. Returns (the new state, the keys counted)."""
    streaks: dict[str, dict[str, Any]] = {k: dict(v) for k, v in (state.get("streaks") or {}).items()}
    counted = []
    for bid, at in sorted(not_answering.items()):
        f = Finding(kind="broker_check_failed", severity=Severity.WARNING, summary="", broker_ids=(int(bid),),
                    details={"problem": "broker_not_serving"})
        key = streak_key(f)
        st = streaks.get(key)
        if st is not None and (str(st.get("watch_at") or "") >= at or _gap_s(st.get("last_seen"), at) > settings.episode_gap_s):
            continue  # this event counted already (a retried task), or an old streak: the check's own step decides
        st = st or {"first_seen": at, "count": 0, "incident_id": None, "kind": f.kind}
        st.update(problem=problem_of(f), broker_ids=[int(bid)], last_seen=max(str(st.get("last_seen") or ""), at), absent=0,
                  watch_at=at, count=int(st.get("count", 0)) + 1)
        streaks[key] = st
        counted.append(key)
    return {**state, "streaks": streaks}, counted


def link(state: Mapping[str, Any], key: str, incident_id: str) -> dict[str, Any]:
    """The state after the incident opened for streak ``key``."""
    new = {**state, "streaks": {k: dict(v) for k, v in (state.get("streaks") or {}).items()}}
    if key in new["streaks"]:
        new["streaks"][key]["incident_id"] = incident_id
    return new


def _running_for(f: Finding, incidents: Mapping[str, Mapping[str, Any]], running: set[str]) -> Mapping[str, Any] | None:
    """A running response on the same problem that covers one of the finding's brokers."""
    wanted = set(f.broker_ids)
    for iid in sorted(running):
        rec = incidents.get(iid)
        if rec is None:
            continue
        trig = rec.get("trigger") or {}
        same_problem = (trig.get("details") or {}).get("problem", trig.get("kind")) == problem_of(f)
        same_subject = (trig.get("details") or {}).get("subject") == (f.details.get("subject"))
        if same_problem and same_subject and (wanted & set(rec.get("broker_ids") or ()) or not wanted):
            return rec
    return None


def stale_responses(incidents: Mapping[str, Mapping[str, Any]], run_states: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """Incidents marked ``responding`` whose run is no longer queued/running (it ended without
    recording an outcome, or was deleted): [(incident id, reason)] -> they need a person."""
    out = []
    for iid, rec in incidents.items():
        if rec.get("status") != RESPONDING:
            continue
        run = rec.get("response_run")
        state = run_states.get(iid)
        if state not in ("queued", "running"):
            out.append((iid, f"response run {run} is {state or 'unknown to Airflow'} but never recorded an outcome"))
    return out


def _gap_s(before: str | None, at: str) -> float:
    if not before:
        return 0.0
    try:
        return (clock.parse(at) - clock.parse(before)).total_seconds()
    except ValueError:
        return 0.0


__all__ = ["Action", "NEEDS_PERSON", "OPEN", "count_watch", "link", "pending", "stale_responses", "step", "streak_key"]
