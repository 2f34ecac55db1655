"""Incident response: mitigate first (move leadership off a broker that does not serve, its JVM untouched, after an
approval; on unless the cluster sets ``mitigation.enabled`` false) → capture → analyze (Spark) → report → choose → (plan → approval
→ restart → verify → the original replica order back → follow up on the peers) or explain → close.

Mitigate first (``operators/mitigate.py``, ``runbooks/mitigate-first.md``): for a suspect that fails a direct check now
while the incident says it is not serving, the partitions it leads move to serving in-sync replicas through the same
engine checks and four-eyes approval as every change; partitions whose only in-sync replica it is stay down until the
restart, by name. Rejected, unanswered (``mitigation.approval_wait_s``), refused or halted: the capture goes on.

The restart is a plan through the remediation engine (``operators/remediate.py``): the same safety rules on
fresh state, approval bound to the plan and this run, maintenance lock, gates and halt as every other restart.
What each incident gets (``remediate/choice.py``), with its runbook:

* a broker not serving -- deadlocked (``runbooks/broker-jvm-deadlock.md``, 001) or silently isolated
  (``runbooks/broker-silently-isolated.md``, 000): restart it; once it is back, peers that still show the
  symptom get ``kafka_rolling_restart`` (its own approval);
* the log cleaner dead (``runbooks/offsets-load-stalled.md``, 002b): restart those brokers one at a time;
* a client's unknown API keys (``runbooks/unsupported-client-request.md``, 002a) and a ZooKeeper follower
  dropping out (``runbooks/zookeeper-follower-drop.md``, 004): no restart -- captured, explained, recorded, and
  handed to a person. A ZooKeeper incident captures every ensemble member (``zookeeper_servers``).

Least power: this one DAG serves every cluster, so ``max_active_runs`` (which would queue one cluster's response
behind another's) is replaced by a per-cluster guard -- ``open_incident`` refuses a second response while another
runs on the same cluster, and an ``incident_id`` of another cluster or other brokers; ``capture`` is refused past
``capture.max_per_hour`` captures of the cluster in an hour (``incidents/store.py``).
"""

from __future__ import annotations

import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from kafka_runbooks.operators.analyze import AnalyzeBundleOperator, PublishReportOperator
from kafka_runbooks.notify.webhook import APPROVAL_WAITING, HALTED, OnCallWebhookNotifier
from kafka_runbooks.operators.approval import DECISION_KEY, RemediationApprovalOperator
from kafka_runbooks.operators.capture import CaptureEvidenceOperator
from kafka_runbooks.operators.incident import CloseIncidentOperator, OpenIncidentOperator
from kafka_runbooks.operators.mitigate import MitigateOperator, PlanMitigationOperator, RestoreOrderOperator
from kafka_runbooks.operators.params import broker_ids_param, cluster_param
from kafka_runbooks.operators.remediate import INCIDENT_RESTART, ClusterRecoveredSensor, ExecutePlanOperator, PlanRemediationOperator
from kafka_runbooks.operators.response import FOLLOW_UP_KEY, ChooseRemediationOperator, ExplainIncidentOperator, FollowUpPeersOperator

RECOVERY_TIMEOUT = timedelta(seconds=float(os.environ.get("KAFKA_RUNBOOKS_RECOVERY_TIMEOUT_S", 600)))


def xcom(task_id: str, field: str | None = None, key: str = "return_value") -> str:
    path = f"['{field}']" if field else ""
    return "{{ ti.xcom_pull(task_ids='" + task_id + "', key='" + key + "')" + path + " }}"


def build() -> DAG:
    """The ``kafka_incident_response`` DAG (one per Airflow deployment, for every cluster: the cluster is a run parameter)."""
    with DAG(
        dag_id="kafka_incident_response",
        doc_md=__doc__,
        description="Capture evidence, analyze it on Spark, and restart the broker only after on-call approves.",
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        render_template_as_native_obj=True,
        tags=["kafka", "capture", "analyze", "remediate"],
        params=_params(),
    ) as dag:
        incident = OpenIncidentOperator(
            task_id="open_incident",
            request={
                "cluster": "{{ params.cluster }}",
                "broker_ids": "{{ params.broker_ids }}",
                "zookeeper_servers": "{{ params.zookeeper_servers }}",
                "reason": "{{ params.reason }}",
                "incident_id": "{{ params.incident_id }}",
            },
        )
        plan_mitigation, approve_mitigation, mitigate = _mitigation(incident)
        capture, analyze, report, choose, explain = _diagnosis(incident)
        plan, approve, restart, verify, restore, follow_up = _restart(incident, report)
        close = _close(incident)
        incident >> plan_mitigation >> approve_mitigation >> mitigate >> capture
        incident >> capture >> analyze >> report >> choose >> [plan, explain]
        plan >> approve >> restart >> verify >> [restore, follow_up] >> close
        explain >> close
    return dag


