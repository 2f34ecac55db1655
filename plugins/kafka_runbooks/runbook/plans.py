"""The plan a change runs is the plan its plan task recorded (issue 29 §2). The plan task records the plan in the
state database -- its ``planned`` ledger entry: the plan, its digest, the findings it was computed from, the run's
canary switch, the report, the gates -- and passes on only a reference to it (``output``: the record, the cluster, the
kind, the digest). The approval (what a person is shown and binds to) and every task that changes a cluster load
that entry by the digest (``load``): nothing else the reference carries is read, so editing XCom cannot change what is
shown or what runs. A dry run records nothing; its reference says what it would have done (nothing acts on it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kafka_runbooks.runbook import finding_records
from kafka_runbooks.runbook.errors import Stop


@dataclass(frozen=True)
class Reference:
    cluster: str
    record_id: str
    digest: str


@dataclass(frozen=True)
class RecordedPlan:
    """The ``planned`` entry of a record under a digest: everything the approval shows and the change runs."""

    config: Any
    plan: Any  # model.Plan
    digest: str
    findings: tuple[Any, ...] = ()  # model.Finding: the findings the plan was computed from
    canary: bool = False
    report: str | None = None
    gates: tuple[str, ...] = ()
    approval_wait_s: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def output(plan, digest: str, *, dry_run: bool = False, **said: Any) -> dict[str, Any]:
    """What a plan task returns (its XCom): the reference to the recorded plan -- never a copy of it. ``said``: small
    values for a person or a later task's log (a dry run's order), never read by the approval or a change."""
    return {"plan": {"roll_id": plan.roll_id, "cluster": plan.cluster, "kind": plan.kind}, "digest": digest,
            "record_id": plan.roll_id, "dry_run": bool(dry_run), **said}


def reference(plan_output: Any) -> Reference:
    """(cluster, record id, digest): all a plan task's output is trusted for; Stop when it names no recorded plan."""
    plan = plan_output.get("plan") if isinstance(plan_output, dict) else None
    if not isinstance(plan, dict) or not plan.get("roll_id") or not plan.get("cluster") or not plan_output.get("digest"):
        raise Stop("the plan task's output names no recorded plan (record and digest)")
    return Reference(str(plan["cluster"]), str(plan["roll_id"]), str(plan_output["digest"]))


def record(config, plan, digest: str, run_id: str, *, canary: bool, gates: Sequence[str] = (), report: str | None = None,
           findings: Sequence[Any] = (), approval_wait_s: float | None = None, **more: Any) -> None:
    """Appends the ``planned`` entry (the plan, its digest and everything the approval shows) to the record's ledger."""
    from kafka_runbooks.remediate import ledger as L  # keeps DAG parsing fast: the state store loads when a task runs

    records = finding_records.to_records(findings)
    L.Ledger(config, plan.roll_id).append(L.PLANNED, run_id, plan=plan.to_dict(), digest=digest, canary=bool(canary),
                                          gates=list(gates), report=report, findings=records,
                                          **{finding_records.PLAN_SHA256_KEY: finding_records.records_sha256(records)},
                                          approval_wait_s=approval_wait_s, **more)


def _default_canary(config, plan) -> bool:
    """A plan recorded before the run's canary switch was recorded with it: the cluster's own setting."""
    from kafka_runbooks.remediate.election import KIND as ELECTION  # keeps DAG parsing fast: loaded when a task runs

    return bool(config.election.canary if plan.kind == ELECTION else config.canary.enabled)


def load(plan_output: Any, nothing: str, config_of=None) -> RecordedPlan:
    """The recorded plan the plan task's output refers to (``reference``); Stop saying ``nothing`` was done when none
    was recorded under its digest, or it is of another cluster. ``config_of``: cluster name -> its settings."""
    from kafka_runbooks.remediate.ledger import Ledger, PlanNotRecorded, recorded_plan  # keeps DAG parsing fast: the task runs it

    try:
        ref = reference(plan_output)
    except Stop as exc:
        raise Stop(f"{exc}; {nothing}") from exc
    config = (config_of or load_config)(ref.cluster)
    entries = Ledger(config, ref.record_id).entries()
    try:
        plan, _ = recorded_plan(entries, ref.digest)
    except PlanNotRecorded as exc:
        raise Stop(f"{exc}; {nothing}") from exc
    if plan.cluster != config.name:
        raise Stop(f"the recorded plan is of cluster {plan.cluster!r}, not {config.name!r}; {nothing}")
    entry = next(e for e in entries if e.get("event") == "planned" and e.get("digest") == ref.digest)
    try:  # the digest covers the plan only: the findings the waiver is recomputed from are checked by their own SHA-256
        findings = finding_records.verify_plan_findings(entry, ref.record_id)
    except finding_records.PlanFindingsMismatch as exc:
        raise finding_records.PlanFindingsMismatch(exc.record_id, exc.digest, f"{exc.why}; {nothing}") from exc
    canary = entry.get("canary")
    return RecordedPlan(config=config, plan=plan, digest=ref.digest, findings=findings,
                        canary=_default_canary(config, plan) if canary is None else bool(canary),
                        report=entry.get("report"), gates=tuple(entry.get("gates") or ()),
                        approval_wait_s=entry.get("approval_wait_s"),
                        extra={k: entry.get(k) for k in ("starter", "notes", "resumed") if k in entry})


def load_config(cluster: str):
    """A cluster's settings; Stop naming what is wrong with them."""
    from kafka_runbooks.config import ConfigError, load_cluster  # keeps DAG parsing fast: the settings model loads at run time

    try:
        return load_cluster(str(cluster))
    except ConfigError as exc:
        raise Stop(str(exc)) from exc
