from kafka_runbooks.model import Evidence, Finding, Plan, Severity, Step
from kafka_runbooks.remediate.briefing import approval_body


def _finding():
    return Finding(
        kind="jvm_deadlock",
        severity=Severity.CRITICAL,
        summary="JVM deadlock on broker 3: executor-Heartbeat -> group-metadata-manager-0 -> kafka-request-handler-3",
        broker_ids=(3,),
        evidence=(Evidence(source="hosts/3/jstack-1.out", lines=(12, 13), excerpt='"executor-Heartbeat":\n  waiting to lock monitor 0x1', host="127.0.0.13"),),
    )


PLAN = Plan(
    cluster="lab",
    kind="incident_restart",
    steps=(Step("restart_broker", 3, "step 1 of 1: broker 3 is not serving", blast_radius=("__consumer_offsets-2: loses in-sync replica 3", "orders-1: loses in-sync replica 3")),
           Step("restart_broker", 1, "step 2", refusals=("orders-0: broker 1 is the last in-sync replica (isr=[1])",))),
    not_serving={3: "direct check failed and jvm_deadlock"},
    warnings=("unclean.leader.election.enable is on (Kafka 0.10.1.0 default) for 2 partition(s)",),
    computed_at="2026-11-22T14:00:00.000Z", state_digest="ab" * 32, controller_id=1, controller_epoch=4,
)


def test_body_shows_diagnosis_evidence_each_step_commands_blast_radius_and_binding():
    body = approval_body([_finding()], PLAN, report_path="/b/report.html", approval_timeout="1:00:00",
                         commands={3: {"stop": ("/lab/host3/bin/kafka-stop", "--id", "3"), "start": ("/lab/host3/bin/kafka-start",)}},
                         digest="f" * 64, gates=["back in every ISR"])
    assert "JVM deadlock on broker 3" in body
    assert "hosts/3/jstack-1.out:12,13" in body and "executor-Heartbeat" in body
    assert "stop: `/lab/host3/bin/kafka-stop --id 3`" in body and "start: `/lab/host3/bin/kafka-start`" in body
    # the blast radius as a summary per topic, internal topics first; the partitions themselves on the incident page
    assert body.index("`__consumer_offsets` | 1 | 1") < body.index("`orders` | 1 | 1") < body.index("### Diagnosis")
    assert "orders-1" not in body
    assert "**refused**" in body and "orders-0: broker 1 is the last in-sync replica" in body
    assert "direct check failed and jvm_deadlock" in body and "unclean.leader.election.enable is on" in body
    assert "f" * 64 in body and "back in every ISR" in body
    assert "/b/report.html" in body and "Reject" in body


def test_hostile_values_cannot_break_out_of_code_spans():
    evil = Finding(
        kind="x", severity=Severity.WARNING, summary="`</code><script>alert(1)</script>[click](http://evil)",
        evidence=(Evidence(source="a", excerpt="```\n[link](http://evil)"),),
    )
    plan = Plan(cluster="lab", steps=(Step("restart_broker", 2, "r`[x](http://evil)", blast_radius=("t```-0: `x`",)),))
    body = approval_body([evil], plan, report_path=None, approval_timeout="1h")
    assert "`</code>" not in body and "`[x](http://evil)" not in body
    # the only fences are ours: the excerpt's own ``` was neutralised
    assert body.count("```") % 2 == 0


def test_the_body_reads_as_airflows_hitl_page_renders_it():
    """Airflow 3.3's HITL page renders the body with react-markdown + remark-gfm and ``skipHtml`` (read in its UI
    bundle): raw HTML such as ``<details>`` is dropped, nothing can be collapsed there (the long details are on the
    incident page, collapsed). Rendered here the same way (CommonMark + GFM tables, HTML off, markdown-it): the body has
    no raw HTML, and the gates' sentence is a paragraph of its own -- not run into the last step's list item (a
    paragraph right after a list item, without a blank line, continues that item)."""
    from markdown_it import MarkdownIt

    body = approval_body([_finding()], PLAN, report_path="/b/report.html", approval_timeout="1:00:00",
                         digest="f" * 64, gates=["back in every ISR", "controller settled"])
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    assert not [t for t in tokens if t.type in ("html_block", "html_inline")]
    assert not [c for t in tokens for c in (t.children or []) if c.type == "html_inline"]
    gates = next(i for i, t in enumerate(tokens) if t.type == "inline" and t.content.startswith("After each start"))
    assert tokens[gates - 1].type == "paragraph_open" and tokens[gates - 1].level == 0, tokens[gates - 1]
