"""Capture, as the application runs it: diagnostics from every broker host over SSH into an evidence bundle, before
anything is touched (``capture/collector.py``): the suspects and their peers in parallel, each host within its
deadline, without stopping or pausing any JVM; then the intrusive tools one suspect at a time, under the maintenance
lock, only where a direct check proves it is not serving (``MaintenanceLockGate``). The audit records the capture's
real status -- ``complete``, ``partial`` (with every reason) or ``failed`` -- and it stops only when nothing at all
could be captured."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable

from kafka_runbooks import clock
from kafka_runbooks.runbook import finding_records, plans
from kafka_runbooks.runbook.errors import Stop
from kafka_runbooks.runbook.task import Task


class MaintenanceLockGate:
    """``collector.IntrusiveGate`` for a real cluster: the cluster's maintenance lock (the one every restart and
    election takes, so no intrusive tool runs while the cluster is being changed, and no change starts meanwhile)
    and a direct Kafka-protocol check of the broker taken just before its tools run."""

    def __init__(self, config, brokers, *, run_id: str, dag_id: str, findings=()) -> None:
        self.config, self.brokers, self.run_id, self.dag_id = config, dict(brokers), run_id, dag_id
        self.findings = [f for f in findings if f]  # what corroborates "not serving" (the incident's trigger)
        self.why_not: dict[int, str] = {}  # why a broker did not get the intrusive tools (the collector records it)

    @contextlib.contextmanager
    def session(self):
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # keeps DAG parsing fast: loaded when a task runs
        from kafka_runbooks.remediate.lock import MaintenanceLock  # keeps DAG parsing fast: loaded when a task runs

        with ZooKeeperHook(self.config.zk_conn_id, timeout_s=self.config.capture.connect_timeout_s,
                           cluster=self.config.name).session() as zk:
            lock = MaintenanceLock(zk, self.config.name, run=self.run_id, dag=self.dag_id, user=None,
                                   purpose="capture: intrusive JVM tools on a broker proven not serving")
            identity = lock.acquire(self.config.gates.lock_wait_s)
            try:
                yield identity
                lock.check()
            finally:
                lock.release()

    def not_serving(self, broker_id: int) -> str | None:
        """The evidence that the broker does not serve -- a direct check taken now had no answer (time-out, refused
        connection), corroborated by a not-serving finding of it (``host.commands.intrusive_evidence``) -- or None,
        the reason in ``why_not``."""
        from kafka_runbooks.host.commands import intrusive_evidence  # keeps DAG parsing fast: loaded when a task runs
        from kafka_runbooks.hooks.kafka import KafkaHook  # keeps DAG parsing fast: loaded when a task runs

        broker = self.brokers.get(int(broker_id))
        if broker is None:
            self.why_not[int(broker_id)] = f"broker {broker_id} has no known endpoint: no direct check can be taken"
            return None
        check = KafkaHook(self.config.kafka_conn_id, listener=self.config.listener).knows(
            b for b in self.brokers.values() if b.session_id is not None).check_broker(
            broker, self.config.health.kafka_probe_timeout_s)
        evidence, why = intrusive_evidence(check, self.findings)
        if evidence is None:
            self.why_not[int(broker_id)] = why
        return evidence


def capture_plan(config, suspects, peers) -> str:
    """What the capture will do, said before it starts (task log and audit)."""
    c = config.capture
    intrusive = ("jmap -histo:live" + (", a heap dump" if c.heap_dump else "") + ", jhsdb where no gentle dump works"
                 if c.intrusive else "none (capture.intrusive is off)")
    jmx = (f"one JmxTool read within {config.leadership.jmx_timeout_s:g}s" if config.leadership.jmx
           else "no JMX read (leadership.jmx is off)")
    return (f"capture plan: brokers {sorted(set(suspects) | set(peers))} in parallel, non-intrusive only (thread dumps by "
            f"jstack/jcmd/SIGQUIT, one host at a time, with lock detail (-l) only on a suspect a not-serving finding "
            f"accuses; socket tables, logs, /proc, GC log, {jmx}; server.properties and command lines "
            f"redacted), each "
            f"host within {c.host_deadline_s:g}s; suspects {sorted(suspects)} (at most {c.max_suspects}) get "
            f"{c.jstack_count} thread dumps and heap sizes; intrusive tools: {intrusive} -- only on a suspect whose "
            f"direct check just before had no answer (a time-out, a refused connection) and that a not-serving finding "
            f"accuses, one host at a time, under the cluster's maintenance lock, "
            f"within {c.intrusive_deadline_s:g}s per host")


def capture(incident: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Captures the incident's brokers (and ZooKeeper members) into a new bundle; returns where it is and how it went."""
    from kafka_runbooks.capture.bundle import EvidenceBundle  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.detect.observe import brokers_to_probe, known_registrations  # keeps DAG parsing fast: clients at run time
    from kafka_runbooks.hooks.kafka import KafkaHook  # keeps DAG parsing fast: confluent_kafka loads when a task runs
    from kafka_runbooks.incidents.store import IncidentStore, ResponseRefused  # keeps DAG parsing fast
    from kafka_runbooks.model import ClusterSnapshot  # keeps DAG parsing fast: loaded when a task runs

    if not isinstance(incident, dict) or not incident.get("incident_id"):
        # it runs whatever the mitigation before it did (trigger rule all_done), so also after a failed open_incident
        raise Stop("no incident was opened (see the open_incident task): nothing to capture")
    config = config_of(incident["cluster"])
    incident_id = incident["incident_id"]
    try:  # least power: at most capture.max_per_hour captures of a cluster in any hour, counted before any SSH
        IncidentStore(config).start_capture(incident_id, cluster=config.name, per_hour=config.capture.max_per_hour,
                                            actor=task.actor, details={"brokers": list(incident["capture_broker_ids"])})
    except ResponseRefused as exc:
        raise Stop(str(exc)) from exc
    snapshot = ClusterSnapshot.from_dict(incident["snapshot"])
    trigger = finding_records.trigger_of(finding_records.incident_record(config, incident))
    bundle = EvidenceBundle(
        config.bundle_base, cluster=config.name, incident_id=incident_id,
        trigger=finding_records.to_record(trigger) if trigger else None,
        # one incident may be captured by several response runs; evidence is never overwritten
        capture_id=clock.stamp(micros=True),
    )
    targets, missing = brokers_to_probe(config, snapshot, known_registrations(config))
    wanted = set(incident["capture_broker_ids"])
    hook = KafkaHook(config.kafka_conn_id, listener=config.listener)
    checkable = [b for b in targets if b.id in wanted and (b.endpoints or b.id not in missing)]

    def checker():
        return hook.check_all(checkable, config.health.kafka_probe_timeout_s, unregistered=missing)

    suspects = [int(b) for b in incident["broker_ids"]][: config.capture.max_suspects]
    plan_text = capture_plan(config, suspects, incident["capture_broker_ids"])
    task.log.info("%s", plan_text)
    gate = MaintenanceLockGate(config, {b.id: b for b in targets}, run_id=task.run_id, dag_id=task.dag_id, findings=[trigger])
    manifest = _collect(config, snapshot, incident, bundle, checker, targets, gate)
    return _recorded(task, config, incident_id, bundle, manifest, plan_text)


