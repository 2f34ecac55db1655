"""The incidents pages of the kafka-runbooks app (web/), in process through FastAPI's TestClient on an embedded
SQLite state database: what they list, that everything from a cluster or a person is escaped, that files are
served only from the record's own indexed bundle, and that every route needs Airflow's authentication."""

from __future__ import annotations

import json
import types

import pytest

pytestmark = pytest.mark.timeout(300)

EVIL = "<script>alert(1)</script>\"'><img src=x onerror=alert(2)>"


class _User:
    def __init__(self, name: str, may_read: bool) -> None:
        self.name, self.may_read = name, may_read

    def get_id(self) -> str:
        return self.name

    def get_name(self) -> str:
        return self.name


@pytest.fixture
def site(tmp_path, monkeypatch):
    """Two clusters in a clusters file, their incidents in the embedded SQLite database, a bundle with a report."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.state.bundles import BundleIndex

    monkeypatch.delenv("AIRFLOW_CONN_KAFKA_RUNBOOKS_DB", raising=False)
    bundles = tmp_path / "bundles"
    clusters = {name: {"zk_conn_id": "nowhere", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                       "incident_base": str(tmp_path / "state"), "bundle_base": str(bundles)} for name in ("east", "west")}
    f = tmp_path / "clusters.json"
    f.write_text(json.dumps(clusters))
    monkeypatch.setenv("KAFKA_RUNBOOKS_CLUSTERS_FILE", str(f))
    east = ClusterConfig.from_dict("east", clusters["east"])
    store = IncidentStore(east)
    run = "manual__2026-11-24T10:00:00+00:00"
    deadlock = store.open(cluster="east", broker_ids=[3], reason="JVM deadlock on broker 3 " + EVIL, opened_by="dag:kafka_health_check_east/run:scheduled__1",
                          trigger={"kind": "jvm_deadlock", "severity": "critical", "summary": "deadlock " + EVIL})["id"]
    store.responding(deadlock, actor="dag:kafka_health_check_east/run:scheduled__1", run_id=run)
    store.audit(deadlock, actor="bob", action="approval", outcome="approve", details={"note": EVIL, "run_id": run})
    cap = bundles / "east" / deadlock / "20261124T100000Z"
    (cap / "hosts" / "3").mkdir(parents=True)
    (cap / "hosts" / "3" / "jstack-1.out").write_text("Found one Java-level deadlock: " + EVIL)
    (cap / "report.html").write_text("<html><body><h1>Report of broker 3</h1></body></html>")
    (cap / "findings.json").write_text("{}")
    (bundles / "secret.txt").write_text("not a bundle file")
    manifest = {"incident_id": deadlock, "cluster": "east", "capture_id": "20261124T100000Z", "status": "complete",
                "files": [{"path": "hosts/3/jstack-1.out", "kind": "jstack", "host": "h3", "bytes": 40, "sha256": "ab" * 32},
                          {"path": "../secret.txt", "kind": "aux"}]}
    (cap / "manifest.json").write_text(json.dumps(manifest))
    BundleIndex(east).record_capture(str(cap), manifest)
    BundleIndex(east).record_analysis(str(cap), report=str(cap / "report.html"), findings=1)
    store.update(deadlock, report=str(cap / "report.html"), bundle_dir=str(cap),
                 findings=[{"kind": "jvm_deadlock", "severity": "critical", "summary": EVIL}])
    stuck = store.open(cluster="east", broker_ids=[2], reason="ZooKeeper follower dropped", opened_by="dag:h/run:r2",
                       trigger={"kind": "zookeeper_follower_drop"})["id"]
    store.needs_person(stuck, actor="dag:kafka_incident_response/run:r2", reason="no restart applies: " + EVIL)
    closed = store.open(cluster="east", broker_ids=[1], reason="old one", opened_by="alice", trigger={"kind": "rolling_restart"})["id"]
    store.close(closed, actor="dag:kafka_rolling_restart/run:r0", resolution="restarted [1]")
    return types.SimpleNamespace(east=east, deadlock=deadlock, stuck=stuck, closed=closed, run=run, cap=cap)


@pytest.fixture
def client(site, monkeypatch):
    from fastapi.testclient import TestClient

    import airflow.api_fastapi.app as api_app
    from airflow.api_fastapi.core_api.security import get_user

    from kafka_runbooks.web.app import create_app

    class AuthManager:
        def is_authorized_dag(self, *, method, user, **kw):
            return method == "GET" and user.may_read

    monkeypatch.setattr(api_app, "get_auth_manager", lambda: AuthManager())
    app = create_app()
    who = {"user": _User("vera", True)}
    app.dependency_overrides[get_user] = lambda: who["user"]
    c = TestClient(app)
    c.who = who
    return c


def test_the_list_shows_every_cluster_with_needs_person_first_and_escapes_everything(site, client):
    r = client.get("/incidents")
    assert r.status_code == 200, r.text
    page = r.text
    assert "<script>" not in page and "onerror=alert" not in page.replace("onerror=alert(2)&gt;", "")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "script-src" not in r.headers["content-security-policy"] and "default-src 'none'" in r.headers["content-security-policy"]
    banner = page[page.index("id='needs-person'"):]
    assert site.stuck in banner[: banner.index("</div>")] and "need a person" in banner
    east = page[page.index("Cluster east"):page.index("Cluster west")]
    # needs_person, then the active one, then the ended one
    assert east.index(site.stuck) < east.index(site.deadlock) < east.index(site.closed)
    assert "1 recent ended" in east and "remediation: rolling_restart" in east
    # what the analysis found, beside what the health check saw
    row = east[east.index(site.deadlock):]
    assert "analysis: jvm_deadlock" in row[: row.index("</tr>")]
    assert "Cluster west" in page


def test_one_incident_page_has_status_finding_brokers_actors_runs_timeline_files_and_report(site, client):
    r = client.get(f"/incidents/east/{site.deadlock}")
    assert r.status_code == 200, r.text
    page = r.text
    assert "<script>" not in page and "<img" not in page
    assert "responding" in page and "deadlock &lt;script&gt;" in page
    assert "bob" in page and "scheduled health check" in page  # who acted
    # the run, both ways: a link to Airflow's run page here, and /runs/<dag>/<run> back to this page
    assert "/dags/kafka_incident_response/runs/manual__2026-11-24T10%3A00%3A00%2B00%3A00" in page
    back = client.get(f"/runs/kafka_incident_response/{site.run}", follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == f"/kafka-runbooks/incidents/east/{site.deadlock}"
    assert client.get("/runs/kafka_incident_response/nosuchrun").status_code == 404
    # the audit trail in order: opened, responding, approval
    timeline = page[page.index("Audit trail"):]
    assert timeline.index("open_incident") < timeline.index("status -&gt; responding") < timeline.index("approve")
    # the report is served from the bundle, sandboxed
    assert f"/kafka-runbooks/incidents/east/{site.deadlock}/report" in page
    rep = client.get(f"/incidents/east/{site.deadlock}/report")
    assert rep.status_code == 200 and "Report of broker 3" in rep.text
    assert rep.headers["content-type"].startswith("text/html") and rep.headers["content-security-policy"].startswith("sandbox")
    rr = client.get(f"/runs/kafka_incident_response/{site.run}/report", follow_redirects=False)
    assert rr.status_code == 303 and rr.headers["location"].endswith("/report")
    # bundle files: listed, served as text, never outside the bundle or unlisted
    assert "hosts/3/jstack-1.out" in page
    f = client.get(f"/incidents/east/{site.deadlock}/files/20261124T100000Z/hosts/3/jstack-1.out")
    assert f.status_code == 200 and f.headers["content-type"].startswith("text/plain") and "Java-level deadlock" in f.text
    assert client.get(f"/incidents/east/{site.deadlock}/files/20261124T100000Z/..%2Fsecret.txt").status_code == 404
    assert client.get(f"/incidents/east/{site.deadlock}/files/20261124T100000Z/manifest.json").status_code == 404
    assert client.get(f"/incidents/east/{site.stuck}/files/20261124T100000Z/hosts/3/jstack-1.out").status_code == 404
    # another cluster's id, an unknown cluster, a hostile id
    assert client.get(f"/incidents/west/{site.deadlock}").status_code == 404
    assert client.get(f"/incidents/nosuch/{site.deadlock}").status_code == 404
    assert client.get("/incidents/east/..%2F..%2Fetc").status_code == 404
    doc = client.get(f"/api/incidents/east/{site.deadlock}").json()
    assert doc["record"]["status"] == "responding" and doc["report"].endswith("/report")


def test_a_needs_person_incident_stands_out_on_its_page(site, client):
    page = client.get(f"/incidents/east/{site.stuck}").text
    assert "Needs a person" in page and "no restart applies: &lt;script&gt;" in page
    assert "no report: the analysis has not run" in page
    assert client.get(f"/incidents/east/{site.stuck}/report").status_code == 404


def test_a_report_outside_the_bundle_base_is_not_served(site, client, tmp_path):
    from kafka_runbooks.incidents.store import IncidentStore

    outside = tmp_path / "elsewhere.html"
    outside.write_text("<h1>not evidence</h1>")
    IncidentStore(site.east).update(site.stuck, report=str(outside))
    assert client.get(f"/incidents/east/{site.stuck}/report").status_code == 404


def test_every_route_needs_an_authenticated_reader(site, client):
    from airflow.api_fastapi.core_api.security import get_user

    routes = ["/incidents", f"/incidents/east/{site.deadlock}", f"/incidents/east/{site.deadlock}/report",
              f"/runs/kafka_incident_response/{site.run}", "/api/incidents",
              f"/incidents/east/{site.deadlock}/files/20261124T100000Z/hosts/3/jstack-1.out"]
    client.who["user"] = _User("nobody", False)
    for path in routes:
        assert client.get(path, follow_redirects=False).status_code == 403, path
    del client.app.dependency_overrides[get_user]  # Airflow's own: no token, no cookie
    for path in routes:
        assert client.get(path, follow_redirects=False).status_code == 401, path


def test_the_plugin_puts_the_page_in_the_navigation_and_on_every_run():
    from kafka_runbooks.web.plugin import KafkaRunbooksPlugin

    views = {v["destination"]: v for v in KafkaRunbooksPlugin.external_views}
    # issue 32 point 4: opened as a page of its own, not in Airflow's sandboxed frame (no url_route)
    assert views["nav"]["href"] == "/kafka-runbooks/incidents" and not views["nav"].get("url_route")
    assert views["dag_run"]["href"] == "/kafka-runbooks/runs/{DAG_ID}/{RUN_ID}"


# ---------------------------------------------------------------------------------------------- issue 32


def _anchors(page: str) -> list[str]:
    import re

    return re.findall(r"<a\b[^>]*>", page)


def test_every_link_opens_in_the_top_window_and_the_fleet_overview_is_a_page(site, client):
    """Issue 32 point 4: the pages are shown inside Airflow's frame; a link must not nest a second Airflow UI there. The
    fleet overview is a page, linked from the incidents page."""
    from kafka_runbooks.incidents.store import IncidentStore

    IncidentStore(site.east).audit(site.closed, actor="alice", action="plan_restart", outcome="refused",
                                   details={"run_id": "manual__2026-11-24T09:00:00+00:00"})
    pages = {path: client.get(path) for path in ("/incidents", f"/incidents/east/{site.deadlock}", f"/incidents/east/{site.closed}",
                                                  "/runs/kafka_rolling_restart/nosuchrun", "/fleet")}
    for path, r in pages.items():
        assert r.status_code in (200, 404), (path, r.text)
        anchors = _anchors(r.text)
        assert anchors, path
        # Airflow's pages in the top window; this app's own pages where they are (a sandboxed frame allows no other)
        to_airflow = [a for a in anchors if "href='/dags/" in a or "href='/dag_runs" in a]
        assert [a for a in to_airflow if "target='_top'" not in a] == [], path
        assert [a for a in anchors if a not in to_airflow and "target=" in a] == [], path
    assert any("href='/dags/kafka_rolling_restart/runs/" in a for a in _anchors(pages[f"/incidents/east/{site.closed}"].text))
    listing = pages["/incidents"].text
    assert "href='/kafka-runbooks/fleet'" in listing
    fleet = pages["/fleet"]
    assert fleet.headers["content-type"].startswith("text/html") and "default-src 'none'" in fleet.headers["content-security-policy"]
    assert "Fleet overview" in fleet.text and site.deadlock in fleet.text and "Cluster" in fleet.text
    east = fleet.text[fleet.text.index(">east<"):]
    assert site.stuck in east[: east.index("</tr>")]


def test_who_acted_reads_as_people_and_the_health_check_and_every_run_names_its_dag(site, client):
    """Issue 32 point 7: "By" and "Who acted" show the person or "scheduled health check", not ``dag:.../run:...``; a
    run known only by its id (a refused roll's plan) links to its DAG's run, never "?"."""
    from kafka_runbooks.incidents.store import IncidentStore

    run = "manual__2026-11-24T09:00:00+00:00"
    IncidentStore(site.east).audit(site.closed, actor="alice", action="plan_restart", outcome="refused", details={"run_id": run})
    listing = client.get("/incidents").text
    row = listing[listing.index(site.deadlock):]
    row = row[: row.index("</tr>")]
    assert "scheduled health check" in row and "dag:kafka_health_check" not in row
    page = client.get(f"/incidents/east/{site.deadlock}").text
    acted = page[page.index("Who acted"):]
    acted = acted[: acted.index("</tr>")]
    assert "scheduled health check" in acted and "bob" in acted and "dag:" not in acted, acted
    closed = client.get(f"/incidents/east/{site.closed}").text
    runs = closed[closed.index("<ul class='runs'>"):]
    runs = runs[: runs.index("</ul>")]
    assert "?" not in runs.replace("?run_id_pattern", "")
    assert f"kafka_rolling_restart / {run}" in runs and "/dags/kafka_rolling_restart/runs/manual__2026-11-24T09%3A00%3A00%2B00%3A00" in runs


def _sync_dags() -> None:
    """The DAG files into Airflow's metadata DB, as the DAG processor does (a new DAG arrives paused)."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    for bundle in manager.get_all_dag_bundles():
        if not bundle.is_initialized:
            bundle.initialize()
        sync_bag_to_db(BundleDagBag(dag_folder=bundle.path, bundle_path=bundle.path, bundle_name=bundle.name), bundle.name, bundle.version)


def _watch_of(page: str, cluster: str) -> str:
    part = page[page.index(f"id='cluster-{cluster}'"):]
    return part[: part.index("</div>")]


def test_a_quiet_page_says_whether_anything_watches_each_cluster(site, client, airflow_db):
    """Issue 32 point 3: "0 open" must not pass for healthy while the health DAG is paused, has never run, or the
    triggerer (the ZooKeeper watch) is down. Airflow's metadata DB is the real one (migrated, DAGs synced from the DAG
    files as the DAG processor does); the triggerer's heartbeat row is written as a triggerer writes it."""
    from datetime import timedelta

    from airflow.jobs.job import Job
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from airflow.utils.state import JobState
    from sqlalchemy import delete, update

    from kafka_runbooks import clock
    from kafka_runbooks.detect.history import HistoryStore

    with create_session() as session:
        session.execute(delete(Job).where(Job.job_type == "TriggererJob"))
    _sync_dags()
    with create_session() as session:  # as it arrives (a metadata DB kept from an earlier run may have it unpaused)
        session.execute(update(DagModel).where(DagModel.dag_id == "kafka_health_check_west").values(is_paused=True))
    west = _watch_of(client.get("/incidents").text, "west")
    assert "data-watched='no'" in west
    assert "kafka_health_check_west is PAUSED" in west and "never checked" in west
    assert "no triggerer has ever run" in west

    # unpaused, checked a minute ago, the triggerer alive: watched
    with create_session() as session:
        session.execute(update(DagModel).where(DagModel.dag_id == "kafka_health_check_west").values(is_paused=False))
        session.add(Job(job_type="TriggererJob", state=JobState.RUNNING, latest_heartbeat=clock.parse(clock.now_iso()),
                        heartrate=5))
    from kafka_runbooks.config import ClusterConfig
    import json, os

    west_config = ClusterConfig.from_dict("west", json.loads(open(os.environ["KAFKA_RUNBOOKS_CLUSTERS_FILE"]).read())["west"])
    minute_ago = (clock.parse(clock.now_iso()) - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
    HistoryStore(west_config).update_state(lambda st: {**st, "last_check": minute_ago, "checks": 1})
    west = _watch_of(client.get("/incidents").text, "west")
    assert "data-watched='yes'" in west, west
    assert "last health check" in west and "1 minute ago" in west and "triggerer alive" in west

    # an hour without a check is said as a warning
    hour_ago = (clock.parse(clock.now_iso()) - timedelta(minutes=61)).isoformat().replace("+00:00", "Z")
    HistoryStore(west_config).update_state(lambda st: {**st, "last_check": hour_ago})
    west = _watch_of(client.get("/incidents").text, "west")
    assert "data-watched='no'" in west and "no check for 61 minutes" in west


def test_the_incident_page_says_what_the_mitigation_did_and_when(site, client):
    """Mitigate first: the move of leadership's outcome, written on the incident by the mitigate task
    (``runbook/mitigate.on_incident``, with the shape ``remediate/demote_run.run`` returns), is on its page and in its
    audit trail; a halted one says so with its reason."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate.engine import Halted
    from kafka_runbooks.runbook.mitigate import on_incident
    from kafka_runbooks.runbook.task import Task

    result = {"broker_id": 3, "moved": ["orders-5", "__consumer_offsets-7"],
              "new_leaders": {"orders-5": 1, "__consumer_offsets-7": 2},
              "stays_offline": {"orders-2": "its only in-sync replica is broker 3 " + EVIL}, "left_out": [],
              "restore": {"orders-5": [3, 1, 2]}, "timing": {"reassign_s": 1.3, "elect_s": 0.25, "moved_s": 0.3},
              "approved_by": "carol", "record_id": "east-20261124T100100Z-abcdef", "at": "2026-11-24T10:01:22Z"}
    on_incident(site.east, {"incident_id": site.deadlock, "plan": {"roll_id": result["record_id"]}}, "carol",
                "2026-11-24T10:01:00Z", Task.plain(), result=result)
    page = client.get(f"/incidents/east/{site.deadlock}").text
    assert "<script>" not in page
    section = page[page.index("id='mitigation'"):page.index("<h2>Runs</h2>")]
    assert "Leadership of 2 partition(s) moved off broker 3 from 2026-11-24T10:01:00Z to 2026-11-24T10:01:22Z" in section
    assert "approved by carol" in section and "JVM was not touched" in section
    assert "to broker 1: orders-5" in section and "to broker 2: __consumer_offsets-7" in section
    assert "stays unavailable until the restart: orders-2" in section and result["record_id"] in section
    trail = IncidentStore(site.east).audit_trail(site.deadlock)
    assert [(e["actor"], e["action"], e["outcome"]) for e in trail][-1] == ("carol", "mitigation", "moved")

    on_incident(site.east, {"incident_id": site.stuck, "plan": {"roll_id": "east-x"}}, "carol", "2026-11-24T10:01:00Z",
                Task.plain(), error=Halted("move of leadership off broker 2 HALTED while electing\nthe controller did not take it " + EVIL))
    section = client.get(f"/incidents/east/{site.stuck}").text
    section = section[section.index("id='mitigation'"):]
    assert "was halted" in section and "HALTED while electing" in section and "<script>" not in section


def test_the_incident_page_shows_a_mitigations_reason_code_beside_its_outcome(site, client):
    """A move of leadership that did not happen keeps its reason's stable ``code`` on the incident
    (``mitigate.mitigation_summary``); the page shows it beside the outcome (red before: the code was recorded, never
    shown). One refused before the engine has none: nothing is shown for it."""
    from kafka_runbooks.remediate.engine import Halted
    from kafka_runbooks.runbook.mitigate import on_incident
    from kafka_runbooks.runbook.task import Task

    on_incident(site.east, {"incident_id": site.stuck, "plan": {"roll_id": "east-x"}}, "carol", "2026-11-24T10:01:00Z",
                Task.plain(), error=Halted("move of leadership off broker 2 HALTED while moving\nthe controller never "
                                           "took the reassignment", code="not_reordered" + EVIL))
    section = client.get(f"/incidents/east/{site.stuck}").text
    section = section[section.index("id='mitigation'"):]
    assert "was halted (code <code>not_reordered" in section and "<script>" not in section

    on_incident(site.east, {"incident_id": site.deadlock, "plan": {"roll_id": "east-y"}}, "carol", "2026-11-24T10:01:00Z",
                Task.plain(), error=RuntimeError("the maintenance lock is held by another run"))
    section = client.get(f"/incidents/east/{site.deadlock}").text
    section = section[section.index("id='mitigation'"):]
    assert "was halted (" in section and "(code" not in section


def test_a_response_run_that_also_moved_leadership_leads_to_its_incident(site, client):
    """Mitigation is on by default: the response run also keeps a record of its own mitigation (its ledger holds the
    run). The run's Incident tab still leads to the incident the run responds to (the mitigation is on its page), not
    to a list of two records (the deployed browser journey failed on that list)."""
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_runbooks.remediate import ledger as L

    store = IncidentStore(site.east)
    move = store.open(cluster="east", broker_ids=[3], reason="move leadership off broker 3", opened_by="alice",
                      trigger={"kind": "demote", "incident_id": site.deadlock, "broker_ids": [3]})["id"]
    L.Ledger(site.east, move).append(L.PLANNED, site.run, plan={"kind": "demote", "requested": [3]})
    back = client.get(f"/runs/kafka_incident_response/{site.run}", follow_redirects=False)
    assert back.status_code == 303 and back.headers["location"] == f"/kafka-runbooks/incidents/east/{site.deadlock}"
