"""On-call in a real browser (issue 19): headless Debian Chromium driven by Playwright against the real deployment
(api-server, scheduler, dag-processor, triggerer, two Celery workers) on the lab, signed in through Airflow's own
login page as alice (maintenance) and bob (on call).

A roll alice starts in the DAG's trigger form (which refuses a brokers value that is not a list of broker ids, saying
why): the approval page says who asked and why and sums the blast radius up per topic; alice is told
there that she cannot approve it and why; bob approves in the page; the run's log has one line per phase and gate,
its last task a summary that is also the run's note. A dry run's readable plan is its run's note, on the run's page; a
refused plan (a broker the cluster does not have) says its one-line "refused: ..." summary as the note, and its close
task "refused; nothing changed". The DAG list shows what each product DAG does. An incident response on a broker with
no fault: the incident page lists it as needing a person, its report opens from there in the browser.

The deadlock of ``test_deployed.py`` (incident 001, detected, approved, restarted) is looked at by bob afterwards
(:func:`deadlock_in_the_browser`): the list names it, its page has the audit trail, its report names the deadlock.

Issue 32 (points 2-8), in the same flows: the brokers field offers exactly the configured brokers (nothing else can be
entered; REST gets a refusal); the approval page reads headline, blast radius, details and last, right above the
buttons, why the starter may not approve; a dry run whose plan would be refused fails and says "would be refused" as
its note; the incidents page says whether the cluster is watched; links in the plugin's pages, shown in Airflow's
frame, open in the top window (no second Airflow UI inside it); the fleet overview is a page; a record's plan details
are collapsed.

Screenshots of every step: ``<KAFKA_RUNBOOKS_TEST_VAR>/deployed/screenshots/`` (printed; the deadlock's in its
``incident-001/``).
"""

from __future__ import annotations

import os
import re
import time
import urllib.parse
from pathlib import Path

import pytest

from kafka_lab.airflow_home import REPO

DEPLOYED_VAR = Path(os.environ.get("KAFKA_RUNBOOKS_TEST_VAR", REPO / "var" / "test")) / "deployed"  # conftest.py's

pytestmark = [pytest.mark.deployed, pytest.mark.timeout(1800)]

CHROMIUM = os.environ.get("KAFKA_RUNBOOKS_CHROMIUM", "/usr/bin/chromium")
ROLL, RESPONSE = "kafka_rolling_restart", "kafka_incident_response"
SIGN_IN_TIMEOUT_MS = 180_000


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


class Browser:
    """One Chromium, one signed-in context per user; screenshots numbered in the order taken."""

    def __init__(self, pw, d, shots: Path) -> None:
        if not Path(CHROMIUM).exists():
            pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (scripts/bootstrap.sh installs it)", pytrace=False)
        self.d, self.shots, self.n = d, shots, 0
        shots.mkdir(parents=True, exist_ok=True)
        self.browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        self.pages = {}

    def page(self, user: str):
        if user not in self.pages:
            ctx = self.browser.new_context(viewport={"width": 1400, "height": 1000})
            ctx.set_default_timeout(60_000)
            page = ctx.new_page()
            # the first page of a cold browser: on the loaded 2-core machine the whole deployment once stood still for
            # ~50 s here (api-server and scheduler both silent, load 15), past the 60 s default
            page.goto(self.d.url + "/", timeout=SIGN_IN_TIMEOUT_MS)
            page.wait_for_selector("input[name=username]", timeout=SIGN_IN_TIMEOUT_MS)
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", self.d.password(user))
            page.keyboard.press("Enter")
            page.wait_for_url(re.compile(r"^(?!.*login).*$"), timeout=60_000)
            page.wait_for_load_state("networkidle")
            self.pages[user] = page
        return self.pages[user]

    def shot(self, user: str, name: str) -> Path:
        self.n += 1
        path = self.shots / f"{self.n:02d}-{user}-{name}.png"
        self.pages[user].screenshot(path=str(path), full_page=True)
        print(f"[screenshot] {path}")
        return path

    def close(self) -> None:
        self.browser.close()


def _text(page) -> str:
    return page.inner_text("body")


