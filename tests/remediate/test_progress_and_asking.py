"""Issue 19 §3-§7 (pure): the approval page says who asked, why, who may answer and -- for anybody else -- that they
cannot and why; the blast radius is a summary per topic first; a restart's audit entries read as one line per phase
and gate per broker; a refused plan has a one-line summary; a dry run's plan reads as a note; a finished run says
what it did and what it left."""

from __future__ import annotations

import logging

from snapshot_builders import P, snap

from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Plan, Step
from kafka_runbooks.remediate import progress
from kafka_runbooks.remediate import briefing
from kafka_runbooks.remediate.asking import footer, header, subject_suffix
from kafka_runbooks.remediate.blast import by_topic, headline, min_isr_by_topic, summarize
from kafka_runbooks.remediate.briefing import approval_body
from kafka_runbooks.remediate.plan import plan_restart, safety_settings

CFG = ClusterConfig(name="c1", zk_conn_id="zk", hosts={1: "ssh_b1", 2: "ssh_b2", 3: "ssh_b3"}, min_insync_replicas=2)


def _cluster():
    parts = [P("__consumer_offsets", i, (i % 3 + 1, (i + 1) % 3 + 1, (i + 2) % 3 + 1), i % 3 + 1, (1, 2, 3)) for i in range(6)]
    parts += [P("orders", i, (1, 2, 3), (i % 3) + 1, (1, 2, 3)) for i in range(4)]
    parts += [P("payments", 0, (1, 2), 1, (1, 2))]  # RF 2: at min ISR 1 override below -> min ISR 1, after a stop 1 left
    parts += [P("canary", 0, (2, 3, 1), 2, (2, 3, 1), min_isr=3)]  # min ISR 3 per topic: a stop would leave 2
    return snap(parts)


def test_the_blast_summary_counts_per_topic_from_the_planners_own_lines():
    s = _cluster()
    settings = safety_settings(CFG)
    plan = plan_restart(s, [1, 2, 3], CFG, settings=settings)
    rows = summarize(plan, min_isr_by_topic(s, plan, settings))
    one = {r.topic: r for r in rows if r.broker_id == 1}
    assert one["__consumer_offsets"].losing_replica == 6 and one["__consumer_offsets"].coordinators_moving == 2
    assert one["__consumer_offsets"].leaderships_moving == 2  # a coordinator moving moves its leadership too
    assert one["orders"].losing_replica == 4 and one["orders"].leaderships_moving == 2
    assert one["orders"].at_min_isr == 4  # 3 -> 2 in sync, min.insync.replicas 2
    assert one["payments"].at_min_isr == 1 and one["payments"].min_isr == 2  # 2 -> 1 in sync: below min ISR 2
    assert [r.topic for r in rows[:1]] == ["__consumer_offsets"]
    totals = {t.topic: t for t in by_topic(rows)}
    assert totals["canary"].min_isr == 3 and totals["canary"].at_min_isr == 1
    assert "leaderships move" in headline(rows) and "left at min ISR" in headline(rows)


def _page(starter="alice"):
    s = _cluster()
    plan = plan_restart(s, [1, 2], CFG, roll_id="c1-roll-1")
    assigned = [{"id": "bob", "name": "bob"}, {"id": "carol", "name": "carol"}]
    head = header(starter=starter, automatic=None if starter else "run type scheduled", why="kernel patch `[x](http://evil)` " + "y" * 400,
                  assigned=assigned, approvers=["alice", "bob", "carol"], incident_url="/kafka-runbooks/incidents/c1/c1-roll-1",
                  what=briefing.what(plan), risk=briefing.risk(plan))
    body = approval_body([], plan, report_path=None, approval_timeout="1:00:00", header=head,
                         min_isr=min_isr_by_topic(s, plan, safety_settings(CFG)), incident_url="/kafka-runbooks/incidents/c1/c1-roll-1",
                         footer=footer(starter=starter, assigned=assigned, approvers=["alice", "bob", "carol"]))
    return body, assigned


