"""A run's note fits Airflow's limit (issue 32, point 1): the api-server refuses a note of more than 1,000 characters
(422), so a summary cut to 980 characters plus a 21-character suffix (1,001) was never set, and only a log warning
said so. The rule (``summary.fit_note``) is checked at the boundary and against Airflow's own request model; then
``set_run_note`` sets a long summary and one of exactly 1,000 characters through a REAL ``airflow api-server`` (the
task runs under ``dag.test()`` in this process, the connection ``kafka_runbooks_api`` names the server and a user)."""

from __future__ import annotations

import json
import logging

import pytest

from kafka_runbooks.operators.summary import NOTE_CUT, NOTE_MAX, fit_note

LONG = "\n".join(f"step {i}: broker {i % 3 + 1} restarted, every gate passed (ISR full, leaders back)" for i in range(40))


def _airflow_accepts(note: str) -> bool:
    """Airflow's own PATCH body model of a DAG run (the api-server answers 422 when it refuses)."""
    from pydantic import ValidationError

    from airflow.api_fastapi.core_api.datamodels.dag_run import DAGRunPatchBody

    try:
        DAGRunPatchBody(note=note)
        return True
    except ValidationError:
        return False


@pytest.mark.parametrize("n", [1, 999, 1000])
def test_a_note_that_fits_is_left_as_it_is(n):
    text = ("x" * (n - 1) + "\n") if n > 1 else "x"
    assert fit_note(text) == text and _airflow_accepts(fit_note(text))


@pytest.mark.parametrize("text", [
    "x" * 1001,  # one word longer than the limit: cut hard
    "word " * 400,  # words only: cut at a space
    LONG,  # lines: cut at a line break
    "y" * 979 + "\n" + "z" * 100,  # a line break just past the room for the suffix
    "é" * 5000,
])
def test_a_long_note_is_cut_within_the_limit_and_says_so(text):
    note = fit_note(text)
    assert len(note) <= NOTE_MAX and note.endswith(NOTE_CUT) and _airflow_accepts(note)
    kept = note[: -len(NOTE_CUT)]
    assert text.startswith(kept) and len(kept) >= (NOTE_MAX - len(NOTE_CUT)) * 2 // 3


def test_lines_are_cut_at_a_line_break_and_words_at_a_space():
    kept = fit_note(LONG)[: -len(NOTE_CUT)]
    assert LONG[len(kept)] == "\n" and kept.split("\n")[-1] in LONG.split("\n")
    words = "word " * 400
    kept = fit_note(words)[: -len(NOTE_CUT)]
    assert kept.endswith("word") and words[len(kept)] == " "


def test_the_old_cut_is_what_airflow_refuses():
    """What the note used to be (980 characters and a 21-character suffix) is refused by Airflow's model: the check
    above is a real one."""
    assert not _airflow_accepts(LONG[:980] + "\n… (cut; see the log)")


# ---------------------------------------------------------------- through a real api-server


@pytest.fixture(scope="module")
def api_server(airflow_db, tmp_path_factory):
    from airflow_runs import ApiServer

    server = ApiServer(tmp_path_factory.mktemp("api-note"), {"runbooks": "user"}).start()
    try:
        yield server
    finally:
        server.stop()


DAG_FILE = """
import logging

from airflow.sdk import DAG, get_current_context, task

from kafka_runbooks.operators.summary import set_run_note

with DAG("kafka_runbooks_run_note", schedule=None, catchup=False) as dag:
    @task
    def summarise():
        context = get_current_context()
        if not set_run_note(context, logging.getLogger("note"), context["dag_run"].conf["text"]):
            raise RuntimeError("set_run_note said the note was not set")

    summarise()
"""


@pytest.mark.airflow
@pytest.mark.timeout(600)
def test_a_long_summary_and_one_of_exactly_1000_characters_become_the_runs_note(api_server, monkeypatch, tmp_path):
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.utils.session import create_session

    from airflow_runs import q
    from kafka_runbooks.operators.summary import API_CONN_ID

    monkeypatch.setenv(f"AIRFLOW_CONN_{API_CONN_ID.upper()}", json.dumps(
        {"conn_type": "http", "host": api_server.url, "login": "runbooks", "password": api_server.passwords["runbooks"]}))
    (tmp_path / "run_note_dag.py").write_text(DAG_FILE)
    manager = DagBundlesManager()
    with create_session() as session:
        manager.sync_bundles_to_db(session=session)
    bundle = next(iter(manager.get_all_dag_bundles()))  # serialized as the DAG processor would (a run needs it)
    bag = BundleDagBag(dag_folder=tmp_path, bundle_path=tmp_path, bundle_name=bundle.name)
    assert not bag.import_errors, bag.import_errors
    sync_bag_to_db(bag, bundle.name, None)
    dag = bag.get_dag("kafka_runbooks_run_note")
    exact = ("n" * 99 + "\n") * 10
    assert len(exact) == NOTE_MAX and fit_note(exact) == exact
    for text in (LONG, exact):
        run = dag.test(run_conf={"text": text})
        assert run.state == "success", "the task failed: the note was not set (its log is above)"
        r = api_server.call("runbooks", "GET", f"/api/v2/dags/{dag.dag_id}/dagRuns/{q(run.run_id)}")
        assert r.status_code == 200, r.text
        note = r.json()["note"]
        assert note == fit_note(text) and len(note) <= NOTE_MAX
