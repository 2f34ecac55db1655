"""docker-compose.yml runs the product (issue 18 §5), validated without a Docker engine: the Python docker-compose 1.29.2
(its own virtualenv under var/, scripts/compose-venv.sh) resolves the file with ``config``; then the resolved services,
images and versions are checked against what the tests here run."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kafka_lab import kafka_home
from kafka_lab.airflow_home import REPO

SECRETS = {"POSTGRES_PASSWORD": "pw-for-the-test", "AIRFLOW_FERNET_KEY": "x" * 43 + "=", "AIRFLOW_API_SECRET_KEY": "s" * 32,
           "AIRFLOW_JWT_SECRET": "j" * 32, "KAFKA_RUNBOOKS_APPROVAL_KEY": "k" * 32}
AIRFLOW_SERVICES = {"airflow-apiserver": "api-server", "airflow-scheduler": "scheduler", "airflow-dag-processor": "dag-processor",
                    "airflow-triggerer": "triggerer", "airflow-worker": "celery worker"}


@pytest.fixture(scope="module")
def compose():
    """The docker-compose executable (scripts/compose-venv.sh creates its virtualenv once)."""
    p = subprocess.run(["bash", str(REPO / "scripts" / "compose-venv.sh")], capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        pytest.fail(f"could not create the docker-compose virtualenv:\n{p.stdout}\n{p.stderr}", pytrace=False)
    return p.stdout.strip().splitlines()[-1]


def _config(compose, env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in SECRETS}
    return subprocess.run([compose, "--project-directory", str(REPO), "-f", str(REPO / "docker-compose.yml"), "config"],
                          capture_output=True, text=True, env={**clean, **env}, timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def resolved(compose) -> dict:
    p = _config(compose, SECRETS)
    assert p.returncode == 0, p.stderr
    return yaml.safe_load(p.stdout)


def _command(svc: dict) -> str:
    cmd = svc.get("command")
    return " ".join(cmd) if isinstance(cmd, list) else str(cmd)


def test_every_component_of_the_product_is_a_service(resolved):
    services = resolved["services"]
    assert set(services) == {"postgres", "redis", "airflow-init", *AIRFLOW_SERVICES, "practice-keys", "zk1", "zk2", "zk3",
                             "kafka1", "kafka2", "kafka3"}
    for name, command in AIRFLOW_SERVICES.items():
        svc = services[name]
        assert _command(svc) == command, name
        env = svc["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
        assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/0"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://airflow:pw-for-the-test@postgres:5432/")
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://airflow-apiserver:8080/execution/"
        targets = {t: (src, mode) for src, t, *mode in (v.split(":") for v in svc["volumes"])}  # "source:target[:mode]"
        # the DAG folder is mounted; the product itself (plugin, Spark apps) is installed in the image as a package
        assert targets["/opt/kafka-runbooks/dags"] == (str(REPO / "dags"), ["ro"])
        assert not {"/opt/kafka-runbooks/plugins", "/opt/kafka-runbooks/spark_apps"} & set(targets)
        assert targets["/var/lib/kafka-runbooks/bundles"] == ("bundles", ["rw"])  # one store, shared by every service
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert "airflow-init" in services and "init.sh" in _command(services["airflow-init"])
    for b in (1, 2, 3):
        k = services[f"kafka{b}"]
        assert str(k["environment"]["BROKER_ID"]) == str(b) and k["environment"]["ZOOKEEPER_CONNECT"] == "zk1:2181,zk2:2181,zk3:2181/kafka"
        assert k["depends_on"]["practice-keys"]["condition"] == "service_completed_successfully"


def test_secrets_are_required_not_written_in_the_file(compose):
    p = _config(compose, {k: v for k, v in SECRETS.items() if k != "AIRFLOW_FERNET_KEY"})
    assert p.returncode != 0 and "set AIRFLOW_FERNET_KEY in .env" in p.stderr
    secret_lines = re.findall(r"^\s*(\w*(?:PASSWORD|SECRET|_KEY)\w*):\s*(.*)$", (REPO / "docker-compose.yml").read_text(), re.M)
    assert len(secret_lines) == 5
    assert all(value.startswith("${") and ":?" in value for _, value in secret_lines), secret_lines  # each one required from .env


def _from(dockerfile: Path) -> str:
    return next(line.split()[1] for line in dockerfile.read_text().splitlines() if line.startswith("FROM "))


def _arg(dockerfile: Path, name: str) -> str:
    return next(line.split("=", 1)[1] for line in dockerfile.read_text().splitlines() if line.startswith(f"ARG {name}="))


def test_images_and_versions_are_the_ones_the_tests_run(resolved):
    services = resolved["services"]
    # Airflow: the image of the version pinned in pyproject.toml (and installed here), on this Python
    airflow = importlib.metadata.version("apache-airflow")
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    expected = f"apache/airflow:{airflow}-python{python}"
    assert airflow == "3.3.2"
    # each image is built once: by airflow-init (Airflow) and practice-keys (the Kafka hosts); the others run it by name
    assert services["airflow-init"]["build"]["args"]["AIRFLOW_IMAGE"] == expected
    builds = {name: svc["image"] for name, svc in services.items() if "build" in svc}
    assert builds == {"airflow-init": "kafka-runbooks/airflow:3.3.2", "practice-keys": "kafka-runbooks/kafka-host:2.3.0"}
    for name in AIRFLOW_SERVICES:
        assert services[name]["image"] == builds["airflow-init"], name
    for b in (1, 2, 3):
        assert services[f"kafka{b}"]["image"] == builds["practice-keys"]
    assert _arg(REPO / "docker" / "airflow" / "Dockerfile", "AIRFLOW_IMAGE") == expected
    # PostgreSQL and Redis: the majors of the Debian servers the deployed suite starts (kafka_lab/servers.py)
    pg_major = max(int(p.name) for p in Path("/usr/lib/postgresql").iterdir() if p.name.isdigit())
    assert services["postgres"]["image"] == f"postgres:{pg_major}" == "postgres:15"
    redis = re.search(r"v=(\d+)\.(\d+)", subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout)
    assert services["redis"]["image"] == f"redis:{redis[1]}.{redis[2]}"
    # ZooKeeper: Debian's zookeeper package of the lab
    zk = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "zookeeper"], capture_output=True, text=True).stdout
    assert all(services[f"zk{z}"]["image"] == "zookeeper:" + ".".join(zk.split(".")[:2]) for z in (1, 2, 3)), zk
    # Kafka: the lab's release and Scala build, on the lab's JDK major
    kafka_df = REPO / "docker" / "kafka" / "Dockerfile"
    args = services["practice-keys"]["build"]["args"]
    assert (args["KAFKA_VERSION"], args["SCALA_VERSION"]) == (kafka_home.KAFKA_VERSION, kafka_home.SCALA_VERSION) == ("2.3.0", "2.12")
    assert (_arg(kafka_df, "KAFKA_VERSION"), _arg(kafka_df, "SCALA_VERSION")) == (kafka_home.KAFKA_VERSION, kafka_home.SCALA_VERSION)
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    jdk = re.search(r'version "(\d+)', java)[1]
    assert _from(kafka_df) == f"eclipse-temurin:{jdk}-jdk-jammy"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_airflow_image_installs_the_package_at_the_pinned_versions():
    """The image installs the product as a package with constraints/ci.txt, whose pins are the versions installed here
    (the versions the tests run); the test tools stay out of the image."""
    dockerfile = (REPO / "docker" / "airflow" / "Dockerfile").read_text()
    assert 'pip install --no-cache-dir -c /opt/kafka-runbooks/src/constraints/ci.txt "/opt/kafka-runbooks/src[deploy]"' in dockerfile
    assert "PYTHONPATH" not in dockerfile
    pins = dict(line.split("==") for line in (REPO / "constraints" / "ci.txt").read_text().splitlines()
                if line and not line.startswith("#"))
    for name in ("apache-airflow", "apache-airflow-providers-celery", "apache-airflow-providers-ssh",
                 "apache-airflow-providers-apache-spark", "kazoo", "confluent-kafka", "pyspark", "psycopg2-binary", "celery"):
        assert pins[name] == importlib.metadata.version(name), name
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    runtime = {re.split(r"[<>=!\[; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"] + project["optional-dependencies"]["deploy"]}
    assert not runtime & {"pytest", "hypothesis", "pytest-timeout", "playwright"}


def test_the_practice_ssh_key_is_private():
    """The practice-keys service leaves the private key 0600, owned by the Airflow image's user, and nothing else."""
    text = (REPO / "docker-compose.yml").read_text()
    (entry,) = [line for line in text.splitlines() if "ssh-keygen" in line]
    assert "chmod 0600 /keys/id_ed25519;" in entry and "chown 50000:0 /keys/id_ed25519;" in entry
    assert re.findall(r"chmod (\d+) /keys/id_ed25519\b(?!\.pub)", entry) == ["0600"]


