"""Helpers for tests that drive Airflow for real: a running ``airflow api-server`` with real users
(SimpleAuthManager), and continuing an existing DAG run in this process the way ``dag.test()``
runs a new one (after a task of it was cleared through the REST API)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
import requests

from kafka_lab.net import service_ip

START_TIMEOUT_S = 180.0


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class ApiServer:
    """``airflow api-server`` on the slot's api_server address, sharing this process's metadata DB."""

    def __init__(self, workdir: Path, users: dict[str, str]) -> None:
        self.host = service_ip("api_server")
        self.port = free_port(self.host)
        self.url = f"http://{self.host}:{self.port}"
        self.users = users  # name -> SimpleAuthManager role
        self.passwords = {u: secrets.token_urlsafe(16) for u in users}
        self.workdir = workdir
        self.proc: subprocess.Popen | None = None
        self._tokens: dict[str, str] = {}

    def start(self) -> "ApiServer":
        pw = self.workdir / "passwords.json"
        pw.write_text(json.dumps(self.passwords))
        env = {
            **os.environ,
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in self.users.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(pw),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__API__BASE_URL": self.url,
        }
        self.log = self.workdir / "api-server.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "airflow"), "api-server", "-H", self.host, "-p", str(self.port), "-w", "1"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                pytest.fail(f"airflow api-server exited ({self.proc.returncode}):\n{self.log.read_text()[-4000:]}", pytrace=False)
            try:
                if requests.get(f"{self.url}/api/v2/monitor/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"airflow api-server did not answer within {START_TIMEOUT_S:g}s:\n{self.log.read_text()[-4000:]}", pytrace=False)
            time.sleep(0.5)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # the server and the workers it started
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)

    def token(self, user: str) -> str:
        if user not in self._tokens:
            r = requests.post(f"{self.url}/auth/token", json={"username": user, "password": self.passwords[user]}, timeout=10)
            r.raise_for_status()
            self._tokens[user] = r.json()["access_token"]
        return self._tokens[user]

    def call(self, user: str, method: str, path: str, **kw) -> requests.Response:
        return requests.request(method, f"{self.url}{path}", headers={"Authorization": f"Bearer {self.token(user)}"}, timeout=30, **kw)


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def continue_run(dag, run_id: str, timeout_s: float = 300.0):
    """Run the schedulable tasks of an existing run until it finishes, in this process, the way
    ``dag.test()`` does for the run it creates (after a task was cleared through the REST API)."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState

    scheduler_dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
    deadline = time.monotonic() + timeout_s
    with create_session() as session:
        dr = session.scalar(select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.run_id == run_id))
        dr.dag = scheduler_dag
        dr.state = DagRunState.RUNNING
        session.commit()
        while dr.state == DagRunState.RUNNING and time.monotonic() < deadline:
            session.expire_all()
            schedulable, _ = dr.update_state(session=session)
            for ti in schedulable:
                ti.try_number += 1
                ti.state = TaskInstanceState.SCHEDULED
            session.commit()
            for ti in [t for t in dr.get_task_instances(session=session) if t.state == TaskInstanceState.SCHEDULED]:
                try:
                    _run_task(ti=ti, task=dag.task_dict[ti.task_id], run_triggerer=True)
                except Exception:  # noqa: BLE001 - the task's state says what happened
                    pass
            if not schedulable:
                time.sleep(0.5)
        return dr