def _collect(config, snapshot, incident, bundle, checker, targets, gate) -> dict[str, Any]:
    from kafka_runbooks.capture.collector import capture_cluster  # keeps DAG parsing fast: paramiko loads when a task runs

    zk_servers = list(incident.get("zookeeper_servers") or [])
    members = []
    if zk_servers:  # a ZooKeeper incident: every member of the ensemble, jstack of the affected one(s)
        from kafka_runbooks.detect.zk_probe import members as zk_members  # keeps DAG parsing fast: loaded when a task runs
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # keeps DAG parsing fast: kazoo loads when a task runs

        members = zk_members(config, ZooKeeperHook(config.zk_conn_id).servers)
    return capture_cluster(config, snapshot, incident["capture_broker_ids"], bundle, suspects=incident["broker_ids"],
                           checker=checker, known={b.id: b for b in targets}, zookeeper_members=members,
                           zookeeper_affected=zk_servers, intrusive=gate)


def _recorded(task: Task, config, incident_id: str, bundle, manifest, plan_text: str) -> dict[str, Any]:
    """The capture's real status in the audit, the record and the bundle index; Stop when nothing was captured."""
    from kafka_runbooks.capture.collector import FAILED  # keeps DAG parsing fast: paramiko loads when a task runs
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs

    hosts = manifest.get("hosts", {})
    unreachable = sorted(b for b, h in hosts.items() if not h.get("reachable"))
    failed = [c for c in manifest.get("commands", []) if c.get("error") or c.get("exit_code") not in (0, None)]
    status = manifest["status"]
    store = IncidentStore(config)
    store.audit(incident_id, actor=task.actor, action="capture", outcome=status, details={
        "bundle_dir": str(bundle.path),
        "duration_s": manifest.get("duration_s"),
        "hosts": {b: {"role": h.get("role"), "status": h.get("status"), "process_state": h.get("process_state"),
                      "thread_dump_method": h.get("thread_dump_method")} for b, h in sorted(hosts.items())},
        "zookeeper": {z: {"role": h.get("role"), "status": h.get("status")}
                      for z, h in sorted((manifest.get("zookeeper") or {}).items())},
        "reasons": manifest.get("status_reasons", []),
        "plan": plan_text,
        "intrusive": {b: h.get("intrusive") for b, h in sorted(hosts.items()) if h.get("intrusive")},
        "intrusive_phase": manifest.get("intrusive"),
        "suspects_capped": manifest.get("suspects_capped"),
        "unreachable": unreachable,
        "failed_commands": [f"{c['broker_id']}:{c['name']}" for c in failed],
    })
    record_bundle(config, incident_id, str(bundle.path), manifest)
    if status == FAILED:
        raise Stop(f"capture failed on every host; nothing captured (see {bundle.path}): "
                   + "; ".join(manifest.get("status_reasons", [])[:5]))
    task.log.info("bundle %s: capture %s in %ss, %d files; reasons: %s", bundle.path, status, manifest.get("duration_s"),
                  len(manifest.get("files", [])), manifest.get("status_reasons"))
    return {"bundle_dir": str(Path(bundle.path)), "unreachable": unreachable, "status": status,
            "status_reasons": manifest.get("status_reasons", [])}