def test_the_practice_cluster_settings_are_valid_and_its_hosts_run_sshd(tmp_path, monkeypatch):
    from kafka_runbooks.config import ClusterConfig

    keys = tmp_path / "keys"
    (keys / "hosts").mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "id_ed25519")], check=True)
    for b in (1, 2, 3):
        (keys / "hosts" / f"kafka{b}.pub").write_text(f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{b}hostkeyhostkeyhostkeyhostkey root@kafka{b}\n")
    monkeypatch.setenv("KAFKA_RUNBOOKS_KEYS", str(keys))
    monkeypatch.setenv("KAFKA_RUNBOOKS_APPROVAL_KEY", "k" * 32)
    configure = _load(REPO / "docker" / "airflow" / "configure.py", "compose_configure")
    cluster = configure.cluster()["practice"]
    config = ClusterConfig.from_dict("practice", cluster)  # unknown or retired settings are refused here
    assert config.kafka_version == kafka_home.KAFKA_VERSION and config.listener == "REPLICATION"
    conns = configure.connections()
    for b in (1, 2, 3):
        extra = json.loads(conns[f"practice_kafka_{b}"]["extra"])
        assert extra["no_host_key_check"] is False and extra["host_key"].startswith("ssh-ed25519 ") and "PRIVATE KEY" in extra["private_key"]
    # the commands the runbooks run over SSH exist in the broker image, which runs sshd in the foreground
    kafka_df = (REPO / "docker" / "kafka" / "Dockerfile").read_text()
    assert "openssh-server" in kafka_df and "COPY bin/ /opt/kafka-host/bin/" in kafka_df
    for which in ("stop", "start", "kill"):
        (cmd,) = config.argv(f"{which}_command", 1)
        assert (REPO / "docker" / "kafka" / "bin" / Path(cmd).name).is_file() and cmd.startswith("/opt/kafka-host/bin/")
    entry = (REPO / "docker" / "kafka" / "entrypoint.sh").read_text()
    assert entry.rstrip().endswith("exec /usr/sbin/sshd -D -e") and "runuser -u kafka -- /opt/kafka-host/bin/kafka-start" in entry
    for script in ("entrypoint.sh", "bin/kafka-start", "bin/kafka-stop", "bin/kafka-kill"):
        assert subprocess.run(["bash", "-n", str(REPO / "docker" / "kafka" / script)]).returncode == 0, script
