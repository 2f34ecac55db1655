"""Issue 7's lab: switching the brokers' profile (automatic leader rebalance on/off), and the faults of incident 003.

* ``use_profile("rebalance")`` rewrites every broker's server.properties and rolls the brokers (controlled stop,
  start, full ISRs; the controller last). ``auto.leader.rebalance.enable`` is not a dynamic config in Kafka 2.3:
  measured on the lab, ``kafka-configs --alter --entity-default`` answers "Cannot update these configs
  dynamically: Set(auto.leader.rebalance.enable)" and a value written into ``/config/brokers/<default>`` by hand
  makes every broker log ``ERROR Non-dynamic configs configured in ZooKeeper will be ignored:
  Set(auto.leader.rebalance.enable)``. Only the active controller's own setting matters, so every broker gets it.
* ``hold_fetchers(b)``: broker b stays registered and answers clients, but its replica fetchers stop: it falls out
  of the ISR of every partition that gets writes (a returning broker that cannot catch up).
* ``hold_controller_requests(b)``: the active controller's LeaderAndIsr / UpdateMetadata requests to broker b wait
  in the controller while the other brokers get theirs: b's metadata cache goes stale (incident 003's broker 3
  missed leader epochs 427..433 because they waited in its own request queue behind client requests).
* ``flap(b, times)``: incident 003's session losses, each one only once the broker has finished starting.

``reset()`` undoes the holds (faults.py ``HOLD_RELEASES``); the profile stays until ``use_profile`` is called again.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

from . import agent, hosts
from .hosts import BROKER_IDS
from .procs import LabError, alive, process_start, wait_until
from .profile import PROFILE_KEYS, broker_settings
from .zookeeper import CHROOT, connect_string

# 2.3: "[KafkaServer id=1] started"; 0.10: "[Kafka Server 1], started"
STARTED = re.compile(r"\[Kafka ?Server (?:id=)?(\d+)\],? started")



REBALANCE_CHECK = re.compile(r"preferred replicas by broker", re.IGNORECASE)  # the controller's rebalance check (DEBUG)

# a follower's own lines about a partition it does not fetch (2.3.0 and 0.10.2.1 wordings)
NOT_FOLLOWING_HINTS = re.compile(r"older epoch|[Ii]gnor|Truncat|[Rr]emoved fetcher|[Aa]dded fetcher|become-follower|OffsetOutOfRange|FATAL|ERROR")
START_MARK = "INFO Registered kafka:type=kafka.Log4jController MBean"  # a broker JVM's first server.log line


def since_last_start(log: Path, jvm_started: float | None = None) -> str:
    """server.log from the current JVM's first line on. log4j rolls server.log every hour (``server.log.<date>-HH``):
    when the JVM started before the last roll, its first lines are in the rolled files (newest first searched). A rolled
    file last written before ``jvm_started`` (epoch s) holds none of this JVM's lines: never searched (a JVM that has not
    logged yet would otherwise be seen started by its predecessor's lines)."""
    text = log.read_text(errors="replace") if log.exists() else ""
    for rolled in sorted(log.parent.glob(log.name + ".*"), key=lambda p: p.stat().st_mtime, reverse=True):
        if START_MARK in text or (jvm_started is not None and rolled.stat().st_mtime < jvm_started):
            break
        text = rolled.read_text(errors="replace") + text
    mark = text.rfind(START_MARK)
    return text[mark if mark >= 0 else 0:]

