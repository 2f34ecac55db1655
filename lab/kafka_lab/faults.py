"""Faults injected into the lab's real Kafka brokers and ZooKeeper servers (Kafka's code unchanged), and reset().

Signals (pause/resume, zk-stall), the hosts' own control scripts run as the host user (stop/start/kill), the
lab's fault agent inside each broker JVM (hang, isolate, deadlock, kill-cleaner; java/LabFaultAgent.java), and a
raw client (bad-request). lab/README.md records what each one really does to Kafka 2.3.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from . import agent, badclient, zookeeper
from .badclient import BAD_REQUEST_WINDOW_S
from .hosts import BROKER_IDS
from .procs import LabError, alive, proc_state, read_pid, signal_if_ours, spawn, tail, wait_until
from .profile import broker_settings
from .zookeeper import SYNC_LIMIT, TICK_TIME_MS, ZK_IDS

STOPPED = ("T", "t")
# How long a stop waits for Kafka's controlled shutdown at its worst: controlled.shutdown.max.retries (3) attempts, each
# up to the profile's request.timeout.ms (10 s) plus controlled.shutdown.retry.backoff.ms (5 s), = 45 s, then the rest of
# the shutdown. Seen: broker 3 of 0.10.2.1 at load 57, its controller slow to answer, failed all three attempts
# ("Connection to 1 was disconnected before the response was read") and finished unclean 46 s after SIGTERM.
STOP_TIMEOUT_S = 75
# agent holds (java/LabFaultAgent.java) undone by reset() before anything else, and how
HOLD_RELEASES = {"controller-requests-held": "release-controller-requests", "fetchers-held": "release-fetchers"}


class FaultsMixin:
    """Mixed into Lab: needs its paths, host_script(), registration() and the wait_* helpers."""

    # ------------------------------------------------------------------ broker processes
    def _require_broker_pid(self, b: int) -> int:
        pid = self.broker_pid(b)
        if not alive(pid):
            raise LabError(f"broker {b} is not running")
        return pid

    def session_timeout_s(self) -> float:
        return int(broker_settings(self.profile, self.kafka)["zookeeper.session.timeout.ms"]) / 1000

    def start(self, b: int, wait: bool = True, timeout: float = 90) -> str:
        """kafka-start as the host's user. The script itself returns at once and never waits; with ``wait`` this
        first waits until the old registration is gone (Kafka refuses to start while its previous ZooKeeper session
        holds /brokers/ids/<b>), then until the new JVM is registered, and fails at once if the JVM dies."""
        deadline = time.monotonic() + timeout
        if alive(self.broker_pid(b)):
            return self.host_script(b, "kafka-start").stdout  # "already running": nothing to wait for
        if wait:
            self.wait_unregistered(b, timeout)
        out = self.host_script(b, "kafka-start").stdout
        if not wait:
            return out
        pid = self.broker_pid(b)
        while self.registration(b) is None:
            if not alive(pid):
                raise LabError(f"broker {b} (pid {pid}) exited on start; server.log ends:\n{tail(self.server_log(b), 15)}")
            if time.monotonic() > deadline:
                raise LabError(f"broker {b} (pid {pid}) not registered within {timeout:.0f}s")
            time.sleep(0.2)
        return out

    def stop(self, b: int, timeout_s: float = STOP_TIMEOUT_S, check: bool = True) -> subprocess.CompletedProcess:
        """kafka-stop as the host's user: SIGTERM (controlled shutdown), waits up to ``timeout_s``, never SIGKILL."""
        return self.host_script(b, "kafka-stop", timeout=timeout_s + 30, check=check, env={"KAFKA_STOP_TIMEOUT_S": str(int(timeout_s))})

    def kill(self, b: int) -> str:
        """kafka-kill as the host's user (SIGKILL): the registration stays until the ZooKeeper session expires."""
        return self.host_script(b, "kafka-kill").stdout

    def pause(self, b: int) -> int:
        """SIGSTOP: the process and its ports stay; ZooKeeper expires its session after the session timeout."""
        pid = self._require_broker_pid(b)
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: proc_state(pid) in STOPPED, 5, f"broker {b} (pid {pid}) to stop")
        return pid

    def resume(self, b: int) -> int:
        pid = self._require_broker_pid(b)
        os.kill(pid, signal.SIGCONT)
        wait_until(lambda: proc_state(pid) not in STOPPED, 5, f"broker {b} (pid {pid}) to continue")
        return pid

    # ------------------------------------------------------------------ the fault agent
    def agent_state(self, b: int) -> dict | None:
        return agent.read_state(self.run_dir(b))

    def _agent(self, b: int, action: str) -> dict:
        pid = self._require_broker_pid(b)
        if proc_state(pid) in STOPPED:
            raise LabError(f"broker {b} is paused (SIGSTOP): resume it before {action}")
        return agent.command(self.run_dir(b), action, pid)

    def hang(self, b: int) -> dict:
        """Request handling stops (the request queue's lock is held); registered, process alive."""
        return self._agent(b, "hold-requests")

    def unhang(self, b: int) -> dict:
        return self._agent(b, "release-requests")

    def isolate(self, b: int) -> dict:
        """Incident 000: stops serving and stops writing its logs (log4j appenders blocked); stays registered."""
        self._agent(b, "block-logs")
        return self._agent(b, "hold-requests")

    def unisolate(self, b: int) -> dict:
        self._agent(b, "unblock-logs")
        return self._agent(b, "release-requests")

    def deadlock(self, b: int) -> dict:
        """A real Java-level deadlock in the broker JVM, Kafka's request queue lock in the cycle; undone by a restart."""
        return self._agent(b, "deadlock")

    def kill_cleaner(self, b: int) -> dict:
        """Incident 002b: kafka-log-cleaner-thread-0 dies (Thread.stop); undone by a restart."""
        return self._agent(b, "kill-cleaner")

    def fence_fetcher(self, b: int, topic: str, partition: int) -> dict:
        """Issue 16's stuck follower: broker b's fetcher drops ``topic-partition`` the way Kafka 2.3 does when the leader
        answers FENCED_LEADER_EPOCH (``AbstractFetcherThread.onPartitionFenced``), while b keeps its leader epoch: a
        LeaderAndIsr of the same epoch is ignored, b never fetches the partition again and, once it has writes, leaves
        its ISR. Undone by a restart of b (``reset()`` does one) or a new leader epoch of the partition."""
        import re

        if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", topic):
            raise LabError(f"not a topic name: {topic!r}")
        return self._agent(b, f"fence-fetcher:{topic}:{int(partition)}")

    def followed_by(self, b: int) -> list[tuple[str, int]]:
        """Partitions broker b follows right now (a replica, in the ISR, not the leader), sorted."""
        return sorted(k for k, st in self.partitions().items() if b in st["replicas"] and b in st["isr"] and st["leader"] not in (b, -1))

    # ------------------------------------------------------------------ ZooKeeper faults
    def zk_flap(self, b: int, times: int = 3, timeout: float = 60, before_resume=None) -> list[dict]:
        """Makes broker b's ZooKeeper session expire ``times`` times (paused past the session timeout, resumed);
        returns each new registration's czxid and session id. ``before_resume()`` runs once b is unregistered."""
        sessions = []
        for _ in range(times):
            old = self.registration(b)
            if old is None:
                raise LabError(f"broker {b} is not registered")
            self.pause(b)
            try:
                self.wait_unregistered(b, timeout)
                if before_resume is not None:
                    before_resume()
            finally:
                self.resume(b)
            new = wait_until(lambda: (r := self.registration(b)) and r[1].czxid != old[1].czxid and r, timeout,
                             f"broker {b} to register again")
            sessions.append({"czxid": new[1].czxid, "session": hex(new[1].ephemeralOwner)})
        return sessions

    def zk_stall(self, z: int, seconds: float | None = None) -> dict:
        """Incident 004: SIGSTOP a ZooKeeper follower longer than syncLimit x tickTime, then SIGCONT."""
        seconds = 2 * SYNC_LIMIT * TICK_TIME_MS / 1000 if seconds is None else float(seconds)
        mode = zookeeper.mode(z)
        if mode != "follower":
            modes = {n: zookeeper.mode(n) for n in ZK_IDS}
            raise LabError(f"zk{z} is not a serving follower ({mode}); modes: {modes}")
        pid = self.zk_pid(z)
        (self.state / "run" / "zk-stalled").write_text(f"{int(z)}\n")  # reset() restarts it (see _restart_stalled_zk)
        os.kill(pid, signal.SIGSTOP)
        t0 = time.time()
        try:
            time.sleep(seconds)  # the stall itself: its length is the fault
        finally:
            os.kill(pid, signal.SIGCONT)
        return {"zk": z, "pid": pid, "stopped_at": t0, "resumed_at": time.time(), "seconds": seconds,
                "sync_limit_ms": SYNC_LIMIT * TICK_TIME_MS}

    def bad_request(self, b: int, api_key: int = badclient.DEFAULT_API_KEY) -> dict:
        """Incident 002a: a request with an API key the broker does not know, from the lab's bad-client address."""
        try:
            return badclient.send(b, api_key)
        finally:
            self._mark_bad_request()

    def _mark_bad_request(self) -> None:
        """When the last bad request was sent (reset() waits out health.bad_request_window_s after it)."""
        (self.state / "run" / "bad-request-at").write_text(f"{time.time()}\n")

    def start_bad_client(self, b: int, api_key: int = badclient.DEFAULT_API_KEY, interval_s: float = 5.0) -> int:
        """Incident 002a, as it happens: a client that keeps sending that request every ``interval_s`` while it holds
        an idle connection of its own to the broker (a background process; ``reset()`` ends it)."""
        import sys

        pid = read_pid(self._pid_file("bad-client"))
        if alive(pid):
            raise LabError(f"a bad client already runs (pid {pid}); reset() ends it")
        argv = [sys.executable, "-m", "kafka_lab.badclient", "--broker", str(int(b)), "--api-key", str(int(api_key)),
                "--interval", str(float(interval_s)), "--hold", "--state", str(self.state / "run")]
        lab_dir = os.path.dirname(os.path.dirname(os.path.abspath(badclient.__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([lab_dir, os.environ.get("PYTHONPATH", "")])}
        return spawn(argv, self.state / "run" / "bad-client.log", self._pid_file("bad-client"), env=env)

    def stop_bad_client(self) -> bool:
        pid = read_pid(self._pid_file("bad-client"))
        if not signal_if_ours(pid, self.marker, signal.SIGTERM):
            return False
        wait_until(lambda: not alive(pid), 10, "the bad client to stop")
        return True

    def grow_offsets(self, partition: int, target_bytes: int, **kw) -> dict:
        """Incident 002b: __consumer_offsets-<partition> made large (kill the cleaners first, or it is compacted)."""
        from . import bigoffsets

        (self.state / "run" / "offsets-grown").write_text(f"{int(partition)}\n")  # reset() undoes the settings
        return bigoffsets.grow([self.host_dir(b) / "data" for b in BROKER_IDS if (self.host_dir(b) / "data" / f"__consumer_offsets-{partition}").exists()],
                               partition, target_bytes, **kw)

    def slow_loader(self, b: int, cpu_percent: float = 5.0) -> list[int]:
        """Incident 002b: broker b's offsets loader threads limited to ``cpu_percent`` of a CPU (cgroup.py says why)."""
        from . import cgroup

        return cgroup.limit(b, self._require_broker_pid(b), cpu_percent)

    # ------------------------------------------------------------------ heal
    def reset(self, timeout: float = 240) -> list[str]:
        """Heals every fault and returns to the healthy baseline; cheap when nothing is broken. Returns what it did."""
        deadline = time.monotonic() + timeout
        left = lambda: max(5.0, deadline - time.monotonic())  # noqa: E731
        done: list[str] = []
        if self.stop_bad_client():
            done.append("stopped the bad client")
            self._mark_bad_request()
        from . import bigoffsets, cgroup

        done += [f"released {g}" for g in cgroup.release()]
        grown = self.state / "run" / "offsets-grown"
        for z in ZK_IDS:
            pid = self.zk_pid(z)
            if not alive(pid):
                self._start_zk(z)
                done.append(f"started zk{z}")
            else:
                if proc_state(pid) in STOPPED:
                    done.append(f"resumed zk{z}")
                os.kill(pid, signal.SIGCONT)  # always: a SIGSTOP sent just before may not show in /proc yet
        for b in BROKER_IDS:
            if not alive(read_pid(self._pid_file(f"sshd{b}"))):
                self._start_sshd(b)
                done.append(f"started sshd{b}")
        self._release_holds(done)  # first: a controller holding its requests to a broker cannot drop that broker
        for z in ZK_IDS:
            if not alive(read_pid(self._pid_file(f"sshd-zk{z}"))):
                self._start_zk_sshd(z)
                done.append(f"started sshd-zk{z}")
        to_start = [b for b in BROKER_IDS if self._heal_broker(b, done, left)]
        wait_until(zookeeper.quorum_modes, left(), "the ZooKeeper ensemble to serve", interval=0.2)
        self._restart_stalled_zk(done, left)
        for b in to_start:
            self.wait_unregistered(b, left())
            self.host_script(b, "kafka-start")
            done.append(f"started broker {b}")
        self.wait_registered(BROKER_IDS, left())
        self._wait_full_isr_or_restart(done, left)
        if self.non_preferred():
            self.ensure_preferred_leaders(left())
            done.append("preferred-replica election")
        if grown.exists():
            bigoffsets.undo()
            partition = int(grown.read_text().strip() or 0)
            grown.unlink()
            done.append("__consumer_offsets segment.bytes restored, fill topic deleted")
            # the restarted cleaners compact the grown partition: wait until it is small again (the healthy baseline)
            dirs = [self.host_dir(b) / "data" for b in BROKER_IDS]
            wait_until(lambda: max(bigoffsets.segment_counts(dirs, partition).values() or [0]) <= 10, left(),
                       f"__consumer_offsets-{partition} compacted by the restarted log cleaners")
            done.append(f"__consumer_offsets-{partition} compacted")
        if not alive(read_pid(self._pid_file("load"))):
            self.start_load()
            done.append("started the load")
        marked = self.state / "run" / "bad-request-at"
        if marked.exists():
            # bad requests' lines in broker logs count for health.bad_request_window_s: the baseline is reached once
            # they are older than that
            wait = float(marked.read_text().strip() or 0) + BAD_REQUEST_WINDOW_S + 1 - time.time()
            if wait > 0:
                time.sleep(min(wait, BAD_REQUEST_WINDOW_S + 1))
                done.append(f"waited out the bad requests' {BAD_REQUEST_WINDOW_S:.0f} s window")
            marked.unlink()
        if done or not self._load_fresh():
            self.wait_load(left())
        return done

    def _restart_stalled_zk(self, done: list[str], left) -> None:
        """A follower that dropped out of the quorum and rejoined keeps saying so for the product's drop window (its
        ZooKeeperServer younger than the leader's, its election count up: detect/zookeeper.py finds the drop after the
        fact). The healthy baseline has no drop in that window: the follower's process is restarted, which the
        product tells apart from a drop (a new process, its first election)."""
        marked = self.state / "run" / "zk-stalled"
        if not marked.exists():
            return
        z = int(marked.read_text().strip())
        if zookeeper.mode(z) == "follower":  # an ensemble election since leaves no after-the-fact drop to undo
            pid = self.zk_pid(z)
            if signal_if_ours(pid, self.marker, signal.SIGTERM):
                wait_until(lambda: not alive(pid), left(), f"zk{z} to stop")
            self._start_zk(z)
            wait_until(lambda: zookeeper.mode(z) == "follower" and zookeeper.quorum_modes(), left(),
                       f"zk{z} to follow again", interval=0.2)
            done.append(f"restarted zk{z} (it had dropped out of the quorum)")
        marked.unlink()

    def _wait_full_isr_or_restart(self, done: list[str], left, catch_up_s: float = 60) -> None:
        """Full ISRs; a registered broker that stays out of ISRs (Kafka 2.3.0 can reject the controller's
        LeaderAndIsr after a session expiry: "Epoch N larger than current broker epoch M") is restarted."""
        try:
            self.wait_full_isr(min(catch_up_s, left()))
            return
        except LabError:
            parts = self.partitions()
        stuck = sorted({r for s in parts.values() for r in s["replicas"] if r not in s["isr"]})
        for b in stuck:
            if self.stop(b, timeout_s=30, check=False).returncode != 0:
                self.kill(b)
            done.append(f"restarted broker {b} (registered but out of ISRs)")
        for b in stuck:
            self.start(b, timeout=left())
        self.wait_full_isr(left())

    def _release_holds(self, done: list[str]) -> None:
        """Releases the agent's holds on fetchers and on the controller's requests (leadership.py's faults)."""
        for b in BROKER_IDS:
            pid = self.broker_pid(b)
            st = agent.read_state(self.run_dir(b))
            if not alive(pid) or not st or st.get("pid") != pid:
                continue
            active = st.get("active") or ()
            releases = [action for flag, action in HOLD_RELEASES.items()
                        if any(a == flag or a.startswith(flag + ":") for a in active)]
            if not releases:
                continue
            if proc_state(pid) in STOPPED:
                done.append(f"resumed broker {b}")
            os.kill(pid, signal.SIGCONT)  # a paused JVM's agent cannot answer
            for action in releases:
                agent.command(self.run_dir(b), action, pid)
                done.append(f"{action} on broker {b}")

    def _heal_broker(self, b: int, done: list[str], left) -> bool:
        """Undoes what can be undone in place; True when the broker must be (re)started."""
        pid = self.broker_pid(b)
        if not alive(pid):
            return True
        if proc_state(pid) in STOPPED:
            done.append(f"resumed broker {b}")
        os.kill(pid, signal.SIGCONT)  # always: a SIGSTOP sent just before may not show in /proc yet
        st = agent.read_state(self.run_dir(b))
        if not st or st.get("pid") != pid or not (st.get("active") or st.get("needs_restart")):
            return False
        if st.get("needs_restart"):
            # a deadlocked broker never finishes a controlled shutdown; one whose cleaner died does (and then
            # its registration goes at once instead of after the session timeout)
            if st["needs_restart"] == "deadlock" or self.stop(b, timeout_s=30, check=False).returncode != 0:
                self.kill(b)
                done.append(f"killed broker {b} ({st['needs_restart']})")
            else:
                done.append(f"stopped broker {b} ({st['needs_restart']})")
            return True
        if "logs-blocked" in st["active"]:
            agent.command(self.run_dir(b), "unblock-logs", pid)
        if "requests-held" in st["active"]:
            agent.command(self.run_dir(b), "release-requests", pid)
        done.append(f"released {st['active']} on broker {b}")
        if agent.command(self.run_dir(b), "ping", pid).get("shutting_down"):
            # a SIGTERM arrived while it was stuck: its shutdown now proceeds; let it finish, then start it again
            try:
                wait_until(lambda: not alive(pid), min(60.0, left()), f"broker {b} to finish its shutdown")
            except LabError:
                self.kill(b)
            done.append(f"broker {b} finished a pending shutdown")
            return True
        return False

    def _load_fresh(self, within_s: float = 10) -> bool:
        try:
            s = self.load_stats()
        except LabError:
            return False
        now = time.time()
        return (now - s["updated_at"] < within_s and now - (s["last_produce_ok_at"] or 0) < within_s
                and all(now - (g["last_commit_ok_at"] or 0) < within_s for g in s["groups"].values()))
