"""The scheduled preferred election (``election.schedule``; ``dags/kafka_preferred_election_schedule.py``). Pure.

A cluster with ``election.schedule`` (a 5-field cron, read in ``election.schedule_timezone``, default UTC) is *due*
when one of its cron times falls in the dispatcher run's data interval (``schedules.due_at``). A due cluster is then
checked on its state now (:func:`skip_reason`): nothing to move, or every broker's leadership imbalance within
Kafka's own rule (``leader.imbalance.per.broker.percentage``, default 10 %: what the controller itself tolerates),
is skipped with that reason; otherwise the dispatcher starts ``kafka_preferred_election`` for it -- the same plan,
approval, deferred wait, maintenance lock and checked batches as a run started from the form. The schedule never
approves anything. Each decision (started, skipped with its reason, failed) is audited in the cluster's
``<cluster>-election-schedule`` record of the incident store -- the state database (``state/``), created once by
whichever dispatcher run comes first.
"""

from __future__ import annotations

from kafka_runbooks.model import ClusterSnapshot

AUDIT_SUFFIX = "election-schedule"  # <cluster>-election-schedule: the record that holds each scheduled decision
DISPATCH_EVERY_MIN = 5  # how often the dispatcher looks for due clusters: a cron finer than this fires once per look


def skip_reason(snapshot: ClusterSnapshot) -> str | None:
    """Why a scheduled election is not started for this state; None when it should be."""
    from kafka_runbooks.detect.leadership import imbalance, imbalance_threshold

    ratios = imbalance(snapshot)
    moving = {b: e for b, e in ratios.items() if e["not_led"]}
    if not moving:
        return "nothing to elect: every partition is led by its preferred replica"
    pct = imbalance_threshold(snapshot)
    over = {b: e for b, e in moving.items() if e["ratio"] * 100 > pct}
    if not over:
        return ("leadership imbalance within Kafka's own rule (leader.imbalance.per.broker.percentage "
                f"{pct:g} %): " + ", ".join(f"broker {b} {e['ratio'] * 100:.1f} % ({len(e['not_led'])} of {e['preferred']})"
                                             for b, e in sorted(moving.items())))
    return None


def imbalance_summary(snapshot: ClusterSnapshot) -> str:
    from kafka_runbooks.detect.leadership import imbalance, imbalance_threshold

    return (", ".join(f"broker {b} {e['ratio'] * 100:.1f} % ({len(e['not_led'])} of {e['preferred']} not led)"
                      for b, e in sorted(imbalance(snapshot).items()) if e["not_led"])
            + f" > leader.imbalance.per.broker.percentage {imbalance_threshold(snapshot):g} %")
