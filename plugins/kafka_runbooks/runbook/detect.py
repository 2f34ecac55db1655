"""Detect, as the application runs it: read the cluster (ZooKeeper, direct Kafka checks, canary, SSH host probes),
keep it and its history, run the detectors, and move incidents by the rules of ``incidents/lifecycle.py`` -- a new
incident gets what ``remediate.choice.first_response`` says: the response run, or a person."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from kafka_runbooks import metrics
from kafka_runbooks.notify import pagerduty
from kafka_runbooks.runbook import plans
from kafka_runbooks.runbook.task import Task

RESPONSE_DAG = "kafka_incident_response"
HEALTH_DAG_PREFIX = "kafka_health_check_"  # + the cluster's name: its health-check DAG (dags/kafka_health_check.py)


def health_dag_id(cluster: str) -> str:
    return f"{HEALTH_DAG_PREFIX}{cluster}"


# what a check without JMX cannot see (a run the serving watch started: take_snapshot(jmx=False)): the follower's log
# end offsets and fetcher lags come from the same JmxTool read
NO_JMX_PROBLEMS = ("follower_stuck",)
# a serving-watch event counts as a check of the brokers it names only while it is this fresh (a run queued behind a
# long one starts later; an older event says little about now)
WATCH_EVENT_MAX_AGE_S = 120.0


def watch_observations(payloads: list[dict[str, Any]], cluster: str, now: str,
                       max_age_s: float | None = WATCH_EVENT_MAX_AGE_S) -> dict[int, str]:
    """``{broker id: when}`` of the serving watch's events (``triggers/serving.py``) that started this run (``payloads``:
    its asset events' payloads) naming brokers of ``cluster`` that did not answer, at most ``max_age_s`` old (None: any
    age -- was the run started by the serving watch at all). Empty for a cron run or a ZooKeeper change."""
    from kafka_runbooks import clock  # keeps DAG parsing fast: loaded when a task runs

    out: dict[int, str] = {}
    for payload in payloads:
        if payload.get("changed") != ["serving"] or payload.get("cluster") != cluster:
            continue
        at = str(payload.get("at") or "")
        try:
            if not at or (max_age_s is not None and (clock.parse(now) - clock.parse(at)).total_seconds() > max_age_s):
                continue
        except ValueError:
            continue
        for bid in (payload.get("not_answering") or {}):
            if str(bid).isdigit():
                out[int(bid)] = max(out.get(int(bid), ""), at)
    return out


def snapshot(cluster: str, task: Task, probe_hosts: bool = True,
             config_of: Callable[[str], Any] = plans.load_config) -> dict[str, Any]:
    """Reads ZooKeeper, checks every broker directly, runs the canary and probes every host; keeps the snapshot in the
    state database and returns its ``state.snapshots.SnapshotRef`` (a 100,000-partition snapshot is ~17 MB)."""
    from kafka_runbooks.detect.observe import known_registrations, take_snapshot  # keeps DAG parsing fast: clients at run time
    from kafka_runbooks.state.snapshots import Snapshots  # keeps DAG parsing fast: loaded when a task runs

    from kafka_runbooks import clock  # keeps DAG parsing fast: loaded when a task runs

    config = config_of(cluster)
    watch = watch_observations(task.asset_payloads, config.name, clock.now_iso(), max_age_s=None)
    if watch:
        task.log.info("started by the serving watch (brokers %s did not answer it): no JmxTool read this run", sorted(watch))
    s = take_snapshot(config, probe_hosts=probe_hosts, known=known_registrations(config), jmx=not watch)
    task.log.info("cluster %s: registered %s, configured %s, controller %s, %d partitions, %d unparsable znodes; checks %s",
                  s.cluster, sorted(s.live_broker_ids), list(s.configured_broker_ids), s.controller_id, len(s.partitions),
                  len(s.unparsable), {c.broker_id: ("ok" if c.ok else c.error_code) for c in s.kafka_checks})
    ref = Snapshots(config).put(s)
    task.log.info("snapshot %s kept in the state database (%d bytes compressed)", ref.snapshot_id[:16], ref.compressed_bytes)
    return ref.to_dict()


def response_run_states(task: Task, incidents: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """Airflow's state of each responding incident's response run (None when Airflow does not know it)."""
    from kafka_runbooks.incidents.store import RESPONDING  # keeps DAG parsing fast: loaded when a task runs

    return {iid: task.run_state(RESPONSE_DAG, rec["response_run"]) for iid, rec in incidents.items()
            if rec.get("status") == RESPONDING and rec.get("response_run")}


def detect(cluster: str, snapshot_value: Any, task: Task, config_of: Callable[[str], Any] = plans.load_config,
           sleep=time.sleep) -> list[dict[str, Any]]:
    """Records the snapshot in the history, runs the detectors on it, and moves incidents: opens one (and returns the
    response run to start) when a finding held for ``health.consecutive_checks`` checks; resolves one whose finding
    cleared for ``health.clear_checks`` checks; marks ``needs_person`` a response that ended without an outcome.
    Returns ``[{"trigger_run_id": ..., "conf": ...}]`` for a mapped TriggerDagRunOperator."""
    from kafka_runbooks.detect.history import HistoryStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.detect.observe import known_registrations, take_snapshot  # keeps DAG parsing fast: clients at run time
    from kafka_runbooks.incidents import lifecycle  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.incidents.store import IncidentStore  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.model import ClusterSnapshot  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.state.snapshots import SnapshotRef, Snapshots  # keeps DAG parsing fast: loaded when a task runs

    config = config_of(cluster)
    # the snapshot task's ref (a whole snapshot is still taken, as a test or an older run may pass one)
    s = Snapshots(config).get(snapshot_value) if SnapshotRef.is_ref(snapshot_value) else ClusterSnapshot.from_dict(snapshot_value)
    history_store, store = HistoryStore(config), IncidentStore(config)
    starts: list[dict[str, Any]] = []
    started, watch = _watched(task, config)
    for observation in range(1, config.health.consecutive_checks + 1):
        counted = ((watch or {}) if observation == 1 else {}) if started else None  # the watch's rounds: once
        state = check(s, config, history_store, store, task, starts, counted)
        waiting = lifecycle.pending(state, config.health)
        if not waiting or config.health.recheck_s <= 0 or observation == config.health.consecutive_checks:
            break
        task.log.info("re-checking in %gs: %s seen once, not yet for %d consecutive checks",
                      config.health.recheck_s, waiting, config.health.consecutive_checks)
        sleep(config.health.recheck_s)
        s = take_snapshot(config, known=known_registrations(config), jmx=not started)
    return starts


def _watched(task: Task, config) -> tuple[bool, dict[int, str] | None]:
    """Whether the serving watch started this run (its snapshot read no JMX), and the brokers its fresh rounds count
    one check of."""
    from kafka_runbooks import clock  # keeps DAG parsing fast: loaded when a task runs

    started = bool(watch_observations(task.asset_payloads, config.name, clock.now_iso(), max_age_s=None))
    watch = watch_observations(task.asset_payloads, config.name, clock.now_iso()) if started else None
    if watch:
        task.log.info("started by the serving watch: brokers %s did not answer it (%s); that counts as one check of them",
                      sorted(watch), watch)
    return started, watch


def findings_of(snapshot, config, history_store, task: Task) -> list:
    """The detectors' findings on this observation (kept in the history), less what the product's own running plans
    cause (annotated, and no competing incident, capture or plan)."""
    from kafka_runbooks.detect.activity import during_plan  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.detect.detectors import detect as run_detectors  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.detect.record import record_check  # keeps DAG parsing fast: loaded when a task runs

    history = record_check(history_store, snapshot)
    activity = product_activity(config, task)
    findings = run_detectors(snapshot, config.health, history, config.zookeeper_health, leadership=config.leadership,
                             kafka_version=config.kafka_version, activity=activity)
    for a in activity:
        task.log.info("the product's own work on %s: %s", config.name, a.describe())
    for f in findings:
        task.log.warning("finding %s [%s] brokers=%s: %s", f.kind, f.severity.value, list(f.broker_ids), f.summary)
        metrics.finding(f.kind)
    return [f for f in findings if not during_plan(f)]


def check(snapshot, config, history_store, store, task: Task, starts: list, watch: dict[int, str] | None = None) -> dict:
    """One observation: history, detectors, lifecycle, incident moves. Returns the new state. ``watch`` (a run the
    serving watch started; None otherwise): the brokers its rounds count one check of (``lifecycle.count_watch``);
    the snapshot read no JMX, so ``NO_JMX_PROBLEMS`` are not observed."""
    from kafka_runbooks.incidents import lifecycle  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.finding_records import to_record  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.incident import needs_person  # keeps DAG parsing fast: loaded when a task runs

    findings = findings_of(snapshot, config, history_store, task)
    incidents = {r["id"]: r for r in store.records(config.name)}
    run_states = response_run_states(task, incidents)
    for iid, reason in lifecycle.stale_responses(incidents, run_states):
        incidents[iid] = needs_person(store, config, task, iid, actor=task.actor, reason=reason)
        task.log.warning("incident %s needs a person: %s", iid, reason)
    running = {iid for iid, state in run_states.items() if state in ("queued", "running")}
    actions: list[lifecycle.Action] = []

    def advance(state: dict) -> dict:
        if watch:  # the serving watch's rounds first: they came before this snapshot
            state, counted = lifecycle.count_watch(state, {b: at for b, at in watch.items() if at <= snapshot.taken_at},
                                                   config.health)
            for key in counted:
                task.log.info("lifecycle: %s counted once for the serving watch's rounds", key)
        new, acts = lifecycle.step(state, findings, incidents, running, config.health, snapshot.taken_at,
                                   unobserved=NO_JMX_PROBLEMS if watch is not None else ())
        actions.extend(acts)
        return new

    state = history_store.update_state(advance)
    links = _act(actions, state, snapshot, config, store, task, starts)
    if links:
        state = history_store.update_state(lambda st: _link_all(lifecycle, st, links))
    return state


def _act(actions, state, snapshot, config, store, task: Task, starts: list) -> dict[str, str]:
    """The lifecycle's moves done: open (and start its response), note, resolve, a new streak. Returns the problems'
    keys linked to the incidents opened for them."""
    links: dict[str, str] = {}
    for a in actions:
        task.log.info("lifecycle: %s %s %s: %s", a.kind, a.key, a.incident_id or "", a.reason)
        if a.kind == "open" and a.finding is not None:
            # the problem's episode (its streak since first seen): unique among incidents, so a health check racing
            # this one opens nothing more
            episode = ((state.get("streaks") or {}).get(a.key) or {}).get("first_seen")
            start = open_for(store, config, a, task, key=f"{config.name}/{a.key}@{episode}")
            links[a.key] = start["incident_id"]
            if start.get("conf"):
                starts.append({"trigger_run_id": start["run_id"], "conf": start["conf"]})
        elif a.kind == "note" and a.incident_id:
            store.update(a.incident_id, last_seen_at=snapshot.taken_at, last_seen_kind=a.finding.kind if a.finding else None)
        elif a.kind == "resolve" and a.incident_id:
            metrics.incident_closed(store.resolve(a.incident_id, actor=task.actor, reason=a.reason, **dict(a.details)))
            pagerduty.resolve(store, config, a.incident_id, actor=task.actor)  # its page (if any) resolved too
        elif a.kind == "restart_streak" and a.incident_id:
            store.audit(a.incident_id, actor=task.actor, action="detected_again", outcome="new streak", details={"reason": a.reason})
    return links


def product_activity(config, task: Task) -> list:
    """The product's remediations acting now or within the window (``remediate/activity.py``); the maintenance lock
    is read on its own ZooKeeper session. A failure to read them is logged and treated as none."""
    from kafka_runbooks.hooks.zookeeper import ZooKeeperHook  # keeps DAG parsing fast: kazoo loads when a task runs
    from kafka_runbooks.remediate.activity import product_activity as activity  # keeps DAG parsing fast

    try:
        with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
            return activity(config, zk)
    except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable is the snapshot's finding, not this one's
        task.log.warning("the product's own activity on %s could not be read: %s: %s", config.name, type(exc).__name__, exc)
        return []


def open_for(store, config, a, task: Task, key: str | None = None) -> dict[str, Any]:
    """Opens the incident of a lifecycle ``open`` (once per problem episode), pages when the finding says so, and gives
    it what ``remediate.choice.first_response`` says: the response run (returned with its conf) or a person.

    The finding is recorded on the incident (its ``trigger``), where the response run's tasks load it
    (``finding_records.trigger_of``). The conf is a reference, never a copy of the finding: the cluster, the incident
    and its brokers (shown in the response's approval subjects; its ``open_incident`` checks them against the record).
    The response reads the rest -- the reason, the ZooKeeper members a ZooKeeper incident captures -- from the
    incident's record (``runbook.incident.open_incident``)."""
    from kafka_runbooks.incidents.store import IncidentExists  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.remediate.choice import PERSON, first_response  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.finding_records import to_record  # keeps DAG parsing fast: loaded when a task runs
    from kafka_runbooks.runbook.incident import needs_person  # keeps DAG parsing fast: loaded when a task runs

    f, actor = a.finding, task.actor
    try:
        record = store.open(cluster=config.name, broker_ids=f.broker_ids, reason=f.summary, trigger=to_record(f), opened_by=actor,
                            key=key)
    except IncidentExists as exc:
        task.log.warning("incident %s is already open for this problem (%s), opened by a concurrent health check: "
                         "not opened again", exc.record["id"], key)
        return {"incident_id": exc.record["id"]}
    store.audit(record["id"], actor=actor, action="detected", outcome=f.kind, details={"why": a.reason})
    metrics.incident_opened(record)
    task.log.warning("opened incident %s: %s", record["id"], a.reason)
    if f.details.get("page"):
        from kafka_runbooks.notify.webhook import page  # keeps DAG parsing fast: loaded when a task runs

        sent, what = page(config.approvals.oncall_conn_id, config.name, f":rotating_light: {f.summary}",
                          {"incident": record["id"], "kind": f.kind})
        store.audit(record["id"], actor=actor, action="page_oncall", outcome="sent" if sent else "not sent", details={"result": what})
    response = first_response(f)
    if response.kind == PERSON:
        needs_person(store, config, task, record["id"], actor=actor, page=not f.details.get("page"),  # paged above
                     reason=response.reason)
        return {"incident_id": record["id"]}
    run_id = f"health__{record['id']}"
    store.responding(record["id"], actor=actor, run_id=run_id)
    conf = {"cluster": config.name, "incident_id": record["id"], "broker_ids": list(record.get("broker_ids") or [])}
    return {"incident_id": record["id"], "run_id": run_id, "conf": conf}


def _link_all(lifecycle, state: dict, links: Mapping[str, str]) -> dict:
    for key, iid in links.items():
        state = lifecycle.link(state, key, iid)
    return state
