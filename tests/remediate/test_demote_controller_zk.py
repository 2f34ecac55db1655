"""Mitigate first (issue 30) when the not-serving broker is the controller: the controller is moved first
(``demote_run.move_controller``), against a REAL ZooKeeper (tests/detect/zkserver.py).

No Kafka here: each broker is a kazoo session of its own that registers /brokers/ids/<id> (ephemeral), as a broker's
KafkaZkClient does. The controller is the session that created /controller (ephemeral, {"brokerid": ..}) and
/controller_epoch. :func:`_elector` stands in for Kafka 2.3's election as read in KafkaController (``Reelect`` ->
``elect()``): on /controller's deletion, the broker creates /controller naming itself and bumps /controller_epoch in ONE
ZooKeeper transaction (``registerControllerAndIncrementControllerEpoch``'s multi). A broker whose controller event
thread is stuck runs no elector (its ``Reelect`` waits in its queue)."""

from __future__ import annotations

import json
import threading

import pytest

from kafka_runbooks.remediate.demote_run import controller_znode, move_controller
from kafka_runbooks.remediate.engine import Halted

pytestmark = pytest.mark.timeout(120)


def _controller_doc(b: int) -> bytes:
    return json.dumps({"version": 1, "brokerid": b, "timestamp": "1700000000000"}).encode()


@pytest.fixture
def brokers(zk, zookeeper):
    """Sessions for brokers 1, 2 and 3, each registered; broker 3 is the controller (epoch 7)."""
    sessions = {}
    for b in (1, 2, 3):
        s = zookeeper.client(zk.chroot_path)
        s.create(f"/brokers/ids/{b}", json.dumps({"host": "127.0.0.1", "port": 9090 + b}).encode(), ephemeral=True,
                 makepath=True)
        sessions[b] = s
    zk.create("/controller_epoch", b"7")
    sessions[3].create("/controller", _controller_doc(3), ephemeral=True)
    yield sessions
    for s in sessions.values():
        s.stop()
        s.close()


def _elector(session, b: int) -> threading.Event:
    """Broker ``b`` takes /controller once it is deleted (as KafkaController.elect() does, one transaction); the
    event is set once it tried."""
    tried = threading.Event()

    def elect():
        data, estat = session.get("/controller_epoch")
        epoch = int(data) + 1
        tx = session.transaction()
        tx.create("/controller", _controller_doc(b), ephemeral=True)
        tx.set_data("/controller_epoch", str(epoch).encode(), version=estat.version)
        tx.commit()
        tried.set()

    def watch(event):
        if event.type == "DELETED":
            threading.Thread(target=elect, daemon=True).start()
        else:
            session.exists("/controller", watch=watch)

    session.exists("/controller", watch=watch)
    return tried


def test_another_broker_taking_the_deleted_controller_lets_the_run_go_on(zk, brokers):
    seen = controller_znode(zk)
    assert seen["broker_id"] == 3 and seen["owner"] == brokers[3].client_id[0]
    tried = _elector(brokers[1], 1)
    moved = move_controller(zk, 3, seen, timeout_s=30)
    assert tried.is_set()
    assert moved["from"] == 3 and moved["to"] == 1 and moved["deleted"]
    now = controller_znode(zk)
    assert now["broker_id"] == 1 and now["owner"] == brokers[1].client_id[0]
    assert zk.get("/controller_epoch")[0] == b"8"


def test_no_broker_taking_it_within_the_bound_halts_controller_not_moved(zk, brokers):
    seen = controller_znode(zk)
    with pytest.raises(Halted) as halted:
        move_controller(zk, 3, seen, timeout_s=2)
    assert halted.value.code == "controller_not_moved"
    assert "no registered broker took it within 2 s (no /controller)" in str(halted.value)
    assert zk.exists("/controller") is None  # it was deleted: said, not hidden


def test_a_broker_whose_controller_thread_works_may_take_it_again_and_the_move_goes_on_through_it(zk, brokers):
    """A hang of the request handlers only leaves the controller's event thread working: its own Reelect may win the
    election again (the lab measured such a controller processing the move: docs/MITIGATE.md); the move goes on."""
    seen = controller_znode(zk)
    _elector(brokers[3], 3)  # broker 3's event thread is not stuck: its Reelect runs and it wins
    moved = move_controller(zk, 3, seen, timeout_s=30)
    assert moved["to"] == 3 and moved["retaken"] is True and moved["deleted"] is True
    assert controller_znode(zk)["broker_id"] == 3 and controller_znode(zk)["czxid"] != seen["czxid"]


def test_a_controller_znode_that_is_not_the_one_the_check_saw_is_never_deleted(zk, brokers):
    seen = controller_znode(zk)
    # broker 3 lost and re-took it since the check: another znode (another czxid), still naming broker 3
    brokers[3].delete("/controller")
    brokers[3].create("/controller", _controller_doc(3), ephemeral=True)
    again = controller_znode(zk)
    with pytest.raises(Halted) as halted:
        move_controller(zk, 3, seen, timeout_s=2)
    assert halted.value.code == "controller_changed" and "nothing was deleted" in str(halted.value)
    assert controller_znode(zk)["czxid"] == again["czxid"] != seen["czxid"]


def test_an_election_since_the_check_fails_the_fence_and_nothing_is_deleted(zk, brokers):
    seen = controller_znode(zk)
    zk.set("/controller_epoch", b"8")  # /controller_epoch moved on (as a new election's transaction does)
    with pytest.raises(Halted) as halted:
        move_controller(zk, 3, seen, timeout_s=2)
    assert halted.value.code == "controller_changed" and "nothing was deleted" in str(halted.value)
    assert controller_znode(zk)["czxid"] == seen["czxid"]


