"""A real Airflow deployment on loopback, as a team would run the product: every component its own process.

    control "machine" (127.S.2.70)    api-server, scheduler, dag-processor, triggerer
    worker1 / worker2 (127.S.2.71/72) a Celery worker each, in its own mount namespace and working directory
    PostgreSQL (servers.Postgres)     Airflow's metadata database (and the Celery result backend)
    Redis (servers.Redis)             the Celery broker
    on-call (127.S.2.73)              the webhook the product pages (oncall.py)

    python -m kafka_lab deploy up | status | down        (lab/kafka_lab/__main__.py)

Machines are simulated on one host the way that matters to the product: each worker runs in a mount namespace of
its own where the node path (``<state>/node``) is a private directory (``<state>/<worker>/node``), so what one
worker writes there (the product's ``incident_base``) the other never sees, and only the evidence bundle store
(``<state>/bundles``, ``bundle_base``) is one directory for all, as a shared mount would be. Each worker has its own
``AIRFLOW_HOME`` and working directory, serves its own task logs on its own address (Airflow's log server app,
port 8793), and names itself by that address (``hostname_callable``), so ``TaskInstance.hostname`` tells which
machine ran a task.

Configuration is a real deployment's: the executor, the databases, the shared secrets (Fernet key, JWT and API
secret) in every component's environment; users in SimpleAuthManager with a passwords file (``USERS``: SimpleAuthManager
because the product's approvers are Airflow user ids, which are the user names here -- FAB would make them numeric ids,
and Airflow documents SimpleAuthManager for development and tests: a production deployment uses FAB or its identity
provider's auth manager); the lab's connections, the cluster Variable and the remediation pool set through the REST API
in the metadata database -- no component gets a credential in its environment.

Every process is started in a session of its own, recorded with its start time (``<state>/run/<name>.pid``): a
process belongs to the deployment when its session is one of those (Airflow's task processes take process groups of
their own, never a new session). ``stop``, ``kill_worker`` and ``down()`` signal exactly those, nothing else.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Mapping

from kafka_lab import net
from kafka_lab.procs import LabError, alive, port_open, read_pid, tail, wait_until
from kafka_lab.servers import Postgres, Redis

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

NODE_ENV = "KAFKA_RUNBOOKS_NODE"
ADDRESS_ENV = "KAFKA_RUNBOOKS_NODE_ADDRESS"

CONTROL = "control"
WORKERS = ("worker1", "worker2")
NODE_ADDRESS = {CONTROL: "deploy_control", "worker1": "deploy_worker_1", "worker2": "deploy_worker_2"}
API_PORT = 8080
LOG_SERVER_PORT = 8793
ONCALL_PORT = 8090
ONCALL_PATH = "/hooks/oncall"
QUEUE = "default"

# SimpleAuthManager roles: alice runs maintenance (admin), bob and carol are on call and approve; "runbooks" is the
# product's service user, which sets a run's note (its summary) through the REST API (connection kafka_runbooks_api)
USERS = {"alice": "admin", "bob": "user", "carol": "user", "runbooks": "user"}
SERVICE_USER = "runbooks"
API_CONN_ID = "kafka_runbooks_api"
APPROVERS = ("alice", "bob", "carol")  # the person who started a run is never asked (remediate/approvals.py)
ONCALL_CONN_ID = "kafka_runbooks_oncall"
POOL = "kafka_runbooks_remediation"
PRODUCT_DB = "kafka_runbooks"  # the product's state database, beside Airflow's own in the deployment's PostgreSQL
# the product's DAGs this deployment runs (the health check is one DAG per cluster of the Variable: the lab's here);
# kafka_fleet_analytics (a daily Spark job over every bundle) stays paused
HEALTH_DAG = "kafka_health_check_lab"
ACTIVE_DAGS = (HEALTH_DAG, "kafka_incident_response", "kafka_rolling_restart", "kafka_preferred_election",
               "kafka_preferred_election_schedule")
ALL_DAGS = ACTIVE_DAGS + ("kafka_fleet_analytics",)

START_TIMEOUT_S = 600.0
STOP_TIMEOUT_S = 30.0
# a task whose worker died is failed by the scheduler after this long without a heartbeat (Airflow's default: 300 s)
HEARTBEAT_TIMEOUT_S = 60
# the health check's cron here: a lab-sized cycle (the product's default is every 5 minutes)
HEALTH_SCHEDULE = "* * * * *"


def node_address() -> str:
    """``[core] hostname_callable`` of every component: the address of the "machine" it runs on."""
    return os.environ.get(ADDRESS_ENV) or socket.getfqdn()


def default_state_dir() -> Path:
    return Path(os.environ.get("KAFKA_RUNBOOKS_DEPLOY_HOME") or REPO / "var" / "deploy")


def _stat(pid: int) -> tuple[int, int] | None:
    """(session id, start time in clock ticks) of a live process, else None."""
    try:
        with open(f"/proc/{int(pid)}/stat") as fh:
            fields = fh.read().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[3]), int(fields[19])


class Deployment:
    def __init__(self, state_dir: str | os.PathLike | None = None, *, health_schedule: str = HEALTH_SCHEDULE,
                 worker_concurrency: int = 2):
        self.state = Path(state_dir or default_state_dir()).resolve()
        self.health_schedule = health_schedule
        self.worker_concurrency = int(worker_concurrency)
        self.postgres = Postgres(self.state / "postgres")
        self.redis = Redis(self.state / "redis")
        self.address = {n: net.service_ip(kind) for n, kind in NODE_ADDRESS.items()}
        self.url = f"http://{self.address[CONTROL]}:{API_PORT}"
        self.users = dict(USERS)
        self._tokens: dict[str, str] = {}

    # ------------------------------------------------------------------ layout
    @property
    def node_path(self) -> Path:
        """The machine-local path every node sees as its own (the product's incident_base lives under it)."""
        return self.state / "node"

    @property
    def bundles(self) -> Path:
        """The evidence bundle store: the one directory shared by every node, as a mount would be."""
        return self.state / "bundles"

    def node_dir(self, node: str) -> Path:
        """A node's working directory (its AIRFLOW_HOME, logs and, for a worker, its private node path)."""
        return self.state / node

    def private_node_path(self, node: str) -> Path:
        """What ``node_path`` holds as seen by ``node`` (the control node sees the host's directory itself)."""
        return self.node_path if node == CONTROL else self.node_dir(node) / "node"

    def log(self, name: str) -> Path:
        """A process's log, under the directory of the node it runs on."""
        node = CONTROL if name == "db-migrate" else self._argv(name)[0]
        return self.node_dir(node) / "logs" / f"{name}.log"

    @property
    def secrets_dir(self) -> Path:
        return self.state / "secrets"

    @property
    def pages_file(self) -> Path:
        return self.state / "oncall" / "pages.jsonl"

    def _pid_file(self, name: str) -> Path:
        return self.state / "run" / f"{name}.pid"

    def _secret(self, name: str, make) -> str:
        path = self.secrets_dir / name
        if not path.exists():
            self.secrets_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.secrets_dir, 0o700)
            path.write_text(make())
            path.chmod(0o600)
        return path.read_text().strip()

    @property
    def passwords_file(self) -> Path:
        path = self.secrets_dir / "passwords.json"
        if not path.exists():
            self._secret("passwords.json", lambda: json.dumps({u: secrets.token_urlsafe(16) for u in USERS}))
        return path

    def password(self, user: str) -> str:
        return json.loads(self.passwords_file.read_text())[user]

    def _fernet_key(self) -> str:
        from cryptography.fernet import Fernet

        return self._secret("fernet.key", lambda: Fernet.generate_key().decode())

    # ------------------------------------------------------------------ environment
    def metadata_url(self) -> str:
        return self.postgres.url("airflow")

    def product_db_url(self) -> str:
        """The product's state database (the Airflow connection kafka_runbooks_db points at it)."""
        return self.postgres.url(PRODUCT_DB)

    def environment(self, node: str) -> dict[str, str]:
        """The whole environment of a component on ``node`` (nothing inherited but the basics)."""
        keep = ("HOME", "LANG", "LC_ALL", "TZ", "JAVA_HOME", "KAFKA_HOME", net.SLOT_ENV, "TMPDIR")
        env = {k: os.environ[k] for k in keep if k in os.environ}
        address = self.address[node]
        home = self.node_dir(node) / "airflow"
        db = self.metadata_url()
        env.update({
            "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "/usr/bin:/bin")]),
            NODE_ENV: node,
            ADDRESS_ENV: address,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__FERNET_KEY": self._fernet_key(),
            "AIRFLOW__CORE__PARALLELISM": "16",
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "kafka_lab.deployment.node_address",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in self.users.items()),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db,
            "AIRFLOW__CELERY__BROKER_URL": self.redis.url(0),
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + db,
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.worker_concurrency),
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": QUEUE,
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__SECRET_KEY": self._secret("api-secret.key", lambda: secrets.token_hex(32)),
            "AIRFLOW__API_AUTH__JWT_SECRET": self._secret("jwt-secret.key", lambda: secrets.token_hex(32)),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(LOG_SERVER_PORT),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_S),
            # a worker's calls to the api-server's execution API: Airflow's 5 s timed out here under load (>20)
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "30",
            # a DAG file parses in ~0.5 s idle, but on the loaded CI machine one import outlasted Airflow's 30 s: the
            # file became an import error, its DAG went missing and a trigger answered 404 ("Dag ... not found")
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "150",
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "180",
            # the product's deployment settings (README "Pointing the DAGs at a real cluster"), the same on every node
            "KAFKA_RUNBOOKS_DEFAULT_CLUSTER": "lab",
            # Spark in local mode on the worker that runs the analysis, bound to that worker's address
            "SPARK_LOCAL_IP": address,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_CONF_DIR": str(REPO / "lab" / "spark-conf"),  # the lab's spark-defaults.conf (airflow_home.py)
        })
        if node == CONTROL:
            env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] = str(self.passwords_file)
        return env

    # ------------------------------------------------------------------ processes
    def _argv(self, name: str) -> tuple[str, list[str]]:
        """(node, argv) of each process of the deployment."""
        airflow = str(VENV_BIN / "airflow")
        if name == "api-server":
            return CONTROL, [airflow, "api-server", "-H", self.address[CONTROL], "-p", str(API_PORT), "-w", "1"]
        if name == "scheduler":
            return CONTROL, [airflow, "scheduler", "--skip-serve-logs"]
        if name == "dag-processor":
            return CONTROL, [airflow, "dag-processor"]
        if name == "triggerer":
            return CONTROL, [airflow, "triggerer", "--skip-serve-logs"]
        if name in WORKERS:
            worker = [airflow, "celery", "worker", "-H", self.celery_name(name), "-q", QUEUE, "-c", str(self.worker_concurrency),
                      "--skip-serve-logs", "--without-gossip", "--without-mingle"]
            # a machine of its own: its node path is private; the bundle store and everything else stay shared
            return name, ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                          'mount --bind -- "$1" "$2" && shift 2 && exec "$@"', "sh",
                          str(self.private_node_path(name)), str(self.node_path), *worker]
        if name.endswith("-log-server"):
            node = name[: -len("-log-server")]
            return node, [str(VENV_BIN / "python"), "-m", "uvicorn", "airflow.utils.serve_logs.log_server:get_app", "--factory",
                          "--host", self.address[node], "--port", str(LOG_SERVER_PORT), "--no-access-log"]
        if name == "oncall":
            return CONTROL, [str(VENV_BIN / "python"), "-m", "kafka_lab.oncall", "--host", net.service_ip("deploy_oncall"),
                             "--port", str(ONCALL_PORT), "--path", ONCALL_PATH, "--out", str(self.pages_file)]
        raise LabError(f"no process {name!r} in the deployment")

    @property
    def process_names(self) -> list[str]:
        return ["oncall", "api-server", "scheduler", "dag-processor", "triggerer",
                *[f"{w}-log-server" for w in WORKERS], *WORKERS]

    def _recorded(self, name: str) -> tuple[int, int] | None:
        try:
            pid, started = self._pid_file(name).read_text().split()
            return int(pid), int(started)
        except (OSError, ValueError):
            return None

    def pid(self, name: str) -> int | None:
        """The pid of the process ``name`` if it runs (the recorded pid with the recorded start time), else None."""
        rec = self._recorded(name)
        if rec is None:
            return None
        st = _stat(rec[0])
        return rec[0] if st is not None and st[1] == rec[1] else None

    def members(self, name: str) -> list[int]:
        """Every live process of ``name``'s session: the process itself, its workers, its tasks and their children."""
        rec = self._recorded(name)
        if rec is None:
            return []
        leader, started = rec
        leader_stat = _stat(leader)
        if leader_stat is not None and leader_stat[1] != started:
            return []  # the pid is another process's now: the session is gone
        out = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                st = _stat(int(d))
                if st is not None and st[0] == leader and st[1] >= started:
                    out.append(int(d))
        return sorted(out)

    def start(self, name: str) -> int:
        if (pid := self.pid(name)) is not None:
            return pid
        node, argv = self._argv(name)
        cwd = self.node_dir(node)
        (cwd / "airflow").mkdir(parents=True, exist_ok=True)
        if node in WORKERS:
            self.private_node_path(node).mkdir(parents=True, exist_ok=True)
        log = self.log(name)
        log.parent.mkdir(parents=True, exist_ok=True)
        env = self.environment(node)
        with open(log, "ab") as out:
            p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd, env=env,
                                 start_new_session=True)
        st = _stat(p.pid)
        if st is None:
            raise LabError(f"{name} exited at once:\n{tail(log, 30)}")
        self._pid_file(name).parent.mkdir(parents=True, exist_ok=True)
        self._pid_file(name).write_text(f"{p.pid} {st[1]}\n")
        return p.pid

    def stop(self, name: str, sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Ends one process of the deployment (``sig`` to it, SIGKILL to its whole session after ``timeout``). True if
        it ran."""
        return bool(self.stop_all([name], sig, timeout))

    def stop_all(self, names: list[str], sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S) -> list[str]:
        """Ends the processes ``names`` together: ``sig`` to each, one shared ``timeout`` for them to exit, then SIGKILL
        to whatever is left of their sessions. Returns the names that ran."""
        ran = [n for n in names if self.pid(n) is not None or self.members(n)]
        for name in ran:
            if (pid := self.pid(name)) is not None:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        while any(self.pid(n) is not None for n in ran) and time.monotonic() < deadline:
            time.sleep(0.2)
        for name in ran:
            self._kill_session(name)
        return ran

    def _kill_session(self, name: str) -> list[int]:
        killed = []
        for p in self.members(name):
            try:
                os.kill(p, signal.SIGKILL)
                killed.append(p)
            except ProcessLookupError:
                pass
        wait_until(lambda: not self.members(name), 15, f"{name}'s processes to exit after SIGKILL")
        return killed

    def kill_worker(self, worker: str) -> list[int]:
        """The worker's machine dies: SIGKILL to the worker, its pool, its tasks and anything they started."""
        if worker not in WORKERS:
            raise LabError(f"no worker {worker!r}")
        return self._kill_session(worker) + self._kill_session(f"{worker}-log-server")

    # ------------------------------------------------------------------ lifecycle
    def up(self, lab=None, timeout: float = START_TIMEOUT_S, *, fresh: bool = False) -> dict[str, Any]:
        """Starts (or completes) the deployment and, given a running Lab, configures the product for it. Bounded by
        ``timeout``; on failure what was started is stopped and the error names the process and its log's tail.
        ``fresh``: stops what runs and starts from empty databases (the previous state kept as ``<state>.prev``)."""
        if os.geteuid() != 0:
            raise LabError("the deployment needs root: PostgreSQL runs as its own user, workers get mount namespaces")
        if fresh and self.state.exists():
            self.down()
            prev = self.state.with_name(self.state.name + ".prev")
            shutil.rmtree(prev, ignore_errors=True)
            self.state.rename(prev)
        t0 = time.monotonic()
        deadline = t0 + timeout
        for parent in self.state.parents:
            if parent.exists() and not os.stat(parent).st_mode & 0o001:
                raise LabError(f"{parent} is not searchable by other users; PostgreSQL's user must reach {self.state}")
        self.state.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state, 0o755)
        for d in (self.node_path, self.bundles, self.state / "oncall", self.state / "run"):
            d.mkdir(parents=True, exist_ok=True)
        try:
            self.postgres.up()
            self.postgres.create_database("airflow")
            self.postgres.create_database(PRODUCT_DB)
            self.redis.up()
            self._migrate(deadline)
            for name in self.process_names:
                self.start(name)
            self.wait_ready(deadline)
            if lab is not None:  # the Variable names the clusters: their health-check DAGs appear once it is set
                self.configure(lab, product_db_url=self.product_db_url())
                self.wait_dags(ALL_DAGS, deadline)
                self._unpause(deadline)
        except BaseException:
            self.down()
            raise
        self._save(up_seconds=round(time.monotonic() - t0, 1))
        return self.status()

    def _migrate(self, deadline: float) -> None:
        env = self.environment(CONTROL)
        (self.node_dir(CONTROL) / "airflow").mkdir(parents=True, exist_ok=True)
        log = self.log("db-migrate")
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            p = subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], stdout=out, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=env, cwd=self.node_dir(CONTROL),
                               timeout=max(30.0, deadline - time.monotonic()))
        if p.returncode != 0:
            raise LabError(f"airflow db migrate exited {p.returncode}:\n{tail(log, 40)}")

    def wait_ready(self, deadline: float) -> None:
        """Every process alive; the api-server reports the metadata DB, scheduler, triggerer and dag-processor healthy;
        both Celery workers answer a ping and consume the queue; every DAG parsed without an import error."""
        def check_alive():
            for name in self.process_names:
                if self.pid(name) is None:
                    raise LabError(f"{name} exited during start; its log ({self.log(name)}):\n{tail(self.log(name), 40)}")

        def step(what: str, predicate, interval: float = 1.0):
            while True:
                check_alive()
                try:
                    value = predicate()
                    if value:
                        return value
                except Exception as exc:  # noqa: BLE001 - reported if the deadline passes
                    last = exc
                else:
                    last = None
                if time.monotonic() > deadline:
                    raise LabError(f"deployment not ready: timed out waiting for {what}" + (f" (last error: {last!r})" if last else "")
                                   + "".join(f"\n--- {n} ({self.log(n)}):\n{tail(self.log(n), 15)}" for n in self.process_names))
                time.sleep(interval)

        step("the on-call webhook", lambda: port_open(net.service_ip("deploy_oncall"), ONCALL_PORT))
        step("the api-server", lambda: self.health() is not None)
        step("the scheduler, triggerer and dag-processor to report healthy", self._components_healthy)
        step("both Celery workers to answer a ping and consume the queue", lambda: set(self.consuming()) == set(WORKERS), 2.0)
        step("each worker's log server", lambda: all(port_open(self.address[w], LOG_SERVER_PORT) for w in WORKERS))
        step("the DAG files to be parsed", lambda: self._dags_parsed(set(ALL_DAGS) - {HEALTH_DAG}), 2.0)

    def wait_dags(self, dag_ids, deadline: float) -> None:
        wait_until(lambda: self._dags_parsed(set(dag_ids)), max(1.0, deadline - time.monotonic()),
                   f"the DAGs {sorted(dag_ids)} to be parsed", interval=2.0)

    def health(self) -> dict | None:
        import requests

        try:
            r = requests.get(f"{self.url}/api/v2/monitor/health", timeout=5)
        except requests.RequestException:
            return None
        return r.json() if r.status_code == 200 else None

    def _components_healthy(self) -> bool:
        h = self.health() or {}
        return all((h.get(c) or {}).get("status") == "healthy" for c in ("metadatabase", "scheduler", "triggerer", "dag_processor"))

    def _dags_parsed(self, dag_ids: set[str]) -> bool:
        errors = self.call("alice", "GET", "/api/v2/importErrors").json()
        if errors.get("total_entries"):
            raise LabError(f"DAG import errors: {errors['import_errors']}")
        dags = {d["dag_id"] for d in self.call("alice", "GET", "/api/v2/dags", params={"limit": 100}).json()["dags"]}
        return dag_ids <= dags

    def _unpause(self, deadline: float) -> None:
        for dag_id in ACTIVE_DAGS:
            r = self.call("alice", "PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": False})
            if r.status_code != 200:
                raise LabError(f"could not unpause {dag_id}: HTTP {r.status_code} {r.text[:300]}")

    def down(self) -> list[str]:
        """Stops every process of the deployment (workers first), then Redis and PostgreSQL. Returns what ran."""
        try:
            stopped = self.stop_all(list(reversed(self.process_names)))
        finally:
            self.redis.down()
            self.postgres.down()
        self._tokens.clear()
        return stopped

    def status(self) -> dict[str, Any]:
        procs = {n: (self.pid(n) or None) for n in self.process_names}
        out: dict[str, Any] = {
            "state_dir": str(self.state), "api_server": self.url, "users": self.users,
            "passwords_file": str(self.passwords_file), "processes": procs,
            "postgres": f"{self.postgres.host}:{self.postgres.port}" + ("" if self.postgres.running() else " (down)"),
            "redis": self.redis.url(0) + ("" if self.redis.running() else " (down)"),
            "node_path": str(self.node_path), "bundle_store": str(self.bundles), "pages": str(self.pages_file),
            "logs": {n: str(self.log(n)) for n in self.process_names},
        }
        if procs.get("api-server"):
            out["health"] = self.health()
        if self.redis.running():
            try:
                out["workers_consuming"] = self.consuming()
            except Exception as exc:  # noqa: BLE001 - status reports
                out["workers_consuming"] = repr(exc)
        saved = self._saved()
        if saved:
            out["up_seconds"] = saved.get("up_seconds")
        return out

    def _saved(self) -> dict:
        try:
            return json.loads((self.state / "deployment.json").read_text())
        except (OSError, ValueError):
            return {}

    def _save(self, **kw) -> None:
        data = {**self._saved(), **kw, "api_server": self.url, "users": self.users, "passwords_file": str(self.passwords_file)}
        (self.state / "deployment.json").write_text(json.dumps(data, indent=2) + "\n")

    # ------------------------------------------------------------------ Celery
    def celery_name(self, worker: str) -> str:
        return f"{worker}@{self.address[worker]}"

    def _celery(self):
        from celery import Celery

        return Celery("kafka_lab_deployment", broker=self.redis.url(0))

    def consuming(self, queue: str = QUEUE) -> list[str]:
        """The workers that answer a ping and consume ``queue`` now."""
        app = self._celery()
        try:
            answers = app.control.inspect(destination=[self.celery_name(w) for w in WORKERS], timeout=2.0).active_queues() or {}
        finally:
            app.close()
        return sorted(w for w in WORKERS if any(q.get("name") == queue for q in answers.get(self.celery_name(w)) or []))

    def start_worker(self, worker: str, timeout: float = 180.0) -> None:
        """Starts a worker (and its log server) that is not running -- a machine back after a crash -- and waits until
        it consumes the queue."""
        for name in (f"{worker}-log-server", worker):
            self.start(name)
        wait_until(lambda: self.pid(worker) is not None and worker in self.consuming(), timeout,
                   f"{worker} to answer and consume {QUEUE}", interval=2.0)

    def consume(self, worker: str, on: bool, queue: str = QUEUE) -> None:
        """Drains a worker (``on=False``: it finishes what it runs and takes no new task from ``queue``) or puts it back,
        with Celery's remote control, as an operator draining a machine would."""
        if (worker in self.consuming(queue)) == on:
            return
        app = self._celery()
        try:
            dest = [self.celery_name(worker)]
            reply = (app.control.add_consumer(queue, destination=dest, reply=True, timeout=5.0) if on
                     else app.control.cancel_consumer(queue, destination=dest, reply=True, timeout=5.0))
        finally:
            app.close()
        if not reply:
            raise LabError(f"{worker} did not answer the {'add' if on else 'cancel'}_consumer request")
        wait_until(lambda: (worker in self.consuming(queue)) == on, 30, f"{worker} to {'consume' if on else 'stop consuming'} {queue}",
                   interval=0.5)

    # ------------------------------------------------------------------ REST (the users' way in)
    def token(self, user: str) -> str:
        import requests

        if user not in self._tokens:
            r = requests.post(f"{self.url}/auth/token", json={"username": user, "password": self.password(user)}, timeout=30)
            r.raise_for_status()
            self._tokens[user] = r.json()["access_token"]
        return self._tokens[user]

    def call(self, user: str, method: str, path: str, **kw):
        import requests

        kw.setdefault("timeout", 60)
        headers = {**(kw.pop("headers", None) or {}), "Authorization": f"Bearer {self.token(user)}"}
        return requests.request(method, f"{self.url}{path}", headers=headers, **kw)

    def trigger(self, user: str, dag_id: str, conf: Mapping[str, Any]) -> str:
        """Starts a run as ``user`` through REST; returns its run id."""
        from datetime import datetime, timezone

        r = self.call(user, "POST", f"/api/v2/dags/{dag_id}/dagRuns",
                      json={"conf": dict(conf), "logical_date": None, "run_after": datetime.now(timezone.utc).isoformat()})
        if r.status_code != 200:
            raise LabError(f"trigger {dag_id} as {user}: HTTP {r.status_code} {r.text[:500]}")
        return r.json()["dag_run_id"]

    def set_paused(self, dag_id: str, paused: bool, user: str = "alice") -> None:
        r = self.call(user, "PATCH", f"/api/v2/dags/{dag_id}", json={"is_paused": bool(paused)})
        if r.status_code != 200:
            raise LabError(f"{'pause' if paused else 'unpause'} {dag_id}: HTTP {r.status_code} {r.text[:300]}")

    def runs(self, dag_id: str, user: str = "alice", limit: int = 50) -> list[dict]:
        """The DAG's latest runs, newest first."""
        r = self.call(user, "GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": limit, "order_by": "-run_after"})
        r.raise_for_status()
        return r.json()["dag_runs"]

    def run(self, dag_id: str, run_id: str, user: str = "alice") -> dict:
        r = self.call(user, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}")
        r.raise_for_status()
        return r.json()

    def task_instances(self, dag_id: str, run_id: str, user: str = "alice") -> dict[str, dict]:
        """{task_id: task instance} of a run (a mapped task's instances under ``task_id[i]``)."""
        r = self.call(user, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}/taskInstances", params={"limit": 200})
        r.raise_for_status()
        out = {}
        for ti in r.json()["task_instances"]:
            key = ti["task_id"] if ti.get("map_index", -1) in (-1, None) else f"{ti['task_id']}[{ti['map_index']}]"
            out[key] = ti
        return out

    def wait_run(self, dag_id: str, run_id: str, timeout: float, user: str = "alice") -> dict:
        """Until the run is finished (success or failed); returns it."""
        return wait_until(lambda: (r := self.run(dag_id, run_id, user))["state"] in ("success", "failed") and r, timeout,
                          f"{dag_id} run {run_id} to finish", interval=2.0)

    def wait_task(self, dag_id: str, run_id: str, task_id: str, states: tuple[str, ...], timeout: float,
                  user: str = "alice") -> dict:
        """Until ``task_id`` of the run is in one of ``states``; fails early when the run finished without it."""
        def check():
            ti = self.task_instances(dag_id, run_id, user).get(task_id) or {}
            if ti.get("state") in states:
                return ti
            if ti.get("state") in ("failed", "upstream_failed", "skipped", "success"):
                raise LabError(f"{dag_id} {run_id}: {task_id} is {ti['state']}, not {states}")
            return None

        def guarded():
            try:
                return check()
            except LabError as exc:
                return exc

        got = wait_until(guarded, timeout, f"{dag_id} {run_id}: {task_id} in {states}", interval=2.0)
        if isinstance(got, LabError):
            raise got
        return got

    def answer_if_asked(self, user: str, dag_id: str, run_id: str, task_id: str, option: str, timeout: float) -> dict:
        """Until ``task_id`` is asked (awaiting input: then ``user`` answers ``option`` through REST) or has ended without
        asking (a mitigation planned for nobody is skipped). {"state": its state when seen, "subject": the question or
        None, "status_code": the answer's HTTP status or None}."""
        ended = ("failed", "upstream_failed", "skipped", "success", "removed")
        ti = wait_until(lambda: (t := self.task_instances(dag_id, run_id).get(task_id) or {}).get("state") in
                        ("awaiting_input", *ended) and t, timeout, f"{dag_id} {run_id}: {task_id} asked or ended", interval=2.0)
        if ti["state"] != "awaiting_input":
            return {"state": ti["state"], "subject": None, "status_code": None}
        subject = self.hitl(dag_id, run_id, task_id, user).get("subject")
        return {"state": ti["state"], "subject": subject, "status_code": self.answer(user, dag_id, run_id, task_id, option).status_code}

    def hitl(self, dag_id: str, run_id: str, task_id: str, user: str) -> dict:
        r = self.call(user, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}/taskInstances/{task_id}/-1/hitlDetails")
        r.raise_for_status()
        return r.json()

    def answer(self, user: str, dag_id: str, run_id: str, task_id: str, option: str = "Approve"):
        """``user`` answers a waiting approval through REST, as in the UI. Returns the HTTP response."""
        return self.call(user, "PATCH", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}/taskInstances/{task_id}/-1/hitlDetails",
                         json={"chosen_options": [option], "params_input": {}})

    def task_log(self, dag_id: str, run_id: str, task_id: str, user: str = "bob", try_number: int = 1) -> str:
        """A task's log as the UI shows it, one line per event (the API serves structured logs as JSON)."""
        r = self.call(user, "GET", f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id)}/taskInstances/{task_id}/logs/{try_number}",
                      headers={"Accept": "application/json"})
        r.raise_for_status()
        content = r.json().get("content") or []
        return "\n".join(str(e.get("event")) if isinstance(e, dict) else str(e) for e in content)

    def worker_of(self, ti: Mapping[str, Any]) -> str | None:
        """Which node ran a task instance (its hostname is the node's address)."""
        return next((n for n, a in self.address.items() if a == ti.get("hostname")), None)

    # ------------------------------------------------------------------ configuration of the product
    def configure(self, lab, *, product_db_url: str | None = None) -> dict[str, Any]:
        """The lab's connections, the cluster Variable and the remediation pool, set in the metadata database through
        the REST API (as an admin would), with credentials only in connections. Returns the cluster settings."""
        settings = self.cluster_settings(lab)
        conns = self.connections(lab, product_db_url=product_db_url)
        self._bulk("/api/v2/connections", [{"connection_id": cid, **c} for cid, c in conns.items()])
        self._bulk("/api/v2/variables", [{"key": "kafka_runbooks_clusters", "value": json.dumps(settings),
                                          "description": "kafka-runbooks: every cluster's settings (README)"}])
        self._bulk("/api/v2/pools", [{"name": POOL, "slots": 1, "description": "tasks that change a Kafka cluster",
                                      "include_deferred": False}])
        return settings

    def _bulk(self, path: str, entities: list[dict]) -> None:
        body = {"actions": [{"action": "create", "entities": entities, "action_on_existence": "overwrite"}]}
        r = self.call("alice", "PATCH", path, json=body)
        if r.status_code != 200:
            raise LabError(f"PATCH {path}: HTTP {r.status_code} {r.text[:500]}")
        result = r.json().get("create") or {}
        if result.get("errors"):
            raise LabError(f"PATCH {path}: {result['errors']}")

    def cluster_settings(self, lab) -> dict[str, Any]:
        settings = json.loads(json.dumps(lab.cluster_settings()))
        lab_cluster = settings["lab"]
        lab_cluster["incident_base"] = str(self.node_path / "incidents")  # each machine's own
        lab_cluster["bundle_base"] = str(self.bundles)  # the shared store
        lab_cluster["approvals"] = {**lab_cluster.get("approvals", {}), "approvers": list(APPROVERS), "oncall_conn_id": ONCALL_CONN_ID}
        # the health check's cron: a lab-sized cycle (the product's default is every 5 minutes)
        lab_cluster["health"] = {**lab_cluster.get("health", {}), "schedule": self.health_schedule}
        # lab-sized like the lab's gates: a returning broker's session is stable after 20 s, the wait re-checks every 2 s
        lab_cluster["election"] = {"batch_size": 8, "offsets_batch_size": 10, "stable_s": 20.0, "poll_s": 2.0,
                                   "convergence_s": 60.0, "deadline_s": 900.0}
        return settings

    def connections(self, lab, *, product_db_url: str | None = None) -> dict[str, dict[str, Any]]:
        """The lab's connections as the deployment stores them: SSH keys inside the connection (``private_key``), not a
        path on one machine."""
        out: dict[str, dict[str, Any]] = {}
        private_key = Path(lab.key_file).read_text()
        for key, value in lab.airflow_env().items():
            if not key.startswith("AIRFLOW_CONN_"):
                continue
            conn = json.loads(value)
            extra = dict(conn.pop("extra", {}) or {})
            if conn.get("conn_type") == "ssh" and "key_file" in extra:
                extra.pop("key_file")
                extra["private_key"] = private_key
            if "schema" in conn:
                conn["schema"] = conn.pop("schema")
            out[key[len("AIRFLOW_CONN_"):].lower()] = {**conn, "extra": json.dumps(extra)}
        out["spark_default"] = {"conn_type": "spark", "host": "local[2]", "extra": "{}"}
        out[ONCALL_CONN_ID] = {"conn_type": "http", "schema": "http", "host": net.service_ip("deploy_oncall"), "port": ONCALL_PORT,
                               "extra": json.dumps({"path": ONCALL_PATH})}
        out[API_CONN_ID] = {"conn_type": "http", "host": self.url, "login": SERVICE_USER, "password": self.password(SERVICE_USER),
                            "extra": "{}"}
        if product_db_url:
            out["kafka_runbooks_db"] = _connection_from_url(product_db_url)
        return out

    def pages(self) -> list[dict]:
        from kafka_lab.oncall import read_pages

        return read_pages(self.pages_file)

    # ------------------------------------------------------------------ the metadata database, read directly
    def metadata_query(self, sql: str) -> list[tuple]:
        """Rows of a read-only query on Airflow's metadata database (PostgreSQL), as an operator's psql would."""
        out = self.postgres.psql(sql, database="airflow")
        return [tuple(line.split("|")) for line in out.splitlines() if line]


