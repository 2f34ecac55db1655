"""Private database and broker servers for the tests, the drills and the deployed suite: a PostgreSQL cluster
(Debian ``postgresql``) and a Redis server (Debian ``redis-server``), each on a loopback address of this slot
(``net.service_ip``), with its data and logs under a state directory of ours. Nothing system-wide is started or
changed: no service unit, no default port on 127.0.0.1.

    pg = Postgres(state / "postgres"); pg.up(); url = pg.create_database("kafka_runbooks")   # postgresql+psycopg2://...
    redis = Redis(state / "redis"); redis.up(); redis.url(0)                               # redis://127.S.2.61:6379/0

PostgreSQL refuses to run as root: its files belong to Debian's ``postgres`` user and its processes run as it.
Clients authenticate with a password (scram-sha-256), as in production; the password is generated once per
state directory and kept there (mode 0600).
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import signal
import subprocess
import time
from pathlib import Path

from kafka_lab import net
from kafka_lab.procs import LabError, alive, port_open, read_pid, wait_until

PG_PORT = 5432
REDIS_PORT = 6379
SUPERUSER = "postgres"


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise LabError(f"PostgreSQL's {name} not found under /usr/lib/postgresql/*/bin: install Debian's postgresql "
                       "(scripts/bootstrap.sh does)")
    return found[-1]


def _as_postgres(argv: list[str], **kw) -> subprocess.CompletedProcess:
    kw.setdefault("timeout", 120)
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=True, capture_output=True, text=True, **kw)


class Postgres:
    def __init__(self, state_dir: str | os.PathLike, host: str | None = None, port: int = PG_PORT):
        self.dir = Path(state_dir).resolve()
        self.host = host or net.service_ip("postgres")
        self.port = port

    @property
    def data(self) -> Path:
        return self.dir / "data"

    @property
    def log(self) -> Path:
        return self.dir / "postgres.log"

    def password(self, user: str = SUPERUSER) -> str:
        path = self.dir / f"{user}.password"
        if not path.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            path.write_text(secrets.token_urlsafe(24))
            path.chmod(0o600)
        return path.read_text().strip()

    def pid(self) -> int | None:
        pid_file = self.data / "postmaster.pid"
        try:
            return int(pid_file.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def running(self) -> bool:
        return alive(self.pid()) and port_open(self.host, self.port)

    def up(self, timeout: float = 60) -> "Postgres":
        """initdb once, then start (idempotent). Returns self."""
        if self.running():
            return self
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "postgres", "postgres")
        if not (self.data / "PG_VERSION").exists():
            pwfile = self.dir / "initdb.pw"
            pwfile.write_text(self.password())
            shutil.chown(pwfile, "postgres", "postgres")
            pwfile.chmod(0o600)
            try:
                _as_postgres([_pg_bin("initdb"), "-D", str(self.data), "-U", SUPERUSER, "--pwfile", str(pwfile),
                              "--auth-local=peer", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"])
            finally:
                pwfile.unlink(missing_ok=True)
        self.log.touch()
        shutil.chown(self.log, "postgres", "postgres")
        sockets = self.dir / "sock"
        sockets.mkdir(exist_ok=True)
        shutil.chown(sockets, "postgres", "postgres")
        opts = (f"-c listen_addresses={self.host} -p {self.port} -c unix_socket_directories={sockets} "
                "-c max_connections=200 -c shared_buffers=64MB -c fsync=on")
        _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts, "-w", "-t", str(int(timeout)),
                      "start"], timeout=timeout + 30)
        wait_until(lambda: port_open(self.host, self.port), timeout, f"PostgreSQL on {self.host}:{self.port}")
        return self

    def down(self) -> None:
        if (self.data / "postmaster.pid").exists():
            try:
                _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"], timeout=90)
            except subprocess.CalledProcessError:
                pid = self.pid()
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)

    def psql(self, sql: str, database: str = "postgres") -> str:
        out = _as_postgres(["psql", "-h", str(self.dir / "sock"), "-p", str(self.port), "-U", SUPERUSER, "-d", database,
                            "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        return out.stdout

    def create_database(self, name: str, user: str | None = None) -> str:
        """A database (and its owner role, with a password of its own), created once. Returns its SQLAlchemy URL."""
        user = user or name
        for ident in (name, user):
            if not ident.replace("_", "").isalnum():
                raise ValueError(f"not a plain identifier: {ident!r}")
        pw = self.password(user)
        if not self.psql(f"SELECT 1 FROM pg_roles WHERE rolname = '{user}'").strip():
            self.psql(f"CREATE ROLE {user} LOGIN PASSWORD '{pw}'")
        if not self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'").strip():
            self.psql(f"CREATE DATABASE {name} OWNER {user}")
        return self.url(name, user)

    def url(self, database: str, user: str | None = None) -> str:
        user = user or database
        return f"postgresql+psycopg2://{user}:{self.password(user)}@{self.host}:{self.port}/{database}"


class Redis:
    def __init__(self, state_dir: str | os.PathLike, host: str | None = None, port: int = REDIS_PORT):
        self.dir = Path(state_dir).resolve()
        self.host = host or net.service_ip("redis")
        self.port = port

    @property
    def pid_file(self) -> Path:
        return self.dir / "redis.pid"

    def running(self) -> bool:
        return alive(read_pid(self.pid_file)) and port_open(self.host, self.port)

    def up(self, timeout: float = 30) -> "Redis":
        if self.running():
            return self
        server = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.path.exists(server):
            raise LabError("redis-server not found: install Debian's redis-server (scripts/bootstrap.sh does)")
        self.dir.mkdir(parents=True, exist_ok=True)
        conf = self.dir / "redis.conf"
        conf.write_text("\n".join([
            f"bind {self.host}", f"port {self.port}", "daemonize yes", f"pidfile {self.pid_file}",
            f"logfile {self.dir / 'redis.log'}", f"dir {self.dir}", "save ''", "appendonly no", "protected-mode no", "",
        ]))
        subprocess.run([server, str(conf)], check=True, capture_output=True, text=True, timeout=30)
        wait_until(lambda: port_open(self.host, self.port), timeout, f"Redis on {self.host}:{self.port}")
        return self

    def down(self) -> None:
        pid = read_pid(self.pid_file)
        if alive(pid):
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.1)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    def url(self, db: int = 0) -> str:
        return f"redis://{self.host}:{self.port}/{db}"
