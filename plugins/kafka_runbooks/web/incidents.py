"""What the incidents pages show, read from the state database: per cluster the open and recent records (incidents,
and the remediations -- rolls, elections -- that are records too), one record with its audit trail, the people and
runs that acted on it, its evidence bundles and report, and the runs of Airflow it belongs to.

Reads only; no ZooKeeper, no Airflow metadata: it answers when the cluster does not. Files are served only from a
bundle the index lists for THAT record and only under the cluster's ``bundle_base`` (:func:`bundle_file`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import sqlalchemy as sa

from kafka_runbooks.state import schema as S
from kafka_runbooks.state.fleet import NOT_INCIDENTS
from kafka_runbooks.state.incidents import NEEDS_PERSON, OPEN, RESPONDING, TERMINAL, IncidentError, validate_id

RECENT = 50  # ended records shown per cluster
ACTIVE = (NEEDS_PERSON, OPEN, RESPONDING)
_ACTOR_RUN = re.compile(r"^dag:(?P<dag>[^/]+)/run:(?P<run>.+)$")
RESPONSE_DAG = "kafka_incident_response"
# the DAG whose runs act on a record of this kind (its plan, approval, ledger): an incident's is the response's
DAG_OF_KIND = {"rolling_restart": "kafka_rolling_restart", "preferred_election": "kafka_preferred_election",
               "election_schedule": "kafka_preferred_election_schedule"}


class NotFound(LookupError):
    pass


@dataclass(frozen=True)
class RunRef:
    """A DAG run an incident belongs to; ``dag_id`` None when only the run id is known."""

    dag_id: str | None
    run_id: str
    why: str  # "response", "approval", "ledger", "audit"

    def to_dict(self) -> dict[str, Any]:
        return {"dag_id": self.dag_id, "run_id": self.run_id, "why": self.why}


@dataclass
class IncidentView:
    record: dict[str, Any]
    audit: list[dict[str, Any]] = field(default_factory=list)
    bundles: list[dict[str, Any]] = field(default_factory=list)
    runs: list[RunRef] = field(default_factory=list)
    actors: list[str] = field(default_factory=list)
    report: str | None = None  # the report's path when it is servable
    report_problem: str | None = None  # why not
    plan_detail: Any = None  # model.PlanDetail of the record's plan (state/plans.py), when kept and matching its fingerprint

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "audit": self.audit, "bundles": self.bundles, "runs": [r.to_dict() for r in self.runs],
                "actors": self.actors, "report": self.report, "report_problem": self.report_problem}


def kind_of(record: Mapping[str, Any]) -> str | None:
    return (record.get("trigger") or {}).get("kind")


def is_remediation(record: Mapping[str, Any]) -> bool:
    return kind_of(record) in NOT_INCIDENTS


def rank(record: Mapping[str, Any]) -> tuple:
    """needs_person first, then the other active ones, then the ended ones; newest first within each."""
    status = record.get("status")
    group = 0 if status == NEEDS_PERSON else 1 if status in ACTIVE else 2
    return (group, _desc(str(record.get("opened_at") or "")))


def _desc(text: str) -> tuple:
    return tuple(-ord(ch) for ch in text)


def cluster_records(db, cluster: str, recent: int = RECENT) -> list[dict[str, Any]]:
    """Every active record of ``cluster`` and its ``recent`` latest ended ones, ranked (:func:`rank`)."""
    t = S.incident
    with db.read() as c:
        active = c.execute(sa.select(t.c.record).where(t.c.cluster == cluster, t.c.status.in_(ACTIVE))).scalars().all()
        ended = c.execute(sa.select(t.c.record).where(t.c.cluster == cluster, t.c.status.not_in(ACTIVE))
                          .order_by(t.c.opened_at.desc(), t.c.id.desc()).limit(recent)).scalars().all()
    return sorted([dict(r) for r in active] + [dict(r) for r in ended], key=rank)


def incident_view(db, cluster: str, incident_id: str) -> IncidentView:
    """One record of ``cluster`` with its trail, bundles and runs. :class:`NotFound` when it is not that cluster's."""
    from kafka_runbooks.state.bundles import BundleIndex
    from kafka_runbooks.state.incidents import IncidentStore

    try:
        validate_id(incident_id)
        store = IncidentStore(db)
        record = store.get(incident_id)
    except IncidentError as exc:
        raise NotFound(str(exc)) from exc
    if record.get("cluster") != cluster:
        raise NotFound(f"no incident {incident_id} in cluster {cluster}")
    audit = store.audit_trail(incident_id)
    view = IncidentView(record=record, audit=audit, bundles=BundleIndex(db).of_incident(incident_id))
    view.runs = runs_of(db, record, audit)
    view.actors = actors_of(record, audit)
    view.plan_detail = plan_detail_of(db, record)
    return view


