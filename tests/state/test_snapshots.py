"""The health checks' snapshots in the state database (issue 18 §4): the snapshot task keeps the snapshot and passes
only its ref in XCom; the detect task reads the same snapshot back; a cluster keeps its last KEEP; a ref to one no
longer kept, or to bytes that do not match, is an error that says so."""

from __future__ import annotations

import dataclasses
import json

import pytest
import sqlalchemy as sa

from kafka_runbooks.state import schema as S
from kafka_runbooks.state.snapshots import KEEP, SnapshotNotKept, SnapshotRef, Snapshots

from snapshot_builders import P, snap  # noqa: E402


def _big(n: int):
    return snap([P(f"t{i // 1000}", i % 1000, [1 + i % 3, 1 + (i + 1) % 3, 1 + (i + 2) % 3], 1 + i % 3, [1, 2, 3]) for i in range(n)])


def test_a_snapshot_is_kept_and_read_back_whole_and_only_its_ref_travels(state_db):
    store = Snapshots(state_db)
    s = _big(20_000)  # ~3.5 MB of JSON; the 100,000-partition figures are ./run bench scale's
    ref = store.put(s)
    assert store.get(ref) == s and store.get(ref.to_dict()) == s
    assert ref.partitions == 20_000 and ref.brokers == len(s.brokers) and ref.cluster == s.cluster
    travelling = len(json.dumps(ref.to_dict()))
    whole = len(json.dumps(s.to_dict()))
    assert travelling < 1_000 and whole > 1_000_000, (travelling, whole)  # the XCom: a few hundred bytes instead of MBs
    assert store.put(s) == ref  # the same snapshot twice: kept once
    assert SnapshotRef.is_ref(ref.to_dict()) and not SnapshotRef.is_ref(s.to_dict())


def test_a_cluster_keeps_its_last_snapshots_and_an_old_ref_says_it_is_gone(state_db):
    store = Snapshots(state_db)
    base = _big(10)
    refs = [store.put(dataclasses.replace(base, taken_at=f"2026-11-25T00:00:{i:02d}.000Z")) for i in range(KEEP + 3)]
    other = store.put(dataclasses.replace(base, cluster="c2"))
    with state_db.read() as c:
        kept = c.execute(sa.select(S.snapshot.c.cluster, sa.func.count()).group_by(S.snapshot.c.cluster)).all()
    assert dict(kept) == {base.cluster: KEEP, "c2": 1}
    for old in refs[:3]:
        with pytest.raises(SnapshotNotKept, match="only the last 20 checks' snapshots are kept"):
            store.get(old)
    assert store.get(refs[-1]).taken_at == "2026-11-25T00:00:22.000Z" and store.get(other).cluster == "c2"


def test_a_ref_whose_bytes_do_not_match_is_refused(state_db):
    store = Snapshots(state_db)
    ref = store.put(_big(5))
    forged = dataclasses.replace(ref, snapshot_id="0" * 64)
    with pytest.raises(SnapshotNotKept, match="is not in the state database"):
        store.get(forged)
    other = store.put(_big(6))
    with state_db.write() as c:  # a row whose bytes were changed under its id
        body = c.execute(sa.select(S.snapshot.c.body).where(S.snapshot.c.id == other.snapshot_id)).scalar_one()
        c.execute(sa.update(S.snapshot).where(S.snapshot.c.id == ref.snapshot_id).values(body=body))
    with pytest.raises(SnapshotNotKept, match="do not match its id"):
        store.get(ref)
