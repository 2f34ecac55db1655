"""Findings between a response run's tasks travel as references, never as findings (issue 28), as the restart plan
does (``plans.py``): a task passes the incident (its id and cluster) or the bundle (its directory and the SHA-256 of
its ``findings.json``), and the service that needs the findings loads them, typed, from where they are stored:

* the detection's finding that opened the incident (its ``trigger``) and the analysis's findings, both on the
  incident's record in the state database (``trigger_of``, ``analysis_of``);
* the analysis's ``findings.json`` in the bundle, read once, by the report task, which records its findings on the
  incident with the file's SHA-256 (``read_analysis``); every later reader (``analysis_of``) checks that digest --
  the file's bytes, the reference the report task handed on and the recorded findings must all agree -- and refuses
  (``FindingsMismatch``, naming the incident and the file) when they do not;
* the findings a plan was computed from, in the plan's ledger entry with their SHA-256 (``records_sha256``: the plan's
  digest covers the plan only), checked when ``plans.load`` reads them back (``PlanFindingsMismatch`` when they differ).

This module is the one place of ``runbook/`` (and ``operators/``) where a finding is a dict: ``to_record`` /
``to_records`` serialize for the state database and the bundle, ``from_records`` parses what they hold. An edited
XCom therefore changes neither what the remediation choice reads nor what a plan is computed from.

The health check's asset events (``triggers/serving.py``) carry observations of the serving watch, never findings;
the DAG-run conf the health check starts a response with names the incident (``incident_id``), which holds the finding.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Mapping

from kafka_runbooks.runbook.errors import Stop

FINDINGS_FILE = "findings.json"
SHA256_KEY = "findings_sha256"
PLAN_SHA256_KEY = "findings_sha256"  # beside the findings in a plan's ``planned`` ledger entry


class FindingsMismatch(Stop):
    """The analysis's findings of an incident cannot be trusted: its ``findings.json`` is gone or unreadable, its
    SHA-256 is not the one recorded (or handed on), or the recorded findings are not the file's. Nothing is decided
    from them: the task fails saying which incident and which file."""

    def __init__(self, incident_id: Any, path: Any, why: str) -> None:
        self.incident_id, self.path, self.why = incident_id, str(path), why
        super().__init__(f"refused: the analysis's findings of incident {incident_id} cannot be trusted: {path}: {why}")


class PlanFindingsMismatch(Stop):
    """The findings recorded with a plan (its ``planned`` ledger entry) are not the ones it was recorded with: their
    SHA-256 is not the one recorded beside them, or none was recorded. The not-serving waiver is recomputed from them,
    so nothing is approved or run from them: the task fails naming the record, the plan's digest and what differs."""

    def __init__(self, record_id: Any, digest: Any, why: str) -> None:
        self.record_id, self.digest, self.why = record_id, str(digest), why
        super().__init__(f"refused: the findings recorded with plan {self.digest[:12]} of {record_id} cannot be "
                         f"trusted: {why}")


