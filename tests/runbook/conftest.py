"""The real-ZooKeeper fixtures of tests/detect, shared (one server process for the whole session)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_name = "kafka_runbooks_tests_detect_conftest"
if _name not in sys.modules:
    _spec = importlib.util.spec_from_file_location(_name, Path(__file__).parent.parent / "detect" / "conftest.py")
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules[_name] = _mod
    _spec.loader.exec_module(_mod)

zookeeper = sys.modules[_name].zookeeper
zk = sys.modules[_name].zk
