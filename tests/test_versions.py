"""kafka_runbooks/versions.py, pure: placing a broker from what it reports, the conservative reading of the unknown,
and the mismatch with the setting. (The 2.x branches run against real brokers in tests/lab/test_versions_23.py; the 0.10 branches on what was recorded
from the real 0.10.2.1 lab before its withdrawal, tests/analyze/fixtures/real0102/ -- docs/VERSIONS.md.)"""

from __future__ import annotations

import json
from pathlib import Path

from kafka_runbooks import versions as V
from kafka_runbooks.detect.version_check import mismatch_findings

REAL0102 = Path(__file__).parent / "analyze" / "fixtures" / "real0102"


def api(keys: dict[int, int]) -> dict[int, tuple[int, int]]:
    return {k: (0, v) for k, v in keys.items()}


def test_parse_and_text():
    assert V.parse("0.10.2.1") == (0, 10, 2, 1) and V.parse("2.3.0-cp1") == (2, 3, 0) and V.parse("v2.8") == (2, 8)
    assert V.parse("") is None and V.parse("latest") is None and V.text(None) == "unknown"


def test_api_versions_place_a_broker_between_two_markers():
    real = {int(k): tuple(v) for k, v in json.loads((REAL0102 / "api_versions.json").read_text()).items()}
    o = V.from_api_versions(1, real)
    assert (o.low, o.high) == ((0, 10, 2), (0, 11, 0)) and "OffsetFetch v2 (KIP-88)" in o.detail
    # 0.10.1: CreateTopics but OffsetFetch only v1
    o = V.from_api_versions(1, {**real, 9: (0, 1)})
    assert (o.low, o.high) == ((0, 10, 1), (0, 10, 2))
    # 2.3: every key up to 44, Metadata v7
    o = V.from_api_versions(1, {**{k: (0, 1) for k in range(45)}, 3: (0, 7), 9: (0, 6)})
    assert (o.low, o.high) == ((2, 3, 0), (2, 4, 0))
    # newer than the table: a floor only
    o = V.from_api_versions(1, {**{k: (0, 1) for k in range(60)}, 3: (0, 9), 9: (0, 8)})
    assert (o.low, o.high) == ((2, 4, 0), None)


def test_has_and_lacks_read_the_oldest_broker_and_unknown_is_conservative():
    old = V.Observation(1, "api_versions", (0, 10, 2), (0, 11, 0))
    new = V.Observation(2, "api_versions", (2, 3, 0), (2, 4, 0))
    mixed = V.cluster_version({1: [old], 2: [new]})  # a rolling upgrade is as old as its oldest broker
    assert not mixed.has("describe_configs") and mixed.lacks("describe_configs")
    assert V.cluster_version({2: [new]}).has("elect_leaders_api")
    for unknown in (V.UNKNOWN, V.cluster_version({1: []}), V.assumed(None)):
        assert not unknown.known and not any(unknown.has(f) for f in V.FEATURES) and not any(unknown.lacks(f) for f in V.FEATURES)
    # a znode schema version is a floor: 4 says >= 0.10.2, which decides nothing newer
    floor = V.cluster_version({3: [V.from_znode(3, 4)]})
    assert floor.known and floor.has("api_versions") and not floor.has("describe_configs") and not floor.lacks("describe_configs")
    assert "not known to be at least 0.11.0" in floor.branch("describe_configs")
    assert "is older than 0.11.0" in mixed.branch("describe_configs") and "KIP-133" in mixed.branch("describe_configs")


def test_the_log_line_is_exact_and_a_conflict_is_noted():
    kv = V.cluster_version({1: [V.from_log_line(1, "0.10.2.1"), V.from_api_versions(1, api({18: 0, 19: 0, 9: 2}))]})
    assert kv.exact == "0.10.2.1" and kv.describe() == "0.10.2.1" and kv.notes == ()
    bad = V.cluster_version({1: [V.from_log_line(1, "2.3.0"), V.Observation(1, "api_versions", (0, 10, 2), (0, 11, 0))]})
    assert bad.notes and "its log says 2.3.0" in bad.notes[0]


def test_mismatch_with_the_setting():
    kv = V.cluster_version({b: [V.Observation(b, "api_versions", (0, 10, 2), (0, 11, 0))] for b in (1, 2, 3)}, "2.3.0")
    assert kv.mismatch() == "kafka_version is '2.3.0' but brokers 1, 2, 3 are >= 0.10.2, < 0.11.0 (ApiVersions)"
    for fits in ("0.10.2.1", "0.10.2", "0.10"):
        assert V.KafkaVersion(kv.brokers, fits).mismatch() is None
    assert V.KafkaVersion(kv.brokers, "0.10.1.0").mismatch() is not None
    assert V.KafkaVersion(kv.brokers, None).mismatch() is None and V.KafkaVersion((), "2.3.0").mismatch() is None
    exact = V.cluster_version({1: [V.from_log_line(1, "0.10.2.1")]}, "0.10.1.1")
    assert exact.mismatch() == "kafka_version is '0.10.1.1' but broker 1 runs 0.10.2.1"
    (f,) = mismatch_findings(kv, "2.3.0")
    assert f.kind == "kafka_version_mismatch" and f.broker_ids == (1, 2, 3) and f.details["observed"]["describe"] == kv.describe()


