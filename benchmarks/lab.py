"""Figures of the lab on real Kafka 2.3.0 (prints them; asserts nothing): how
long the lab takes to come up, a broker to start, and each fault until Kafka (or ZooKeeper) shows its reaction.

    KAFKA_RUNBOOKS_SLOT=N python benchmarks/lab.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "lab"), str(REPO / "plugins")]

# 2.3's fetcher wording, and 0.10's ("Error in fetch kafka.server.ReplicaFetcherThread$FetchRequest@...")
FETCH_ERROR = (r"(?:Error in response for fetch request|Error in fetch kafka\.server\.ReplicaFetcherThread\$FetchRequest@[0-9a-f]+) .*\n"
               r"(java\.io\.IOException: Connection to {b} was disconnected before the response was read)")


def main() -> int:
    from kafka_lab import Lab, wait_until
    from kafka_lab.logwatch import LogCursor
    from kafka_lab.topics import list_topics_at
    from kafka_lab.zookeeper import quorum_modes

    lab = Lab(REPO / "var" / "bench-lab")
    figures: list[tuple[str, float]] = []

    def timed(name: str, fn) -> None:
        t0 = time.monotonic()
        fn()
        figures.append((name, time.monotonic() - t0))
        print(f"{name:<58} {figures[-1][1]:7.1f}", flush=True)

    def reset(after: str) -> None:
        timed(f"  reset after {after}", lab.reset)

    timed("lab up (ZooKeeper, sshd, 3 brokers, topics, load)", lab.up)
    try:
        lab.stop(2)
        timed("broker start (kafka-start) -> registered", lambda: lab.start(2))
        timed("broker registered -> full ISRs", lambda: lab.wait_full_isr(120))
        reset("start")

        for fault, b in (("hang", 3), ("isolate", 2), ("deadlock", 1)):
            cur = LogCursor(lab.server_log(1 if b != 1 else 2))
            getattr(lab, fault)(b)
            t0 = time.monotonic()
            wait_until(lambda: not _answers(list_topics_at, b), 30, f"broker {b} to stop answering")
            figures.append((f"{fault} -> direct Metadata request fails (3 s timeout)", time.monotonic() - t0))
            print(f"{figures[-1][0]:<58} {figures[-1][1]:7.1f}", flush=True)
            timed(f"{fault} -> a peer logs 'Connection to {b} was disconnected'", lambda: cur.wait_for(FETCH_ERROR.format(b=b), 120))
            reset(fault)

        lab.pause(2)
        timed("pause -> deregistered (ZooKeeper session timeout)", lambda: lab.wait_unregistered(2, 120))
        timed("  deregistered -> no partition led by it", lambda: lab.wait_partitions(
            lambda ps: all(s["leader"] != 2 for s in ps.values()), 60, "leadership moved"))
        lab.resume(2)
        timed("resume -> registered again", lambda: lab.wait_registered([2], 60))
        reset("pause")

        lab.kill(3)
        timed("kill -> deregistered (ZooKeeper session timeout)", lambda: lab.wait_unregistered(3, 120))
        timed("  start after kill -> registered", lambda: lab.start(3))
        reset("kill")

        t0 = time.monotonic()
        lab.stop(1)
        figures.append(("stop (controlled shutdown) -> process gone", time.monotonic() - t0))
        print(f"{figures[-1][0]:<58} {figures[-1][1]:7.1f}", flush=True)
        reset("stop")

        timed("zk-flap x1 (pause past the session, resume, re-register)", lambda: lab.zk_flap(1, times=1))
        reset("zk-flap")

        follower = next(z for z, m in quorum_modes().items() if m == "follower")
        cur = LogCursor(lab.zk_log(follower))
        info = lab.zk_stall(follower)
        t0 = time.monotonic()
        cur.wait_for(r"FOLLOWING - LEADER ELECTION TOOK", 60)
        figures.append((f"zk-stall ({info['seconds']:.0f} s) resumed -> follower following again", time.monotonic() - t0))
        print(f"{figures[-1][0]:<58} {figures[-1][1]:7.1f}", flush=True)
        reset("zk-stall")

        cur = LogCursor(lab.server_log(3))
        lab.bad_request(3)
        timed("bad-request -> 'Unknown API key' in server.log", lambda: cur.wait_for(r"Unknown API key 60", 30))

        cur = LogCursor(lab.log_path(2, "log-cleaner.log"))
        lab.kill_cleaner(2)
        timed("kill-cleaner -> 'Error due to' in log-cleaner.log", lambda: cur.wait_for(r"Error due to", 30))
        reset("kill-cleaner")
        timed("reset with nothing broken", lab.reset)
    finally:
        lab.down()
    return 0


def _answers(list_topics_at, b: int) -> bool:
    try:
        list_topics_at(b, timeout=3)
        return True
    except Exception:  # noqa: BLE001 - a timeout is the figure
        return False


if __name__ == "__main__":
    sys.exit(main())
