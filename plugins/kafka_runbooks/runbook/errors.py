"""How a service says a task must end without its result: ``Stop`` (the task fails saying why; nothing, or nothing
further, was changed) and ``Skip`` (nothing to do here; the task is skipped saying why). The operators turn them into
Airflow's ``AirflowFailException`` / ``AirflowSkipException`` (``operators/glue.py``); the services never import
Airflow."""

from __future__ import annotations


class Stop(Exception):
    """The task fails with this sentence; a side-effecting task is never retried."""


class Refusal(Stop):
    """A plan refused (or, in a dry run, that would be): the task fails with the sentence as the last line of its log,
    no traceback, and is never tried again (``operators/refusal.py``)."""


class Skip(Exception):
    """Nothing to do: the task is skipped with this sentence."""
