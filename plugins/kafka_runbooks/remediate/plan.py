"""Plan a restart of one or more brokers.  Pure: snapshot + config in, RestartPlan out.

Order (Strimzi's): brokers proven not serving first, then brokers that are not registered (down),
then the rest in the order asked, the active controller last (restarting it forces a controller
election; doing that once, at the end, moves things the fewest times).  One broker per step.

Step 1 is checked against the snapshot as it is; step k against the snapshot as it will be if steps
1..k-1 succeed (their brokers registered and back in every ISR): a plan that starts by restarting a
broker that is down is not refused because that broker is down. The plan is a prediction shown to
the approver; the executor checks every stop again on fresh state.

What the plan carries stays small at any size (``remediate/blast.py``): per step the first lines of each kind of
effect, every count and the whole list's fingerprint, the first refusals and their count; the whole lists are the
plan's ``detail`` (``model.PlanDetail``), which the plan task keeps in the state database.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping

from kafka_runbooks import clock
from kafka_runbooks.config import ClusterConfig
from kafka_runbooks.model import Broker, ClusterSnapshot, Partition, PlanDetail, RestartPlan, Step
from kafka_runbooks.remediate import blast
from kafka_runbooks.remediate.digest import state_digest
from kafka_runbooks.remediate.gates import canary_coverage
from kafka_runbooks.remediate.resumption import GATES_ONLY, REFUSE, START
from kafka_runbooks.remediate.safety import SafetySettings, blast_radius, stop_refusals, unclean_warnings

ACTION = "restart_broker"
GATES_ACTION = "gate_broker"  # a resumed step whose broker registered again after an earlier run's stop: gates only


def safety_settings(config: ClusterConfig, static_configs: Mapping[int, Mapping[str, str]] | None = None,
                    unread: Mapping[int, str] | None = None, version=None) -> SafetySettings:
    """``unread``: brokers whose server.properties could not be read (their static values are unknown).
    ``version``: what the brokers report (``KafkaHook.kafka_version``); the product's callers always pass it."""
    return SafetySettings(
        min_isr=config.min_insync_replicas,
        unclean=config.unclean_leader_election,
        kafka_version=config.kafka_version,
        static_configs=dict(static_configs or {}),
        unread=dict(unread or {}),
        version=version,
    )


def offline_warnings(computed: Iterable[tuple[int, list[str], list[str]]], shown: int = 20) -> list[str]:
    """Per step that takes partitions offline (its broker is their only live in-sync replica: a stuck leader whose ISR
    shrank to itself), what the approver must know, by name: they are OFFLINE for the whole restart, nothing moves
    them and nothing keeps them up."""
    out = []
    for bid, effects, _ in computed:
        names = blast.offline_names(effects)
        if names:
            more = f" and {len(names) - shown} more (every one on the incident page)" if len(names) > shown else ""
            out.append(f"broker {bid}'s restart takes {len(names)} partition(s) OFFLINE for its whole duration (broker {bid} "
                       f"is their only live in-sync replica; with unclean leader election off no other replica may lead them): "
                       f"{', '.join(names[:shown])}{more}")
    return out


def not_holder_warnings(unresponsive: Mapping[int, str]) -> list[str]:
    """What the approver must know: brokers that count as no holder of anything (checked again before every stop)."""
    return [f"broker {b} is not a holder now: {why}; it is restarted first where the plan includes it, and checked again "
            "before every stop" for b, why in sorted(unresponsive.items())]


def restart_order(snapshot: ClusterSnapshot, broker_ids: Iterable[int], not_serving: Mapping[int, str] | None = None) -> list[int]:
    """Not serving first, then unregistered, then the rest as asked, the controller last; de-duplicated."""
    ids: list[int] = []
    for b in broker_ids:
        if int(b) not in ids:
            ids.append(int(b))
    not_serving = not_serving or {}
    live = snapshot.live_broker_ids

    def group(b: int) -> int:
        if b in not_serving:
            return 0
        if b not in live:
            return 1
        if b == snapshot.controller_id:
            return 3
        return 2

    return sorted(ids, key=lambda b: (group(b), ids.index(b)))


def restored(snapshot: ClusterSnapshot, broker_id: int) -> ClusterSnapshot:
    """The snapshot as it will be once ``broker_id`` is registered again and in every ISR it belongs in."""
    brokers = snapshot.brokers
    if snapshot.broker(broker_id) is None:
        brokers = tuple(sorted(brokers + (Broker(broker_id, "", 0),), key=lambda b: b.id))

    if brokers == snapshot.brokers and all(broker_id in p.isr for p in snapshot.partitions_of(broker_id)):
        return snapshot  # nothing changes (and the snapshot's indexes stay computed)

    def back(p: Partition) -> Partition:
        if broker_id not in p.replicas or broker_id in p.isr:
            return p
        isr = tuple(r for r in p.replicas if r in p.isr or r == broker_id)
        return dataclasses.replace(p, isr=isr, leader=p.leader if p.leader >= 0 else broker_id)

    return dataclasses.replace(snapshot, brokers=brokers, partitions=tuple(back(p) for p in snapshot.partitions))


