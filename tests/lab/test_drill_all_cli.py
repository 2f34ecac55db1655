"""``./run demo all``: every drill runs on one lab of Kafka 2.3.0, and ``--kafka`` is gone with the 0.10.2.1
distribution (issue 27). No lab is started: the lab is replaced by one that records what it was asked and stops the
run at ``up``."""

from __future__ import annotations

import pytest

import kafka_lab
from kafka_lab import drill, drill_all


class _Stop(Exception):
    pass


class _RecordingLab:
    made: list[dict] = []

    def __init__(self, state_dir, profile=None, kafka=None):
        self.kafka = kafka or "2.3.0"
        _RecordingLab.made.append({"state": state_dir, "kafka": kafka})

    def up(self, profile=None, kafka=None):
        _RecordingLab.made.append({"up": kafka})
        raise _Stop


@pytest.fixture
def recording_lab(monkeypatch):
    _RecordingLab.made = []
    monkeypatch.setattr(kafka_lab, "Lab", _RecordingLab)
    return _RecordingLab.made


def test_drill_all_runs_on_one_lab_of_the_default_version(recording_lab, tmp_path):
    with pytest.raises(_Stop):
        drill.main(["all", "--state-dir", str(tmp_path)])  # ./run demo all -> kafka_lab.drill -> drill_all.main
    assert recording_lab == [{"state": tmp_path.resolve(), "kafka": None}, {"up": None}]


@pytest.mark.parametrize("argv", [["all", "--kafka", "0.10.2.1"], ["000", "--kafka", "0.10.2.1"], ["--kafka", "0.10.2.1"]])
def test_the_drills_no_longer_take_a_kafka_version(recording_lab, capsys, argv):
    with pytest.raises(SystemExit) as exc:
        drill.main(argv)
    assert exc.value.code == 2 and "unrecognized arguments: --kafka 0.10.2.1" in capsys.readouterr().err
    assert recording_lab == []
