"""Bounded waits without fixed sleeps: re-check when a ZooKeeper watch fires, else every ``poll_s`` (at once, then
every ``termination.HURRY_POLL_S``, once the task is being terminated)."""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

from kafka_runbooks.remediate.termination import HURRY_POLL_S, TERMINATION

T = TypeVar("T")


class Waker:
    """A kazoo watch callback that wakes the waiter (watches fire once; re-arm on every check)."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def __call__(self, *_args) -> None:
        self.event.set()


def wait_for(check: Callable[[], T | None], *, timeout_s: float, poll_s: float, waker: Waker | None = None,
             guard: Callable[[], None] | None = None) -> T | None:
    """Call ``check`` until it returns something other than None (returned) or ``timeout_s`` passes
    (None). ``check`` may raise to fail at once. Between checks it waits for ``waker`` or ``poll_s``.
    ``guard`` (e.g. the maintenance lock's ``check``) is called before every check and raises to stop
    the wait at once: a long wait notices a lost lock within ``poll_s``, not at its end."""
    deadline = time.monotonic() + timeout_s
    while True:
        if guard is not None:
            guard()
        if waker is not None:
            waker.event.clear()
        result = check()
        if result is not None:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        _pause(min(poll_s, remaining), waker)


def _pause(seconds: float, waker: Waker | None) -> None:
    """Up to ``seconds``, in slices of ``HURRY_POLL_S``: ends when ``waker`` fires, and after the slice in which the
    task was told it is being terminated (``termination``: its SIGKILL is ~5 s away, the step checks again now)."""
    end = time.monotonic() + seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            return
        if waker is not None:
            if waker.event.wait(min(left, HURRY_POLL_S)):
                return
        else:
            time.sleep(min(left, HURRY_POLL_S))
        if TERMINATION.noticed():
            return