GATES_ONLY_TAIL = (
    "NOT stopped or started: its gates only -- registered with a new session, back in every ISR, every "
    "__consumer_offsets partition's coordinator loaded, canary (when enabled). If the process the earlier run's stop "
    "targeted still runs when the step executes, or ZooKeeper no longer shows this, the step is refused and nothing is "
    "stopped: a restart needs a new plan and approval."
)


def _resumed_reason(n: int, total: int, resumed) -> str:
    """The step of a broker an earlier run of the roll left unfinished (``resumption.decide``): what will really happen."""
    head = f"step {n} of {total} (resumed): {resumed.sentence}. "
    if resumed.action == GATES_ONLY:
        return head + GATES_ONLY_TAIL
    if resumed.action == REFUSE:
        return head + "Nothing is done with it: the plan is refused."
    if resumed.action == START:
        return head + ("Started (a stop command only if a process of it still runs), then gates: registered with a new "
                       "session, back in every ISR, every __consumer_offsets partition's coordinator loaded, canary (when "
                       "enabled). Safety is checked again on fresh state first.")
    return head + ("Controlled shutdown (stop command), wait until its process and its ZooKeeper registration are gone, "
                   "start, then gates: registered with a new session, back in every ISR, every __consumer_offsets "
                   "partition's coordinator loaded, canary (when enabled). Safety is checked again on fresh state before "
                   "the stop.")


def _reason(n: int, total: int, broker_id: int, snapshot: ClusterSnapshot, not_serving: Mapping[int, str],
            unresponsive: Mapping[int, str] | None = None, resumed=None) -> str:
    unresponsive = unresponsive or {}
    if resumed is not None:
        return _resumed_reason(n, total, resumed)
    if broker_id in not_serving:
        why = f"broker {broker_id} is not serving ({not_serving[broker_id]}): restarted first"
    elif broker_id in unresponsive:
        why = (f"broker {broker_id} is not a holder now ({unresponsive[broker_id]}): restarted first (no waiver: it must "
               "not be the last in-sync replica of anything)")
    elif broker_id not in snapshot.live_broker_ids:
        why = f"broker {broker_id} is not registered in ZooKeeper: started first"
    elif broker_id == snapshot.controller_id:
        why = f"broker {broker_id} is the active controller: restarted last"
    else:
        why = f"restart broker {broker_id}"
    return (
        f"step {n} of {total}: {why}. Controlled shutdown (stop command), wait until its process and its ZooKeeper "
        "registration are gone, start, then gates: registered with a new session, back in every ISR, every "
        "__consumer_offsets partition's coordinator loaded, canary (when enabled). Safety is checked again on "
        "fresh state before the stop."
    )


def _each_stop(snapshot: ClusterSnapshot, order: list[int], config: ClusterConfig, settings: SafetySettings,
               not_serving: Mapping[int, str], unresponsive: Mapping[int, str],
               unreachable: Mapping[int, str], resumed: Mapping[int, Any]) -> list[tuple[int, list[str], list[str]]]:
    """Each stop of ``order`` on the state the earlier steps leave (each broker back in every ISR after its step):
    (broker, every effect, every refusal). A resumed broker whose step is its gates only (``resumed``) is not stopped:
    no effect, no stop refusal; one whose resume is refused has that refusal."""
    computed: list[tuple[int, list[str], list[str]]] = []
    gates_only = {b for b, d in resumed.items() if d.action == GATES_ONLY}
    resume_refused = {b: d.sentence for b, d in resumed.items() if d.action == REFUSE}
    state, stuck, silent = snapshot, dict(not_serving), dict(unresponsive)
    for bid in order:
        why: list[str] = []
        if bid not in config.hosts:
            why.append(f"cluster {config.name!r} has no SSH connection for broker {bid}; refusing to act on an unknown broker")
        elif bid in unreachable:
            why.append(f"its host cannot be reached over SSH now ({unreachable[bid]}): its stop and start could not be run")
        if bid in resume_refused:  # ZooKeeper's order contradicts the ledger (``resumption.decide``): nothing is done
            why.append(resume_refused[bid])
        if bid in gates_only:
            computed.append((bid, [], why))
        else:
            why += stop_refusals(state, bid, settings, stuck, silent)
            computed.append((bid, blast_radius(state, bid, stuck, settings), why))
        state = restored(state, bid)
        stuck.pop(bid, None)
        silent.pop(bid, None)
    return computed


