"""Fleet analytics over several bundles of two clusters: one Parquet dataset partitioned by cluster and date,
and the documented on-call queries (runbooks/fleet-analytics.md) answered from it; run through the operator the
scheduled DAG uses (SparkSubmitOperator, spark_default = local[2]). Three bundles are analysed beforehand in the
tests' shared SparkSession; the operator's --analyze-missing analyses the fourth inside the fleet job."""

import json

import pytest

from analyze_helpers import fixture_bytes, make_bundle, run_in_session, spark_env

pytestmark = pytest.mark.second_lane  # ./run test runs it in its second lane, after the deployed suite (lane balance)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, airflow_db, spark):
    base = tmp_path_factory.mktemp("fleet-base")
    seed = [("hosts/219/jstack-1.out", "jstack", 219, fixture_bytes("seed001_219_jstack_deadlock.txt")),
            ("hosts/219/netstat.out", "sockets_netstat", 219, fixture_bytes("seed001_219_netstat_antp.txt"))]
    zk = [(f"zk/{z}/zookeeper.log", "zk_log", None, fixture_bytes(f"real23/zk{z}.zookeeper.log"), str(z)) for z in (1, 2, 3)]
    analysed = [make_bundle(base, seed, cluster="prod-a", incident="inc-a1", created_at="2026-11-20T10:00:00Z"),
                make_bundle(base, seed, cluster="prod-a", incident="inc-a2", created_at="2026-11-21T10:00:00Z"),
                make_bundle(base, zk, cluster="prod-b", incident="inc-b1", created_at="2026-11-22T14:05:00Z")]
    missing = make_bundle(base, seed, cluster="prod-b", incident="inc-old", created_at="2026-08-01T10:00:00Z")  # outside 30 days
    for b in analysed:
        run_in_session(spark, b)
    assert not (missing / "findings.json").exists()
    (base / "prod-b" / "broken").mkdir()
    (base / "prod-b" / "broken" / "manifest.json").write_text("{not json")
    out = tmp_path_factory.mktemp("fleet-out")

    import os

    from kafka_runbooks.operators.analyze import FleetAnalyticsOperator

    saved = dict(os.environ)
    try:
        os.environ.update({k: v for k, v in spark_env().items() if k in ("PATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_IP")})
        os.environ.pop("SPARK_HOME", None)
        os.environ["AIRFLOW_CONN_SPARK_DEFAULT"] = json.dumps({"conn_type": "spark", "host": "local[2]"})
        op = FleetAnalyticsOperator(task_id="fleet", base=str(base), out=str(out), days=30, conn_id="spark_default",
                                    conf={"spark.ui.enabled": "false"}, application_args=None)
        op._fleet_args += ["--today", "2026-11-22"]
        op.execute({})
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert (missing / "findings.json").exists()  # analysed by the fleet job (--analyze-missing)
    return base, out, json.loads((out / "answers.json").read_text())


def test_fleet_dataset_is_partitioned_by_cluster_and_date(fleet, spark):
    _, out, doc = fleet
    assert doc["bundles"] == 5 and doc["analysed"] == 4 and any("manifest unreadable" in s["why"] for s in doc["skipped"])
    parts = sorted(p.relative_to(out / "findings").as_posix() for p in (out / "findings").glob("cluster=*/date=*"))
    assert parts == ["cluster=prod-a/date=2026-11-20", "cluster=prod-a/date=2026-11-21",
                     "cluster=prod-b/date=2026-08-01", "cluster=prod-b/date=2026-11-22"]
    assert (out / "lock_edges" / "cluster=prod-a").exists() and (out / "zk_drops" / "cluster=prod-b").exists()
    f = spark.read.parquet(str(out / "findings"))
    assert f.where("kind = 'jvm_deadlock'").select("cluster").distinct().count() == 2


def test_close_wait_and_deadlocks_by_broker_last_30_days(fleet):
    _, _, doc = fleet
    rows = {(r["cluster"], r["broker_id"], r["kind"]): r for r in doc["answers"]["close_wait_and_deadlocks_by_broker"]}
    assert rows[("prod-a", 219, "jvm_deadlock")]["incidents"] == 2
    assert rows[("prod-a", 219, "broker_socket_pileup")]["incidents"] == 2
    assert ("prod-b", 219, "jvm_deadlock") not in rows  # its only deadlock is older than 30 days
    assert rows[("prod-a", 219, "jvm_deadlock")]["first_date"] == "2026-11-20"


def test_zookeeper_follower_drops_by_server_and_hour(fleet):
    _, _, doc = fleet
    rows = [(r["cluster"], r["server"], r["hour"], r["drops"]) for r in doc["answers"]["zk_follower_drops_by_server_and_hour"]]
    assert rows == [("prod-b", "1", 14, 1), ("prod-b", "2", 14, 1)]
