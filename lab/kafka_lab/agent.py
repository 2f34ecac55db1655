"""The Python side of LabFaultAgent (java/LabFaultAgent.java): build its jar, command it, read its state.

The agent runs inside every lab broker (``-javaagent:``); the lab writes ``run/fault-command`` ("SEQ ACTION",
atomically) and waits for ``run/fault-state.json`` to report that sequence number.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from .procs import LabError

JAVA_SRC = Path(__file__).with_name("java") / "LabFaultAgent.java"
COMMAND_FILE = "fault-command"
STATE_FILE = "fault-state.json"


def start_build(out_dir: Path) -> subprocess.Popen:
    """javac in the background (it overlaps ZooKeeper's start); finish_build() makes the jar."""
    classes = out_dir / "classes"
    classes.mkdir(parents=True)
    return subprocess.Popen(["javac", "-J-Xmx128m", "-nowarn", "--release", "17", "-d", str(classes), str(JAVA_SRC)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish_build(javac: subprocess.Popen, out_dir: Path, timeout: float = 120) -> Path:
    out, err = javac.communicate(timeout=timeout)
    if javac.returncode != 0:
        raise LabError(f"javac {JAVA_SRC.name} failed:\n{out}\n{err}")
    manifest = out_dir / "MANIFEST.MF"
    manifest.write_text("Premain-Class: LabFaultAgent\nAgent-Class: LabFaultAgent\n")
    jar = out_dir / "lab-fault-agent.jar"
    p = subprocess.run(["jar", "cfm", str(jar), str(manifest), "-C", str(out_dir / "classes"), "."],
                       capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise LabError(f"jar failed: {p.stdout}{p.stderr}")
    os.chmod(jar, 0o644)
    return jar


def read_state(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None


def command(run_dir: Path, action: str, pid: int, timeout: float = 20) -> dict:
    """Sends one action to the agent of the JVM ``pid`` and returns its state once it has run it."""
    deadline = time.monotonic() + timeout
    state = read_state(run_dir)
    while not state or state.get("pid") != pid:  # the agent of a just-started JVM writes its first state
        if time.monotonic() > deadline:
            raise LabError(f"the fault agent of pid {pid} never reported in {run_dir / STATE_FILE} (state: {state})")
        time.sleep(0.05)
        state = read_state(run_dir)
    seq = int(state["seq"]) + 1
    tmp = run_dir / (COMMAND_FILE + ".tmp")
    tmp.write_text(f"{seq} {action}\n")
    os.chmod(tmp, 0o644)
    tmp.replace(run_dir / COMMAND_FILE)
    while True:
        state = read_state(run_dir)
        if state and state.get("pid") == pid and int(state.get("seq", -1)) >= seq:
            if not state.get("ok"):
                raise LabError(f"fault agent ({action}) failed: {state.get('message')}")
            return state
        if time.monotonic() > deadline:
            raise LabError(f"the fault agent of pid {pid} did not run {action!r} within {timeout:.0f}s (state: {state})")
        time.sleep(0.05)
