"""Approvals that mean something: who may approve, and a decision that cannot be replayed.  Pure.

Design. The decision is never read from XCom. The approval task (a HITL ApprovalOperator) resumes
in ``execute_complete`` with the resume event Airflow built from its HITL detail row (written by the
REST endpoint, which already enforced ``assigned_users``, or by the scheduler's timeout sweep); it
applies the four-eyes rule itself and records a :class:`Decision` in the remediation ledger sealed
with an HMAC keyed by a secret held in an Airflow connection. Before asking, it records the request
(plan digest, run, try, who started the run) sealed the same way, so the decision binds to the plan
that was SHOWN even if the plan's XCom were edited while the request waited. The executor accepts only a
decision that

* carries a valid seal (nobody without the secret can write or edit one: not a hand-written XCom,
  not a hand-edited ledger line),
* names this DAG run and the digest of the very plan it is about to execute AND of everything that will
  run for it (``digest.execution_binding``: per-broker argv, the broker -> host map, the gates, the canary
  switch, the approvers, the seal key's connection): a changed plan, a Variable or an XCom edited after
  Approve, or another run cannot use it -- the refusal names what changed,
* is an Approve by a configured approver who did not start the run, not a timeout; when no person
  started the run (triggered by another DAG, a schedule) it must still come from a configured approver
  and the record says the run was automatic,
* is younger than ``approvals.max_age_s`` (a deferred election: until the deadline its approver approved),
* comes from the approval task's latest try and has not been used before: the first executor try
  that uses it records so under the ledger's lock, so a cleared or retried restart task finds it
  used and refuses (clearing the approval task too asks a person again).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Mapping, Sequence

from kafka_runbooks.remediate.digest import canonical

APPROVE = "Approve"
REJECT = "Reject"
MIN_SECRET_BYTES = 16


class ApprovalError(RuntimeError):
    """No usable approval; the message says why."""


@dataclass(frozen=True)
class Decision:
    dag_id: str
    run_id: str
    task_id: str
    try_number: int
    plan_digest: str
    chosen: str | None  # "Approve" / "Reject" / None (refused before any answer counted)
    user_id: str | None
    user_name: str | None
    responded_at: str | None
    timed_out: bool
    starter: str | None  # dag_run.triggering_user_name
    refusals: tuple[str, ...] = ()  # why this answer does not count (four eyes), empty when it does
    automatic: str | None = None  # no person started the run: how it was started (the record says so)
    binding: Mapping[str, Any] | None = None  # digest.execution_binding at the request: what will run
    plan: Mapping[str, Any] | None = None  # the plan the approver was shown

    @property
    def approved(self) -> bool:
        return self.chosen == APPROVE and not self.timed_out and not self.refusals

    def payload(self) -> dict[str, Any]:
        d = asdict(self)
        d["refusals"] = list(self.refusals)
        return d

    @classmethod
    def from_payload(cls, d: Mapping[str, Any]) -> "Decision":
        return cls(**{**{k: d.get(k) for k in cls.__dataclass_fields__}, "refusals": tuple(d.get("refusals") or ())})

    @property
    def started_by(self) -> str:
        return self.starter if self.starter else f"nobody: automatic run ({self.automatic or 'no person recorded as its starter'})"


def seal(decision: Decision, secret: bytes) -> str:
    return hmac.new(secret, canonical(decision.payload()), hashlib.sha256).hexdigest()


def check_secret(secret: bytes | str | None, conn_id: str) -> bytes:
    raw = secret.encode() if isinstance(secret, str) else (secret or b"")
    if len(raw) < MIN_SECRET_BYTES:
        raise ApprovalError(
            f"no usable approval key: Airflow connection {conn_id!r} must hold a secret of at least "
            f"{MIN_SECRET_BYTES} bytes in its password"
        )
    return raw


def assigned_users(approvers: Sequence[str], starter: str | None, names: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """The HITL request's assigned users: the configured approvers, minus whoever started the run -- compared by id
    and by name (a run's starter is recorded by the auth manager's user name; FAB's ids are numbers: ``names``)."""
    names = names or {}
    return [{"id": a, "name": names.get(a, a)} for a in approvers if starter is None or starter not in (a, names.get(a, a))]


def four_eyes_refusals(user_id: str | None, user_name: str | None, approvers: Sequence[str], starter: str | None,
                       names: Mapping[str, str] | None = None) -> list[str]:
    """Why this answer does not count. The answering user's id and name come from Airflow's auth manager (the HITL
    row); the starter is the run's ``triggering_user_name`` (the same auth manager's name). Unknown starter (a run
    another DAG or a schedule started): only a configured approver counts -- the rule that always holds."""
    names = names or {}
    out = []
    if not user_id:
        out.append("the answer names no user")
        return out
    if starter and starter in (user_id, user_name, names.get(user_id)):
        out.append(f"user {user_id!r} started this run and cannot approve it (four eyes)")
    if user_id not in approvers:
        out.append(f"user {user_id!r} is not one of the cluster's approvers {list(approvers)}")
    elif user_name and names.get(user_id) and user_name != names[user_id]:
        out.append(f"user {user_id!r} answered as {user_name!r}, but the cluster's approver {user_id!r} is {names[user_id]!r}")
    return out


def entry_for(decision: Decision, secret: bytes) -> dict[str, Any]:
    return {"decision": decision.payload(), "mac": seal(decision, secret)}


def usable_refusals(
    entries: Iterable[Mapping[str, Any]],
    *,
    secret: bytes,
    dag_id: str,
    run_id: str,
    plan_digest: str,
    approvers: Sequence[str],
    names: Mapping[str, str] | None = None,
    plan: Mapping[str, Any] | None = None,
    binding: Mapping[str, Any] | None = None,
    max_age_s: float | None = None,
    now: str | None = None,
    valid_until: str | None = None,
) -> tuple[list[str], Mapping[str, Any] | None]:
    """(reasons the approval cannot be used, the approval entry when one was found).

    ``plan_digest``: the approval digest of the plan and binding about to run (``digest.approval_digest``); ``plan`` and
    ``binding`` themselves, to name what changed. ``entries`` are the ledger's entries; approval entries carry
    ``decision`` and ``mac``; an ``approval_used`` entry marks a decision (run, task try) as consumed.
    ``max_age_s``/``now``: the approval expires ``max_age_s`` after it was given, or at ``valid_until`` when later
    (a deferred election's approved deadline)."""
    from kafka_runbooks import clock
    from kafka_runbooks.remediate.digest import binding_changes

    entries = list(entries)
    mine = [e for e in entries if e.get("event") == "approval" and (e.get("decision") or {}).get("run_id") == run_id
            and (e.get("decision") or {}).get("dag_id") == dag_id]
    if not mine:
        return [f"no approval was recorded for run {run_id!r} of {dag_id!r}"], None
    latest = max(mine, key=lambda e: int((e.get("decision") or {}).get("try_number") or 0))
    decision = Decision.from_payload(latest["decision"])
    refusals: list[str] = []
    if not hmac.compare_digest(str(latest.get("mac") or ""), seal(decision, secret)):
        return ["the recorded approval's seal does not verify: it was not written by the approval task (or was edited)"], latest
    if decision.plan_digest != plan_digest:
        changes = []
        if decision.plan is not None and plan is not None:
            changes += binding_changes(decision.plan, plan, "plan.")
        if decision.binding is not None and binding is not None:
            changes += binding_changes(decision.binding, binding)
        refusals.append(
            f"the approval was for {decision.plan_digest[:12]}, not what would run now {plan_digest[:12]}: "
            + ("; ".join(changes[:20]) if changes else "the plan or what runs for it changed") + "; a new approval is needed"
        )
    if decision.timed_out:
        refusals.append("the approval request timed out (no answer is a Reject)")
    elif decision.chosen != APPROVE:
        refusals.append(f"the answer was {decision.chosen!r}, not {APPROVE!r}")
    refusals += list(decision.refusals)
    refusals += [r for r in four_eyes_refusals(decision.user_id, decision.user_name, approvers, decision.starter, names)
                 if r not in refusals]
    if max_age_s is not None and decision.chosen == APPROVE and not decision.timed_out:
        if not decision.responded_at:
            refusals.append("the approval records no time: its age cannot be proven")
        else:
            try:
                given = clock.parse(decision.responded_at)
                current = clock.parse(now) if now else clock.parse(clock.now_iso())
                limit = given.timestamp() + max_age_s
                if valid_until:
                    limit = max(limit, clock.parse(valid_until).timestamp())
                if current.timestamp() > limit:
                    refusals.append(f"the approval given at {decision.responded_at} expired (approvals.max_age_s = {max_age_s:g}"
                                    + (f", approved deadline {valid_until}" if valid_until else "") + "); a new approval is needed")
            except (TypeError, ValueError):
                refusals.append(f"the approval's time {decision.responded_at!r} cannot be read: its age cannot be proven")
    for e in entries:
        if (
            e.get("event") == "approval_used"
            and e.get("run_id") == run_id
            and int(e.get("approval_try") or 0) == decision.try_number
            and e.get("dag_id") == dag_id
        ):
            refusals.append(
                f"this approval (try {decision.try_number} of {decision.task_id}) was already used at {e.get('at')} by "
                f"{e.get('task_id')} try {e.get('by_try')}; a cleared or retried task needs a new approval"
            )
            break
    return refusals, latest
