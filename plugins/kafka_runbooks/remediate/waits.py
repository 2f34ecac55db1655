"""Bounded waits without fixed sleeps: re-check when a ZooKeeper watch fires, else every ``poll_s``."""

from __future__ import annotations

import threading
import time
from typing import Callable, TypeVar

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
        if waker is not None:
            waker.event.wait(min(poll_s, remaining))
        else:
            time.sleep(min(poll_s, remaining))