def _wait_text(page, pattern: str, timeout_s: float = 90.0, reload: bool = False) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        text = _text(page)
        if re.search(pattern, text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"{pattern!r} not on {page.url} within {timeout_s:g} s; the page says:\n{text[:3000]}")
        time.sleep(2)
        if reload:
            page.reload()
            page.wait_for_load_state("networkidle")


def _log(d, dag_id: str, run_id: str, task_id: str, user: str = "bob") -> str:
    return d.task_log(dag_id, run_id, task_id, user)


def on_call_in_the_browser(d, lab, shots: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = Browser(pw, d, shots)
        try:
            _dag_list(b, d)
            _roll(b, d)
            _plans_as_notes(b, d, lab)
            _incident(b, d)
        finally:
            b.close()


def _dag_list(b: Browser, d) -> None:
    """The DAG list says what each product DAG does: its own description, shown (Airflow 3) when the pointer rests on
    the DAG's name."""
    bob = b.page("bob")
    bob.goto(f"{d.url}/dags")
    _wait_text(bob, re.escape(RESPONSE))
    for dag_id, description in ((ROLL, "Restart brokers one at a time, keeping a holder of every offsets partition up, "
                                       "gated after each start."),
                                (RESPONSE, "Capture evidence, analyze it on Spark, and restart the broker only after on-call approves.")):
        name = bob.get_by_test_id("dag-id").filter(has_text=re.compile(rf"^{re.escape(dag_id)}$"))
        assert name.count() == 1, (dag_id, name.count(), _text(bob)[:3000])
        name.hover()
        bob.get_by_text(description, exact=True).wait_for(state="visible", timeout=30_000)
        b.shot("bob", f"dag-list-{dag_id}")
        bob.mouse.move(0, 0)


def _roll(b: Browser, d) -> None:
    # the DAG's page and its trigger form say what it does and what each field wants
    alice = b.page("alice")
    alice.goto(f"{d.url}/dags/{ROLL}")
    _wait_text(alice, r"Overview")
    b.shot("alice", "dag-page")

    reason = f"kernel patch, browser test {int(time.time())}"
    run_id = _trigger_in_the_form(b, d, reason)
    run = d.run(ROLL, run_id)
    assert run["triggering_user_name"] == "alice", run
    # Airflow's multi-select sends the chosen ids as strings; the plan reads them as broker ids
    assert run["conf"] == {"cluster": "lab", "brokers": ["2"], "reason": reason, "mode": "execute", "canary": False,
                           "resume": False}, run["conf"]
    d.wait_task(ROLL, run_id, "approve", ("awaiting_input",), 600)

    page_path = f"/dags/{ROLL}/runs/{q(run_id)}/tasks/approve/required_actions"
    alice.goto(d.url + page_path)
    text = _wait_text(alice, r"Asked by")
    b.shot("alice", "approval-request")
    assert "alice" in text and reason in text  # who asked, why
    # issue 32 point 5: a headline (what, where, why, risk), the blast radius summary, then the details
    body = text[text.index("Restart broker 2 of cluster lab"):]  # the body, after Airflow's own tabs ("Details" among them)
    order = [body.index(x) for x in ("Why:", "Risk:", "Blast radius (summary)", "Details", "Diagnosis", "Who may answer:")]
    assert order == sorted(order), (order, body[:4000])
    assert re.search(r"Who may answer:\s*bob,\s*carol", text), text[:3000]
    assert "you cannot answer this request" in text and "__consumer_offsets" in text and "at min ISR" in text
    # issue 32 point 6: Airflow shows alice an enabled Approve; why she cannot is said right where she clicks
    starter = alice.get_by_text("alice: you started this run, so you cannot approve it", exact=False).first
    approve = alice.get_by_test_id("hitl-option-Approve")
    said, button = starter.bounding_box(), approve.bounding_box()
    assert said and button and 0 <= button["y"] - (said["y"] + said["height"]) < 300, (said, button)
    starter.scroll_into_view_if_needed()
    b.shot("alice", "approval-why-not-you-above-the-buttons")

    bob = b.page("bob")
    bob.goto(d.url + page_path)
    _wait_text(bob, r"Asked by")
    b.shot("bob", "approval-request")
    bob.get_by_role("button", name=re.compile(r"^Approve$")).first.click()
    time.sleep(3)
    b.shot("bob", "approved")
    run = d.wait_run(ROLL, run_id, 900)
    assert run["state"] == "success", run

    log = _log(d, ROLL, run_id, "execute")
    # a gate's waiting line, when there is one, says how long the gate has left
    for waiting in (ln for ln in log.splitlines() if re.search(r"gate (in-sync|coordinator|canary): waiting, ", ln)):
        assert re.search(r", [\d.]+ s left", waiting), waiting
    for line in ("broker 2: safety check on fresh state passed", "broker 2: stopped in", "broker 2: registered again",
                 "broker 2: gate in-sync PASSED in", "broker 2: gate coordinator PASSED in", "broker 2: DONE in"):
        assert line in log, f"{line!r} not in the execute log:\n{log[-6000:]}"
    assert "Connected (version" not in log and "Authentication (publickey) successful" not in log
    close = _log(d, ROLL, run_id, "close")
    assert "summary:" in close and "restarted [2]" in close and "approved by bob" in close, close[-3000:]
    note = d.run(ROLL, run_id).get("note") or ""
    assert "restarted [2]" in note and "approved by bob" in note, note

    bob.goto(f"{d.url}/dags/{ROLL}/runs/{q(run_id)}")
    _wait_text(bob, r"DONE, every gate passed")  # the note's first line, on the run's page
    # the plugin's tab on every run: Airflow's UI adds the plugins' tabs after it has drawn the run (ci11 read the page
    # before, its screenshot a moment later had the tab): waited for, not read once
    _wait_text(bob, r"\bIncident\b")
    b.shot("bob", "run-note-summary")

    # the roll's record, from the run's tab to the incident page and back
    bob.goto(f"{d.url}/kafka-runbooks/runs/{ROLL}/{q(run_id)}")
    text = _wait_text(bob, r"Remediation")
    b.shot("bob", "roll-record")
    assert "closed" in text and "bob" in text and "approval" in text and "gate_in_sync" in text
    # issue 32 point 5: the plan's per-broker details and the audit details are collapsed
    details = bob.locator("details")
    assert details.count() > 0 and not any(details.evaluate_all("els => els.map(e => e.open)")), details.count()


def _plans_as_notes(b: Browser, d, lab) -> None:
    """A dry run's readable plan is the run's note; a refused plan's note is its one-line summary first, and its close
    task says "refused; nothing changed"; a dry run whose plan would be refused (issue 32 point 2) fails its plan task
    and says "would be refused" as its note and in its close task. None restarts anything (no approval is asked).
    The refusal is real: broker 3 is stopped, its partitions under-replicated, while the plans are made."""
    from kafka_lab.procs import wait_until

    tag = int(time.time())
    dry = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [1], "reason": f"browser test dry run {tag}", "mode": "dry-run"})
    d.wait_run(ROLL, dry, 600)
    # issue 32 point 8: a broker the cluster does not have, or not a whole number, is refused by the api-server; no run
    for bad in ([4], [1.5]):
        with pytest.raises(Exception, match=r"HTTP 4\d\d"):
            d.trigger("alice", ROLL, {"cluster": "lab", "brokers": bad, "reason": f"browser test bad {tag}", "mode": "dry-run"})
    from kafka_lab.deployment import HEALTH_DAG

    d.set_paused(HEALTH_DAG, True)  # the health check would open an incident about broker 3 and respond to it meanwhile
    lab.stop(3)
    lab.wait_unregistered(3, timeout=120)
    wait_until(lambda: not lab.full_isr() or None, 120, "a partition out of its ISR after broker 3 stopped", interval=2.0)
    try:
        refused = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [1], "reason": f"browser test refused {tag}",
                                            "mode": "execute", "canary": False})
        dry_refused = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [1], "reason": f"browser test dry refused {tag}",
                                                "mode": "dry-run"})
        d.wait_run(ROLL, refused, 600)
        d.wait_run(ROLL, dry_refused, 600)
    finally:
        lab.start(3, timeout=180)
        lab.wait_registered([1, 2, 3], timeout=180)
        lab.wait_full_isr(timeout=300)
        d.set_paused(HEALTH_DAG, False)
    bob = b.page("bob")

    note = d.run(ROLL, dry).get("note") or ""
    assert note.startswith("**rolling_restart of lab: DRY RUN -- nothing was asked and nothing changed**"), note
    assert "Order: [1]" in note and "Blast radius:" in note and "1. broker 1:" in note, note
    bob.goto(f"{d.url}/dags/{ROLL}/runs/{q(dry)}")
    _wait_text(bob, r"DRY RUN -- nothing was asked and nothing changed")  # the note's first line, on the run's page
    text = _whole_note(bob, "Blast radius:")
    b.shot("bob", "dry-run-plan-note")
    assert "Order: [1]" in text and "broker 1: step 1 of 1" in text, text[:3000]  # markdown: the list's "1." is a marker
    assert "approve" not in {k for k, t in d.task_instances(ROLL, dry).items() if t["state"] in ("success", "failed")}

    note = d.run(ROLL, refused).get("note") or ""
    lines = note.splitlines()
    assert "REFUSED -- nothing changed" in lines[0], note
    one_line = lines[2]
    assert one_line.startswith("refused"), note
    close = _log(d, ROLL, refused, "close")
    assert f"refused; nothing changed. {one_line}" in close, close[-3000:]
    assert d.task_instances(ROLL, refused)["plan"]["state"] == "failed"
    # issue 32 point 7: the plan task's log ends with the refusal's sentence, not a traceback (operators/refusal.py)
    plan_log = _log(d, ROLL, refused, "plan")
    assert "Task failed with exception" not in plan_log and "Task exited" in plan_log, plan_log[-3000:]
    bob.goto(f"{d.url}/dags/{ROLL}/runs/{q(refused)}")
    _wait_text(bob, r"REFUSED -- nothing changed")
    b.shot("bob", "refused-plan-note")

    # issue 32 point 2: the dry run of the same refused plan, as loud
    note = d.run(ROLL, dry_refused).get("note") or ""
    lines = note.splitlines()
    assert lines[0] == "**rolling_restart of lab: DRY RUN -- WOULD BE REFUSED; nothing was asked and nothing changed**", note
    assert lines[2].startswith("would be refused"), note
    tis = d.task_instances(ROLL, dry_refused)
    assert tis["plan"]["state"] == "failed" and tis["approve"]["state"] != "success", tis
    assert "dry run: would be refused" in _log(d, ROLL, dry_refused, "close")
    assert "DRY RUN: would be refused" in _log(d, ROLL, dry_refused, "plan")
    bob.goto(f"{d.url}/dags/{ROLL}/runs/{q(dry_refused)}")
    _wait_text(bob, r"WOULD BE REFUSED")
    b.shot("bob", "dry-run-would-be-refused-note")