def test_the_approval_page_reads_headline_blast_radius_details_then_who_may_answer_above_the_buttons():
    """Issue 32 points 5 and 6: a short headline (what, where, why in plain text cut short, risk), the blast radius
    summary, the details; last -- right above Airflow's Approve and Reject -- who may answer, and to the person who
    started the run that they cannot and why (Airflow shows them an enabled Approve and answers "Access Denied")."""
    body, assigned = _page()
    first = body.splitlines()[0]
    assert first == "## Restart brokers 2, 1 of cluster c1, one at a time", first  # in the order they go (controller last)
    why = body[body.index("**Why:**"):body.index("**Asked by**")]
    assert "`" not in why.replace("\\`", "") and "](http" not in why and "http://" not in why  # plain, no code span, no link
    assert "(the whole reason is on the incident page)" in why and len(why) < 420
    assert "**Asked by** alice." in body and "**Risk:** " in body and "leaderships move" in body.split("\n### Blast")[0]
    order = [body.index(x) for x in ("**Why:**", "### Blast radius (summary)", "## Details", "### Diagnosis", "### Plan",
                                     "**Reject**, or no answer", "**Who may answer:**", "alice: you started this run")]
    assert order == sorted(order), order
    tail = body[body.index("**Who may answer:**"):]
    assert tail.startswith("**Who may answer:** bob, carol (the cluster's approvers, except alice who started this run).")
    assert "**alice: you started this run, so you cannot approve it** (four eyes" in tail and "Access Denied" in tail
    assert "you cannot answer this request" in tail and "ask bob, carol" in tail
    assert "| `orders` | 4 | 4 |" in body and "[on the incident page](/kafka-runbooks/incidents/c1/c1-roll-1)" in body
    assert "orders-0: loses" not in body
    # the subject is short enough for Airflow's list of required actions
    assert subject_suffix("alice", assigned) == " (asked by alice)"
    assert len("Rolling restart of lab: approve the plan?" + subject_suffix("alice", assigned)) <= 60


def test_an_automatic_run_is_said_as_such_and_names_the_approvers_not_asked():
    body, _ = _page(starter=None)
    assert "**Asked by** nobody: an automatic run" in body and "you started this run" not in body
    assert body.index("### Plan") < body.index("**Who may answer:** bob, carol (the cluster's approvers).")


def test_offline_partitions_of_a_not_serving_broker_are_said_to_be_already_offline():
    """Issue 32 point 5: "1 OFFLINE" says why -- the deadlocked broker alone leads the partition: it is already
    unavailable, and the restart is what brings it back."""
    plan = Plan(cluster="lab", kind="incident_restart",
                steps=(Step("restart_broker", 3, "step 1 of 1: broker 3 is not serving",
                            blast_radius=("orders-1: loses in-sync replica 3 (isr 3 -> ); already unavailable (leader 3 is not "
                                          "serving); offline until broker 3 is back", "orders-2: loses in-sync replica 3 (isr 1,3 -> 1)")),),
                not_serving={3: "direct check failed and jvm_deadlock"})
    body = approval_body([], plan, report_path=None, approval_timeout="1:00:00",
                         header=header(starter="alice", automatic=None, why="deadlock", assigned=[{"id": "bob"}], approvers=["bob"],
                                       incident_url=None, what=briefing.what(plan), risk=briefing.risk(plan)))
    assert body.startswith("## Restart broker 3 of cluster lab")
    assert "1 OFFLINE (already unavailable now: see OFFLINE below)" in body
    line = next(ln for ln in body.splitlines() if ln.startswith("- **OFFLINE:**"))
    assert "1 partition(s) are ALREADY unavailable, not made so by this plan: broker 3 is not serving" in line
    assert "jvm\\_deadlock" in line and "it alone leads them (their only in-sync replica)" in line
    assert body.index("- **OFFLINE:**") < body.index("| topic |")


