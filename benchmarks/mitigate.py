"""Figures for issue #30, mitigate first, measured side by side on one lab (prints them; asserts nothing about speed).

    python benchmarks/mitigate.py [--faults leader controller] [--modes mitigate restart]

For each fault (``leader``: a broker that leads partitions and is not the controller has its request handlers held,
``lab.hang``; ``controller``: the same for the controller) and each mode, on a reset lab, through Airflow's dag.test()
as the drills run it: the health check back to back until it opens the incident, then the incident response with
every approval answered Approve the moment it is asked (by this program, as user "drill-bot"):

- (a) ``mitigate``: mitigation.enabled -- the move of leadership off the broker, its JVM untouched, before the capture;
- (b) ``restart``: mitigation.enabled false -- today's response: capture, analysis, then the restart.

A canary producer (acks=all, one message per partition every 0.25 s, request.timeout.ms 5 s, socket.timeout.ms 10 s:
short client timeouts, as the runbook asks of the product's own canary) writes to every partition the broker leads at
the fault. Per partition: the produce gap (the longest time between two deliveries) and the fault -> delivery again
(the first delivery more than 1 s after the fault: the hung broker acknowledges nothing); then the approval (the one
that moves leadership: the mitigation's in (a), the restart's in (b)) -> delivery again. For (a), once a partition
delivers again: the hung JVM's process id and a jstack of it (its request handler threads still parked). Partitions
whose only in-sync replica was the broker stay down until the restart in (a) too: marked "stays".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCE_EVERY_S = 0.25
AFTER_FAULT_S = 1.0  # a delivery this long after the fault comes from a serving leader (the hung one acks nothing)


class Canary:
    """acks=all deliveries per partition, timed with time.time()."""

    def __init__(self, bootstrap: str, partitions: list[tuple[str, int]]) -> None:
        self.bootstrap, self.partitions, self.failed = bootstrap, partitions, 0
        self._stop = threading.Event()
        self.delivered: dict[tuple[str, int], list[float]] = {k: [] for k in self.partitions}
        self._thread = threading.Thread(target=self._run, name="mitigate-canary", daemon=True)

    def _run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 900000,
                      "request.timeout.ms": 5000, "socket.timeout.ms": 10000, "retries": 10000000,
                      "enable.idempotence": False})

        def cb(k):
            def done(err, _msg):
                if err is None:
                    self.delivered[k].append(time.time())
                else:
                    self.failed += 1
            return done

        while not self._stop.is_set():
            for k in self.partitions:
                p.produce(k[0], b"mitigate-bench", partition=k[1], on_delivery=cb(k))
            p.poll(PRODUCE_EVERY_S)
        p.flush(30)

    def start(self) -> "Canary":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def again(self, k, t_fault: float) -> float | None:
        return next((t for t in self.delivered[k] if t > t_fault + AFTER_FAULT_S), None)

    def gap(self, k, t_fault: float) -> float | None:
        ts = [t for t in self.delivered[k] if t > t_fault - 5]
        return max((b - a for a, b in zip(ts, ts[1:])), default=None)


def _jstack(pid: int) -> dict:
    alive = os.path.exists(f"/proc/{pid}")
    if not alive:
        return {"pid": pid, "alive": False}
    try:
        r = subprocess.run(["jstack", str(pid)], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"pid": pid, "alive": True, "jstack": f"failed: {exc}"}
    blocks = [b for b in r.stdout.split("\n\n") if 'kafka-request-handler-' in b.split("\n", 1)[0]]  # 2.x: data-plane-kafka-request-handler-N
    # stuck: waiting to ACQUIRE the request queue's lock (held), not an idle handler's timed wait for a request
    parked = [b for b in blocks if ("java.lang.Thread.State: WAITING" in b or "java.lang.Thread.State: BLOCKED" in b)
              and ("AbstractQueuedSynchronizer.acquire(" in b or "waiting to lock" in b)]
    return {"pid": pid, "alive": True, "jstack_rc": r.returncode, "request_handlers": len(blocks), "parked": len(parked)}


def _set_mitigation(enabled: bool) -> None:
    clusters = json.loads(os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"])
    clusters["lab"].setdefault("mitigation", {})["enabled"] = enabled
    os.environ["AIRFLOW_VAR_KAFKA_RUNBOOKS_CLUSTERS"] = json.dumps(clusters)


def clean_slate(lab, original: dict) -> list[str]:
    """Between runs, after ``lab.reset()``: the incidents a run left (a needs_person incident of the broker would take the
    next fault's finding as a note on it: no new response) are closed, and a replica order a mitigation left (its
    restart refused or halted: restore_order never ran) is written back. What it did."""
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.incidents.store import IncidentStore
    from kafka_lab.procs import wait_until

    done = []
    store = IncidentStore(load_cluster("lab"))
    for r in store.records("lab", statuses=["open", "responding", "needs_person"]):
        store.close(r["id"], actor="bench-mitigate", resolution="closed between benchmark runs")
        done.append(f"closed {r['id']}")
    now = lab.partitions()
    back = [{"topic": t, "partition": p, "replicas": original[(t, p)]} for (t, p), s in now.items()
            if (t, p) in original and s["replicas"] != original[(t, p)]]
    if back:
        kz = lab.kazoo()
        kz.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": back}).encode())
        wait_until(lambda: kz.exists("/admin/reassign_partitions") is None, 180, "the original replica order written back")
        lab.ensure_preferred_leaders(120)
        done.append(f"original replica order of {len(back)} partition(s) written back")
    return done


def one(lab, dags, fault: str, mode: str, original: dict) -> dict:
    """One fault, one mode: the figures (see the module's doc)."""
    from kafka_lab.approvals import incident_answers
    from kafka_lab.drill import HEALTH, RESPONSE, detect_until_finding, say, say_mitigation
    from kafka_lab.net import broker_ip

    lab.reset()
    for line in clean_slate(lab, original):
        say(f"[{fault}/{mode}] before the run: {line}")
    _set_mitigation(mode == "mitigate")
    controller = lab.controller()["brokerid"]
    b = controller if fault == "controller" else max(x for x in (1, 2, 3) if x != controller)
    ps = lab.partitions()
    led = sorted(k for k, s in ps.items() if s["leader"] == b and not k[0].startswith("__"))
    canary = Canary(",".join(f"{broker_ip(x)}:9092" for x in (1, 2, 3)), led).start()
    time.sleep(5)
    pid = lab.broker_pid(b)
    say(f"[{fault}/{mode}] hanging broker {b} (controller {controller}, pid {pid}); canary on {len(led)} partition(s) it leads")
    t_fault = time.time()
    lab.hang(b)
    confs = detect_until_finding(dags.get_dag(HEALTH), "lab", timeout_s=600)
    t_found = time.time()
    evidence: dict = {}

    def watch():  # (a): once leadership moved (a partition delivers again), the hung JVM is still there, threads parked
        while not evidence and time.time() - t_fault < 1800:
            if any(canary.again(k, t_fault) for k in led):
                evidence.update(_jstack(pid))
                return
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    if mode == "mitigate":
        watcher.start()
    with incident_answers("Approve", "Approve", user="drill-bot", timeout_s=900) as answers:
        run = dags.get_dag(RESPONSE).test(run_conf=confs[0])
    if answers.error:
        raise answers.error
    say_mitigation(run)
    deadline = time.time() + 120
    while time.time() < deadline and not all(canary.again(k, t_fault) for k in led):
        time.sleep(1)
    canary.stop()
    if mode == "mitigate":
        watcher.join(timeout=130)
    asked = answers["approve_mitigation" if mode == "mitigate" else "approve"].answered_at
    t_approved = asked[0] if asked else None
    tis = {ti.task_id: ti.state for ti in run.get_task_instances()}
    # where the time between the finding and delivery went: each task's wall time, in the order they ran
    took = [(ti.task_id, (ti.end_date - ti.start_date).total_seconds()) for ti in sorted(
        (ti for ti in run.get_task_instances() if ti.start_date and ti.end_date), key=lambda ti: ti.start_date)]
    stays = set()
    if mode == "mitigate":
        m = next((ti for ti in run.get_task_instances() if ti.task_id == "mitigate"), None)
        out = m.xcom_pull(task_ids="mitigate") if m is not None and m.state == "success" else None
        stays = set((out or {}).get("stays_offline") or {})
    rows = []
    for k in led:
        again = canary.again(k, t_fault)
        rows.append({"partition": f"{k[0]}-{k[1]}", "stays": f"{k[0]}-{k[1]}" in stays,
                     "fault_to_again_s": round(again - t_fault, 1) if again else None,
                     "approval_to_again_s": round(again - t_approved, 1) if again and t_approved else None,
                     "gap_s": round(canary.gap(k, t_fault) or 0, 1)})
    return {"fault": fault, "mode": mode, "broker": b, "controller": controller, "pid": pid, "run": str(run.state),
            "fault_to_finding_s": round(t_found - t_fault, 1),
            "finding_to_approval_s": round(t_approved - t_found, 1) if t_approved else None,
            "mitigate": tis.get("mitigate"), "took": took, "rows": rows, "evidence": evidence, "canary_failed": canary.failed}


def _print(results: list[dict]) -> None:
    print(f"{'fault':10} {'mode':8} {'B':>2} {'fault→finding':>13} {'→approval':>9} {'partitions':>10} "
          f"{'fault→again max/median':>22} {'approval→again max/median':>25} {'stay down':>9}  JVM after (a)")
    for r in results:
        moved = [x for x in r["rows"] if not x["stays"]]
        fa = [x["fault_to_again_s"] for x in moved if x["fault_to_again_s"] is not None]
        aa = [x["approval_to_again_s"] for x in moved if x["approval_to_again_s"] is not None]
        never = len([x for x in moved if x["fault_to_again_s"] is None])
        ev = r["evidence"]
        jvm = (f"pid {ev['pid']} alive, jstack: {ev.get('parked')}/{ev.get('request_handlers')} request handlers parked"
               if ev.get("alive") else (f"pid {ev['pid']} gone" if ev else "-"))
        fmt = lambda xs: f"{max(xs):.1f}/{statistics.median(xs):.1f}" if xs else "-"  # noqa: E731
        print(f"{r['fault']:10} {r['mode']:8} {r['broker']:>2} {r['fault_to_finding_s']:13.1f} "
              f"{(r['finding_to_approval_s'] or 0):9.1f} {len(r['rows']):>10} {fmt(fa):>22}{' (+%d never)' % never if never else ''} "
              f"{fmt(aa):>25} {sum(x['stays'] for x in r['rows']):>9}  {jvm}")
    print("\nper partition (fault→again / approval→again / longest gap, s):")
    for r in results:
        print(f"  {r['fault']}/{r['mode']} (broker {r['broker']}, run {r['run']}, mitigate {r['mitigate']}): "
              + ", ".join(f"{x['partition']}{'*' if x['stays'] else ''} {x['fault_to_again_s']}/{x['approval_to_again_s']}/{x['gap_s']}"
                          for x in r["rows"]))
    print("  (* its only in-sync replica was the hung broker: it stays down until the restart)")
    print("\nthe response's tasks, wall time in the order they ran (s):")
    for r in results:
        print(f"  {r['fault']}/{r['mode']}: " + ", ".join(f"{t} {s:.1f}" for t, s in r.get("took") or []))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--faults", nargs="+", choices=("leader", "controller"), default=["leader", "controller"])
    p.add_argument("--modes", nargs="+", choices=("mitigate", "restart"), default=["mitigate", "restart"])
    args = p.parse_args(argv)
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")
    from kafka_lab import Lab
    from kafka_lab.airflow_home import load_dags, prepare

    state = REPO / "var" / "bench-mitigate"
    lab = Lab(state / "lab")
    results = []
    t0 = time.monotonic()
    with contextlib.redirect_stdout(sys.stderr):  # the drills' narration; only the figures go to stdout
        lab.up()
        try:
            print(f"lab up in {time.monotonic() - t0:.1f}s", flush=True)
            prepare(state / "airflow", lab.airflow_env())
            dags = load_dags()
            original = {k: v["replicas"] for k, v in lab.partitions().items()}
            for fault in args.faults:
                for mode in args.modes:
                    results.append(one(lab, dags, fault, mode, original))
                    print(json.dumps(results[-1]), flush=True)
        finally:
            lab.down()
    _print(results)
    print(f"\n(all in {time.monotonic() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
