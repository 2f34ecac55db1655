"""Detection and capture figures on the lab's real Kafka 2.3.0 (prints them; asserts nothing).

    KAFKA_RUNBOOKS_SLOT=N python benchmarks/detect.py

- fault -> finding for hang, deadlock, pause and kill: health checks back to back from the moment of
  the fault (what a check sees how soon); on a schedule add the wait for the next run (<= its period);
- for the faults ZooKeeper sees (pause, kill): fault -> ZooKeeper change seen by the event trigger
  (the session timeout) and trigger -> finding (the health run it starts);
- fault -> incident: the finding held for health.consecutive_checks observations (re-check after
  health.recheck_s in the same run);
- capture wall time: one host, three hosts in parallel, and a stopped (paused) JVM.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # figures only on stdout
sys.path[:0] = [str(REPO / "lab"), str(REPO / "plugins")]

NOT_SERVING = {"broker_unresponsive", "broker_unregistered_alive", "broker_absent"}
BROKER = 3


def main() -> int:
    import logging

    for name in ("kazoo", "paramiko"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from kafka_lab import Lab

    from kafka_runbooks import clock
    from kafka_runbooks.capture.bundle import EvidenceBundle
    from kafka_runbooks.capture.collector import capture_cluster
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.observe import brokers_to_probe, check_once, known_registrations, take_snapshot
    from kafka_runbooks.hooks.kafka import KafkaHook

    state = REPO / "var" / "bench-detect"
    lab = Lab(state / "lab")
    rows: list[tuple[str, str]] = []

    def row(name: str, value: str) -> None:
        rows.append((name, value))
        print(f"{name:<64} {value}", flush=True)

    t0 = time.monotonic()
    lab.up()
    row("lab up", f"{time.monotonic() - t0:.1f} s")
    try:
        os.environ.update(lab.airflow_env())
        raw = dict(lab.cluster_settings()["lab"])
        work = Path(tempfile.mkdtemp(prefix="bench-detect-", dir=state))
        os.chmod(work, 0o755)

        def config(tag: str) -> ClusterConfig:
            d = dict(raw, incident_base=str(work / tag / "incidents"), bundle_base=str(work / tag / "bundles"))
            d["canary"] = {**d.get("canary", {}), "enabled": True}
            return ClusterConfig.from_dict("lab", d)

        def first_finding(cfg, since: float, bound: float = 180.0):
            checks = 0
            while time.monotonic() - since < bound:
                started = time.monotonic()
                snapshot, findings = check_once(cfg)
                checks += 1
                hit = [f for f in findings if f.kind in NOT_SERVING and f.broker_ids == (BROKER,)]
                if hit:
                    return time.monotonic() - since, started - since, hit[0].kind, checks
            return None, None, None, checks

        for fault in ("hang", "deadlock", "pause", "kill"):
            lab.reset()
            cfg = config(fault)
            check_once(cfg)  # the history: broker 3 answered before the fault
            watcher = TriggerWatch(cfg) if fault in ("pause", "kill") else None
            t_fault = time.monotonic()
            getattr(lab, fault)(BROKER)
            took, started, kind, checks = first_finding(cfg, t_fault)
            if took is None:
                row(f"fault -> finding: {fault}", f"NOT FOUND within 180 s ({checks} checks)")
                continue
            row(f"fault -> finding: {fault} ({kind})", f"{took:.1f} s (the check that found it started at +{started:.1f} s; {checks} checks)")
            t_second = time.monotonic()
            time.sleep(cfg.health.recheck_s)
            _, findings = check_once(cfg)
            again = [f for f in findings if f.kind in NOT_SERVING and f.broker_ids == (BROKER,)]
            row(f"fault -> incident: {fault} (held {cfg.health.consecutive_checks} observations, re-check {cfg.health.recheck_s:g} s)",
                f"{took + time.monotonic() - t_second:.1f} s" if again else "finding did not hold")
            if watcher is not None:
                seen = watcher.wait(120)
                if seen is None:
                    row(f"  {fault}: ZooKeeper change seen by the trigger", "not within 120 s")
                else:
                    row(f"  {fault}: fault -> ZooKeeper change seen by the trigger", f"{seen - t_fault:.1f} s")
                    t_run = time.monotonic()
                    _, findings = check_once(cfg)
                    hit = [f.kind for f in findings if f.kind in NOT_SERVING and f.broker_ids == (BROKER,)]
                    row(f"  {fault}: trigger -> finding (one health check)", f"{time.monotonic() - t_run:.1f} s {hit}")
                watcher.stop()

        # capture wall time
        lab.reset()
        cfg = config("capture")

        def capture(ids, suspects, tag):
            known = known_registrations(cfg)
            snapshot = take_snapshot(cfg, known=known)
            targets, missing = brokers_to_probe(cfg, snapshot, known)
            hook = KafkaHook(cfg.kafka_conn_id, listener=cfg.listener)
            bundle = EvidenceBundle(cfg.bundle_base, "lab", tag, capture_id=clock.stamp(micros=True))
            t = time.monotonic()
            m = capture_cluster(cfg, snapshot, ids, bundle, suspects=suspects, known={b.id: b for b in targets},
                                checker=lambda: hook.check_all([b for b in targets if b.id in ids], 5.0, unregistered=missing))
            return time.monotonic() - t, m

        took, m = capture([BROKER], [BROKER], "one")
        row("capture, 1 host (suspect: jstack x3, histogram, heap dump, logs, sockets)", f"{took:.1f} s, {m['status']}")
        took, m = capture([1, 2, BROKER], [BROKER], "three")
        row("capture, 3 hosts in parallel (suspect + 2 peers)", f"{took:.1f} s, {m['status']}")
        lab.pause(BROKER)
        took, m = capture([BROKER], [BROKER], "stopped-one")
        row("capture, 1 stopped JVM (paused)", f"{took:.1f} s, {m['status']} ({len(m['status_reasons'])} reasons)")
        took, m = capture([1, 2, BROKER], [BROKER], "stopped-three")
        row("capture, 3 hosts in parallel, suspect paused", f"{took:.1f} s, {m['status']}")
    finally:
        lab.down()
    print(json.dumps(dict(rows), indent=1))
    return 0


class TriggerWatch:
    """The ZooKeeper event trigger running in a thread, recording when it first fires."""

    def __init__(self, cfg) -> None:
        from kafka_runbooks.triggers.zookeeper import ZooKeeperChangeTrigger

        self.trigger = ZooKeeperChangeTrigger(cluster=cfg.name, zk_conn_id=cfg.zk_conn_id, debounce_s=0.2, verify_s=5.0)
        self.fired: float | None = None
        self.ready = threading.Event()
        self.done = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(30)

    def _run(self) -> None:
        async def go():
            agen = self.trigger.run()
            task = asyncio.ensure_future(agen.__anext__())
            await asyncio.sleep(2.0)  # baseline read
            self.ready.set()
            while not self.done.is_set():
                finished, _ = await asyncio.wait({task}, timeout=0.2)
                if finished:
                    task.result()
                    self.fired = self.fired or time.monotonic()
                    task = asyncio.ensure_future(agen.__anext__())
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await agen.aclose()

        self.loop.run_until_complete(go())

    def wait(self, bound: float) -> float | None:
        deadline = time.monotonic() + bound
        while self.fired is None and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.fired

    def stop(self) -> None:
        self.done.set()
        self.thread.join(30)


if __name__ == "__main__":
    sys.exit(main())