def test_a_restart_reads_as_one_line_per_phase_and_gate_per_broker():
    entries = [
        ("maintenance_lock", "acquired", {}),
        ("safety_check", "ok", {"broker_id": 2}),
        ("safety_check_before_stop", "ok", {"broker_id": 2, "controller": 1}),
        ("stop_broker", "ok", {"broker_id": 2, "duration_s": 0.4}),
        ("kill_broker", "ok", {"broker_id": 2, "why": "process [pid 7] outlived the stop command by 30s"}),
        ("broker_stopped", "ok", {"broker_id": 2, "killed": True, "seconds": 31.2}),
        ("start_broker", "ok", {"broker_id": 2, "duration_s": 0.2}),
        ("broker_registered", "ok", {"broker_id": 2, "seconds": {"start_register": 7.5}}),
        ("in_sync_progress", "waiting", {"broker_id": 2, "still_missing": 12, "waiting_for": [f"t-{i}" for i in range(12)],
                                         "log_recovery": {"loaded": 40}, "left_s": 283.42}),
        ("gate_in_sync", "ok", {"broker_id": 2, "gate": "in_sync", "seconds": 9.87, "partitions": 40}),
        ("gate_coordinator", "ok", {"broker_id": 2, "seconds": 1.2, "probed": [1, 4]}),
        ("restart_broker", "ok", {"broker_id": 2, "timing": {"total_s": 52.0}, "report": {"killed": True}}),
        ("maintenance_lock", "released", {}),
    ]
    text = progress.lines({"action": a, "outcome": o, "details": d} for a, o, d in entries)
    assert len(text) == len(entries)
    assert "broker 2: STOP TIMED OUT: process [pid 7] outlived the stop command by 30s; KILLED" in text[4]
    assert text[8] == ("broker 2: gate in-sync: waiting, 12 partition(s) still out of the ISR (t-0, t-1, t-2, t-3, t-4 and "
                       "7 more); log recovery: loaded 40, 283.4 s left")
    assert text[9] == "broker 2: gate in-sync PASSED in 9.9 s: back in the ISR of all 40 partition(s)"
    assert text[11] == "broker 2: DONE in 52.0 s (it had to be KILLED after the stop timeout)"


def test_the_coordinator_and_canary_gates_waits_read_as_lines_with_the_time_left():
    from kafka_runbooks.remediate.executor import MAX_LISTED, coordinator_progress_details

    pending = list(range(30))
    errors = {p: ["COORDINATOR_LOAD_IN_PROGRESS"] for p in pending[:25]} | {27: ["NOT_COORDINATOR", "NOT_COORDINATOR"]}
    d = coordinator_progress_details(pending, errors, 412.06)
    # bounded: at most MAX_LISTED partitions named, their errors with them
    assert d["still_pending"] == 30 and len(d["waiting_for"]) == MAX_LISTED == len(d["errors_seen"])
    assert d["waiting_for"][:2] == ["__consumer_offsets-0", "__consumer_offsets-1"] and d["left_s"] == 412.1
    assert d["answered"] == {"COORDINATOR_LOAD_IN_PROGRESS": 25, "NOT_COORDINATOR": 1}  # counted over all 30
    text = progress.line("coordinator_progress", "waiting", {"broker_id": 3, **d})
    assert text == ("broker 3: gate coordinator: waiting, 30 offsets partition(s) still loading or not answering from a "
                    "loaded coordinator (__consumer_offsets-0, __consumer_offsets-1, __consumer_offsets-2, "
                    "__consumer_offsets-3, __consumer_offsets-4 and 25 more); answered COORDINATOR_LOAD_IN_PROGRESS (25), "
                    "NOT_COORDINATOR (1), 412.1 s left")
    small = coordinator_progress_details([3, 7], {}, 5.0)
    assert progress.line("coordinator_progress", "waiting", {"broker_id": 1, **small}) == (
        "broker 1: gate coordinator: waiting, 2 offsets partition(s) still loading or not answering from a loaded "
        "coordinator (__consumer_offsets-3, __consumer_offsets-7), 5.0 s left")
    assert progress.line("canary_progress", "waiting", {"broker_id": 2, "failed_rounds": 3, "left_s": 100,
                                                         "last_failure": "round at 4.1s: leader 2: -185 timed out"}) == (
        "broker 2: gate canary: waiting, 3 round(s) failed so far, last round at 4.1s: leader 2: -185 timed out, 100.0 s left")
    # a waiting line is said at INFO: nothing failed yet
    assert [r for r in progress.lines([{"action": "coordinator_progress", "outcome": "waiting", "details": small}])]


def test_connection_chatter_goes_to_debug(caplog):
    progress.quiet_connection_noise()
    with caplog.at_level(logging.INFO):
        logging.getLogger("paramiko.transport").info("Connected (version 2.0, client OpenSSH_9.2p1)")
        logging.getLogger("kazoo.client").info("Connecting to 127.0.0.1(127.0.0.1):2181, use_ssl: False")
        logging.getLogger("kazoo.client").warning("Connection dropped: socket connection error")
    assert [r.getMessage() for r in caplog.records] == ["Connection dropped: socket connection error"]


