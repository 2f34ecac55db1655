"""The deployed suite: one real Airflow deployment (lab/kafka_lab/deployment.py) and one lab, shared by its tests.

Reusable by other suites (browser tests): ``deployment`` gives the api-server URL (``deployment.url``), the users
(``deployment.users``, ``deployment.password(user)``), REST calls as a user (``deployment.call``) and the lab it runs
on (``deployed_lab``). The tests here run only with ``KAFKA_RUNBOOKS_TEST_PART=deployed`` or when named.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kafka_lab.airflow_home import REPO

DEPLOYED_VAR = Path(os.environ.get("KAFKA_RUNBOOKS_TEST_VAR", REPO / "var" / "test")) / "deployed"


@pytest.fixture(scope="session")
def deployed_lab():
    """The practice cluster the deployment runs the product on (3 ZooKeeper, 3 sshd hosts, 3 Kafka 2.3.0 brokers)."""
    from kafka_lab import Lab

    lab = Lab(DEPLOYED_VAR / "lab")
    try:
        lab.up()
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="session")
def deployment(deployed_lab):
    """PostgreSQL, Redis, api-server, scheduler, dag-processor, triggerer and two Celery workers, configured for the lab."""
    from kafka_lab.deployment import Deployment

    d = Deployment(DEPLOYED_VAR / "airflow")
    t0 = time.monotonic()
    try:
        d.up(deployed_lab, fresh=True)
        print(f"\n[deployment up in {time.monotonic() - t0:.1f} s: {d.url}]")
        yield d
    finally:
        d.down()


@pytest.fixture
def healthy(deployment, deployed_lab):
    """Before a flow: the lab healed, both workers consuming, the product's DAGs unpaused."""
    from kafka_lab.deployment import ACTIVE_DAGS, WORKERS

    deployed_lab.reset()
    for w in WORKERS:
        if deployment.pid(w) is None:  # killed by a previous flow: the machine comes back
            deployment.start_worker(w)
    for w in WORKERS:
        deployment.consume(w, True)
    for dag_id in ACTIVE_DAGS:
        deployment.set_paused(dag_id, False)
    return deployment
