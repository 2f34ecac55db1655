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


def test_body_shows_diagnosis_evidence_exact_plan_and_blast_radius():
    plan = Plan(
        cluster="lab",
        steps=(Step(action="restart_broker", broker_id=3, command=("/lab/host3/bin/kafka-restart", "--id", "3"), reason="deadlocked"),),
        blast_radius=("__consumer_offsets-2", "orders-1"),
    )
    body = approval_body([_finding()], plan, report_path="/b/report.html", approval_timeout="1:00:00")
    assert "JVM deadlock on broker 3" in body
    assert "hosts/3/jstack-1.out:12,13" in body and "executor-Heartbeat" in body
    assert "/lab/host3/bin/kafka-restart --id 3" in body
    assert body.index("__consumer_offsets-2") < body.index("orders-1")
    assert "/b/report.html" in body and "Reject" in body


def test_hostile_values_cannot_break_out_of_code_spans():
    evil = Finding(
        kind="x", severity=Severity.WARNING, summary="`</code><script>alert(1)</script>[click](http://evil)",
        evidence=(Evidence(source="a", excerpt="```\n[link](http://evil)"),),
    )
    body = approval_body([evil], Plan(cluster="lab", steps=()), report_path=None, approval_timeout="1h")
    assert "`</code>" not in body
    # the only fences are ours: the excerpt's own ``` was neutralised
    assert body.count("```") % 2 == 0
    assert "No partition loses an in-sync replica" in body