class BundleMismatch(Stop):
    """The bundle a task was handed is not the incident's recorded one (or none is recorded, or the recorded one is
    not in the bundle index for the incident): nothing is analysed or reported from it. Names the incident and both
    bundles."""

    def __init__(self, incident_id: Any, handed: Any, recorded: Any, why: str) -> None:
        self.incident_id, self.handed, self.recorded = incident_id, handed, recorded
        super().__init__(f"refused: incident {incident_id}: {why} (handed on: {handed}; recorded on the incident: "
                         f"{recorded})")


def record_bundle(config, incident_id: str, location: str, manifest) -> None:
    """The incident's bundle, recorded where the tasks after the capture read it (``recorded_bundle``): on the
    incident's record (its ``bundle_dir`` and the capture's status) and in the bundle index."""
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.state.bundles import BundleIndex  # keeps DAG parsing fast: loaded when a task runs

    IncidentStore(config).update(incident_id, bundle_dir=str(location), capture_status=manifest["status"])
    BundleIndex(config).record_capture(str(location), manifest)


def recorded_bundle(config, incident: Any, handed: Any) -> str:
    """The incident's recorded bundle -- the ``bundle_dir`` on its record, indexed for it in the bundle index -- which
    the analysis and the report use; ``handed`` (what the capture task pushed, through XCom) must be that very bundle.
    ``BundleMismatch`` otherwise."""
    from kafka_runbooks.state.bundles import BundleIndex  # keeps DAG parsing fast: loaded when a task runs

    incident_id = incident.get("incident_id") if isinstance(incident, dict) else None
    if not incident_id:
        raise BundleMismatch(None, handed, None, "no incident was opened (see the open_incident task)")
    recorded = (finding_records.incident_record(config, incident) or {}).get("bundle_dir")
    if not recorded:
        raise BundleMismatch(incident_id, handed, None, "no bundle is recorded on the incident (see the capture task)")
    indexed = {str(b["location"]) for b in BundleIndex(config).of_incident(str(incident_id)) if b.get("cluster") == config.name}
    if str(recorded) not in indexed:
        raise BundleMismatch(incident_id, handed, recorded, "the incident's bundle is not in the bundle index for it")
    if handed is not None and str(handed) != str(recorded):
        raise BundleMismatch(incident_id, handed, recorded, "the bundle handed on is not the incident's recorded one")
    return str(recorded)
