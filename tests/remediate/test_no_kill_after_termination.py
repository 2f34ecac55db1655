"""Issue 29 (review): once Airflow terminates the execute task (SIGTERM -> the operator's ``on_kill``,
``remediate/termination.py``), nothing that stops or kills a process may leave -- not the stop command, and not the
``kill_command`` of a stop that timed out.

The broker is a real local process that ignores SIGTERM (a hung broker whose controlled shutdown never ends, the
incidents' stuck-broker case); the "SSH connection" runs each argv on this machine (the strict SSH hook's contract:
``run(argv, timeout) -> CommandResult``), so ``pgrep``, ``ps``, ``kill`` and ``stat`` are the real tools the product's
``BrokerHost`` runs. The Airflow SIGTERM handler is stood in for by calling the product's own ``termination.on_kill``
while the stop command runs (the task runner calls it in the main thread, between two bytecodes). ZooKeeper is a stand-in
holding broker 2's registration (the step never gets past the stop here).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace

import pytest

from kafka_runbooks.config import ClusterConfig, GateSettings


@pytest.fixture(autouse=True)
def no_termination():
    from kafka_runbooks.remediate.termination import TERMINATION

    TERMINATION.clear()
    yield TERMINATION
    TERMINATION.clear()


class LocalShell:
    """The broker's host: every argv run here (``subprocess``), every command kept in ``sent``; ``during_stop`` is called
    while the stop command runs (the SIGTERM arriving then)."""

    def __init__(self, during_stop=None):
        self.sent: list[tuple[str, ...]] = []
        self.during_stop = during_stop

    def run(self, argv, timeout):
        from kafka_runbooks.hooks.ssh import CommandResult

        self.sent.append(tuple(argv))
        t0 = time.monotonic()
        p = subprocess.run(list(argv), capture_output=True, timeout=timeout)
        if argv[:2] == ("kill", "-TERM") and self.during_stop is not None:
            self.during_stop()
        return CommandResult(tuple(argv), "", p.stdout, p.stderr, p.returncode, None, time.monotonic() - t0)


@pytest.fixture
def hung_broker(tmp_path):
    """A real process standing for broker 2's JVM that ignores SIGTERM; its command line carries a unique marker (the
    configured ``process_pattern``). Killed at the end by its pid if still alive."""
    marker = f"hung-broker-{uuid.uuid4().hex}"
    proc = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                             "print('ready', flush=True); time.sleep(600)", marker], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"  # its SIGTERM handler is installed
    log = tmp_path / "server.log"
    log.write_text("[2026-11-29 10:00:00,000] INFO [KafkaServer id=2] started (kafka.server.KafkaServer)\n")
    cfg = ClusterConfig(name="c1", zk_conn_id="zk", hosts={2: "ssh_b2"}, process_pattern=marker,
                        stop_command=("kill", "-TERM", str(proc.pid)), kill_command=("kill", "-KILL", str(proc.pid)),
                        start_command=("true",), server_log_path=str(log))
    try:
        yield SimpleNamespace(proc=proc, cfg=cfg)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


def test_a_stop_that_times_out_after_the_sigterm_sends_no_kill_command(hung_broker):
    """The stop command leaves, the SIGTERM comes while it runs, the broker's process outlives the stop: the step
    halts saying so, the kill_command never leaves, the broker is left as it is. On the code before: the kill_command
    was sent ``gates.stop_s`` after the stop (commands ``[..., ('kill', '-KILL', pid)]``, the process killed)."""
    from kafka_runbooks.remediate.host import BrokerHost
    from kafka_runbooks.remediate.steps import StepFailed, restart_broker
    from kafka_runbooks.remediate.termination import TaskTerminated, on_kill

    shell = LocalShell(during_stop=lambda: on_kill("ExecutePlanOperator"))
    host = BrokerHost(hung_broker.cfg, 2, shell)
    zk = SimpleNamespace(exists=lambda path, watch=None: SimpleNamespace(ephemeralOwner=0x77, czxid=5))
    gates = GateSettings(poll_s=0.05, stop_s=0.5, deregister_s=1, register_s=1)
    with pytest.raises(StepFailed) as failed:
        restart_broker(zk, host, gates, lambda *a, **k: None, logging.getLogger("test"))
    kills = [argv for argv in shell.sent if argv[0] == "kill"]
    assert kills == [("kill", "-TERM", str(hung_broker.proc.pid))]  # the stop only: no kill_command
    assert hung_broker.proc.poll() is None  # the broker's process was left as it is
    assert failed.value.phase == "stop" and failed.value.code == TaskTerminated.code and failed.value.stopped
    assert "kill_command was not sent" in failed.value.reason and "being terminated by Airflow" in failed.value.reason


def test_the_host_sends_no_stop_or_kill_once_the_task_is_terminated_but_still_a_start(hung_broker):
    """The class, at the one place commands leave (``BrokerHost.run``): after ``on_kill`` the stop and the kill raise
    TaskTerminated unsent, whoever asks; the start (what brings a broker this step stopped back) still goes. On the code
    before: both were sent."""
    from kafka_runbooks.remediate.host import BrokerHost
    from kafka_runbooks.remediate.termination import TaskTerminated, on_kill

    shell = LocalShell()
    host = BrokerHost(hung_broker.cfg, 2, shell)
    on_kill("ExecutePlanOperator")
    for which in ("stop_command", "kill_command"):
        with pytest.raises(TaskTerminated, match=f"{which} of broker 2 not sent"):
            host.run(which, 5)
    assert shell.sent == [] and hung_broker.proc.poll() is None
    assert host.run("start_command", 5).ok and shell.sent == [("true",)]
