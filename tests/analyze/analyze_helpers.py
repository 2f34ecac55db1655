"""Helpers for the Analyze tests (unique module name: tests/analyze is on sys.path in prepend mode)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
REPO = HERE.parents[1]
VENV_BIN = Path(sys.executable).parent


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.pop("SPARK_HOME", None)
    return env




def make_bundle(root: Path, files: list[tuple], *, cluster: str = "lab", incident: str = "inc-1",
                created_at: str = "2026-11-22T13:59:30Z", finished_at: str = "2026-11-22T14:05:00Z",
                extra: dict | None = None) -> Path:
    """A capture bundle as capture writes it: files [(rel path, kind, broker_id, bytes[, server])], manifest.json
    with sha256 and sizes, commands in file order (their started_at orders successive captures)."""
    import hashlib
    import json

    b = root / cluster / incident / "20261122T140000Z"
    b.mkdir(parents=True, exist_ok=True)
    mfiles, commands = [], []
    for i, f in enumerate(files):
        rel, kind, bid, data = f[:4]
        server = f[4] if len(f) > 4 else None
        p = b / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        entry = {"path": rel, "broker_id": bid, "host": f"127.102.1.{bid}" if bid is not None else None, "kind": kind,
                 "command": kind, "stream": "stdout", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        if server is not None:
            entry["server"] = server
        mfiles.append(entry)
        commands.append({"broker_id": bid, "host": entry["host"], "name": p.stem, "kind": kind, "argv": [kind],
                         "command": kind, "started_at": f"2026-11-22T14:00:{i:02d}+00:00", "duration_s": 0.1,
                         "exit_code": 0, "error": None, "stdout": rel, "stderr": None})
    manifest = {"schema": "kafka-runbooks/evidence-bundle/v1", "incident_id": incident, "capture_id": "20261122T140000Z",
                "cluster": cluster, "created_at": created_at, "finished_at": finished_at, "trigger": None,
                "hosts": {}, "commands": commands, "files": mfiles, **(extra or {})}
    (b / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return b


def submit(app: str, args: list[str], master: str = "local[2]", timeout: int = 600):
    import subprocess

    return subprocess.run([str(VENV_BIN / "spark-submit"), "--master", master, "--conf", "spark.ui.enabled=false",
                           str(REPO / "spark_apps" / app), *args], env=spark_env(), capture_output=True, text=True,
                          timeout=timeout)
