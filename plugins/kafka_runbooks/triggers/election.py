"""``ElectionReadyTrigger``: the deferred preferred election's wait, in the triggerer -- no worker slot is held
while it waits (hours, in production: until the returning broker is ready and traffic is quiet).

Every ``poll_s`` it re-checks (``remediate/election_run.check_ready``, blocking calls in a worker thread) and fires
once: ``{"status": "ready", ...}`` when nothing stands in the way, or ``{"status": "gave_up", "reason": ...}`` at the
plan's deadline, naming what it was still waiting for -- or at once when a broker it waits for is stuck out of an ISR
(``detect/replicas.py``: no progress, no fetcher; it would never be ready), with that diagnosis. The followers'
figures of the earlier checks are kept here, in memory, to tell catching up from stuck. A check that fails
(ZooKeeper unreachable) counts as not ready, with the error as its reason.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from kafka_runbooks import clock

CLASSPATH = "kafka_runbooks.triggers.election.ElectionReadyTrigger"


class ElectionReadyTrigger(BaseTrigger):
    def __init__(self, cluster: str, conditions: dict[str, Any], poll_s: float = 30.0) -> None:
        super().__init__()
        self.cluster = cluster
        self.conditions = dict(conditions)
        self.poll_s = float(poll_s)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return CLASSPATH, {"cluster": self.cluster, "conditions": self.conditions, "poll_s": self.poll_s}

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from asgiref.sync import sync_to_async

        from kafka_runbooks.config import load_cluster
        from kafka_runbooks.remediate import election as E
        from kafka_runbooks.remediate.election_run import check_ready
        from kafka_runbooks.remediate.progress import ready_line, wait_line

        config = await sync_to_async(load_cluster)(self.cluster)
        checks = 0
        why: list[str] = []
        first_seen: list[str] = []
        series: list = []  # the followers' samples of this wait's checks
        while True:
            checks += 1
            try:
                why, seen = await asyncio.to_thread(check_ready, config, self.conditions, series)
            except Exception as exc:  # noqa: BLE001 - not ready; the reason says why
                why, seen = [f"could not check: {type(exc).__name__}: {exc}"], {}
            if checks == 1:
                first_seen = list(why)
            if not why:
                self.log.info("%s", ready_line(self.cluster, checks, first_seen))
                yield TriggerEvent({"status": "ready", "at": clock.now_iso(), "checks": checks, "waited_for": first_seen,
                                    "seen": seen})
                return
            self.log.info("%s", wait_line(self.cluster, checks, why, E.seconds_left(self.conditions, clock.now())))
            if seen.get("stuck"):
                yield TriggerEvent({"status": "gave_up", "at": clock.now_iso(), "checks": checks, "waited_for": first_seen,
                                    "reason": seen["stuck"], "stuck": seen.get("followers")})
                return
            if E.past_deadline(self.conditions, clock.now()):
                yield TriggerEvent({"status": "gave_up", "at": clock.now_iso(), "checks": checks, "waited_for": first_seen,
                                    "reason": E.give_up_reason(self.conditions, why, checks)})
                return
            await asyncio.sleep(self.poll_s)
