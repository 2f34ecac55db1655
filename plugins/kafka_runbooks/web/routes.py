"""The incidents routes of the kafka-runbooks app (listed in ``app.py``): every one behind the same ``reader``
dependency as the fleet overview (the api-server's authentication, then read access to DAGs)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse

from kafka_runbooks.web import incidents as I
from kafka_runbooks.web import pages as P


def _html(text: str, status_code: int = 200) -> HTMLResponse:
    from kafka_runbooks.web.common import PAGE_CSP, SECURITY_HEADERS  # deferred: loaded on first use, not when a DAG file is parsed

    return HTMLResponse(text, status_code=status_code, headers={"Content-Security-Policy": PAGE_CSP, **SECURITY_HEADERS})


def _config(cluster: str):
    from kafka_runbooks.web.common import configs as _configs  # deferred: loaded on first use, not when a DAG file is parsed

    configs, errors = _configs()
    for c in configs:
        if c.name == cluster:
            return c
    if cluster in errors:
        raise HTTPException(status_code=409, detail=f"cluster {cluster!r}: settings: {errors[cluster]}")
    raise HTTPException(status_code=404, detail=f"no cluster {cluster!r} in the Variable kafka_runbooks_clusters")


def _view(cluster: str, incident_id: str):
    from kafka_runbooks.state import state_of  # deferred: loaded on first use, not when a DAG file is parsed

    config = _config(cluster)
    try:
        return config, I.incident_view(state_of(config), cluster, incident_id)
    except I.NotFound as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc


def _all_records() -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    from kafka_runbooks.state import state_of  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.web.common import configs as _configs  # deferred: loaded on first use, not when a DAG file is parsed

    configs, errors = _configs()
    out: dict[str, list[dict[str, Any]]] = {}
    for c in configs:
        try:
            out[c.name] = I.cluster_records(state_of(c), c.name)
        except Exception as exc:  # noqa: BLE001 - one unreadable database never hides the other clusters
            errors[c.name] = f"{type(exc).__name__}: {exc}"
    return out, errors


def _records_of_run(dag_id: str, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    from kafka_runbooks.state import state_of  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.web.common import configs as _configs  # deferred: loaded on first use, not when a DAG file is parsed

    configs, _ = _configs()
    groups: dict[Any, list[str]] = {}
    for c in configs:
        try:
            groups.setdefault(state_of(c), []).append(c.name)
        except Exception:  # noqa: BLE001 - its clusters are listed as errors on the incidents page
            continue
    found = []
    for db, names in groups.items():
        found += [(r["cluster"], r) for r in I.records_of_run(db, names, dag_id, run_id)]
    return found


def _bundles(config, view) -> list[tuple[dict, list[dict], str | None]]:
    out = []
    for entry, directory, why in I.bundle_dirs(view, config.bundle_base):
        if directory is None:
            out.append((entry, [], why))
            continue
        files, problem = I.manifest_files(directory)
        out.append((entry, files, problem))
    return out


def _watch(names) -> dict[str, dict[str, Any]]:
    """Per cluster: is it watched (``web/watch.py``) -- its last check (state database), its health DAG and the
    triggerer (Airflow's metadata database, read by the api-server this runs in)."""
    from kafka_runbooks.config import health_schedules, raw_clusters  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.web import watch as W  # deferred: loaded on first use, not when a DAG file is parsed
    from kafka_runbooks.web.fleet import fleet_document  # deferred as the page's other reads

    names = sorted(names)
    doc = fleet_document()
    fleet = {c["cluster"]: c for c in doc["clusters"]}
    schedules = {s.cluster: s for s in health_schedules(raw_clusters(missing_ok=True))[0]}
    try:
        facts, problem = W.airflow_facts([W.health_dag_id(n) for n in names]), None
    except Exception as exc:  # noqa: BLE001 - said on the page as a warning: the page never pretends all is well
        facts, problem = None, f"{type(exc).__name__}: {str(exc)[:300]}"
    out = {}
    for n in names:
        s = schedules.get(n)
        out[n] = W.watch_status(n, fleet.get(n), facts, now=doc["generated_at"], stale_s=W.stale_after_s(s.cron if s else None),
                                watch_zookeeper=s.watch_zookeeper if s else True, facts_error=problem)
    return out


def add(app: FastAPI, reader) -> None:
    @app.get("/incidents", dependencies=[reader], response_class=HTMLResponse)
    def incidents_page() -> HTMLResponse:
        records, errors = _all_records()
        return _html(P.list_page(records, errors, _watch(set(records) | set(errors))))

    @app.get("/fleet", dependencies=[reader], response_class=HTMLResponse)
    def fleet_page() -> HTMLResponse:
        from kafka_runbooks.web.fleet import fleet_document  # deferred as the page's other reads

        return _html(P.fleet_page(fleet_document()))

    @app.get("/api/incidents", dependencies=[reader])
    def incidents_json() -> dict[str, Any]:
        records, errors = _all_records()
        return {"clusters": {k: v for k, v in records.items()}, "errors": errors}

    @app.get("/incidents/{cluster}/{incident_id}", dependencies=[reader], response_class=HTMLResponse)
    def incident_page(cluster: str, incident_id: str) -> HTMLResponse:
        config, view = _view(cluster, incident_id)
        report, problem = I.report_of(view, config.bundle_base)
        return _html(P.detail_page(cluster, view, _bundles(config, view), report is not None, problem))

    @app.get("/api/incidents/{cluster}/{incident_id}", dependencies=[reader])
    def incident_json(cluster: str, incident_id: str) -> dict[str, Any]:
        config, view = _view(cluster, incident_id)
        report, problem = I.report_of(view, config.bundle_base)
        doc = view.to_dict()
        doc.update(report=f"{P.incident_url(cluster, incident_id)}/report" if report else None, report_problem=problem)
        return doc

    @app.get("/incidents/{cluster}/{incident_id}/report", dependencies=[reader])
    def report(cluster: str, incident_id: str):
        from kafka_runbooks.web.common import REPORT_CSP, SECURITY_HEADERS  # deferred: loaded on first use, not when a DAG file is parsed

        config, view = _view(cluster, incident_id)
        path, problem = I.report_of(view, config.bundle_base)
        if path is None:
            raise HTTPException(status_code=404, detail=problem)
        return FileResponse(path, media_type="text/html; charset=utf-8",
                            headers={"Content-Security-Policy": REPORT_CSP, **SECURITY_HEADERS})

    @app.get("/incidents/{cluster}/{incident_id}/files/{capture}/{relpath:path}", dependencies=[reader])
    def bundle_file(cluster: str, incident_id: str, capture: str, relpath: str):
        from kafka_runbooks.web.common import REPORT_CSP, SECURITY_HEADERS  # deferred: loaded on first use, not when a DAG file is parsed

        config, view = _view(cluster, incident_id)
        try:
            path = I.bundle_file(view, config.bundle_base, capture, relpath)
        except I.NotFound as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        # every file as text (a report opens through /report): nothing captured is ever rendered as a page here
        return FileResponse(path, media_type="text/plain; charset=utf-8",
                            headers={"Content-Security-Policy": REPORT_CSP, **SECURITY_HEADERS})

    @app.get("/runs/{dag_id}/{run_id}", dependencies=[reader], response_class=HTMLResponse)
    def run_records(dag_id: str, run_id: str):
        found = _records_of_run(dag_id, run_id)
        if len(found) > 1 and dag_id == I.RESPONSE_DAG:  # a response run also made a mitigation's record: its incident
            found = [(c, r) for c, r in found if r.get("response_run") == run_id] or found
        if len(found) == 1:
            cluster, r = found[0]
            return RedirectResponse(P.incident_url(cluster, r["id"]), status_code=303)
        return _html(P.runs_page(dag_id, run_id, found), status_code=200 if found else 404)

    @app.get("/runs/{dag_id}/{run_id}/report", dependencies=[reader])
    def run_report(dag_id: str, run_id: str):
        found = _records_of_run(dag_id, run_id)
        for cluster, r in found:
            config, view = _view(cluster, r["id"])
            if I.report_of(view, config.bundle_base)[0] is not None:
                return RedirectResponse(P.incident_url(cluster, r["id"]) + "/report", status_code=303)
        return _html(P.runs_page(dag_id, run_id, found), status_code=404)