def plan_detail_of(db, record: Mapping[str, Any]):
    """The record's plan's detail (every blast radius line and refusal) when kept and it matches the plan's fingerprint."""
    from kafka_runbooks.model import Plan
    from kafka_runbooks.state.plans import PlanDetails

    plan = record.get("plan")
    if not isinstance(plan, dict) or not plan.get("blast_sha256") or not record.get("plan_digest"):
        return None
    return PlanDetails(db).with_detail(Plan.from_dict(plan), record["id"], record["plan_digest"]).detail


def actors_of(record: Mapping[str, Any], audit: Sequence[Mapping[str, Any]]) -> list[str]:
    """Who acted, in order of first appearance: people, and runs (``dag:X/run:Y``)."""
    seen: list[str] = []
    for a in [record.get("opened_by")] + [e.get("actor") for e in audit]:
        if a and a not in seen:
            seen.append(str(a))
    return seen


def runs_of(db, record: Mapping[str, Any], audit: Sequence[Mapping[str, Any]]) -> list[RunRef]:
    """The DAG runs this record belongs to: its response run, the runs that asked for and used an approval of it,
    wrote its ledger, or acted in its audit trail. A run known only by its id (a ledger entry, an audit entry's
    ``run_id``) is taken to be of the DAG that acts on records of this kind (:data:`DAG_OF_KIND`)."""
    out: dict[str, RunRef] = {}
    usual = DAG_OF_KIND.get(str(kind_of(record) or ""), RESPONSE_DAG)

    def add(dag_id: str | None, run_id: Any, why: str) -> None:
        if not run_id:
            return
        run_id = str(run_id)
        known = out.get(run_id)
        if known is None or (known.dag_id is None and dag_id):
            out[run_id] = RunRef(dag_id or (known.dag_id if known else None), run_id, known.why if known else why)

    if record.get("response_run"):
        add(RESPONSE_DAG, record["response_run"], "response")
    for e in audit:
        m = _ACTOR_RUN.match(str(e.get("actor") or ""))
        if m:
            add(m["dag"], m["run"], "audit")
        details = e.get("details") or {}
        if isinstance(details, dict) and details.get("run_id"):
            add(usual, details["run_id"], "audit")
    rid = str(record.get("id"))
    with db.read() as c:
        for r in c.execute(sa.select(S.approval.c.dag_id, S.approval.c.run_id).where(S.approval.c.record_id == rid)
                           .order_by(S.approval.c.id)):
            add(r.dag_id, r.run_id, "approval")
        for r in c.execute(sa.select(S.ledger.c.run_id).where(S.ledger.c.record_id == rid).distinct()):
            add(usual, r.run_id, "ledger")
    return list(out.values())