def _whole_note(page, needle: str) -> str:
    """The run page's text with the whole note: as shown, or -- when the page shows only its beginning -- as its Note
    button opens it."""
    text = _text(page)
    if needle in text:
        return text
    page.get_by_role("button", name=re.compile(r"note", re.I)).first.click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text(needle, exact=False).first.wait_for(timeout=30_000)
    return dialog.inner_text()


def deadlock_in_the_browser(d, incident_id: str, run_id: str, shots: Path) -> None:
    """bob looks at the deadlock incident (001) after it was answered: the list names it with what the analysis found,
    its page (opened from the list, as a person would) has the audit trail of capture, approval, restart and gates, and
    its report, opened from there, names the deadlock."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = Browser(pw, d, shots)
        try:
            bob = b.page("bob")
            bob.goto(f"{d.url}/kafka-runbooks/incidents")
            _wait_text(bob, re.escape(incident_id))
            row = bob.locator("table.incidents tr", has=bob.get_by_role("link", name=incident_id, exact=True))
            assert row.count() == 1, row.count()
            cells = [c.strip() for c in row.locator("td").all_inner_texts()]
            b.shot("bob", "incidents")
            assert cells[1] == "closed" and "analysis: jvm_deadlock" in cells[3] and cells[4] == "3", cells
            row.get_by_role("link", name=incident_id, exact=True).click()
            bob.wait_for_url(re.compile(rf"/kafka-runbooks/incidents/lab/{re.escape(q(incident_id))}$"))
            text = _wait_text(bob, r"Audit trail")
            b.shot("bob", "incident")
            assert f"Incident {incident_id}" in text and "jvm_deadlock" in text and "JVM deadlock on broker 3" in text, text[:3000]
            timeline = bob.locator("table.timeline").inner_text()
            for action in ("open_incident", "capture", "approval", "stop_broker", "broker_registered", "gate_in_sync",
                           "gate_coordinator", "restart_broker"):
                assert action in timeline, (action, timeline[:3000])
            assert "bob" in timeline
            runs = bob.locator("ul.runs").inner_text()
            assert f"{RESPONSE} / {run_id}" in runs, runs
            # the run's Incident tab leads to the same page
            page_url = bob.url
            bob.goto(f"{d.url}/kafka-runbooks/runs/{RESPONSE}/{q(run_id)}")
            bob.wait_for_load_state("load")
            assert bob.url == page_url, (bob.url, page_url)
            bob.locator("#report-link").click()
            bob.wait_for_load_state("load")
            text = _text(bob)
            b.shot("bob", "report")
            assert bob.url.endswith("/report"), bob.url
            assert "jvm_deadlock" in text and "JVM deadlock on broker 3" in text and "Lock cycle on broker 3" in text, text[:3000]
        finally:
            b.close()


def _trigger_in_the_form(b: Browser, d, reason: str) -> str:
    """alice fills the roll's trigger form (Airflow's params form) and submits it; the run's id, from the run page the
    form opens. On the way, issue 19 problem 8: what the brokers field refuses, and how it says so."""
    alice = b.page("alice")
    alice.get_by_test_id("trigger-dag-button").click()
    form = alice.get_by_role("dialog")
    form.locator("#element_reason").wait_for()
    text = form.inner_text()
    for described in ("Broker ids to restart", "Choose from the configured brokers", "Why (recorded with every action)",
                      "dry-run shows the plan and changes nothing", "Gate every start on a canary",
                      "Continue the cluster's last halted roll"):
        assert described in text, (described, text[:3000])
    assert form.locator("input[name=element_mode]").input_value() == "dry-run"  # dry run by default
    submit = form.get_by_test_id("trigger-dag-submit")
    assert submit.is_disabled()  # the reason is required
    form.locator("#element_reason").fill(reason)
    assert submit.is_enabled()
    # issue 32 point 8: the brokers field offers exactly the configured brokers, in words; nothing else can be entered
    from playwright.sync_api import expect

    brokers = form.locator("[data-scope=field][data-part=root]", has_text="Broker ids to restart").last
    brokers.get_by_role("combobox").click()
    alice.get_by_role("option").first.wait_for()
    offered = sorted(t.strip() for t in alice.get_by_role("option").all_inner_texts())
    assert offered == ["broker 1", "broker 2", "broker 3"], offered
    b.shot("alice", "form-brokers-only-configured")
    alice.keyboard.type("9")
    expect(alice.get_by_role("option")).to_have_count(0)  # a broker the cluster does not have is not there to choose
    alice.keyboard.press("Backspace")
    alice.get_by_role("option", name="broker 2", exact=True).click()
    form.get_by_text("Cluster name, a key of", exact=False).click()  # closes the menu (Escape would close the dialog)
    assert "broker 2" in brokers.inner_text(), brokers.inner_text()
    _field(alice, form, "input[name=element_mode]").get_by_role("combobox").click()
    alice.get_by_role("option", name="execute").click()
    assert form.locator("input[name=element_mode]").input_value() == "execute"
    canary = form.locator("input[name=element_canary]")
    canary.locator("xpath=..").click()  # the switch's control
    assert not canary.is_checked()
    b.shot("alice", "trigger-form")
    submit.click()
    alice.wait_for_url(re.compile(rf"/dags/{ROLL}/runs/[^/]+$"))
    b.shot("alice", "triggered")
    return urllib.parse.unquote(alice.url.rsplit("/runs/", 1)[1])


def _field(page, form, selector: str):
    """The form's row (label, input, description, error) of the input ``selector``."""
    return form.locator("[data-scope=field][data-part=root]", has=page.locator(selector))