class LeadershipMixin:
    """Mixed into Lab (needs its paths, stop/start, registration, agent helpers and waits)."""

    # ------------------------------------------------------------------ profile
    def use_profile(self, profile: str, timeout: float = 300) -> list[str]:
        """Every broker restarted with ``profile``'s settings (controller last); [] when every running broker has them
        (read from its own JVM's KafkaConfig lines: a roll that failed half-way is done again)."""
        settings = broker_settings(profile, self.kafka)
        if profile == self.profile and all(self._runs_settings(b, settings) for b in BROKER_IDS):
            return []
        self.profile = profile
        self._save(profile=profile)
        for b in BROKER_IDS:
            hosts.write_server_properties(self.host_dir(b), b, connect_string() + CHROOT, settings, self.kafka)
        deadline = time.monotonic() + timeout
        controller = (self.controller() or {}).get("brokerid")
        done = []
        for b in sorted(BROKER_IDS, key=lambda x: x == controller):
            self.wait_full_isr(max(5.0, deadline - time.monotonic()))
            if self.stop(b, timeout_s=30, check=False).returncode != 0:
                self.kill(b)
            self.start(b, timeout=max(5.0, deadline - time.monotonic()))
            self.wait_started(b, max(5.0, deadline - time.monotonic()))
            done.append(f"restarted broker {b} with profile {profile}")
        self.wait_full_isr(max(5.0, deadline - time.monotonic()))
        self.ensure_preferred_leaders(max(5.0, deadline - time.monotonic()))
        self.wait_load(max(5.0, deadline - time.monotonic()))
        return done

    def _runs_settings(self, b: int, settings: dict) -> bool:
        """b's server.properties has ``settings`` and its running JVM logged the profile keys among them with these
        values (``\tkey = value``, its KafkaConfig lines since its start)."""
        path = self.host_dir(b) / "config" / "server.properties"
        pid = self.broker_pid(b)
        try:
            lines = set(path.read_text().splitlines())
        except OSError:
            return False
        if not pid or not all(f"{k}={v}" in lines for k, v in settings.items()):
            return False
        running = since_last_start(self.server_log(b), process_start(pid))
        return all(f"\t{k} = {settings[k]}\n" in running for k in PROFILE_KEYS if k in settings)

    def wait_started(self, b: int, timeout: float = 90) -> None:
        """Until broker b's current JVM logged ``[KafkaServer id=b] started`` (its socket server serves)."""
        pid = self.broker_pid(b)
        log = self.server_log(b)
        born = process_start(pid) if pid else None

        def started():
            text = since_last_start(log, born)
            return bool(STARTED.search(text)) and self.broker_pid(b) == pid
        wait_until(started, timeout, f"broker {b} (pid {pid}) to log that it started", interval=0.2)

    # ------------------------------------------------------------------ incident 003's faults
    def flap(self, b: int, times: int = 3, timeout: float = 90) -> list[dict]:
        """Broker b's ZooKeeper session expires ``times`` times (zk_flap), each only once b runs (a session lost
        while Kafka 2.3 starts up makes it exit: 'Fatal error during KafkaServer startup')."""
        out = []
        for _ in range(times):
            self.wait_started(b, timeout)
            out += self.zk_flap(b, times=1, timeout=timeout)
        return out

    def preferred_of(self, b: int) -> list[tuple[str, int]]:
        """Partitions whose preferred (first) replica is broker b."""
        return sorted(k for k, st in self.partitions().items() if st["replicas"][0] == b)

    def bounce(self, b: int) -> None:
        """Broker b stopped and started, back in every ISR; the leadership of its preferred partitions moved away
        and (automatic rebalance off) stays away: the scene of a preferred election."""
        self.stop(b)
        self.start(b)
        self.wait_started(b)
        self.wait_full_isr(120)
        ps = self.partitions()
        if not self.preferred_of(b) or any(ps[k]["leader"] == b for k in self.preferred_of(b)):
            raise LabError(f"broker {b} still leads some of its preferred partitions after its restart")

    def leads_preferred(self, b: int) -> bool:
        ps = self.partitions()
        return all(ps[k]["leader"] == b for k in self.preferred_of(b))

    def wait_leads_preferred(self, b: int, timeout: float = 60) -> None:
        """Until broker b leads every partition it is the preferred replica of (the automatic rebalance moved
        them back, in the rebalance profile)."""
        wait_until(lambda: self.leads_preferred(b), timeout, f"broker {b} to lead its preferred partitions again", interval=0.2)

    def flap_then_hold(self, b: int, attempts: int = 4, timeout: float = 90, follow_timeout: float = 60) -> dict:
        """Incident 003 from 18:02 on: broker b leads its preferred partitions, loses its session (leadership
        moves away), registers again and follows again (back in their ISRs); then the controller's requests to it are held, so
        the automatic rebalance that moves leadership back to b reaches every broker but b. ZooKeeper and the
        other brokers say b leads; b does not know it. Needs the rebalance profile and b not the controller.
        Retried (released, flapped again) when the rebalance got there before the hold, and after restarting b when it
        did not follow again within ``follow_timeout`` (what was seen is in the result's ``restarted``). Raises at once
        when b's JVM exited (the drill's watch reads why)."""
        interval = float(broker_settings(self.profile, self.kafka).get("leader.imbalance.check.interval.seconds", 10))
        restarted: list[str] = []
        for attempt in range(1, attempts + 1):
            self.wait_leads_preferred(b, timeout)
            self.wait_started(b, timeout)
            # b resumes right after one of the controller's rebalance checks, and the hold below comes as soon as b
            # follows again: most of the interval is left before the next check moves leadership back (resumed at a
            # random moment, 0.10.2.1's check came ~1 s after the registration, four attempts in a row)
            (session,) = self.zk_flap(b, times=1, timeout=timeout, before_resume=lambda: self.wait_rebalance_check(interval + 5))
            mine = self.preferred_of(b)
            if not self._wait_follows_again(b, mine, session["czxid"], follow_timeout):
                restarted.append(f"attempt {attempt}: {self._not_following(b, mine, session['czxid'], follow_timeout)}")
                self.stop(b, check=False)
                if alive(self.broker_pid(b)):
                    self.kill(b)
                self.start(b, timeout=timeout)
                self.wait_started(b, timeout)
                continue
            if self.leads_preferred(b):
                continue  # the rebalance already moved them back: one more session loss
            held = self.hold_controller_requests(b)
            if self.leads_preferred(b) and all(v == b for v in self._view_leaders(b, mine).values()):
                self.release_controller_requests()  # too late: b got the LeaderAndIsr before the hold
                continue
            return {**held, "attempt": attempt, "partitions": [f"{t}-{p}" for t, p in mine], "restarted": restarted}
        raise LabError(f"could not hold the controller's requests to broker {b} before the rebalance in {attempts} attempts"
                       + (f"; restarted it when it did not follow again: {restarted}" if restarted else ""))

    def _wait_follows_again(self, b: int, mine, czxid: int, timeout: float) -> bool:
        """Until ``_follows_again``; False after ``timeout``. Raises when b's JVM exits meanwhile."""
        pid = self.broker_pid(b)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self._follows_again(b, mine, czxid):
                    return True
            except Exception:  # noqa: BLE001 - ZooKeeper busy: asked again
                pass
            if not alive(pid):
                raise LabError(f"broker {b} (pid {pid}) exited after its session loss")
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def _follows_again(self, b: int, mine, czxid: int) -> bool:
        """b is back in the ISR of one of its preferred partitions, written after its new registration (``czxid``),
        or of all of them: b led them before its session loss, so it has taken the controller's LeaderAndIsr that
        made it their follower (one request for all of them) and the requests held from now on are the rebalance's.
        Not waiting for every ISR leaves the hold most of the controller's check interval on a loaded machine (at
        nice 19 beside a CI run, 0.10.2.1's broker 3 took more than 9 s to rejoin all 20)."""
        kz = self.kazoo()
        isrs = []
        for t, p in mine:
            data, stat = kz.get(f"/brokers/topics/{t}/partitions/{p}/state")
            state = json.loads(data)
            if b in state["isr"] and state["leader"] != b and stat.mzxid > czxid:
                return True
            isrs.append(b in state["isr"])
        return all(isrs)

    def _not_following(self, b: int, mine, czxid: int, waited: float) -> str:
        """What ZooKeeper and b's own server.log say about b's preferred partitions, when it did not follow again."""
        kz = self.kazoo()
        states = []
        for t, p in mine:
            try:
                data, stat = kz.get(f"/brokers/topics/{t}/partitions/{p}/state")
                st = json.loads(data)
                states.append(f"{t}-{p}: leader {st['leader']} isr {st['isr']} epoch {st['leader_epoch']}"
                              + (" (written after its registration)" if stat.mzxid > czxid else ""))
            except Exception as exc:  # noqa: BLE001 - said as it is
                states.append(f"{t}-{p}: {type(exc).__name__}")
        pid = self.broker_pid(b)
        text = since_last_start(self.server_log(b), process_start(pid) if pid else None)
        names = {f"{t}-{p}" for t, p in mine}
        lines = [ln for ln in text.splitlines()[-4000:] if any(n in ln for n in names)
                 and NOT_FOLLOWING_HINTS.search(ln)]
        return (f"broker {b} not back in the ISR of any of its {len(mine)} preferred partitions {waited:.0f} s after "
                f"registering again; ZooKeeper: {'; '.join(states[:6])}{' ...' if len(states) > 6 else ''}; its server.log: "
                + (" | ".join(lines[-6:]) if lines else "no line about them"))

    def wait_rebalance_check(self, timeout: float) -> bool:
        """Until the active controller's next automatic-rebalance check: the "Preferred replicas by broker" line its
        controller.log gets at each one, every leader.imbalance.check.interval.seconds (0.10.2.1 and 2.3.0 alike).
        False when none came within ``timeout``."""
        controller = (self.controller() or {}).get("brokerid")
        if controller is None:
            return False
        log = self.log_path(int(controller), "controller.log")
        offset = log.stat().st_size if log.exists() else 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            size = log.stat().st_size if log.exists() else 0
            if size < offset:  # rolled by log4j
                offset = 0
            if size > offset:
                with log.open("rb") as f:
                    f.seek(offset)
                    chunk = f.read(size - offset)
                if REBALANCE_CHECK.search(chunk.decode(errors="replace")):
                    return True
                offset += chunk.rfind(b"\n") + 1  # a line still being written is read again
            time.sleep(0.05)
        return False

    def _view_leaders(self, b: int, keys) -> dict:
        view = self.views().get(b, {})
        return {k: view.get(k, (None, None))[0] for k in keys} if "error" not in view else {}

    def hold_fetchers(self, b: int) -> dict:
        return self._agent(b, "hold-fetchers")

    def release_fetchers(self, b: int) -> dict:
        return self._agent(b, "release-fetchers")

    def hold_controller_requests(self, to_broker: int) -> dict:
        """In the active controller: its requests to ``to_broker`` wait until released. Returns the agent's state
        with ``controller``."""
        controller = (self.controller() or {}).get("brokerid")
        if controller is None:
            raise LabError("no active controller")
        if controller == to_broker:
            raise LabError(f"broker {to_broker} is the controller itself")
        return {**self._agent(int(controller), f"hold-controller-requests:{int(to_broker)}"), "controller": int(controller)}

    def release_controller_requests(self) -> list[int]:
        """Releases every controller-request hold; the brokers whose agent held one."""
        released = []
        for b in BROKER_IDS:
            st = agent.read_state(self.run_dir(b)) or {}
            if any(a.startswith("controller-requests-held") for a in st.get("active") or ()):
                self._agent(b, "release-controller-requests")
                released.append(b)
        return released

    def held_controller_requests(self) -> dict[int, int]:
        """{controller broker: broker its requests are held for}."""
        out = {}
        for b in BROKER_IDS:
            for a in (agent.read_state(self.run_dir(b)) or {}).get("active") or ():
                if a.startswith("controller-requests-held:"):
                    out[b] = int(a.rsplit(":", 1)[1])
        return out

    def views(self, timeout: float = 2.0) -> dict[int, dict]:
        """Each broker's own metadata (leader, leader epoch) of every partition, asked on its replication listener
        alone (the product's kafka_wire); an exception's name where it did not answer."""
        from kafka_runbooks.hooks.kafka_wire import fetch_metadata

        from .net import KAFKA_REPLICATION_PORT

        out: dict[int, dict] = {}
        for b in BROKER_IDS:
            try:
                md = fetch_metadata(hosts.host_name(b), KAFKA_REPLICATION_PORT, timeout, ask_versions=True)  # 2.3: epochs
                out[b] = {(p.topic, p.index): (p.leader, p.leader_epoch) for p in md.partitions}
            except Exception as exc:  # noqa: BLE001 - the caller wants to see who did not answer
                out[b] = {"error": type(exc).__name__}
        return out
