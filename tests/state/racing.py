"""Racing processes for the state tests: forked children that start together (a barrier), report their result or
their traceback, and are killed if they outlive the bound -- never a test that hangs on a child.

A child resets the signal handlers it inherited (earlier tests in the same pytest process may have run Airflow,
which installs its own) and leaves with os._exit, so nothing of the parent's runs in it after its work."""

from __future__ import annotations

import multiprocessing
import os
import queue
import signal
import traceback
from typing import Any, Callable, Sequence


def _child(target: Callable[..., Any], barrier, index: int, args: Sequence[Any], results) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        results.put((index, True, target(barrier, *args)))
    except BaseException:  # noqa: BLE001 - reported to the parent
        results.put((index, False, traceback.format_exc()))
    finally:
        results.close()
        results.join_thread()
        os._exit(0)


def race(target: Callable[..., Any], argsets: Sequence[Sequence[Any]], timeout_s: float = 180.0) -> list[Any]:
    """Runs ``target(barrier, *args)`` in one forked process per argset; their results in argset order. A child's
    exception fails the caller with the child's traceback."""
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(len(argsets))
    results = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(target, barrier, i, tuple(a), results), daemon=True) for i, a in enumerate(argsets)]
    for p in procs:
        p.start()
    got: dict[int, tuple[bool, Any]] = {}
    try:
        while len(got) < len(procs):
            i, ok, value = results.get(timeout=timeout_s)
            got[i] = (ok, value)
    except queue.Empty:
        raise AssertionError(f"racers did not finish within {timeout_s:g} s: {sorted(set(range(len(procs))) - set(got))}") from None
    finally:
        for p in procs:
            p.join(10)
            if p.is_alive():
                p.kill()
                p.join(10)
    failed = [value for ok, value in got.values() if not ok]
    if failed:
        raise AssertionError("a racer failed:\n" + "\n".join(failed))
    return [got[i][1] for i in range(len(procs))]
