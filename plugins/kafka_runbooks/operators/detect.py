"""Detect: read the cluster (ZooKeeper, direct Kafka checks, canary, SSH host probes), keep its
history, run the detectors, and open / resolve incidents by the rules of incidents/lifecycle.py."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from airflow.sdk import BaseOperator

from kafka_runbooks import metrics
from kafka_runbooks.notify import pagerduty
from kafka_runbooks.detect.observe import brokers_to_probe, known_registrations, take_snapshot

RESPONSE_DAG = "kafka_incident_response"
HEALTH_DAG_PREFIX = "kafka_health_check_"  # + the cluster's name: its health-check DAG (dags/kafka_health_check.py)
__all__ = ["ClusterSnapshotOperator", "DetectFindingsOperator", "brokers_to_probe", "health_dag_id", "known_registrations",
           "take_snapshot"]


def health_dag_id(cluster: str) -> str:
    return f"{HEALTH_DAG_PREFIX}{cluster}"


# what a check without JMX cannot see (a run the serving watch started: take_snapshot(jmx=False)): the follower's log
# end offsets and fetcher lags come from the same JmxTool read
NO_JMX_PROBLEMS = ("follower_stuck",)
# a serving-watch event counts as a check of the brokers it names only while it is this fresh (a run queued behind a
# long one starts later; an older event says little about now)
WATCH_EVENT_MAX_AGE_S = 120.0


def watch_observations(context, cluster: str, now: str, max_age_s: float | None = WATCH_EVENT_MAX_AGE_S) -> dict[int, str]:
    """``{broker id: when}`` of the serving watch's events (``triggers/serving.py``) that started this run: the asset
    events' payloads (Airflow keeps an AssetWatcher's TriggerEvent payload in the event's ``extra["payload"]``) naming
    brokers of ``cluster`` that did not answer, at most ``max_age_s`` old (None: any age -- was the run started by the
    serving watch at all). Empty for a cron run or a ZooKeeper change."""
    from kafka_runbooks import clock  # deferred: loaded on first use, not when a DAG file is parsed

    out: dict[int, str] = {}
    try:
        events = [e for evs in (context.get("triggering_asset_events") or {}).values() for e in evs]
    except Exception:  # noqa: BLE001 - no asset events in this context (a test's, an older Airflow's)
        return out
    for e in events:
        extra = getattr(e, "extra", None) if not isinstance(e, dict) else e.get("extra")
        payload = (extra or {}).get("payload") if isinstance(extra, dict) else None
        if not isinstance(payload, dict) or payload.get("changed") != ["serving"] or payload.get("cluster") != cluster:
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


class ClusterSnapshotOperator(BaseOperator):
    """Reads ZooKeeper, checks every broker directly, runs the canary and probes every host. The snapshot is kept in the
    state database; what it returns (XCom) is its ``state.snapshots.SnapshotRef``: a 100,000-partition snapshot is ~17 MB."""

    template_fields: Sequence[str] = ("cluster",)

    def __init__(self, *, cluster: str, probe_hosts: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.probe_hosts = probe_hosts

    def execute(self, context) -> dict[str, Any]:
        from kafka_runbooks.config import load_cluster

        from kafka_runbooks import clock  # deferred: loaded on first use, not when a DAG file is parsed

        config = load_cluster(self.cluster)
        watch = watch_observations(context, config.name, clock.now_iso(), max_age_s=None)
        if watch:
            self.log.info("started by the serving watch (brokers %s did not answer it): no JmxTool read this run", sorted(watch))
        snapshot = take_snapshot(config, probe_hosts=self.probe_hosts, known=known_registrations(config), jmx=not watch)
        self.log.info(
            "cluster %s: registered %s, configured %s, controller %s, %d partitions, %d unparsable znodes; checks %s",
            snapshot.cluster, sorted(snapshot.live_broker_ids), list(snapshot.configured_broker_ids), snapshot.controller_id,
            len(snapshot.partitions), len(snapshot.unparsable),
            {c.broker_id: ("ok" if c.ok else c.error_code) for c in snapshot.kafka_checks},
        )
        from kafka_runbooks.state.snapshots import Snapshots

        ref = Snapshots(config).put(snapshot)
        self.log.info("snapshot %s kept in the state database (%d bytes compressed)", ref.snapshot_id[:16], ref.compressed_bytes)
        return ref.to_dict()


def response_run_states(context, incidents: Mapping[str, Mapping[str, Any]]) -> dict[str, str | None]:
    """Airflow's state of each responding incident's response run (None when Airflow does not know it)."""
    from kafka_runbooks.incidents.store import RESPONDING

    ti = context.get("ti")
    out: dict[str, str | None] = {}
    for iid, rec in incidents.items():
        run_id = rec.get("response_run")
        if rec.get("status") != RESPONDING or not run_id:
            continue
        try:
            state = ti.get_dagrun_state(RESPONSE_DAG, run_id)
            out[iid] = str(getattr(state, "value", state)) if state is not None else None
        except Exception:  # noqa: BLE001 - the run does not exist (deleted) or the API is unavailable
            out[iid] = None
    return out


class DetectFindingsOperator(BaseOperator):
    """Records the snapshot in the history, runs the detectors on it, and moves incidents:
    opens one (and returns the response run to start) when a finding held for
    ``health.consecutive_checks`` checks; resolves one whose finding cleared for
    ``health.clear_checks`` checks; marks ``needs_person`` a response that ended without an outcome.

    Returns ``[{"trigger_run_id": ..., "conf": ...}]`` for a mapped TriggerDagRunOperator.
    """

    template_fields: Sequence[str] = ("cluster", "snapshot")

    def __init__(self, *, cluster: str, snapshot: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cluster = cluster
        self.snapshot = snapshot

    def execute(self, context) -> list[dict[str, Any]]:
        import time

        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.detect.history import HistoryStore
        from kafka_runbooks.incidents import lifecycle
        from kafka_runbooks.incidents.store import IncidentStore
        from kafka_runbooks.model import ClusterSnapshot

        from kafka_runbooks.state.snapshots import SnapshotRef, Snapshots

        config = load_cluster(self.cluster)
        # the snapshot task's ref (a whole snapshot is still taken, as a test or an older run may pass one)
        snapshot = Snapshots(config).get(self.snapshot) if SnapshotRef.is_ref(self.snapshot) else ClusterSnapshot.from_dict(self.snapshot)
        history_store = HistoryStore(config)
        store = IncidentStore(config)
        starts: list[dict[str, Any]] = []
        from kafka_runbooks import clock  # deferred: loaded on first use, not when a DAG file is parsed

        started = bool(watch_observations(context, config.name, clock.now_iso(), max_age_s=None))  # its snapshot read no JMX
        watch = watch_observations(context, config.name, clock.now_iso()) if started else None
        if watch:
            self.log.info("started by the serving watch: brokers %s did not answer it (%s); that counts as one check of them",
                          sorted(watch), watch)
        for observation in range(1, config.health.consecutive_checks + 1):
            counted = ((watch or {}) if observation == 1 else {}) if started else None  # the watch's rounds: once
            state = self._check(snapshot, config, history_store, store, context, starts, counted)
            waiting = lifecycle.pending(state, config.health)
            if not waiting or config.health.recheck_s <= 0 or observation == config.health.consecutive_checks:
                break
            self.log.info("re-checking in %gs: %s seen once, not yet for %d consecutive checks",
                          config.health.recheck_s, waiting, config.health.consecutive_checks)
            time.sleep(config.health.recheck_s)
            snapshot = take_snapshot(config, known=known_registrations(config), jmx=not started)
        return starts

    def _check(self, snapshot, config, history_store, store, context, starts: list, watch: dict[int, str] | None = None) -> dict:
        """One observation: history, detectors, lifecycle, incident moves. Returns the new state. ``watch`` (a run the
        serving watch started; None otherwise): the brokers its rounds count one check of (``lifecycle.count_watch``);
        the snapshot read no JMX, so ``NO_JMX_PROBLEMS`` are not observed."""
        from kafka_runbooks.detect.activity import during_plan
        from kafka_runbooks.detect.detectors import detect
        from kafka_runbooks.detect.record import record_check
        from kafka_runbooks.incidents import lifecycle

        history = record_check(history_store, snapshot)
        activity = self._activity(config)
        findings = detect(snapshot, config.health, history, config.zookeeper_health, leadership=config.leadership,
                          kafka_version=config.kafka_version, activity=activity)
        for a in activity:
            self.log.info("the product's own work on %s: %s", config.name, a.describe())
        for f in findings:
            self.log.warning("finding %s [%s] brokers=%s: %s", f.kind, f.severity.value, list(f.broker_ids), f.summary)
            metrics.finding(f.kind)
        # what a running plan of the product causes is its own: annotated, and no competing incident, capture or plan
        findings = [f for f in findings if not during_plan(f)]

        from kafka_runbooks.operators.incident import needs_person

        actor = f"dag:{context['dag'].dag_id}/run:{context['run_id']}"
        incidents = {r["id"]: r for r in store.records(config.name)}
        run_states = response_run_states(context, incidents)
        for iid, reason in lifecycle.stale_responses(incidents, run_states):
            incidents[iid] = needs_person(store, config, context, iid, actor=actor, reason=reason)
            self.log.warning("incident %s needs a person: %s", iid, reason)
        running = {iid for iid, state in run_states.items() if state in ("queued", "running")}

        actions: list[lifecycle.Action] = []

        def advance(state: dict) -> dict:
            if watch:  # the serving watch's rounds first: they came before this snapshot
                state, counted = lifecycle.count_watch(state, {b: at for b, at in watch.items() if at <= snapshot.taken_at}, config.health)
                for key in counted:
                    self.log.info("lifecycle: %s counted once for the serving watch's rounds", key)
            new, acts = lifecycle.step(state, findings, incidents, running, config.health, snapshot.taken_at,
                                       unobserved=NO_JMX_PROBLEMS if watch is not None else ())
            actions.extend(acts)
            return new

        state = history_store.update_state(advance)
        links: dict[str, str] = {}
        for a in actions:
            self.log.info("lifecycle: %s %s %s: %s", a.kind, a.key, a.incident_id or "", a.reason)
            if a.kind == "open" and a.finding is not None:
                # the problem's episode (its streak since first seen): unique among incidents, so a health check racing
                # this one opens nothing more
                episode = ((state.get("streaks") or {}).get(a.key) or {}).get("first_seen")
                start = self._open(store, config, a, actor, context, key=f"{config.name}/{a.key}@{episode}")
                links[a.key] = start["incident_id"]
                if start.get("conf"):
                    starts.append({"trigger_run_id": start["run_id"], "conf": start["conf"]})
            elif a.kind == "note" and a.incident_id:
                store.update(a.incident_id, last_seen_at=snapshot.taken_at, last_seen_kind=a.finding.kind if a.finding else None)
            elif a.kind == "resolve" and a.incident_id:
                metrics.incident_closed(store.resolve(a.incident_id, actor=actor, reason=a.reason, **dict(a.details)))
                pagerduty.resolve(store, config, a.incident_id, actor=actor)  # its page (if any) resolved too
            elif a.kind == "restart_streak" and a.incident_id:
                store.audit(a.incident_id, actor=actor, action="detected_again", outcome="new streak", details={"reason": a.reason})
        if links:
            state = history_store.update_state(lambda st: _link_all(lifecycle, st, links))
        return state

    def _activity(self, config) -> list:
        """The product's remediations acting now or within the window (``remediate/activity.py``); the maintenance lock
        is read on its own ZooKeeper session. A failure to read them is logged and treated as none."""
        from kafka_runbooks.hooks.zookeeper import ZooKeeperHook
        from kafka_runbooks.remediate.activity import product_activity

        try:
            with ZooKeeperHook(config.zk_conn_id, timeout_s=config.capture.connect_timeout_s).session() as zk:
                return product_activity(config, zk)
        except Exception as exc:  # noqa: BLE001 - ZooKeeper unreachable is the snapshot's finding, not this one's
            self.log.warning("the product's own activity on %s could not be read: %s: %s", config.name, type(exc).__name__, exc)
            return []

    def _open(self, store, config, a, actor: str, context, key: str | None = None) -> dict[str, Any]:
        from kafka_runbooks.incidents.store import IncidentExists
        from kafka_runbooks.operators.incident import needs_person

        f = a.finding
        try:
            record = store.open(cluster=config.name, broker_ids=f.broker_ids, reason=f.summary, trigger=f.to_dict(), opened_by=actor,
                                key=key)
        except IncidentExists as exc:
            self.log.warning("incident %s is already open for this problem (%s), opened by a concurrent health check: "
                             "not opened again", exc.record["id"], key)
            return {"incident_id": exc.record["id"]}
        store.audit(record["id"], actor=actor, action="detected", outcome=f.kind, details={"why": a.reason})
        metrics.incident_opened(record)
        self.log.warning("opened incident %s: %s", record["id"], a.reason)
        if f.details.get("page"):
            from kafka_runbooks.notify.webhook import page

            sent, what = page(config.approvals.oncall_conn_id, config.name, f":rotating_light: {f.summary}",
                              {"incident": record["id"], "kind": f.kind})
            store.audit(record["id"], actor=actor, action="page_oncall", outcome="sent" if sent else "not sent", details={"result": what})
        zk_servers = [str(f.details["subject"])] if f.details.get("problem") == "zookeeper_member" and f.details.get("server") else []
        if not f.broker_ids and not zk_servers:
            needs_person(store, config, context, record["id"], actor=actor, page=not f.details.get("page"),  # paged above
                         reason="no broker or ZooKeeper server named by the finding: nothing to capture or restart automatically")
            return {"incident_id": record["id"]}
        if f.details.get("problem") == "leadership":
            # a restart would move leadership again (incident 003): on-call stops the automatic rebalance and starts the
            # deferred election (kafka_preferred_election), which waits until the broker is ready and traffic is quiet
            needs_person(store, config, context, record["id"], actor=actor, page=not f.details.get("page"),
                         reason=f"{f.kind}: no automatic restart; see {f.details.get('runbook')} ({f.details.get('remediation')})")
            return {"incident_id": record["id"]}
        run_id = f"health__{record['id']}"
        store.responding(record["id"], actor=actor, run_id=run_id)
        conf = {"cluster": config.name, "incident_id": record["id"], "broker_ids": list(f.broker_ids), "reason": f.summary[:2000],
                "zookeeper_servers": zk_servers, "finding": f.to_dict()}
        return {"incident_id": record["id"], "run_id": run_id, "conf": conf}


def _link_all(lifecycle, state: dict, links: Mapping[str, str]) -> dict:
    for key, iid in links.items():
        state = lifecycle.link(state, key, iid)
    return state