def test_a_refused_plan_has_a_one_line_summary_and_a_dry_run_a_readable_note():
    s = _cluster()
    down = snap([p for p in _cluster().partitions], brokers=(1, 3))  # broker 2 is down: its partitions' ISRs still name it
    plan = plan_restart(down, [1, 3], CFG)
    assert plan.refused
    one = progress.refusal_summary(plan)
    assert one.startswith("refused: ") and "\n" not in one and len(one) < 1200
    note = progress.plan_note(plan, "f" * 64, dry_run=False)
    assert note.startswith("**restart of c1: REFUSED -- nothing changed**") or "REFUSED -- nothing changed" in note.splitlines()[0]
    ok = plan_restart(snap([p for p in s.partitions if p.topic not in ("canary", "payments")]), [1, 2, 3], CFG)
    assert not ok.refused
    dry = progress.plan_note(ok, "a" * 64, dry_run=True, incident_url=None)
    assert "DRY RUN -- nothing was asked and nothing changed" in dry and "Order: [2, 3, 1]" in dry and "1. broker 2" in dry
    # the order and the blast radius are paragraphs of their own in the note's Markdown, never run together
    assert "\n\nBlast radius: " in dry


def test_a_finished_run_says_what_it_did_how_long_and_what_it_left():
    result = {"restarted": [1, 2], "approved_by": "bob", "wall_s": 24.3,
              "timings": [{"broker_id": 1, "stop_s": 3.0, "in_sync_s": 2.0, "total_s": 12.0}]}
    s = snap([P("orders", 0, (1, 2), 2, (1, 2)), P("orders", 1, (2, 1), 2, (1, 2))])
    text = progress.run_summary("rolling_restart", "c1", result, outcome="DONE", imbalance=progress.not_preferred(s))
    assert "restarted [1, 2] in 24.3 s, approved by bob" in text
    assert "broker 1: 12.0 s (stop 3.0 s, in sync 2.0 s)" in text
    # a kill and a stop command that timed out are said in the summary, as the executor's result carries them
    killed = {**result, "timings": [{"broker_id": 3, "stop_s": 20.0, "total_s": 41.0, "controlled_shutdown": "not logged",
                                      "killed": True, "stop_command": "exit 124: timeout after 10s"}]}
    text2 = progress.run_summary("rolling_restart", "c1", killed, outcome="DONE")
    assert ("broker 3: 41.0 s (stop 20.0 s); stop command exit 124: timeout after 10s; KILLED: its process outlived the stop "
            "command; controlled shutdown not logged") in text2, text2
    clean = {**result, "timings": [{"broker_id": 1, "stop_s": 3.0, "total_s": 9.0, "controlled_shutdown": "succeeded",
                                     "killed": False, "stop_command": "ok"}]}
    assert "broker 1: 9.0 s (stop 3.0 s)\n" in progress.run_summary("rolling_restart", "c1", clean, outcome="DONE") + "\n"
    assert "1 partition(s) led by a broker other than their preferred replica (orders-0); run kafka_preferred_election" in text
    # issue 32 point 7: the election DAG linked, and whether it is paused said
    linked = progress.run_summary("rolling_restart", "c1", {"restarted": [1]}, outcome="DONE", imbalance=["orders-0"],
                                  election=progress.election_hint(True, "/dags/kafka_preferred_election"))
    assert ("run [kafka_preferred_election](/dags/kafka_preferred_election) to move leadership back (it is PAUSED: "
            "unpause it first, or its run waits)") in linked
    assert progress.election_hint(False, "/dags/kafka_preferred_election").endswith("to move leadership back")
    assert "the product's DAGs arrive paused" in progress.election_hint(None)


