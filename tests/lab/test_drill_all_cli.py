"""``./run demo all --kafka 0.10.2.1`` (issue 20 §3): the version reaches the one lab every drill runs on. No lab is
started: the lab is replaced by one that records what it was asked and stops the run at ``up``."""

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


@pytest.mark.parametrize("argv, version", [(["all", "--kafka", "0.10.2.1"], "0.10.2.1"), (["all"], None)])
def test_drill_all_passes_the_kafka_version_to_its_lab(recording_lab, tmp_path, argv, version):
    with pytest.raises(_Stop):
        drill.main(argv + ["--state-dir", str(tmp_path)])  # ./run demo all ... -> kafka_lab.drill -> drill_all.main
    assert recording_lab == [{"state": tmp_path.resolve(), "kafka": version}, {"up": version or "2.3.0"}]


def test_drill_all_refuses_an_unknown_kafka_version(recording_lab, capsys):
    with pytest.raises(SystemExit) as exc:
        drill_all.main(["all", "--kafka", "0.9.0.1"])
    assert exc.value.code == 2 and "invalid choice: '0.9.0.1'" in capsys.readouterr().err
    assert recording_lab == []