def test_the_delete_is_one_transaction_fenced_on_the_epoch_the_check_read(zk, brokers, monkeypatch):
    """The re-read inside the run agrees with the check, then /controller_epoch moves before the delete: the
    transaction's check of /controller_epoch's version fails and /controller is kept (ZooKeeper multi: all or none)."""
    seen = controller_znode(zk)
    real_transaction = zk.transaction

    def racing_transaction():  # an election's epoch bump lands between the re-read and the commit
        zk.set("/controller_epoch", b"8")
        return real_transaction()

    monkeypatch.setattr(zk, "transaction", racing_transaction)  # the real transaction, a real write just before it
    with pytest.raises(Halted) as halted:
        move_controller(zk, 3, seen, timeout_s=2)
    assert halted.value.code == "controller_changed" and "(BadVersionError)" in str(halted.value)
    assert "changed while the controller was being moved" in str(halted.value)
    assert controller_znode(zk)["czxid"] == seen["czxid"]


def test_a_controller_that_moved_to_another_registered_broker_on_its_own_is_left_alone(zk, brokers):
    seen = controller_znode(zk)
    brokers[3].delete("/controller")
    brokers[2].create("/controller", _controller_doc(2), ephemeral=True)
    czxid = controller_znode(zk)["czxid"]
    moved = move_controller(zk, 3, seen, timeout_s=2)
    assert moved["to"] == 2 and not moved["deleted"]
    assert controller_znode(zk)["czxid"] == czxid


def _topic(zk, replicas, leader, isr):
    zk.ensure_path("/admin")  # every Kafka broker creates it at startup (KafkaZkClient's persistent paths)
    zk.create("/brokers/topics/orders", json.dumps({"version": 1, "partitions": {"0": replicas}}).encode(), makepath=True)
    zk.create("/brokers/topics/orders/partitions/0/state", json.dumps(
        {"controller_epoch": 8, "leader": leader, "version": 1, "leader_epoch": 4, "isr": isr}).encode(), makepath=True)


def _failing_over_controller(session, zk_path="/admin/reassign_partitions"):
    """Stands for a new Kafka 2.3 controller (KafkaController.onControllerFailover, read at the 2.3.0 tag): it read the
    pending reassignments when its failover began (none) and, once "Ready to serve", deletes /admin/reassign_partitions
    -- the first one it sees here, written in between, unread (``maybeTriggerPartitionReassignment`` of an empty set).
    Any later one it runs: the new order written to the topic's assignment, then the znode deleted, as a working
    controller completes a reorder of replicas that are all in sync. Returns the list of what it did."""
    did: list[str] = []

    def act():
        if not did:
            session.delete(zk_path)
            did.append("dropped")
        else:
            wanted = json.loads(session.get(zk_path)[0])["partitions"]
            for p in wanted:
                session.set(f"/brokers/topics/{p['topic']}", json.dumps(
                    {"version": 1, "partitions": {str(p["partition"]): p["replicas"]}}).encode())
            session.delete(zk_path)
            did.append("reordered")

    def loop():
        # A watch alone misses a znode written again between the delete and re-arming it (no CREATED event then):
        # look whether it is there on every wake-up, the watch only making the wake-up prompt.
        while len(did) < 2:
            there = threading.Event()
            try:
                if session.exists(zk_path, watch=lambda _e: there.set()) is None:
                    there.wait(0.5)
                    continue
                act()
            except Exception:  # the session closed with the test
                return

    threading.Thread(target=loop, daemon=True).start()
    return did


def test_a_reassignment_a_new_controller_drops_during_its_failover_is_written_again_once(zk, brokers):
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.remediate import demote as D
    from kafka_runbooks.remediate.demote_run import reorder_and_wait

    _topic(zk, [3, 1, 2], 3, [3, 1, 2])
    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                         "election": {"znode_timeout_s": 20}})
    plan = D.plan_demote(read_snapshot(zk, "c1"), 3, {3: "hung"})
    assert [m.replicas for m in plan.moves] == [(1, 2, 3)]
    did = _failing_over_controller(brokers[1])
    took, done, stuck, rewrites = reorder_and_wait(zk, cfg, plan, lambda: None, controller_moved=True)
    assert did == ["dropped", "reordered"] and rewrites == 1 and stuck == []
    assert [m.partition.name for m in done] == ["orders-0"]
    assert json.loads(zk.get("/brokers/topics/orders")[0])["partitions"]["0"] == [1, 2, 3]


def test_a_dropped_reassignment_is_not_written_again_when_this_run_did_not_move_the_controller(zk, brokers):
    """Without a controller move of its own the run does not know who removed it (a person may have): it halts,
    saying so, and writes nothing again."""
    from kafka_runbooks.config import ClusterConfig
    from kafka_runbooks.detect.snapshot import read_snapshot
    from kafka_runbooks.remediate import demote as D
    from kafka_runbooks.remediate.demote_run import reorder_and_wait

    _topic(zk, [3, 1, 2], 3, [3, 1, 2])
    cfg = ClusterConfig.from_dict("c1", {"zk_conn_id": "zk", "hosts": {"1": "h1", "2": "h2", "3": "h3"},
                                         "election": {"znode_timeout_s": 3}})
    plan = D.plan_demote(read_snapshot(zk, "c1"), 3, {3: "hung"})
    did = _failing_over_controller(brokers[1])
    with pytest.raises(Halted) as exc:
        reorder_and_wait(zk, cfg, plan, lambda: None)
    assert did == ["dropped"] and exc.value.code == "not_reordered"
    assert json.loads(zk.get("/brokers/topics/orders")[0])["partitions"]["0"] == [3, 1, 2]
