"""Peers' fetch errors from real logs: Kafka 2.3.0's wording (recorded here) and the 0.10 seed's."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from kafka_runbooks.detect.fetch_errors import UNREACHABLE_CAUSES, fetch_errors

UTC = dt.timezone.utc


def unreachable(text, **kw):
    return [e for e in fetch_errors(text, **kw) if e.cause in UNREACHABLE_CAUSES]

HERE = Path(__file__).parent
KAFKA23 = (HERE / "fixtures" / "kafka23_server_fetch_errors.log").read_text()
SEED001_217 = (HERE.parent / "analyze" / "fixtures" / "seed001_217_server.log").read_text()


def test_kafka23_disconnect_counts_once_and_shutdowns_never():
    errors = unreachable(KAFKA23)
    assert len(errors) == 1  # the INFO (FetchSessionHandler) and WARN (ReplicaFetcherThread) lines of one failure
    (e,) = errors
    assert (e.fetcher_broker_id, e.leader_broker_id, e.cause) == (2, 1, "disconnected")
    assert e.at == dt.datetime(2026, 11, 22, 14, 21, 9, 593000, tzinfo=UTC)
    assert {x.cause for x in fetch_errors(KAFKA23)} == {"disconnected", "client_shutdown"}
    assert KAFKA23.splitlines()[e.line_no - 1].startswith("[2026-11-22 14:21:09,593] INFO [ReplicaFetcher replicaId=2, leaderId=1")
    assert "Connection to 1 was disconnected before the response was read" in e.excerpt


def test_the_window_is_respected_in_utc_with_the_hosts_offset():
    assert unreachable(KAFKA23, since=dt.datetime(2026, 11, 22, 14, 21, 10)) == []
    assert unreachable(KAFKA23, until=dt.datetime(2026, 11, 22, 14, 21, 9)) == []
    assert len(unreachable(KAFKA23, since=dt.datetime(2026, 11, 22, 14, 21, 9), until=dt.datetime(2026, 11, 22, 14, 21, 10))) == 1
    # a host on UTC+2 logged 14:21:09 local = 12:21:09 UTC
    (e,) = unreachable(KAFKA23, utc_offset=dt.timedelta(hours=2))
    assert e.at == dt.datetime(2026, 11, 22, 12, 21, 9, 593000, tzinfo=UTC)


def test_seed001_010_wording_names_the_leader_from_the_thread_name():
    (e,) = unreachable(SEED001_217, broker_id=217)
    assert (e.fetcher_broker_id, e.leader_broker_id, e.cause) == (217, 219, "disconnected")


def test_empty_and_binary_input():
    assert fetch_errors("") == [] and fetch_errors(b"\xff\xfe garbage") == []
