"""Issue 29 §3: a worker killed after writing /admin/preferred_replica_election leaves it for a controller to run later,
unwatched. The close task removes it -- only when it holds exactly what the product's open batch wrote. Real ZooKeeper
(tests/detect/zkserver.py), no brokers: no controller takes the znode, as when the worker died before it did."""

from __future__ import annotations


def _ledger(batch_partitions, ended=False):
    entries = [{"event": "planned", "run_id": "run-1"},
               {"event": "step_started", "run_id": "run-1", "batch": 1, "broker_id": 2, "partitions": batch_partitions}]
    if ended:
        entries.append({"event": "step_done", "run_id": "run-1", "batch": 1, "broker_id": 2, "partitions": batch_partitions})
    return entries


def test_the_close_removes_the_dead_batchs_own_pending_election_znode(zk):
    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate.election_run import clear_interrupted_batch

    batch = ["orders-0", "orders-3"]
    zk.create(E.ZNODE, E.znode_payload(batch), makepath=True)  # what the batch wrote before its worker was killed
    said = clear_interrupted_batch(zk, _ledger(batch))
    assert zk.exists(E.ZNODE) is None and "it was removed" in said


def test_somebody_elses_pending_election_is_left(zk):
    from kafka_runbooks.remediate import election as E
    from kafka_runbooks.remediate.election_run import clear_interrupted_batch

    zk.create(E.ZNODE, E.znode_payload(["payments-1"]), makepath=True)  # an operator's own election
    said = clear_interrupted_batch(zk, _ledger(["orders-0", "orders-3"]))
    assert zk.exists(E.ZNODE) is not None and "holds nothing of it" in said
    assert clear_interrupted_batch(zk, _ledger(["payments-1"], ended=True)) is None  # a batch that ended: not touched
    assert zk.exists(E.ZNODE) is not None