def _incident(b: Browser, d) -> None:
    """A response to a broker that has nothing wrong: captured, analysed on Spark, nothing to restart -- a person's."""
    from kafka_lab.procs import wait_until

    run_id = d.trigger("alice", RESPONSE, {"cluster": "lab", "broker_ids": [1], "reason": "browser test: look at broker 1"})

    rejected, asked_to_move = [], []

    def settled():
        # the analysis may still propose a restart of the broker asked about: bob rejects it, as on-call would
        tis = d.task_instances(RESPONSE, run_id)
        # broker 1 serves: no move of leadership should be asked; were it asked, bob would reject it
        if (tis.get("approve_mitigation") or {}).get("state") == "awaiting_input":
            assert d.answer("bob", RESPONSE, run_id, "approve_mitigation", option="Reject").status_code == 200
            asked_to_move.append(True)
        if (tis.get("approve") or {}).get("state") == "awaiting_input":
            assert d.answer("bob", RESPONSE, run_id, "approve", option="Reject").status_code == 200
            rejected.append(True)
        run = d.run(RESPONSE, run_id)
        return run if run["state"] in ("success", "failed") else None

    run = wait_until(settled, 1200, f"{RESPONSE} {run_id} to finish", interval=3.0)
    # needing a person pages on-call -- unless the person it needs is the one who rejected the restart
    paged = [p for p in d.pages() if p.get("run_id") == run_id
             or (isinstance(p.get("details"), dict) and p["details"].get("run_id") == run_id)]
    print(f"\n[{RESPONSE} {run_id}: {run['state']}; rejected by bob: {bool(rejected)}; on-call paged: "
          f"{[(p.get('event'), (p.get('text') or '').splitlines()[0][:200]) for p in paged]}]")
    if not rejected:
        assert [p for p in paged if p.get("event") in ("needs_person", "halted")], paged
    assert not asked_to_move, "a move of leadership was asked for a broker nothing is wrong with"
    bob = b.page("bob")
    bob.goto(f"{d.url}/kafka-runbooks/incidents")
    text = _wait_text(bob, r"need a person")
    b.shot("bob", "incidents")
    assert "Cluster lab" in text
    # issue 32 point 3: whether anything watches the cluster, beside "N open"
    watch = bob.locator("div.watch").first.inner_text()
    assert "last health check" in watch and "health-check DAG kafka_health_check_lab: active" in watch, watch
    assert "triggerer alive" in watch, watch
    banner = bob.locator("#needs-person")
    assert banner.count() == 1
    bob.goto(f"{d.url}/kafka-runbooks/runs/{RESPONSE}/{q(run_id)}")
    text = _wait_text(bob, r"Incident")
    b.shot("bob", "incident")
    assert "needs_person" in text, (run["state"], text[:3000])
    assert "Needs a person" in text and "browser test: look at broker 1" in text
    assert "Audit trail" in text and "open_incident" in text and "capture" in text  # the timeline
    assert "Evidence bundles" in text and "manifest sha256" in text
    link = bob.locator("#report-link")
    assert link.count() == 1, text[:3000]
    link.click()
    bob.wait_for_load_state("load")
    b.shot("bob", "report")
    assert "/report" in bob.url and "broker" in _text(bob).lower()
    # issue 32 point 4: the fleet overview is a page, linked from the incidents page; a link to Airflow's own pages
    # opens in the top window (the plugin's pages are not framed by the navigation: a sandboxed frame allows no other)
    bob.goto(f"{d.url}/kafka-runbooks/incidents")
    bob.get_by_role("link", name="Fleet overview").click()
    bob.wait_for_url(re.compile(r"/kafka-runbooks/fleet$"))
    text = _wait_text(bob, r"Fleet overview")
    b.shot("bob", "fleet-overview")
    assert "lab" in text and "Waiting for approval" in text, text[:2000]
    bob.goto(f"{d.url}/kafka-runbooks/runs/{RESPONSE}/{q(run_id)}")
    link = bob.locator("ul.runs a").first
    assert link.get_attribute("target") == "_top", link.get_attribute("target")
    link.click()
    bob.wait_for_url(re.compile(r"/dags/"))
    assert bob.locator("iframe").count() == 0
    b.shot("bob", "run-from-the-incident-page")


def test_on_call_in_the_browser(healthy, deployed_lab):
    shots = DEPLOYED_VAR / "screenshots"
    print(f"\n[screenshots in {shots}]")
    on_call_in_the_browser(healthy, deployed_lab, shots)
