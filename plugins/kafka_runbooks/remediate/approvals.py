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
* names this DAG run and the digest of the very plan it is about to execute (a changed plan, or
  another run, cannot use it),
* is an Approve by a configured approver who did not start the run, not a timeout,
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


def assigned_users(approvers: Sequence[str], starter: str | None) -> list[dict[str, str]]:
    """The HITL request's assigned users: the configured approvers, minus whoever started the run."""
    return [{"id": a, "name": a} for a in approvers if a != starter]


def four_eyes_refusals(user_id: str | None, user_name: str | None, approvers: Sequence[str], starter: str | None) -> list[str]:
    out = []
    if not user_id:
        out.append("the answer names no user")
        return out
    if starter and (user_id == starter or user_name == starter):
        out.append(f"user {user_id!r} started this run and cannot approve it (four eyes)")
    if user_id not in approvers:
        out.append(f"user {user_id!r} is not one of the cluster's approvers {list(approvers)}")
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
) -> tuple[list[str], Mapping[str, Any] | None]:
    """(reasons the approval cannot be used, the approval entry when one was found).

    ``entries`` are the ledger's entries; approval entries carry ``decision`` and ``mac``; an
    ``approval_used`` entry marks a decision (run, task try) as consumed."""
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
        refusals.append(
            f"the approval was for plan {decision.plan_digest[:12]}, not this plan {plan_digest[:12]}: the plan changed; "
            "a new approval is needed"
        )
    if decision.timed_out:
        refusals.append("the approval request timed out (no answer is a Reject)")
    elif decision.chosen != APPROVE:
        refusals.append(f"the answer was {decision.chosen!r}, not {APPROVE!r}")
    refusals += list(decision.refusals)
    refusals += [r for r in four_eyes_refusals(decision.user_id, decision.user_name, approvers, decision.starter) if r not in refusals]
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