def records_of_run(db, clusters: Iterable[str], dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """The records (of ``clusters``) a DAG run belongs to: the reverse of :func:`runs_of`."""
    ids: set[str] = set()
    clusters = list(clusters)
    i, a, l, au = S.incident, S.approval, S.ledger, S.audit
    actor = f"dag:{dag_id}/run:{run_id}"
    with db.read() as c:
        ids |= set(c.execute(sa.select(a.c.record_id).where(a.c.dag_id == dag_id, a.c.run_id == run_id)).scalars())
        ids |= set(c.execute(sa.select(l.c.record_id).where(l.c.run_id == run_id)).scalars())
        ids |= set(c.execute(sa.select(au.c.incident_id).where(au.c.actor == actor)).scalars())
        rows = c.execute(sa.select(i.c.id, i.c.record).where(i.c.cluster.in_(clusters))).all() if clusters else []
    out = []
    for r in rows:
        rec = r.record or {}
        if r.id in ids or (dag_id == RESPONSE_DAG and rec.get("response_run") == run_id):
            out.append(dict(rec))
    return sorted(out, key=rank)


# ---------------------------------------------------------------------------------------------- files


def _local(location: str) -> Path | None:
    """A bundle location on this server's disk (a path or file://); None for s3a://, hdfs://, ..."""
    if location.startswith("file://"):
        return Path(location[len("file://"):])
    if re.match(r"^[a-z][a-z0-9+.-]*://", location):
        return None
    return Path(location)


def _inside(path: Path, base: Path) -> bool:
    try:
        path.resolve().relative_to(base.resolve())
    except (ValueError, OSError):
        return False
    return True


def bundle_dirs(view: IncidentView, bundle_base: str) -> list[tuple[dict[str, Any], Path | None, str | None]]:
    """(index entry, its directory when servable, why not otherwise) for each of the record's bundles."""
    out = []
    for b in view.bundles:
        d = _local(str(b["location"]))
        if d is None:
            out.append((b, None, f"{b['location']} is not on this server's disk (read it where Spark does)"))
        elif not _inside(d, Path(bundle_base)):
            out.append((b, None, f"{b['location']} is outside the cluster's bundle_base {bundle_base}: not served"))
        elif not d.is_dir():
            out.append((b, None, f"{b['location']} is not on this server's disk (the bundle store is not mounted here?)"))
        else:
            out.append((b, d, None))
    return out


def manifest_files(directory: Path) -> tuple[list[dict[str, Any]], str | None]:
    """The bundle's files as its manifest lists them (path, kind, host, bytes, sha256); why not when unreadable."""
    try:
        doc = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
        files = [f for f in doc.get("files") or [] if isinstance(f, dict) and isinstance(f.get("path"), str)]
    except (OSError, ValueError, AttributeError) as exc:
        return [], f"manifest.json unreadable: {type(exc).__name__}: {exc}"
    extra = [{"path": n, "kind": "analysis"} for n in ("findings.json", "report.html") if (directory / n).is_file()]
    return files + [e for e in extra if e["path"] not in {f["path"] for f in files}], None


def bundle_file(view: IncidentView, bundle_base: str, capture: str, relpath: str) -> Path:
    """The file ``relpath`` of the record's bundle whose index entry's capture id (or directory name) is ``capture``
    -- listed by its manifest or the analysis' own outputs, inside the bundle and the bundle_base. NotFound else."""
    for entry, directory, _why in bundle_dirs(view, bundle_base):
        if directory is None or capture not in (entry.get("capture_id"), directory.name):
            continue
        files, _ = manifest_files(directory)
        if relpath not in {f["path"] for f in files}:
            raise NotFound(f"{relpath} is not a file of bundle {capture}")
        path = directory / relpath
        if not _inside(path, directory) or not path.is_file():
            raise NotFound(f"{relpath} is not in bundle {capture} on this server")
        return path.resolve()
    raise NotFound(f"no bundle {capture} of incident {view.record.get('id')} on this server")


def report_of(view: IncidentView, bundle_base: str) -> tuple[Path | None, str | None]:
    """The record's HTML report when it lies in one of its indexed bundles on this server; else why not."""
    wanted = [view.record.get("report")] + [((b.get("summary") or {}).get("analysis") or {}).get("report") for b in view.bundles]
    wanted = [w for w in wanted if w]
    if not wanted:
        return None, "no report: the analysis has not run for this record"
    for entry, directory, why in bundle_dirs(view, bundle_base):
        if directory is None:
            continue
        for w in wanted:
            p = _local(str(w))
            if p is not None and _inside(p, directory) and p.is_file():
                return p.resolve(), None
    reasons = [why for _, d, why in bundle_dirs(view, bundle_base) if why]
    return None, "the report is not readable on this server" + (f" ({'; '.join(reasons)})" if reasons else f": {wanted[0]}")
