"""Which remediation an incident gets, and whether a restarted broker's peers need one too. Pure.

* broker not serving (001 deadlock, 000 silently isolated, paused/absent): restart it through the engine,
  then look at its peers (000: "restart broker 0, then brokers 1 and 2" -- only when they still show the
  symptom once it is back);
* the log cleaner dead (002b): restart those brokers, one at a time, through the engine (whose safety keeps a
  holder of every offsets partition up and whose coordinator gate waits for loading);
* a follower stuck out of an ISR (issue 16: Kafka dropped the partition from its fetcher and ignores a LeaderAndIsr of
  the epoch it has): restart that follower through the engine -- its new fetchers start from the controller's
  LeaderAndIsr; nothing else brings it back;
* a client's unknown API keys (002a), a ZooKeeper follower dropping out (004): no restart; the response
  captures, explains and records, and a person acts on the advice;
* anything else (an incident started by hand from the form): restart the brokers named, as asked (the engine's
  safety still refuses one that serves); no-restart findings of the analysis are told alongside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from kafka_runbooks.findings import canonical
from kafka_runbooks.model import Finding

RESTART = "restart"
EXPLAIN = "explain"  # no remediation: explained and recorded, a person acts

NO_RESTART_PROBLEMS = {
    "bad_client_requests": "runbooks/unsupported-client-request.md",
    "zookeeper_member": "runbooks/zookeeper-follower-drop.md",
}
FOLLOW_UP_PROBLEMS = ("broker_not_serving",)
# what a peer shows when it "still shows the symptom" (incident 000: CLOSE_WAIT climbing, not serving)
PEER_SYMPTOMS = ("broker_unresponsive", "broker_unregistered_alive", "broker_absent", "broker_socket_pileup")


@dataclass(frozen=True)
class Remediation:
    kind: str  # RESTART | EXPLAIN
    reason: str
    follow_up_peers: bool = False
    runbook: str | None = None
    advice: str | None = None
    findings: tuple[Finding, ...] = field(default_factory=tuple)  # the findings that explain it (EXPLAIN)

    def to_dict(self) -> dict[str, Any]:
        """What the choice task pushes: the findings by kind only (a task that needs them loads them: issue 28)."""
        return {"kind": self.kind, "reason": self.reason, "follow_up_peers": self.follow_up_peers, "runbook": self.runbook,
                "advice": self.advice, "findings": [f.kind for f in self.findings]}


def _problem(trigger: Finding | None) -> str | None:
    if trigger is None:
        return None
    return str(trigger.details.get("problem") or trigger.kind or "") or None


def remediation_for(trigger: Finding | None, findings: Sequence[Finding] = ()) -> Remediation:
    """From the incident's trigger (the detection's finding; None for a response started from the form) and this
    run's analysis findings."""
    problem = _problem(trigger)
    if trigger is not None and problem in NO_RESTART_PROBLEMS:
        related = [f for f in findings if f.details.get("no_restart") or canonical(f.kind) in (
            "unknown_api_requests", "zookeeper_follower_dropped", "zk_server_starved", "zk_session_expired", "segment_damage")]
        details = trigger.details
        return Remediation(EXPLAIN, f"{trigger.kind}: nothing to restart -- "
                           + ("the client has to be fixed" if problem == "bad_client_requests" else
                              "the follower already rejoined; the cause is on its host or network"),
                           runbook=NO_RESTART_PROBLEMS[problem], advice=details.get("advice"), findings=tuple(related))
    if trigger is None:
        # on-call asked for this restart; the engine's safety still refuses a broker that serves. A no-restart finding
        # of the analysis (e.g. an old bad client's lines in the captured logs) is told, not acted on.
        no_restart = [f for f in findings if f.details.get("no_restart")]
        return Remediation(RESTART, "started from the form: restart the brokers named, through the engine"
                           + (f" (the analysis also found {', '.join(sorted({f.kind for f in no_restart}))}, which no restart fixes)"
                              if no_restart else ""),
                           follow_up_peers=True, advice=no_restart[0].details.get("advice") if no_restart else None,
                           findings=tuple(no_restart))
    if problem == "follower_stuck":
        ids = list(trigger.broker_ids)
        return Remediation(RESTART, f"follower_stuck: broker(s) {ids} stopped fetching partitions they follow and will not start again "
                           "by themselves; a restart through the engine (approved) starts their fetchers from the controller's state",
                           runbook="runbooks/preferred-election.md",
                           advice=trigger.summary)
    if problem == "log_cleaner_stopped":
        return Remediation(RESTART, "the log cleaner is dead on these brokers: restart them one at a time (it starts again and compacts)",
                           runbook="runbooks/offsets-load-stalled.md")
    return Remediation(RESTART, f"{trigger.kind}: restart the broker(s) through the engine",
                       follow_up_peers=problem in FOLLOW_UP_PROBLEMS,
                       runbook=trigger.details.get("runbook"))


def peers_needing_restart(observations: Iterable[Sequence[Finding]], restarted: Iterable[int], peers: Iterable[int]) -> tuple[list[int], dict[int, str]]:
    """Peers that show a symptom in EVERY one of the observations (consecutive health checks after the restarted
    brokers came back): ([broker ids], {broker: why}). A peer that shows it once, or not at all, is left alone."""
    restarted = {int(b) for b in restarted}
    peers = [int(p) for p in peers if int(p) not in restarted]
    obs = [list(fs) for fs in observations]
    if not obs:
        return [], {}
    why: dict[int, str] = {}
    for p in peers:
        seen = [next((f for f in fs if f.kind in PEER_SYMPTOMS and p in f.broker_ids), None) for fs in obs]
        if all(seen):
            why[p] = f"{seen[-1].kind} in {len(obs)} consecutive checks: {seen[-1].summary[:300]}"
    return sorted(why), why


RESPOND = "respond"  # the incident response DAG is started for it
PERSON = "person"  # no automatic response: the incident needs a person


@dataclass(frozen=True)
class FirstResponse:
    """What a newly opened incident gets from detection: a response run (capture, analysis, then ``remediation_for``)
    for the brokers and ZooKeeper servers it names, or a person, with the reason."""

    kind: str  # RESPOND | PERSON
    reason: str = ""
    zookeeper_servers: tuple[str, ...] = ()


def first_response(finding: Finding) -> FirstResponse:
    """A finding that names no broker and no ZooKeeper server: a person (nothing to capture or restart). A leadership
    problem: a person -- a restart would move leadership again (incident 003); on-call stops the automatic rebalance
    and starts the deferred election, which waits until the broker is ready and traffic is quiet. Anything else: the
    response run."""
    d = finding.details
    zk = (str(d["subject"]),) if d.get("problem") == "zookeeper_member" and d.get("server") else ()
    if not finding.broker_ids and not zk:
        return FirstResponse(PERSON, "no broker or ZooKeeper server named by the finding: nothing to capture or restart "
                                     "automatically")
    if d.get("problem") == "leadership":
        return FirstResponse(PERSON, f"{finding.kind}: no automatic restart; see {d.get('runbook')} ({d.get('remediation')})")
    return FirstResponse(RESPOND, zookeeper_servers=zk)