def test_json_round_trip_keeps_every_observation():
    kv = V.cluster_version({1: [V.from_log_line(1, "0.10.2.1")], 2: [V.from_znode(2, 4), V.Observation(2, "api_versions", (0, 10, 2), (0, 11, 0))]},
                           "0.10.2.1")
    back = V.from_dict(json.loads(json.dumps(V.to_dict(kv))))
    assert back.describe() == kv.describe() and back.configured == "0.10.2.1"
    assert [(b.broker_id, b.low, b.high, b.exact) for b in back.brokers] == [(b.broker_id, b.low, b.high, b.exact) for b in kv.brokers]
    assert V.from_dict(None) is V.UNKNOWN


def test_every_feature_names_its_change_and_what_is_done_without_it():
    for f in V.FEATURES.values():
        assert f.ref and f.without and f.since >= (0, 10, 0)
    assert "| DescribeConfigs (API key 32) | 0.11.0 | KIP-133 |" in V.render_markdown()


SEED002 = Path(__file__).parent / "detect" / "fixtures" / "seed002_processor.log"
OUT_0102 = REAL0102 / "broker1.kafkaServer.out.start"


def test_what_a_broker_may_be_asked_is_decided_before_asking_it():
    """Seed 002 (its own log, verbatim): API key 18 is out of 0.9's ApiKeys. Only the broker itself allows ApiVersions:
    a registration schema no 0.9 broker writes (3 by 0.10.0/0.10.1, 4 by 0.10.2+ -- 2.3.0 and the recorded 0.10.2.1
    lab wrote 4), or its own log line at 0.10.0+ (the recorded 0.10.2.1 kafkaServer.out); anything else, unknown
    included, gets the branch that is safe for 0.9."""
    import re

    key = int(re.search(r"ArrayIndexOutOfBoundsException: (\d+)", SEED002.read_text()).group(1))
    assert key == 18 and key not in V.KEYS_0_9 and V.KEYS_0_9 == frozenset(range(17))
    for schema in (3, 4, 5, 6):
        assert V.asking(1, schema).api_versions, schema
    for schema in (None, 1, 2):
        a = V.asking(1, schema)
        assert not a.api_versions and "no ApiVersions" in a.why and a.fallback in ("0.9.0", "0.8.0"), a
    assert "inter.broker.protocol.version" in V.asking(1, 2).why
    # the JVM's own recorded line allows it where the schema (2: a 0.10.2.1 broker with an old protocol version) does not
    logged = V.logged_version(OUT_0102.read_text())
    assert logged == "0.10.2.1" and V.asking(1, 2, logged).api_versions
    assert not V.asking(1, 4, "0.9.0.1").api_versions and V.asking(1, 4, "0.9.0.1").fallback == "0.9.0.1"
    # the setting can only forbid: 0.9 forbids even on schema 4; 0.10+ alone allows nothing (a rolling upgrade from 0.9)
    assert not V.asking(1, 4, None, "0.9.0.1").api_versions and "kafka_version setting" in V.asking(1, 4, None, "0.9.0.1").why
    assert not V.asking(1, 2, None, "0.10.2.1").api_versions and V.asking(1, 4, None, "0.10.2.1").api_versions


def test_every_librdkafka_client_of_a_cluster_that_may_hold_a_0_9_broker_sends_no_api_versions():
    assert V.client_settings([V.asking(1, 4), V.asking(2, 4)]) == {"api.version.request": True}
    assert V.client_settings([V.asking(1, 4), V.asking(2, 2)]) == {"api.version.request": False, "broker.version.fallback": "0.9.0"}
    assert V.client_settings([V.asking(1, 1), V.asking(2, 2)])["broker.version.fallback"] == "0.8.0"
    assert V.client_settings([]) == V.LEGACY_CLIENT == {"api.version.request": False, "broker.version.fallback": "0.9.0"}
    assert "closes the connection" not in V.FEATURES["api_versions"].without and "seed 002" in V.FEATURES["api_versions"].without


def test_the_hook_decides_per_broker_and_for_every_client_it_creates():
    from kafka_runbooks.hooks.kafka import KafkaHook, client_config
    from kafka_runbooks.model import Broker

    new = Broker(1, "h1", 9092, schema_version=4)
    old = Broker(2, "h2", 9092, schema_version=2)
    hook = KafkaHook(listener=None)
    assert hook.asking(new).api_versions and not hook.asking(old).api_versions
    assert hook.librdkafka_settings([new]) == {"api.version.request": True}
    # where ApiVersions may be sent the property is left at librdkafka's default (setting it makes librdkafka warn)
    ok = client_config(hook.librdkafka_base([new]), "h1:9092", 1.0)
    assert "api.version.request" not in ok and "broker.version.fallback" not in ok and not any(k.startswith("kafka_runbooks") for k in ok)
    hook.knows([new, old])  # a client bootstrapped at the new broker may still reach the old one
    assert hook.librdkafka_base([new])["api.version.request"] is False
    assert KafkaHook(logged={2: "0.10.2.1"}).librdkafka_settings([new, old]) == {"api.version.request": True}
    # a base that decided nothing is set up as for 0.9; a decided one is kept
    assert client_config({}, "h1:9092", 1.0)["api.version.request"] is False
    assert client_config({"api.version.request": True}, "h1:9092", 1.0)["api.version.request"] is True


def test_docs_versions_names_only_recordings_and_tests_that_exist():
    import re

    root = Path(__file__).parents[1]
    doc = (root / "docs" / "VERSIONS.md").read_text()
    named = set(re.findall(r"`((?:real0102/|tests/)[^`\s]+)`", doc))
    assert len(named) > 10
    missing = [n for n in named if "*" not in n and not ((root / "tests/analyze/fixtures" / n) if n.startswith("real0102/") else (root / n)).exists()]
    assert missing == []
    for f in V.FEATURES:  # every branch of the capability table has its row
        assert f"`{f}`" in doc, f
