"""A roll whose execute task died with its worker (nothing recorded its end) counts as halted, so ``resume`` can
continue it (the deployed suite kills a worker mid-roll: tests/deployed)."""

from kafka_runbooks.runbook.restart import interrupted_execution


def _e(event, run="r1", **kw):
    return {"event": event, "run_id": run, **kw}


def test_an_execution_that_used_its_approval_and_recorded_no_end_was_interrupted():
    entries = [_e("planned"), _e("approval"), _e("approval_used"), _e("step_started", broker_id=3), _e("step_done", broker_id=3),
               _e("step_started", broker_id=1)]
    why = interrupted_execution(entries, "r1")
    assert "broker 1's restart had started and not finished" in why and "run r1" in why
    entries.append(_e("step_done", broker_id=1))
    assert "between steps" in interrupted_execution(entries, "r1")


def test_an_execution_that_ended_by_itself_or_never_started_was_not():
    base = [_e("planned"), _e("approval"), _e("approval_used"), _e("step_started", broker_id=3)]
    assert interrupted_execution(base + [_e("step_failed", broker_id=3)], "r1") is None
    assert interrupted_execution(base + [_e("halted", broker_id=3)], "r1") is None
    assert interrupted_execution(base + [_e("step_done", broker_id=3), _e("completed")], "r1") is None
    assert interrupted_execution([_e("planned"), _e("approval")], "r1") is None  # rejected or never executed
    assert interrupted_execution(base, "another-run") is None  # the resumed run's close does not re-halt the first run