def _params() -> dict[str, Param]:
    return {
        "cluster": cluster_param(),
        "broker_ids": broker_ids_param("Suspect broker ids (they are captured and, if approved, restarted)."),
        "zookeeper_servers": Param([], type="array", items={"type": "string", "maxLength": 128},
                                   description="For a ZooKeeper incident: the member(s) it is about (every member is captured)."),
        "reason": Param("", type="string", maxLength=2000, description="Why this response was started."),
        "incident_id": Param(None, type=["null", "string"], description="Set by the health check; empty opens a new incident."),
    }


def _mitigation(incident):
    """Mitigate first: the clients before the diagnosis; the JVM is left for the capture."""
    plan_mitigation = PlanMitigationOperator(task_id="plan_mitigation", incident=incident.output)
    approve_mitigation = RemediationApprovalOperator(
        task_id="approve_mitigation",
        subject="Move leadership off Kafka broker(s) {{ params.broker_ids }} of {{ params.cluster }} now (capture, then restart)?",
        plan_output=plan_mitigation.output,
        max_wait_s=600,  # the capture waits for this answer: capped (mitigation.approval_wait_s caps it further)
        notifiers=[OnCallWebhookNotifier(event=APPROVAL_WAITING,
                                         message="moving leadership off {{ params.broker_ids }} on {{ params.cluster }}")],
    )
    mitigate = MitigateOperator(task_id="mitigate", plan_output=plan_mitigation.output, on_failure_callback=OnCallWebhookNotifier(
        event=HALTED, message="moving leadership off {{ params.broker_ids }} on {{ params.cluster }}"))
    return plan_mitigation, approve_mitigation, mitigate


def _diagnosis(incident):
    """Detection's stages: capture, analyze, report, and the choice between a restart and an explanation."""
    # runs whatever the mitigation did (off, skipped, rejected, refused, halted): the evidence is taken in every case
    capture = CaptureEvidenceOperator(task_id="capture", incident=incident.output, trigger_rule="all_done")
    analyze = AnalyzeBundleOperator(
        task_id="analyze",
        bundle_dir=xcom("capture", "bundle_dir"),
        incident=incident.output,  # the incident's recorded bundle is analysed; the pushed one must be it
        kafka_version=xcom("open_incident", "kafka_version"),
        conn_id="spark_default",
    )
    report = PublishReportOperator(task_id="report", incident=incident.output, bundle_dir=xcom("capture", "bundle_dir"))
    choose = ChooseRemediationOperator(task_id="choose_remediation", incident=incident.output, report=report.output)
    explain = ExplainIncidentOperator(task_id="explain", incident=incident.output, report=report.output,
                                      remediation=xcom("choose_remediation", key="remediation"))
    return capture, analyze, report, choose, explain


def _restart(incident, report):
    """The remediation: the one engine (plan / approve / restart), then the recovery, the order back and the peers."""
    halted = OnCallWebhookNotifier(event=HALTED, message="incident response on {{ params.cluster }}")
    plan = PlanRemediationOperator(
        task_id="plan", kind=INCIDENT_RESTART, incident=incident.output, report=report.output, on_failure_callback=halted
    )
    approve = RemediationApprovalOperator(
        task_id="approve",
        subject="Restart Kafka broker(s) {{ params.broker_ids }} on {{ params.cluster }}?",
        plan_output=plan.output,
        notifiers=[OnCallWebhookNotifier(event=APPROVAL_WAITING, message="restart of {{ params.broker_ids }} on {{ params.cluster }}")],
        on_failure_callback=halted,
    )
    restart = ExecutePlanOperator(task_id="restart", plan_output=plan.output, on_failure_callback=halted)
    verify = ClusterRecoveredSensor(task_id="verify_recovery", incident=incident.output, timeout=RECOVERY_TIMEOUT.total_seconds())
    restore = RestoreOrderOperator(task_id="restore_order", plan_output=xcom("plan_mitigation"))
    follow_up = FollowUpPeersOperator(task_id="follow_up_peers", incident=incident.output, restart=xcom("restart"),
                                      remediation=xcom("choose_remediation", key="remediation"))
    return plan, approve, restart, verify, restore, follow_up


def _close(incident):
    return CloseIncidentOperator(
        task_id="close_incident",
        incident=incident.output,
        # pulled by template, not XComArg: a Reject skips the approval's direct downstream tasks,
        # and this one must still run to record the decision
        approval=xcom("approve", key=DECISION_KEY),
        restart=xcom("restart"),
        verify=xcom("verify_recovery"),
        report=xcom("report"),
        explanation=xcom("explain"),
        follow_up=xcom("follow_up_peers", key=FOLLOW_UP_KEY),
    )