def records_sha256(records: Iterable[Mapping[str, Any]] | None) -> str:
    """The SHA-256 of findings as the state database holds them (``to_records``; canonical JSON: sorted keys, no
    spaces), recorded beside them in a plan's ledger entry and checked when it is read back."""
    text = json.dumps(list(records or ()), sort_keys=True, separators=(",", ":"), default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def verify_plan_findings(entry: Mapping[str, Any], record_id: Any) -> tuple[Any, ...]:
    """The findings of a plan's ``planned`` ledger ``entry``, typed, once their SHA-256 is the one recorded with them;
    ``PlanFindingsMismatch`` otherwise. An entry that records no findings and no SHA-256 has none (nothing to trust:
    no waiver can stand on it)."""
    raw, recorded, digest = entry.get("findings") or [], entry.get(PLAN_SHA256_KEY), entry.get("digest")
    if not isinstance(raw, list):
        raise PlanFindingsMismatch(record_id, digest, f"the recorded findings are a {type(raw).__name__}, not a list")
    if recorded is None and raw:
        raise PlanFindingsMismatch(record_id, digest, f"{len(raw)} finding(s) are recorded without their SHA-256")
    found = records_sha256(raw)
    if recorded is not None and found != recorded:
        kinds = ", ".join(sorted({str(f.get("kind")) for f in raw if isinstance(f, Mapping)})) or "none"
        raise PlanFindingsMismatch(record_id, digest, f"the {len(raw)} recorded finding(s) (kinds: {kinds}) have SHA-256 "
                                   f"{found}, the plan's entry records {recorded}: they were changed after the plan task")
    try:
        return from_records(raw)
    except ValueError as exc:
        raise PlanFindingsMismatch(record_id, digest, str(exc)) from exc


def to_record(finding) -> dict[str, Any]:
    """A finding as the state database and the bundle's manifest hold it."""
    return finding.to_dict()


def to_records(findings: Iterable[Any]) -> list[dict[str, Any]]:
    return [to_record(f) for f in findings]


def from_records(raw: Iterable[Mapping[str, Any]] | None) -> tuple[Any, ...]:
    """Typed findings from what the state database holds (a ledger entry's, an incident's); ValueError when one is
    not a finding."""
    from kafka_runbooks.model import Finding  # keeps DAG parsing fast: loaded when a task runs

    try:
        return tuple(Finding.from_dict(f) for f in raw or ())
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a recorded finding cannot be read: {exc!r}") from exc


def trigger_of(record: Mapping[str, Any] | None):
    """The detection's finding that opened the incident ``record``, or None: an incident opened from the form has
    none, and a record a change opened (a rolling restart's, an election's) holds what started it, not a finding."""
    trigger = (record or {}).get("trigger")
    if not isinstance(trigger, Mapping) or "severity" not in trigger or "summary" not in trigger:
        return None
    (finding,) = from_records([trigger])
    return finding


def analysis_of(record: Mapping[str, Any] | None, reference: Any = None) -> tuple[Any, ...]:
    """The analysis's findings the report task recorded on the incident ``record`` (none before it ran), once their
    digest is checked (``verify_analysis``); ``reference`` is the report task's output, when the reader has it."""
    record = record or {}
    raw = record.get("findings") or ()
    claimed = reference.get(SHA256_KEY) if isinstance(reference, Mapping) else None
    if not raw and not record.get(SHA256_KEY) and not claimed:
        return ()  # the report task has not run: nothing recorded, nothing claimed
    return verify_analysis(record, claimed)


def verify_analysis(record: Mapping[str, Any], claimed: Any = None) -> tuple[Any, ...]:
    """The recorded findings of the incident ``record``, typed, if its bundle's ``findings.json`` still has the SHA-256
    recorded with them (and ``claimed``, the one a task handed on, when given) and holds those very findings;
    ``FindingsMismatch`` otherwise."""
    incident_id = record.get("id")
    path = Path(str(record.get("bundle_dir") or "(no bundle recorded)")) / FINDINGS_FILE
    recorded = record.get(SHA256_KEY)
    if not recorded:
        raise FindingsMismatch(incident_id, path, "findings are recorded without the SHA-256 of their file")
    if claimed is not None and claimed != recorded:
        raise FindingsMismatch(incident_id, path, f"the report's reference says SHA-256 {claimed}, the incident records {recorded}")
    try:
        in_file, found = read_analysis(path.parent)
    except (OSError, ValueError) as exc:
        raise FindingsMismatch(incident_id, path, f"it cannot be read: {exc!r}") from exc
    if found != recorded:
        raise FindingsMismatch(incident_id, path, f"its SHA-256 is {found}, the incident records {recorded}")
    try:
        findings = from_records(record.get("findings") or ())
    except ValueError as exc:
        raise FindingsMismatch(incident_id, path, str(exc)) from exc
    if to_records(findings) != to_records(in_file):
        raise FindingsMismatch(incident_id, path, "the findings recorded on the incident are not the file's")
    return findings


def incident_record(config, incident: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The incident's record in the state database, by the id a task passed (``incident``: the open task's output), if
    it is ``config``'s cluster's; None when no incident was opened."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    incident_id = (incident or {}).get("incident_id") if isinstance(incident, Mapping) else None
    # only the run's own cluster's record (IncidentMismatch otherwise): an edited XCom naming another cluster's
    # incident must not steer this run's choice, plan or capture
    return IncidentStore(config).get(str(incident_id), cluster=config.name) if incident_id else None


def read_analysis(bundle_dir: str | Path) -> tuple[tuple[Any, ...], str]:
    """(the findings, the SHA-256 of the file) of the analysis's ``findings.json`` in ``bundle_dir``; OSError or
    ValueError when it cannot be read."""
    data = (Path(bundle_dir) / FINDINGS_FILE).read_bytes()
    doc = json.loads(data.decode("utf-8"))
    if not isinstance(doc, Mapping) or not isinstance(doc.get("findings"), list):
        raise ValueError(f"{FINDINGS_FILE} holds no list of findings")
    return from_records(doc["findings"]), hashlib.sha256(data).hexdigest()
