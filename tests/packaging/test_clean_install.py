"""The product as a team adopts it (issue 31): the wheel built from this checkout, installed into a clean virtualenv
that has Airflow and the wheel's own dependencies and nothing of the checkout (no editable install, no PYTHONPATH,
run from an empty directory). There: Airflow finds the provider and the plugin through their entry points, the one
DAG file of ``kafka-runbooks dag-file`` creates every DAG for a configured fleet of two clusters (a third, with a bad
key, gets none and a warning naming the key), the Spark applications resolve through importlib.resources to files
of the installed package, ``kafka-runbooks validate`` refuses a bad setting with a sentence, and the venv's own
``airflow api-server`` serves the incidents page, and a DAG run of the installed package (``dag.test()`` of the
venv's Airflow) reads a real ZooKeeper, probes each broker's host and refuses a dry-run roll of a stand-in cluster
whose hosts cannot be reached; and one drill against the lab (marked ``third_lane``: it runs on the third lane's lab):
an approved rolling restart of a real Kafka 2.3.0 broker over SSH, run by the clean venv's Airflow with the installed
package only (the lab itself is the repository's: started by the test, never imported in the clean venv).

Speed: a clean install of Airflow and PySpark writes ~1.2 GB (measured here: ~6 min under load). The dependencies
are therefore installed once per machine and constraints/ci.txt into a cached virtualenv (``clean_venv``, built
from a wheelhouse that ``pip wheel`` fills from pip's cache; both under ~/.cache/kafka-runbooks); every run then
installs the freshly built wheel into it with ``--no-index`` and ``pip check`` confirms its requirements are met by
what the venv holds, so the test is about this checkout's wheel, not about PyPI.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import secrets
import signal
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
import requests

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints" / "ci.txt"
CACHE = Path(os.environ.get("KAFKA_RUNBOOKS_CLEAN_INSTALL_CACHE") or Path.home() / ".cache" / "kafka-runbooks")
DEPLOYMENT_DAGS = {"kafka_incident_response", "kafka_rolling_restart", "kafka_preferred_election",
                   "kafka_preferred_election_schedule", "kafka_fleet_analytics"}

pytestmark = pytest.mark.timeout(3600)  # the first run on a machine installs Airflow and PySpark (minutes)


def _run(argv, **kw) -> subprocess.CompletedProcess:
    p = subprocess.run(argv, capture_output=True, text=True, **kw)
    assert p.returncode == 0, f"{argv} exited {p.returncode}:\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}"
    return p


def _clean_env(tmp: Path) -> dict[str, str]:
    """The environment of the clean venv's processes: nothing of the checkout or of the tests' Airflow."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME", "PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_CONFIG_FILE")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(AIRFLOW_HOME=str(tmp / "airflow"), AIRFLOW__CORE__LOAD_EXAMPLES="false",
               AIRFLOW__CORE__PLUGINS_FOLDER=str(tmp / "airflow" / "plugins"), PYTHONNOUSERSITE="1")
    (tmp / "airflow" / "plugins").mkdir(parents=True, exist_ok=True)
    return env


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built from a copy of what the distribution is made of (no build/ left in the checkout, nothing else picked up)."""
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "spark_apps", src / "spark_apps", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "plugins" / "kafka_runbooks", src / "plugins" / "kafka_runbooks", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(src)], timeout=900)
    (whl,) = dist.glob("kafka_runbooks-*.whl")
    return whl


@pytest.fixture(scope="module")
def clean_venv(wheel, tmp_path_factory) -> Path:
    """A virtualenv with the wheel's dependencies at constraints/ci.txt, cached per machine (see the module's doc)."""
    key = hashlib.sha256(CONSTRAINTS.read_bytes() + sys.version.encode()).hexdigest()[:16]
    CACHE.mkdir(parents=True, exist_ok=True)
    venv, wheelhouse, done = CACHE / f"clean-venv-{key}", CACHE / f"wheelhouse-{key}", CACHE / f"clean-venv-{key}.done"
    with open(CACHE / f"clean-venv-{key}.lock", "w") as lock:
        # another lane or worktree building or using the same venv: wait for it (held until this module is done)
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _install(venv, wheelhouse, done, wheel, tmp_path_factory)


def _install(venv: Path, wheelhouse: Path, done: Path, wheel: Path, tmp_path_factory):
    if not done.exists():
        shutil.rmtree(venv, ignore_errors=True)
        _metadata_template(venv).unlink(missing_ok=True)  # made by this venv's Airflow: goes with it
        _run([sys.executable, "-m", "pip", "wheel", "-q", "-w", str(wheelhouse), "-c", str(CONSTRAINTS), str(wheel)],
             timeout=1800)
        _run([sys.executable, "-m", "venv", str(venv)], timeout=300)  # this interpreter's base, no system site
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheelhouse),
              "-c", str(CONSTRAINTS), str(wheel)], timeout=3000)
        done.touch()
    tmp = tmp_path_factory.mktemp("clean")
    # this checkout's wheel; `pip check`: its requirements (and every other's) are met by what the venv holds. Not
    # again when the venv holds exactly this wheel's files already (./run test's third lane: the drill on its lab, after
    # the tests without a lab installed the same wheel; ~10-30 s)
    if not _holds(venv, wheel):
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", "--force-reinstall", "--no-deps",
              str(wheel)], cwd=tmp, env=_clean_env(tmp), timeout=600)
        _run([str(venv / "bin" / "python"), "-m", "pip", "check"], cwd=tmp, env=_clean_env(tmp), timeout=300)
    assert _holds(venv, wheel)
    yield venv


def _holds(venv: Path, wheel: Path) -> bool:
    """Whether the venv's kafka_runbooks is this wheel's: one installed distribution; every file of the wheel's RECORD
    there with its hash (the package, its METADATA, its entry points); no other file in the package."""
    (site,) = (venv / "lib").glob("python*/site-packages")
    with zipfile.ZipFile(wheel) as z:
        (record,) = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
        rows = [line.rsplit(",", 2) for line in z.read(record).decode().splitlines() if line]
    want = {path: digest for path, digest, _ in rows if digest}
    if [p.name for p in site.glob("kafka_runbooks-*.dist-info")] != [record.split("/")[0]]:
        return False
    files = {str(p.relative_to(site)) for p in (site / "kafka_runbooks").rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    if files != {p for p in want if p.startswith("kafka_runbooks/")}:
        return False
    for path, digest in want.items():
        f = site / path
        if not f.is_file() or digest != "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(f.read_bytes()).digest()).rstrip(b"=").decode():
            return False
    return True


def _metadata_template(venv: Path) -> Path:
    return venv.with_name(venv.name + ".airflow.db")


def _migrated_db(venv: Path, db: Path, env: dict[str, str]) -> None:
    """An empty Airflow metadata database at head (SQLite) at ``db``: ``airflow db migrate`` of the venv's own Airflow,
    run once per cached venv (under ``clean_venv``'s lock; ~25 s under load) and copied for each use."""
    template = _metadata_template(venv)
    if not template.exists():
        part = template.with_name(template.name + ".part")
        part.unlink(missing_ok=True)
        _run([str(venv / "bin" / "python"), "-m", "airflow", "db", "migrate"], cwd=db.parent,
             env={**env, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{part}"}, timeout=900)
        part.rename(template)
    shutil.copyfile(template, db)


PROBE = textwrap.dedent('''
    import json, os, sys, warnings
    from importlib import metadata
    out = {"sys_path_has_checkout": any(p.startswith(REPO) for p in sys.path if p)}
    import kafka_runbooks
    out["package_file"] = kafka_runbooks.__file__
    out["lab_importable"] = True
    try:
        import kafka_lab  # noqa: F401
    except ImportError:
        out["lab_importable"] = False
    # (1) the entry points, resolved as Airflow resolves them
    eps = {ep.group: ep for group in ("apache_airflow_provider", "airflow.plugins")
           for ep in metadata.entry_points(group=group) if ep.dist and ep.dist.name == "kafka-runbooks"}
    out["entry_points"] = sorted(eps)
    info = eps["apache_airflow_provider"].load()()
    out["provider_info"] = info
    from airflow.providers_manager import ProvidersManager
    pm = ProvidersManager()
    out["providers"] = sorted(pm.providers)
    out["hooks"] = {t: (h.hook_class_name if h else None) for t, h in pm.hooks.items() if t.startswith("kafka_runbooks")}
    from airflow import plugins_manager
    out["plugins"] = {p["name"]: str(p.get("source")) for p in plugins_manager.get_plugin_info()}
    out["plugin_errors"] = plugins_manager.get_import_errors()
    # (2) the one DAG file, in a DAG folder of its own, for a fleet of two clusters and a bad third
    from airflow.dag_processing.dagbag import DagBag
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    out["dag_ids"] = sorted(bag.dag_ids)
    out["import_errors"] = {k: str(v) for k, v in bag.import_errors.items()}
    out["warnings"] = [str(w.message) for w in caught] + [w for ws in bag.captured_warnings.values() for w in ws]
    out["dag_files"] = sorted({dag.fileloc for dag in bag.dags.values()})
    # (3) the Spark applications: files of the installed package
    from kafka_runbooks.operators.analyze import DEFAULT_APP, FLEET_APP
    out["spark_apps"] = [str(DEFAULT_APP), str(FLEET_APP)]
    out["spark_apps_are_files"] = DEFAULT_APP.is_file() and FLEET_APP.is_file()
    print("PROBE " + json.dumps(out))
''')


@pytest.fixture(scope="module")
def probed(clean_venv, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("adopt")
    env = _clean_env(tmp)
    dags = tmp / "dags"
    dags.mkdir()
    # the team's DAG folder: the one file the package prints
    dag_file = _run([str(clean_venv / "bin" / "kafka-runbooks"), "dag-file"], cwd=tmp, env=env, timeout=300).stdout
    (dags / "kafka_runbooks_dags.py").write_text(dag_file)
    bases = lambda c: {"incident_base": str(tmp / c / "incidents"), "bundle_base": str(tmp / c / "bundles")}  # noqa: E731
    fleet = {"east": {"zk_conn_id": "zk_east", "hosts": {"1": "east_1", "2": "east_2"}, **bases("east")},
             "west": {"zk_conn_id": "zk_west", "hosts": {"1": "west_1"}, "health": {"schedule": "*/10 * * * *"}, **bases("west")},
             "typo": {"zk_conn_id": "zk_typo", "hosts": {"1": "typo_1"}, "capture": {"stop_comand": ["x"]}}}
    settings = tmp / "clusters.json"
    settings.write_text(json.dumps(fleet))
    env.update(AIRFLOW__CORE__DAGS_FOLDER=str(dags), KAFKA_RUNBOOKS_CLUSTERS_FILE=str(settings))
    p = _run([str(clean_venv / "bin" / "python"), "-c", f"REPO = {str(REPO)!r}\n" + PROBE], cwd=tmp, env=env, timeout=600)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("PROBE ")]
    return {"venv": clean_venv, "tmp": tmp, "env": env, **json.loads(line[len("PROBE "):])}


def test_the_installed_package_is_the_wheel_not_the_checkout(probed):
    assert not probed["sys_path_has_checkout"]
    assert Path(probed["package_file"]).is_relative_to(probed["venv"]), probed["package_file"]
    assert not probed["lab_importable"]  # the fault injector is not part of the product


def test_airflow_finds_the_provider_and_the_plugin_through_their_entry_points(probed):
    assert probed["entry_points"] == ["airflow.plugins", "apache_airflow_provider"]
    info = probed["provider_info"]
    assert info["package-name"] == "kafka-runbooks" and info["versions"] == ["0.1.0"]
    assert "kafka-runbooks" in probed["providers"]
    assert probed["hooks"] == {"kafka_runbooks_zookeeper": "kafka_runbooks.hooks.zookeeper.ZooKeeperHook",
                               "kafka_runbooks_kafka": "kafka_runbooks.hooks.kafka.KafkaHook"}
    (source,) = probed["plugins"].values()
    assert list(probed["plugins"]) == ["kafka_runbooks"] and "kafka-runbooks" in source and "KafkaRunbooksPlugin" in source, source
    assert probed["plugin_errors"] == {}


def test_one_dag_file_creates_every_dag_for_the_configured_fleet(probed):
    assert probed["import_errors"] == {}
    assert set(probed["dag_ids"]) == DEPLOYMENT_DAGS | {"kafka_health_check_east", "kafka_health_check_west"}
    assert [Path(f).name for f in probed["dag_files"]] == ["kafka_runbooks_dags.py"]
    # the bad cluster: no DAG, and a warning that names it and the key
    assert any("'typo'" in w and "capture.stop_comand" in w and "unknown setting" in w for w in probed["warnings"]), probed["warnings"]


def test_the_spark_applications_are_files_of_the_installed_package(probed):
    assert probed["spark_apps_are_files"]
    for app in probed["spark_apps"]:
        assert Path(app).is_relative_to(probed["venv"]) and "/kafka_runbooks/spark_apps/" in app, app


def test_validate_refuses_a_bad_setting_with_a_sentence(probed):
    bad = probed["tmp"] / "bad.json"
    bad.write_text(json.dumps({"c1": {"zk_conn_id": "zk", "hosts": {"1": None}, "health": {"watch_zookeeper": "false"}}}))
    p = subprocess.run([str(probed["venv"] / "bin" / "kafka-runbooks"), "validate", str(bad)], capture_output=True,
                       text=True, cwd=probed["tmp"], env=probed["env"], timeout=300)
    assert p.returncode == 1, p
    assert p.stdout.splitlines() == ["cluster 'c1': hosts.1: expected a string, got None",
                                     "cluster 'c1': health.watch_zookeeper: expected true or false, got 'false'"]


def test_the_incidents_page_is_served_by_a_real_api_server_of_the_clean_venv(probed):
    """``airflow api-server`` of the clean venv (its own SQLite metadata database) mounts the plugin found through the
    entry point; the incidents page answers behind Airflow's authentication and lists the configured fleet."""
    from kafka_lab.net import service_ip
    from airflow_runs import free_port

    venv, tmp = probed["venv"], probed["tmp"]
    host = service_ip("api_server")
    port = free_port(host)
    password = secrets.token_urlsafe(16)
    (tmp / "passwords.json").write_text(json.dumps({"vera": password}))
    env = {**probed["env"], "AIRFLOW__CORE__AUTH_MANAGER":
           "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "vera:viewer",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False", "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp / 'airflow.db'}"}
    _migrated_db(venv, tmp / "airflow.db", env)
    url = f"http://{host}:{port}"
    with open(tmp / "api-server.log", "wb") as log:
        proc = subprocess.Popen([str(venv / "bin" / "python"), "-m", "airflow", "api-server", "-H", host, "-p", str(port), "-w", "1"], cwd=tmp,
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, (tmp / "api-server.log").read_text()[-4000:]
            try:
                if requests.get(f"{url}/api/v2/monitor/health", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            assert time.monotonic() < deadline, (tmp / "api-server.log").read_text()[-4000:]
            time.sleep(1)
        assert requests.get(f"{url}/kafka-runbooks/incidents", timeout=30).status_code in (401, 403)
        token = requests.post(f"{url}/auth/token", json={"username": "vera", "password": password}, timeout=30).json()["access_token"]
        page = requests.get(f"{url}/kafka-runbooks/incidents", headers={"Authorization": f"Bearer {token}"}, timeout=60)
        assert page.status_code == 200, page.text[:2000]
        assert "<h1>Kafka incidents</h1>" in page.text
        text = page.text
        for c in ("east", "west"):
            # each cluster: its heading, whether anything watches it (nothing has run here: not watched), its counts
            section = text[text.index(f"<h2 id='cluster-{c}'>Cluster {c}</h2>"):]
            section = section[:section.find("<h2 ", 1)] if section.find("<h2 ", 1) > 0 else section
            assert "NOT WATCHED? never checked" in section and "<p>0 open, 0 recent ended.</p>" in section, section[:3000]
        # the cluster with the bad key is listed with its settings error, naming the key
        assert "cannot read this cluster&#x27;s state: cluster &#x27;typo&#x27;: capture.stop_comand: unknown setting" in text \
            or "cannot read this cluster's state: cluster &#x27;typo&#x27;: capture.stop_comand: unknown setting" in text, text[-3000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


# -- a DAG run of the installed package against a real ZooKeeper ------------------------------------------------------

import importlib.util as _ilu  # noqa: E402 - the ZooKeeper fixtures of tests/detect, as tests/dags/conftest.py loads them

_ZK = "kafka_runbooks_tests_detect_conftest"
if _ZK not in sys.modules:
    _spec = _ilu.spec_from_file_location(_ZK, REPO / "tests" / "detect" / "conftest.py")
    sys.modules[_ZK] = _ilu.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules[_ZK])
zookeeper = sys.modules[_ZK].zookeeper
zk = sys.modules[_ZK].zk

DAG_RUN = textwrap.dedent('''
    import json, os, sys
    from airflow.dag_processing.dagbag import DagBag
    bag = DagBag(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    assert not bag.import_errors, bag.import_errors
    run = bag.get_dag("kafka_rolling_restart").test(run_conf=json.loads(os.environ["RUN_CONF"]))
    tis = {ti.task_id: ti for ti in run.get_task_instances()}
    import kafka_runbooks.operators.remediate as remediate
    print("RUN " + json.dumps({
        "states": {k: str(getattr(ti.state, "value", ti.state)) for k, ti in tis.items()},
        "seconds": {k: round((ti.end_date - ti.start_date).total_seconds(), 1) for k, ti in tis.items()
                    if ti.start_date and ti.end_date},
        "refused": tis["plan"].xcom_pull(task_ids="plan", key="refused"),
        "close": tis["close"].xcom_pull(task_ids="close"),
        "execute": tis["execute"].xcom_pull(task_ids="execute"),
        "module": remediate.__file__,
        "sys_path_has_checkout": any(p.startswith(REPO) for p in sys.path if p)}, default=str))
''')


def test_a_roll_runs_through_the_installed_package_against_a_real_zookeeper(probed, zk, zookeeper):
    """The DAG-run check of issue 31, in the clean venv (its Airflow, its own SQLite metadata database, the one DAG
    file): a dry run of a rolling restart of a stand-in cluster -- three brokers registered in a real ZooKeeper (the
    lab's), their hosts' SSH addresses where nothing listens -- reads the cluster through the installed package, probes
    every host, and fails its plan task saying the plan would be refused (a host that cannot be reached over SSH);
    the close task says "dry run, would be refused". Nothing of the checkout is imported. (A drill against the lab's
    Kafka through the installed package: the next test.)"""
    from kafka_lab.net import service_ip

    down = service_ip("capture_ssh_down")  # nothing listens there
    zk.ensure_path("/brokers/ids")
    for b in (1, 2, 3):
        zk.create(f"/brokers/ids/{b}", json.dumps({"endpoints": [f"PLAINTEXT://{down}:9092"], "host": down, "port": 9092,
                                                    "jmx_port": -1, "timestamp": "1700000000000", "version": 4}).encode())
    zk.create("/controller", json.dumps({"version": 1, "brokerid": 1, "timestamp": "1"}).encode())
    zk.create("/controller_epoch", b"3")
    zk.ensure_path("/brokers/topics")
    venv, tmp = probed["venv"], probed["tmp"]
    settings = tmp / "standin.json"
    settings.write_text(json.dumps({"standin": {
        "zk_conn_id": "standin_zk", "hosts": {str(b): f"standin_host_{b}" for b in (1, 2, 3)}, "kafka_version": "2.3.0",
        "incident_base": str(tmp / "standin" / "incidents"), "capture": {"connect_timeout_s": 2.0}}}))
    env = {**probed["env"], "KAFKA_RUNBOOKS_CLUSTERS_FILE": str(settings), "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "0",
           "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp / 'dagrun.db'}",
           "AIRFLOW_CONN_STANDIN_ZK": json.dumps({"conn_type": "generic", "host": zookeeper.hosts, "extra": {"chroot": zk.chroot_path}}),
           "RUN_CONF": json.dumps({"cluster": "standin", "brokers": [2], "reason": "clean venv dry run", "mode": "dry-run",
                                   "canary": False})}
    for b in (1, 2, 3):
        env[f"AIRFLOW_CONN_STANDIN_HOST_{b}"] = json.dumps({
            "conn_type": "ssh", "host": down, "port": 2222, "login": "kafka",
            "extra": {"host_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"}})
    _migrated_db(venv, tmp / "dagrun.db", env)
    p = _run([str(venv / "bin" / "python"), "-c", f"REPO = {str(REPO)!r}\n" + DAG_RUN], cwd=tmp, env=env, timeout=900)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("RUN ")]
    out = json.loads(line[len("RUN "):])
    assert not out["sys_path_has_checkout"] and Path(out["module"]).is_relative_to(venv), out["module"]
    assert out["states"]["plan"] == "failed" and out["states"]["approve"] == "upstream_failed", out["states"]
    assert out["refused"]["dry_run"] is True, out["refused"]
    assert out["refused"]["summary"].startswith("refused: 1 of 1 step(s) -- broker 2: its host cannot be reached over SSH"), out
    assert out["close"]["status"] == "dry run, would be refused", out["close"]


# -- one drill against the lab through the installed package ----------------------------------------------------------

RESPONDER = textwrap.dedent('''
    import sys, time
    from kafka_lab.approvals import Responder
    r = Responder("kafka_rolling_restart", "approve", "Approve", user="oncall-carol", timeout_s=300).start()
    print("READY", flush=True)
    while r._thread.is_alive() and r.error is None:
        time.sleep(0.3)
    print("ANSWERED" if r.error is None else f"ERROR {r.error!r}", r.answered_run_ids, flush=True)
    r._thread.join()  # on an error: it fails the parked task (and any that parks later) until this process is ended
''')


def _start_responder(db: Path, log: Path) -> subprocess.Popen:
    """The on-call person's Approve, from outside the clean venv (as the API server would write it): the lab's
    ``Responder`` in a process of the checkout's venv, on the clean venv's metadata database."""
    env = {**os.environ, "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{db}"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-c", RESPONDER], env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while "READY" not in log.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-4000:]
        time.sleep(0.2)
    return proc


@pytest.mark.lab
@pytest.mark.airflow
@pytest.mark.third_lane  # ./run test's lanes: on the third lane's lab, after the tests without a lab
def test_a_drill_against_the_lab_runs_through_the_installed_package(clean_venv, healthy_lab, tmp_path_factory):
    """The drill of issue 31 in the clean venv: the one DAG file of ``kafka-runbooks dag-file``, the lab's cluster in
    a settings file and its connections as environment variables (what a team writes), the venv's own Airflow and
    SQLite metadata database. ``dag.test()`` of kafka_rolling_restart, mode execute, for one broker of the lab's real
    Kafka 2.3.0 (not the controller: a roll of one broker, to keep the lane short): the plan reads ZooKeeper and probes
    the hosts over SSH, on-call approves, the engine stops and starts the broker over SSH through its gates (the
    canary's produce and consume included) and the close task closes the roll's record. Then, from the state the
    product recorded: the record closed with its resolution, the ledger's steps done; and on the lab: the broker runs
    with a new pid, the others with their old ones, every broker registered."""
    from kafka_runbooks.config import load_cluster
    from kafka_runbooks.remediate.ledger import Ledger
    from kafka_runbooks.state.incidents import IncidentStore

    lab = healthy_lab
    venv, tmp = clean_venv, tmp_path_factory.mktemp("drill")
    env = _clean_env(tmp)
    dags = tmp / "dags"
    dags.mkdir()
    dag_file = _run([str(venv / "bin" / "kafka-runbooks"), "dag-file"], cwd=tmp, env=env, timeout=300).stdout
    (dags / "kafka_runbooks_dags.py").write_text(dag_file)
    clusters = lab.cluster_settings()
    clusters["lab"] = {**clusters["lab"], "incident_base": str(tmp / "incidents"), "bundle_base": str(tmp / "bundles")}
    (tmp / "clusters.json").write_text(json.dumps(clusters))
    controller = lab.controller()["brokerid"]
    broker = min(b for b in lab.registered_brokers() if b != controller)
    pids = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    db = tmp / "dagrun.db"
    conns = {k: v for k, v in lab.airflow_env().items() if k.startswith("AIRFLOW_CONN_")}
    env.update(conns, AIRFLOW__CORE__DAGS_FOLDER=str(dags), KAFKA_RUNBOOKS_CLUSTERS_FILE=str(tmp / "clusters.json"),
               AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT="0", AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{db}",
               RUN_CONF=json.dumps({"cluster": "lab", "brokers": [broker], "reason": "clean venv drill", "mode": "execute",
                                    "canary": True}))
    _migrated_db(venv, db, env)
    responder = _start_responder(db, tmp / "responder.log")
    try:
        p = _run([str(venv / "bin" / "python"), "-c", f"REPO = {str(REPO)!r}\n" + DAG_RUN], cwd=tmp, env=env, timeout=900)
    finally:
        os.killpg(responder.pid, signal.SIGKILL)
        responder.wait(timeout=30)
    (line,) = [ln for ln in p.stdout.splitlines() if ln.startswith("RUN ")]
    out = json.loads(line[len("RUN "):])
    assert not out["sys_path_has_checkout"] and Path(out["module"]).is_relative_to(venv), out["module"]
    assert "ANSWERED" in (tmp / "responder.log").read_text(), (tmp / "responder.log").read_text()[-4000:]
    assert out["states"] == dict.fromkeys(("plan", "approve", "execute", "close"), "success"), f"{out}\n{p.stdout[-6000:]}"
    close = out["close"]
    assert close["status"] == "closed" and close["restarted"] == [broker], close
    # the state the product recorded (the clean venv's state database, read here with the same settings)
    config = load_cluster("lab", clusters)
    record = IncidentStore(config).get(close["record_id"])
    assert record["status"] == "closed", record
    assert record["resolution"].startswith(f"restarted [{broker}] ") and "approved by oncall-carol; every gate passed" \
        in record["resolution"], record["resolution"]
    progress = Ledger(config, close["record_id"]).progress()
    assert progress.done and progress.completed == (broker,) and progress.requested == (broker,), progress
    # the lab: the broker restarted (a new JVM), the others untouched, none left down
    after = {b: lab.broker_pid(b) for b in (1, 2, 3)}
    assert after[broker] not in (None, pids[broker]), (pids, after)
    assert {b: after[b] for b in after if b != broker} == {b: pids[b] for b in pids if b != broker}, (pids, after)
    assert set(lab.registered_brokers()) == {1, 2, 3}
    print("drill through the installed package: broker", broker, "restarted; task seconds", out["seconds"])
