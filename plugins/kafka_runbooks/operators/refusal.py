"""A refused plan fails its task with one sentence, not a traceback (issue 32 point 7).

Airflow 3.3's task runner (``airflow.sdk.execution_time.task_runner._run_task_and_map_outcome``) logs every exception
a task raises -- ``AirflowFailException`` included -- as "Task failed with exception" with its frames, which the log
page shows open under the message: a person reading why a plan was refused reads a Python traceback last. The one
failure it reports without frames is ``SystemExit`` ("Task exited", with its exit code). A refusal is therefore
:class:`Refused`, a ``SystemExit`` whose exit code is 1 and whose text is the sentence: :func:`refuse` logs the
sentence as an ERROR line, and the task fails. A refusal is never tried again: Airflow asks the task's
``retry_policy`` before it retries after a ``SystemExit``, and :func:`refuse` sets one that fails at once, whatever
``core.default_task_retries`` says. Everything else that goes wrong in these tasks stays an exception with its
traceback (a bug should show where it is).
"""

from __future__ import annotations

from typing import Any, NoReturn

from airflow.sdk.definitions.retry_policy import RetryDecision, RetryPolicy


class Refused(SystemExit):
    """A plan that was refused (or, in a dry run, would be): ``str()`` is the sentence, the exit code 1."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.code = 1
        self.sentence = sentence


class NeverRetry(RetryPolicy):
    """Fails at once (the decision carries no reason: the sentence was logged already)."""

    def evaluate(self, exception: BaseException, try_number: int, max_tries: int, context: Any = None) -> RetryDecision:
        return RetryDecision.fail()

    def serialize(self) -> dict[str, Any]:
        return {}


def refuse(task, sentence: str) -> NoReturn:
    """Fails ``task`` (the running operator) with ``sentence`` as the last line a person reads in its log."""
    task.log.error("%s", sentence)
    task.retry_policy = NeverRetry()
    raise Refused(sentence)
