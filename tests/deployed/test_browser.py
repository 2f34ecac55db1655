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
            _plans_as_notes(b, d)
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
    assert run["conf"] == {"cluster": "lab", "brokers": [2], "reason": reason, "mode": "execute", "canary": False,
                           "resume": False}, run["conf"]
    d.wait_task(ROLL, run_id, "approve", ("awaiting_input",), 600)

    page_path = f"/dags/{ROLL}/runs/{q(run_id)}/tasks/approve/required_actions"
    alice.goto(d.url + page_path)
    text = _wait_text(alice, r"Asked by")
    b.shot("alice", "approval-request")
    assert "alice" in text and reason in text  # who asked, why
    assert re.search(r"Who may answer:\s*bob,\s*carol", text), text[:3000]
    assert "you cannot answer this request" in text and "alice started this run and may not approve it" in text
    assert "Blast radius (summary)" in text and "__consumer_offsets" in text and "at min ISR" in text
    assert text.index("Blast radius (summary)") < text.index("Diagnosis")

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
    text = _wait_text(bob, r"DONE, every gate passed")  # the note's first line, on the run's page
    b.shot("bob", "run-note-summary")
    assert "Incident" in text  # the plugin's tab on every run

    # the roll's record, from the run's tab to the incident page and back
    bob.goto(f"{d.url}/kafka-runbooks/runs/{ROLL}/{q(run_id)}")
    text = _wait_text(bob, r"Remediation")
    b.shot("bob", "roll-record")
    assert "closed" in text and "bob" in text and "approval" in text and "gate_in_sync" in text


def _plans_as_notes(b: Browser, d) -> None:
    """A dry run's readable plan is the run's note; a refused plan's note is its one-line summary first, and its close
    task says "refused; nothing changed". Neither restarts anything (no approval is asked)."""
    tag = int(time.time())
    dry = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [1], "reason": f"browser test dry run {tag}", "mode": "dry-run"})
    refused = d.trigger("alice", ROLL, {"cluster": "lab", "brokers": [4], "reason": f"browser test refused {tag}",
                                        "mode": "execute", "canary": False})
    d.wait_run(ROLL, dry, 600)
    d.wait_run(ROLL, refused, 600)
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
    assert one_line.startswith("refused: 1 of 1 step(s) -- broker 4: ") and "no SSH connection for broker 4" in one_line, note
    close = _log(d, ROLL, refused, "close")
    assert f"refused; nothing changed. {one_line}" in close, close[-3000:]
    assert d.task_instances(ROLL, refused)["plan"]["state"] == "failed"
    bob.goto(f"{d.url}/dags/{ROLL}/runs/{q(refused)}")
    _wait_text(bob, r"REFUSED -- nothing changed")
    text = _whole_note(bob, "no SSH connection for broker 4")
    b.shot("bob", "refused-plan-note")
    assert "refused: 1 of 1 step(s) -- broker 4: " in text, text[:3000]


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
    for described in ("Broker ids to restart", "A JSON list of broker ids, e.g. [1, 2]", "Why (recorded with every action)",
                      "dry-run shows the plan and changes nothing", "Gate every start on a canary",
                      "Continue the cluster's last halted roll"):
        assert described in text, (described, text[:3000])
    assert form.locator("input[name=element_mode]").input_value() == "dry-run"  # dry run by default
    submit = form.get_by_test_id("trigger-dag-submit")
    assert submit.is_disabled()  # the reason is required
    form.locator("#element_reason").fill(reason)
    assert submit.is_enabled()
    brokers = _field(alice, form, "#element_brokers")

    # problem 8: what is not a JSON list of broker ids is refused by the form itself, saying why, before any click
    _type_json(alice, form, "1, 2")
    error = brokers.locator("[data-part=error-text]")
    assert error.inner_text().startswith("SyntaxError: ") and submit.is_disabled(), error.inner_text()
    error.scroll_into_view_if_needed()
    b.shot("alice", "form-brokers-not-json")
    _type_json(alice, form, '["2"]')
    assert error.inner_text() == "All elements in the array must be numbers." and submit.is_disabled()
    # a number that is not a broker id passes the form's own check (Airflow's form checks an array's items only for
    # being numbers): the api-server refuses it against the param's schema, and the form shows its reason; no run
    runs_before = {r["dag_run_id"] for r in d.runs(ROLL)}
    _type_json(alice, form, "[1.5]")
    assert error.count() == 0 and submit.is_enabled()
    submit.click()
    alert = form.get_by_test_id("error-alert")
    alert.wait_for()
    assert "Invalid input for param brokers: 1.5 is not a multiple of 1" in alert.inner_text(), alert.inner_text()
    alert.scroll_into_view_if_needed()
    b.shot("alice", "form-brokers-refused-by-the-api")
    assert {r["dag_run_id"] for r in d.runs(ROLL)} == runs_before

    _type_json(alice, form, "[2]")
    assert error.count() == 0
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


def _type_json(page, form, text: str) -> None:
    """Types ``text`` into the brokers field's JSON editor as a person would. The editor closes brackets and quotes
    itself (and types over them), and an empty editor is reset to ``[]``: the old text is replaced by a stand-in
    character first, the text typed after it, then the stand-in deleted."""
    editor = form.locator("#element_brokers")
    editor.locator(".view-lines").click()
    page.keyboard.press("Control+A")
    page.keyboard.type("x")
    page.keyboard.press("End")
    page.keyboard.type(text)
    page.keyboard.press("Control+Home")
    page.keyboard.press("Delete")
    shown = "".join(editor.locator(".view-lines").inner_text().split()).replace("\xa0", "")
    assert shown == "".join(text.split()), (text, shown)


def _incident(b: Browser, d) -> None:
    """A response to a broker that has nothing wrong: captured, analysed on Spark, nothing to restart -- a person's."""
    from kafka_lab.procs import wait_until

    run_id = d.trigger("alice", RESPONSE, {"cluster": "lab", "broker_ids": [1], "reason": "browser test: look at broker 1"})

    rejected = []

    def settled():
        # the analysis may still propose a restart of the broker asked about: bob rejects it, as on-call would
        tis = d.task_instances(RESPONSE, run_id)
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
    bob = b.page("bob")
    bob.goto(f"{d.url}/kafka-runbooks/incidents")
    text = _wait_text(bob, r"need a person")
    b.shot("bob", "incidents")
    assert "Cluster lab" in text
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
    # the Airflow navigation has the page (the plugin's external view, in Airflow's frame)
    bob.goto(f"{d.url}/plugin/kafka-incidents")
    frame = bob.frame_locator("iframe")
    frame.locator("h1").wait_for()
    b.shot("bob", "incidents-in-airflow")


def test_on_call_in_the_browser(healthy, deployed_lab):
    shots = DEPLOYED_VAR / "screenshots"
    print(f"\n[screenshots in {shots}]")
    on_call_in_the_browser(healthy, deployed_lab, shots)
