"""Drill 003 (issue 7, incident 003): automatic leader rebalance against a returning broker, then the deferred
preferred election instead.

    ./run demo 003 [--keep-lab]        (python -m kafka_lab.drill 003)

1. Rebalance on (the lab's ``rebalance`` profile: ``auto.leader.rebalance.enable=true``, checked every 10 s):
   broker 3 is stopped (its leaderships move away) and started under the client load while its ZooKeeper session
   is made to flap (paused longer than the session timeout, twice). The controller moves leadership back each time
   broker 3 rejoins an ISR. Then the controller's requests to broker 3 are held while the rebalance moves
   leadership back to it: broker 3's own metadata stays stale, as in the incident. The health check, running the
   whole time, raises ``rebalance_hazard``, ``election_storm`` and ``metadata_divergence`` with their evidence.
2. Rebalance off (the default profile): the same return and flaps; ``kafka_preferred_election`` is approved at once
   (by this program, user ``drill-bot``), waits until broker 3 is in every ISR and its session has been stable for
   ``stable_s``, then restores preferred leadership in batches, each checked.

Throughout, a sampler compares every broker's own metadata (asked of each broker alone) with ZooKeeper every
~0.25 s: the longest divergence window of each phase is one of the figures (``benchmarks/election.py``).
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

RETURNING = 3
DAG_ID = "kafka_preferred_election"


def say(msg: str) -> None:
    print(f"[drill 003] {msg}", flush=True)


class DivergenceSampler:
    """In a thread: ZooKeeper's leaders vs every broker's own metadata; the longest time any broker disagreed
    (seconds, from the first sample that disagreed to the first that agreed again)."""

    def __init__(self, lab, interval_s: float = 0.25) -> None:
        self.lab, self.interval_s = lab, interval_s
        self.samples = 0
        self.diverged_samples = 0
        self.longest_s = 0.0
        self.longest_at: str | None = None
        self.worst: dict[str, Any] = {}
        self._since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="divergence-sampler", daemon=True)

    def __enter__(self) -> "DivergenceSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(30)
        self._close(time.monotonic())

    def _close(self, now: float) -> None:
        if self._since is not None:
            took = now - self._since
            if took > self.longest_s:
                self.longest_s = took
            self._since = None

    def _run(self) -> None:
        from kafka_runbooks import clock

        while not self._stop.is_set():
            try:
                zk = {f"{t}-{p}": st["leader"] for (t, p), st in self.lab.partitions().items()}
                views = self.lab.views(timeout=1.0)
            except Exception:  # noqa: BLE001 - a failed sample is skipped, not counted either way
                self._stop.wait(self.interval_s)
                continue
            now = time.monotonic()
            self.samples += 1
            disagree = {}
            for b, view in views.items():
                if "error" in view:
                    continue
                for name, leader in zk.items():
                    t, _, p = name.rpartition("-")
                    seen = view.get((t, int(p)), (None, None))[0]
                    if leader >= 0 and seen != leader:
                        disagree.setdefault(name, {})[b] = seen
            if disagree:
                self.diverged_samples += 1
                if self._since is None:
                    self._since = now
                if now - self._since >= self.longest_s:
                    self.longest_at = clock.now_iso()
                    self.worst = {n: {"zookeeper": zk[n], "views": v} for n, v in list(disagree.items())[:3]}
            else:
                self._close(now)
            self._stop.wait(self.interval_s)

    def figures(self) -> dict[str, Any]:
        return {"longest_s": round(self.longest_s, 2), "samples": self.samples, "diverged_samples": self.diverged_samples,
                "longest_ended_near": self.longest_at, "example": self.worst}


class HealthChecker:
    """The health check (``check_once``: observe, history, detectors) in a loop in a thread; the first finding of
    each kind is kept."""

    def __init__(self, config, kinds: tuple[str, ...]) -> None:
        self.config, self.kinds = config, kinds
        self.first: dict[str, dict] = {}
        self.checks = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-checker", daemon=True)

    def __enter__(self) -> "HealthChecker":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(120)

    def _run(self) -> None:
        from kafka_runbooks.detect.observe import check_once

        while not self._stop.is_set():
            try:
                _, findings = check_once(self.config, probe_hosts=True)
                self.checks += 1
            except Exception as exc:  # noqa: BLE001 - shown at the end
                self.errors.append(f"{type(exc).__name__}: {exc}")
                self._stop.wait(1.0)
                continue
            for f in findings:
                if f.kind in self.kinds and f.kind not in self.first:
                    self.first[f.kind] = f.to_dict()
                    say(f"health check #{self.checks} raised {f.kind} [{f.severity.value}]: {f.summary[:400]}")
            self._stop.wait(0.5)

    def wait_for(self, kind: str, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while kind not in self.first and time.monotonic() < deadline:
            time.sleep(0.5)
        return kind in self.first


def _load_failures(lab) -> int:
    try:
        return int(lab.load_stats().get("produced_failed") or 0)
    except Exception:  # noqa: BLE001
        return -1


def return_and_flap(lab, flaps: int) -> None:
    """Broker 3 stopped (leadership moves away), started under the load, its session flapped ``flaps`` times."""
    lab.stop(RETURNING)
    lab.start(RETURNING)
    if flaps:
        lab.flap(RETURNING, times=flaps)
    lab.wait_started(RETURNING)


def rebalance_phase(lab, config, flaps: int = 2, detect: bool = True) -> dict[str, Any]:
    """Phase 1. Returns its figures and the first finding of each kind."""
    say("profile 'rebalance': auto.leader.rebalance.enable=true, leader.imbalance.check.interval.seconds=10 (rolling the brokers)")
    lab.use_profile("rebalance")
    kinds = ("rebalance_hazard", "election_storm", "metadata_divergence", "leadership_imbalance", "request_queue_saturated",
             "connection_storm")
    failed0 = _load_failures(lab)
    out: dict[str, Any] = {}
    checker = HealthChecker(config, kinds) if detect else None
    if checker:
        checker.__enter__()
    try:
        t0 = time.monotonic()
        with DivergenceSampler(lab) as sampler:
            say(f"broker {RETURNING} stopped and started under load, its ZooKeeper session flapped {flaps} times")
            return_and_flap(lab, flaps)
            lab.wait_full_isr(180)
            lab.wait_leads_preferred(RETURNING, 120)
            say(f"the controller moved leadership back to broker {RETURNING} by itself ({time.monotonic() - t0:.0f} s after the stop)")
            time.sleep(5)
        out["divergence"] = sampler.figures()
        out["load_produce_failures"] = _load_failures(lab) - failed0
        say(f"rebalance on: longest window in which a broker's own metadata disagreed with ZooKeeper: {out['divergence']['longest_s']} s "
            f"({out['divergence']['diverged_samples']} of {out['divergence']['samples']} samples)")
        if checker:
            checker.wait_for("rebalance_hazard", 30)
            checker.wait_for("election_storm", 60)
            say(f"holding the controller's requests to broker {RETURNING} while the rebalance moves leadership back to it "
                "(incident 003: broker 3's cache stayed at epoch 426 while ZooKeeper went to 435)")
            held = lab.flap_then_hold(RETURNING)
            try:
                checker.wait_for("metadata_divergence", 90)
            finally:
                lab.release_controller_requests()
                say(f"released the held controller requests ({held.get('attempt')} attempt(s))")
            lab.wait_full_isr(180)
    finally:
        if checker:
            checker.__exit__(None, None, None)
            out["findings"] = checker.first
            out["checks"] = checker.checks
            out["check_errors"] = checker.errors[-3:]
    return out


def deferred_phase(lab, settings: dict, flaps: int = 2, stable_s: float = 20.0) -> dict[str, Any]:
    """Phase 2: rebalance off; the same return; the deferred election through the DAG, approved by ``drill-bot``."""
    from kafka_lab.airflow_home import load_dags
    from kafka_lab.approvals import Responder
    from kafka_runbooks import clock

    say("profile 'default': auto.leader.rebalance.enable=false (rolling the brokers)")
    lab.use_profile("default")
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"]["election"] = {"batch_size": 8, "offsets_batch_size": 10, "stable_s": stable_s, "poll_s": 1.0,
                                   "convergence_s": 60.0, "deadline_s": 900.0}
    os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"] = json.dumps(clusters)
    failed0 = _load_failures(lab)
    with DivergenceSampler(lab) as sampler:
        say(f"broker {RETURNING} stopped and started under load, its ZooKeeper session flapped {flaps} times; nothing moves back")
        return_and_flap(lab, flaps)
        t_back = clock.now()
        say(f"kafka_preferred_election (execute) started; approval answered by this program as 'drill-bot'; "
            f"it waits for broker {RETURNING} in every ISR and a session stable for {stable_s:g} s")
        with Responder(DAG_ID, "approve", "Approve", user="drill-bot", timeout_s=900) as responder:
            run = load_dags().get_dag(DAG_ID).test(run_conf={"cluster": "lab", "brokers": [RETURNING], "mode": "execute",
                                                            "reason": f"drill 003 {uuid.uuid4().hex[:6]}"})
        if responder.error:
            raise responder.error
        time.sleep(3)
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    out: dict[str, Any] = {"run_state": str(run.state), "tasks": {k: str(ti.state) for k, ti in tis.items()},
                           "divergence": sampler.figures(), "load_produce_failures": _load_failures(lab) - failed0}
    wait = tis["wait"].xcom_pull(task_ids="wait") or {}
    result = tis["elect"].xcom_pull(task_ids="elect") or {}
    if wait.get("at") and tis["elect"].end_date is not None:
        out["ready_at"] = wait["at"]
        out["ready_to_restored_s"] = round((tis["elect"].end_date - clock.parse(wait["at"])).total_seconds(), 2)
        out["returned_to_ready_s"] = round((clock.parse(wait["at"]) - t_back).total_seconds(), 2)
        out["waited_for"] = wait.get("waited_for")
    out["elected"] = len(result.get("elected") or [])
    out["batches"] = result.get("batches")
    out["canary_failures"] = result.get("canary_failures")
    out["batch_timings"] = result.get("timings")
    out["restored"] = lab.leads_preferred(RETURNING)
    record = (tis["plan"].xcom_pull(task_ids="plan") or {}).get("plan", {}).get("roll_id")
    if record:
        from kafka_runbooks.incidents.store import IncidentStore

        out["audit"] = [f"{e['at']} {e['actor']}: {e['action']} -> {e['outcome']}"
                        for e in IncidentStore(settings["incident_base"]).audit_trail(record)]
    return out


def run_drill(state_dir: Path, keep_lab: bool, detect: bool = True, report: Callable[[dict], None] | None = None,
              kafka: str | None = None) -> int:
    from kafka_lab import Lab
    from kafka_lab.airflow_home import prepare

    lab = Lab(state_dir, kafka=kafka)
    t0 = time.monotonic()
    say(f"starting the lab in {state_dir} (3-node ZooKeeper, 3 sshd hosts, 3 Apache Kafka {lab.kafka} brokers, client load)")
    lab.up(kafka=lab.kafka)
    try:
        say(f"lab up in {time.monotonic() - t0:.1f}s")
        prepare(state_dir / "airflow", lab.airflow_env())
        from kafka_runbooks.config import load_cluster

        settings = lab.cluster_settings()["lab"]
        on = rebalance_phase(lab, load_cluster("lab"), detect=detect)
        for kind, f in (on.get("findings") or {}).items():
            say(f"finding {kind} [{f['severity']}]")
            for ev in f.get("evidence", [])[:4]:
                say(f"    evidence {ev['source']}: {ev['excerpt'][:600]}")
        off = deferred_phase(lab, settings)
        for line in off.get("audit", []):
            say(f"audit {line}")
        figures = {"rebalance_on": {k: v for k, v in on.items() if k != "findings"}, "deferred": {k: v for k, v in off.items() if k != "audit"}}
        if report:
            report(figures)
        else:
            say("figures: " + json.dumps(figures, indent=1, default=str))
        wanted = {"rebalance_hazard", "election_storm", "metadata_divergence"} if detect else set()
        missing = sorted(wanted - set(on.get("findings") or {}))
        ok = off.get("run_state") == "success" and off.get("restored") and off.get("canary_failures") == 0 and not missing
        if not ok:
            say(f"DRILL FAILED: run {off.get('run_state')}, restored {off.get('restored')}, canary failures "
                f"{off.get('canary_failures')}, findings not raised: {missing}")
        return 0 if ok else 1
    finally:
        try:
            lab.release_controller_requests()
        except Exception:  # noqa: BLE001
            pass
        if keep_lab:
            say("lab left running (--keep-lab); stop it with: python -m kafka_lab down")
        else:
            lab.down()
            say("lab torn down")


def main(argv: list[str] | None = None) -> int:
    import argparse

    from kafka_lab.airflow_home import REPO

    p = argparse.ArgumentParser(prog="drill 003", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--state-dir", type=Path, default=REPO / "var" / "drill-003")
    p.add_argument("--keep-lab", action="store_true")
    p.add_argument("--verbose", action="store_true", help="show Airflow's INFO logs of every task")
    from kafka_lab.drill import add_kafka_option

    add_kafka_option(p)
    argv = list(argv or [])
    args = p.parse_args(argv[1:] if argv[:1] == ["003"] else argv)  # kafka_lab.drill passes the name first
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO" if args.verbose else "WARNING")
    return run_drill(args.state_dir.resolve(), args.keep_lab, kafka=args.kafka)