def plan_restart(
    snapshot: ClusterSnapshot,
    broker_ids: Iterable[int],
    config: ClusterConfig,
    *,
    kind: str = "rolling_restart",
    not_serving: Mapping[int, str] | None = None,
    settings: SafetySettings | None = None,
    completed: Iterable[int] = (),
    roll_id: str | None = None,
    canary_topic: str | None = None,
    unresponsive: Mapping[int, str] | None = None,
    unreachable: Mapping[int, str] | None = None,
    resumed: Mapping[int, Any] | None = None,
) -> RestartPlan:
    """``not_serving``: broker -> direct evidence it is not serving (``safety.not_serving_evidence``: the waiver).
    ``unresponsive``: broker -> why it is not a holder now (a direct check it did not answer, an open incident):
    such brokers are restarted first, never count as holders, and are named in the plan's warnings.
    ``completed``: brokers an earlier run of this roll restarted; they get no step. ``resumed``: broker -> what a
    resume does with the step an earlier run of the roll left unfinished (``resumption.Resumption``): its step says
    so, and a gates-only one is a ``gate_broker`` step (nothing stopped: no blast radius, no stop refusal)."""

    not_serving = {int(k): v for k, v in (not_serving or {}).items()}
    unresponsive = {int(k): v for k, v in (unresponsive or {}).items() if int(k) not in not_serving}
    settings = settings or safety_settings(config)
    requested = []
    for b in broker_ids:
        if int(b) not in requested:
            requested.append(int(b))
    done = [b for b in dict.fromkeys(int(b) for b in completed)]
    refusals: list[str] = []
    if not requested:
        refusals.append("no broker to restart")
    if snapshot.cluster != config.name:
        refusals.append(f"snapshot is of cluster {snapshot.cluster!r} but the config is for {config.name!r}")
    todo = [b for b in requested if b not in done]
    if requested and not todo:
        refusals.append(f"nothing left to do: brokers {done} were already restarted by this roll")
    if canary_topic:
        refusals += canary_coverage(snapshot, canary_topic)
    order = restart_order(snapshot, todo, {**unresponsive, **not_serving})
    resumed = {int(b): d for b, d in (resumed or {}).items() if d is not None}
    computed = _each_stop(snapshot, order, config, settings, not_serving, unresponsive, unreachable or {}, resumed)
    touched = {blast.split_line(line)[0] for _, effects, _ in computed for line in effects}
    min_isr = blast.min_isr_by_topic(snapshot, touched, settings)
    steps: list[Step] = []
    rows: list[blast.TopicBlast] = []
    for n, (bid, effects, why) in enumerate(computed, 1):
        shown, counts, sha, step_rows = blast.compact_step(bid, effects, min_isr)
        rows += step_rows
        steps.append(Step(GATES_ACTION if getattr(resumed.get(bid), "action", None) == GATES_ONLY else ACTION, bid,
                          _reason(n, len(order), bid, snapshot, not_serving, unresponsive, resumed.get(bid)), shown,
                          tuple(why[:blast.SHOWN_REFUSALS]), blast_counts=counts, blast_sha256=sha,
                          refusal_count=len(why) if len(why) > blast.SHOWN_REFUSALS else 0))
        refusals += [f"broker {bid}: {w}" for w in why[:blast.SHOWN_REFUSALS]]
        if len(why) > blast.SHOWN_REFUSALS:
            refusals.append(f"broker {bid}: ... and {len(why) - blast.SHOWN_REFUSALS} more reason(s) not to stop it "
                            f"({len(why)} in all: every one is on the incident page)")
    topics = blast.by_topic(rows)
    detail = PlanDetail(effects={b: tuple(e) for b, e, _ in computed}, refusals={b: tuple(w) for b, _, w in computed if w},
                        topic_rows=tuple(r.to_dict() for r in rows))
    return RestartPlan(
        cluster=config.name,
        steps=tuple(steps),
        refusals=tuple(refusals),
        kind=kind,
        requested=tuple(requested),
        computed_at=clock.now_iso(),
        state_digest=state_digest(snapshot, not_serving),
        controller_id=snapshot.controller_id,
        controller_epoch=snapshot.controller_epoch,
        warnings=tuple(offline_warnings(computed) + not_holder_warnings(unresponsive) + unclean_warnings(snapshot, order, settings)),
        not_serving=not_serving,
        completed=tuple(done),
        roll_id=roll_id,
        blast_sha256=blast.combined_sha256({s.broker_id: s.blast_sha256 for s in steps}),
        blast_topics=tuple(t.to_dict() for t in topics[:blast.PLAN_TOPICS]),
        blast_topic_count=len(topics),
        detail=detail,
    )