class ProductState:
    """The product's state as the deployment keeps it (``state/``: incidents, audit trail, ledgers), read through its
    database the way the workers write it -- for tests and drills that check what two workers left there."""

    def __init__(self, url: str) -> None:
        from kafka_runbooks.state import StateDb

        self.db = StateDb(url)

    def incident(self, record_id: str) -> dict:
        from kafka_runbooks.incidents.store import IncidentStore

        return IncidentStore(self.db).get(record_id)

    record = incident  # a roll's or an election's own record is kept the same way

    def audit_trail(self, record_id: str) -> list[dict]:
        from kafka_runbooks.incidents.store import IncidentStore

        return IncidentStore(self.db).audit_trail(record_id)

    def ledger(self, record_id: str) -> list[dict]:
        from kafka_runbooks.remediate.ledger import Ledger

        return Ledger(self.db, record_id).entries()

    def progress(self, record_id: str):
        from kafka_runbooks.remediate.ledger import Ledger

        return Ledger(self.db, record_id).progress()

    def close_open(self, cluster: str, actor: str, why: str) -> list[str]:
        """Closes every record of ``cluster`` still open (open, responding, needs_person), saying why; their ids."""
        from kafka_runbooks.incidents.store import IncidentStore  # deferred: the lab loads the product when it is used

        store = IncidentStore(self.db)
        left = store.records(cluster, statuses=["open", "responding", "needs_person"])
        for r in left:
            store.close(r["id"], actor=actor, resolution=why)
        return [r["id"] for r in left]


def product_state(d: "Deployment") -> ProductState:
    return ProductState(d.product_db_url())


def quote(value: str) -> str:
    from urllib.parse import quote as _quote

    return _quote(value, safe="")


def _connection_from_url(url: str) -> dict[str, Any]:
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0]
    return {"conn_type": "postgres" if scheme.startswith("postgres") else scheme, "host": parts.hostname, "port": parts.port,
            "login": unquote(parts.username or ""), "password": unquote(parts.password or ""), "schema": parts.path.lstrip("/"),
            "extra": "{}"}