def test_an_election_reads_as_one_line_per_batch_and_gate():
    """The election's audit entries (remediate/election_run.py) as the executor says them: which target broker and how
    many partitions per batch, the convergence gate waiting on what with how long left, passed in N s."""
    at = {"batch": 1, "batches": 2, "broker_id": 3}
    entries = [
        ("maintenance_lock", "acquired", {}),
        ("batch_check", "ok", {**at, "partitions": 8, "refusals": []}),
        ("elect_batch", "ok", {**at, "partitions": [f"orders-{i}" for i in range(8)], "method": "zookeeper",
                               "znode": "/admin/preferred_replica_election", "controller_s": 0.42}),
        ("convergence_progress", "waiting", {**at, "left_s": 57.5, "waiting_for": [
            "ZooKeeper: 3 partition(s) not led by the preferred replica: orders-0 (leader 1, preferred 3)",
            "broker 2's own metadata disagrees with ZooKeeper: orders-1 says 1"]}),
        ("convergence", "ok", {**at, "partitions": 8, "elect_s": 0.42, "converged_s": 1.25, "canary_rounds": 1,
                               "canary_failures": 0, "queue_checks": 1, "total_s": 2.0, "batch_s": 2.6}),
        ("batch_check", "ok", {"batch": 2, "batches": 2, "broker_id": 3, "partitions": 0, "refusals": []}),
        ("elect_batch", "skipped", {"batch": 2, "batches": 2, "broker_id": 3, "why": "already led by the preferred replica"}),
        ("maintenance_lock", "released", {}),
    ]
    text = progress.lines({"action": a, "outcome": o, "details": d} for a, o, d in entries)
    assert text[1] == ("batch 1 of 2 -> broker 3: 8 partition(s) to move to their preferred leader; fresh state checked: "
                       "broker 3 registered with a stable session, in their ISR, answering a direct check")
    assert text[2] == ("batch 1 of 2 -> broker 3: 8 partition(s) handed to the controller through "
                       "/admin/preferred_replica_election, taken in 0.4 s; gate convergence: waiting")
    assert text[3] == ("batch 1 of 2 -> broker 3: gate convergence: waiting, 57.5 s left: ZooKeeper: 3 partition(s) not led by "
                       "the preferred replica: orders-0 (leader 1, preferred 3); broker 2's own metadata disagrees with "
                       "ZooKeeper: orders-1 says 1")
    assert text[4] == ("batch 1 of 2 -> broker 3: gate convergence PASSED in 2.0 s: 8 partition(s) led by broker 3, every "
                       "broker's own metadata agrees (after 1.2 s); canary 1 round(s), 0 failed; request queues not saturated; "
                       "batch done in 2.6 s")
    assert text[5] == "batch 2 of 2 -> broker 3: skipped: already led by the preferred replica"  # no line for its empty check
    assert len(text) == 7
    offsets = progress.election_line("convergence", "ok", {**at, "partitions": 4, "converged_s": 0.5, "total_s": 0.6, "batch_s": 4.0,
                                                           "coordinator": {"seconds": 2.25, "probed": [0, 3]}})
    assert "gate coordinator PASSED in 2.2 s (2 offsets partition(s) answer from a loaded coordinator)" in offsets
    refused = progress.election_line("batch_check", "refused", {**at, "refusals": ["the quiet window ['01:00-02:00'] (UTC) closed"]})
    assert refused == ("batch 1 of 2 -> broker 3: REFUSED on fresh state: the quiet window ['01:00-02:00'] (UTC) closed; "
                       "nothing of this batch was elected")
    assert progress.line("halt", "failed", {"batch": 2, "reason": "batch did not converge within 10 s"}) == \
        "HALTED at batch 2: batch did not converge within 10 s"
    assert progress.election_line("election_wait", "gave_up", {"checks": 4, "reason": "gave up at the deadline"}) == \
        "wait: GAVE UP after 4 check(s): gave up at the deadline"


def test_the_election_says_each_line_at_its_level(caplog):
    log = logging.getLogger("test.election")
    with caplog.at_level(logging.INFO, logger="test.election"):
        progress.say(log, "convergence_progress", "waiting", {"batch": 1, "broker_id": 3, "left_s": 9.0, "waiting_for": ["x"]})
        progress.say(log, "halt", "failed", {"batch": 1, "reason": "r"})
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "batch 1 -> broker 3: gate convergence: waiting, 9.0 s left: x"), ("WARNING", "HALTED at batch 1: r")]


def test_the_deferred_wait_says_what_it_waits_on_and_how_long_is_left():
    import datetime as dt

    from kafka_runbooks.remediate import election as E

    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.timezone.utc)
    left = E.seconds_left({"deadline_at": "2026-01-01T12:05:00+00:00"}, now)
    assert left == 300.0 and E.seconds_left({}, now) is None
    assert E.seconds_left({"deadline_at": "2026-01-01T11:00:00+00:00"}, now) == 0.0
    assert progress.wait_line("lab", 3, ["broker 3 is not yet in the ISR of 2 partition(s) it hosts"], left) == (
        "preferred election of lab: waiting (check 3, 300.0 s left until the deadline): broker 3 is not yet in the ISR of "
        "2 partition(s) it hosts")
    assert progress.ready_line("lab", 1, []) == "preferred election of lab: ready after 1 check(s); it first waited for: nothing (ready at the first check)"


def test_a_finished_election_says_what_it_elected_and_the_imbalance_it_left():
    result = {"elected": ["orders-0", "orders-3", "__consumer_offsets-2"], "batches": 2, "approved_by": "carol", "wall_s": 6.4,
              "canary_failures": 0, "timings": [
                  {"batch": 1, "broker_id": 3, "partitions": 2, "elect_s": 0.3, "converged_s": 1.1, "batch_s": 2.5},
                  {"batch": 2, "broker_id": 3, "partitions": 1, "elect_s": 0.2, "converged_s": 0.9, "batch_s": 3.0}]}
    # broker 1 is the preferred leader of orders-1 and payments-0, led elsewhere: outside this election's brokers
    s = snap([P("orders", 0, (3, 1, 2), 3, (1, 2, 3)), P("orders", 1, (1, 2, 3), 2, (1, 2, 3)),
              P("payments", 0, (1, 2), 2, (1, 2)), P("orders", 2, (2, 3, 1), 2, (1, 2, 3))])
    left = progress.not_preferred_by_broker(s)
    assert left == {1: ["orders-1", "payments-0"]}
    text = progress.election_summary("lab", result, imbalance=left, brokers=[3], incident_url="/kafka-runbooks/incidents/lab/x")
    lines = text.splitlines()
    assert lines[0] == "preferred election of lab: DONE, every batch converged"
    assert lines[1] == "elected 3 partition(s) in 2 of 2 batch(es) in 6.4 s, approved by carol; canary failures 0"
    assert lines[2] == "  batch 1 -> broker 3: 2 partition(s), controller 0.3 s, converged 1.1 s, done in 2.5 s"
    assert "elected: broker 3 now leads 3 more partition(s) (orders-0, orders-3, __consumer_offsets-2)" in lines
    assert ("left: 2 partition(s) still led by a broker other than their preferred replica: broker 1 is the preferred "
            "leader of 2 of them (orders-1, payments-0); this election moved leadership to brokers [3] only") in lines
    assert lines[-1] == "incident page: /kafka-runbooks/incidents/lab/x"
    balanced = progress.election_summary("lab", {**result, "elected": [], "timings": []}, imbalance={})
    assert "elected: nothing (every partition was already led by its preferred replica)" in balanced
    assert "left: every partition led by its preferred replica" in balanced


def test_an_election_dry_run_reads_as_a_note():
    from kafka_runbooks.model import ElectionBatch

    plan = Plan(cluster="lab", steps=(), kind="preferred_election", requested=(3,),
                batches=(ElectionBatch(3, tuple(f"orders-{i}" for i in range(8)), "move"), ElectionBatch(3, ("__consumer_offsets-1",), "move")),
                conditions={"brokers": [3], "stable_s": 30.0, "window": ["01:00-05:00"], "deadline_s": 21600.0})
    note = progress.election_plan_note(plan, "b" * 64, dry_run=True)
    assert note.splitlines()[0] == "**preferred_election of lab: DRY RUN -- nothing was asked and nothing changed**"
    assert "9 partition(s) in 2 batch(es); digest bbbbbbbbbbbbbbbb" in note
    assert "1. broker 3: 8 partition(s) (orders-0, orders-1, orders-2, orders-3, orders-4 and 3 more)" in note
    assert "2. broker 3: 1 partition(s) (__consumer_offsets-1)" in note
    assert "the quiet window (01:00-05:00); gives up after 21600.0 s" in note


def test_a_dry_run_whose_plan_would_be_refused_says_so_first():
    """Issue 32 point 2: the note of a dry run of a refused plan says "would be refused: <why>" as its first words."""
    s = _cluster()
    plan = plan_restart(s, [4], CFG)  # a broker the cluster does not have
    assert plan.refused
    note = progress.plan_note(plan, "d" * 64, dry_run=True)
    lines = note.splitlines()
    assert lines[0] == "**rolling_restart of c1: DRY RUN -- WOULD BE REFUSED; nothing was asked and nothing changed**", lines[0]
    assert lines[2] == progress.dry_run_refusal(plan) == "would be " + progress.refusal_summary(plan)
    assert lines[2].startswith("would be refused: ")
