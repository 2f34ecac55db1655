"""What each Kafka version can do, in one place, and which version a cluster really runs.

Every version branch of the product asks this module (``KafkaVersion.has(feature)``), never a version string of its
own: the table ``FEATURES`` names what changed, in which release, and the KIP or JIRA that changed it, and says what
the product does on a broker without it. Pure: no I/O (the probes that observe a version are
``hooks/kafka_wire.api_versions`` and the log and ZooKeeper readers; they hand their observations here).

The version is read from the cluster, never trusted from the ``kafka_version`` setting:

* the broker's own log line ``Kafka version : 0.10.2.1`` (``AppInfoParser``, at start; 0.10 logs it to
  kafkaServer.out only, 2.x to server.log too) -- exact;
* its ``ApiVersions`` answer (KIP-35, 0.10.0+): the API keys and versions it speaks bound the release from below and
  above (``from_api_versions``) -- asked only of a broker known to be 0.10.0 or newer (``asking``, below);
* its registration znode's ``version`` field -- a floor only (an upgraded broker writes the old schema while its
  inter.broker.protocol.version is old).

What a broker may be asked is decided BEFORE anything is sent to it (``asking``; seed 002): a 0.9 broker does not know
ApiVersions (API key 18). Its network thread's ``ApiKeys.forId(18)`` throws ``ArrayIndexOutOfBoundsException: 18``
("Processor got uncaught exception", 0.9.0.1's ``SocketServer``), which ends that thread's pass over every request it
selected in the same poll: those requests -- other clients', and replication and controller requests between brokers --
are dropped unanswered; the connection that sent key 18 is not closed and gets no answer either. A broker that may be
older than 0.10.0 is therefore never sent ApiVersions or any key 0.9 does not know, by the product's own wire code
(``hooks/kafka_wire.py``: Metadata v0 alone) or by librdkafka (``client_settings``: ``api.version.request=false`` and
the matching ``broker.version.fallback``).

What is unknown takes the conservative branch (for what may be sent, the branch that is safe for 0.9): ``has()`` is True only when every observed broker is known to be at
or above the release that brought the feature. The branch a broker without the feature gets works on every version
(Metadata instead of DescribeConfigs, the ``/admin/preferred_replica_election`` znode instead of ElectLeaders,
JmxTool read until its first row, ``kafka.tools.DumpLogSegments``, acks=all without idempotence); the one place
where "old" is the *stricter* reading -- unclean leader election on by default before 0.11 -- is also the one a
version we cannot place gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping

Version = tuple  # (0, 10, 2, 1)

_VERSION_RE = re.compile(r"^\s*v?(\d{1,3})\.(\d{1,3})(?:\.(\d{1,4}))?(?:\.(\d{1,4}))?")


def parse(text: str | None) -> Version | None:
    """"0.10.2.1" -> (0, 10, 2, 1); "2.3.0" -> (2, 3, 0); "2.3.0-cp1" -> (2, 3, 0); None when it is not a version."""
    m = _VERSION_RE.match(str(text or ""))
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def text(v: Version | None) -> str:
    return "unknown" if v is None else ".".join(str(x) for x in v)


@dataclass(frozen=True)
class Feature:
    name: str
    since: Version  # the first release with it
    what: str
    ref: str  # the KIP or JIRA that brought it
    without: str  # what the product does on a broker without it (and on one whose version is unknown)


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("api_versions", (0, 10, 0), "the ApiVersions request (API key 18)", "KIP-35",
            "a broker that may be older than it (versions.asking: unknown, or registration schema < 3 without a log line "
            ">= 0.10.0) is never asked it: its version comes from its log line and registration or stays unknown (a 0.9 "
            "broker sent API key 18 drops every request of that network thread's batch, seed 002)"),
    Feature("describe_configs", (0, 11, 0), "DescribeConfigs (API key 32)", "KIP-133",
            "the direct check of a broker is ApiVersions + Metadata on a connection to that broker alone (Metadata v0 "
            "alone where the broker may be older than 0.10.0: versions.asking)"),
    Feature("idempotent_producer", (0, 11, 0), "the idempotent producer (InitProducerId, API key 22)", "KIP-98",
            "the canary produces with acks=all and counts the duplicates of its own retries itself"),
    Feature("unclean_off_by_default", (0, 11, 0), "unclean.leader.election.enable=false by default", "KIP-106",
            "an unset unclean.leader.election.enable is on: plans say what an unclean election would lose and refuse "
            "the stops that could cause one"),
    Feature("dump_log_script", (2, 0, 0), "bin/kafka-dump-log.sh", "KAFKA-6615",
            "kafka-run-class.sh kafka.tools.DumpLogSegments (the class the script runs, present in every version)"),
    Feature("jmxtool_one_time", (2, 0, 0), "JmxTool --one-time and --report-format", "KAFKA-6611",
            "JmxTool runs without them (0.10's JmxTool exits on an unknown option): read until its first row, then stopped"),
    Feature("metadata_leader_epoch", (2, 1, 0), "the leader epoch in Metadata responses (v7)", "KIP-320",
            "per-broker metadata views compare leaders only"),
    Feature("elect_leaders_api", (2, 2, 0), "ElectPreferredLeaders (API key 43)", "KIP-183",
            "the preferred election writes /admin/preferred_replica_election (every ZooKeeper-mode Kafka reads it)"),
    Feature("control_plane", (2, 2, 0), "the controller's requests apart from clients' (control.plane.listener.name)",
            "KIP-291", "the controller's requests wait in the same request queue as clients' requests"),
)}

# ApiVersions markers: the release that added an API key (or a version of one), oldest first. A broker that speaks the
# marker is at least that release; one that does not is older than it. (Source: ApiKeys.java at each release tag.)
API_MARKERS: tuple[tuple[Version, int, int, str], ...] = (
    # (release, api key, its minimum max-version, what)
    ((0, 10, 0), 18, 0, "ApiVersions (KIP-35)"),
    ((0, 10, 1), 19, 0, "CreateTopics (KIP-4)"),
    ((0, 10, 2), 9, 2, "OffsetFetch v2 (KIP-88)"),
    ((0, 11, 0), 32, 0, "DescribeConfigs (KIP-133)"),
    ((1, 0, 0), 37, 0, "CreatePartitions (KIP-195)"),
    ((1, 1, 0), 41, 0, "DescribeDelegationToken (KIP-48)"),
    ((2, 0, 0), 42, 0, "DeleteGroups (KIP-229)"),
    ((2, 1, 0), 3, 7, "Metadata v7 (KIP-320)"),
    ((2, 2, 0), 43, 0, "ElectPreferredLeaders (KIP-183)"),
    ((2, 3, 0), 44, 0, "IncrementalAlterConfigs (KIP-339)"),
    ((2, 4, 0), 45, 0, "AlterPartitionReassignments (KIP-455)"),
)

# registration znode "version" -> the oldest broker that writes it (ZkUtils.registerBrokerInZk / BrokerInfo; read at the
# 0.9.0.1, 0.10.0.0, 0.10.1.0 and 0.10.2.1 tags: 2; 3 or 2; 3 or 2; 4 or 2 -- 2 while inter.broker.protocol.version is
# older than 0.10.0). No recorded pre-2.3 registration znode is kept (docs/VERSIONS.md).
ZNODE_FLOOR: dict[int, Version] = {1: (0, 8, 0), 2: (0, 9, 0), 3: (0, 10, 0), 4: (0, 10, 2), 5: (2, 7, 0)}


@dataclass(frozen=True)
class Observation:
    """What one source says about one broker's version: ``low`` <= version < ``high`` (None: unbounded)."""

    broker_id: int | None
    source: str  # "log", "api_versions", "znode", "setting"
    low: Version | None
    high: Version | None = None
    detail: str = ""

    @property
    def exact(self) -> bool:
        return self.source == "log" and self.low is not None

    def describe(self) -> str:
        who = f"broker {self.broker_id}" if self.broker_id is not None else "the cluster"
        if self.exact:
            rng = text(self.low)
        elif self.high is None:
            rng = f">= {text(self.low)}"
        else:
            rng = f">= {text(self.low)}, < {text(self.high)}"
        return f"{who} {self.source}: {rng}" + (f" ({self.detail})" if self.detail else "")


def from_log_line(broker_id: int | None, version_text: str, detail: str = "") -> Observation | None:
    v = parse(version_text)
    return Observation(broker_id, "log", v, None, detail or f"Kafka version : {version_text}") if v else None


# AppInfoParser at the broker's start: "INFO Kafka version : 0.10.2.1 (org.apache.kafka.common.utils.AppInfoParser)"
# (0.9 - 2.0, the space before the colon), "INFO Kafka version: 2.3.0 (org.apache.kafka.common.utils.AppInfoParser)"
_LOGGED_RE = re.compile(r"^(?:\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)[^\]\n]*\])?[^\n]*?\bKafka version ?: ?([0-9][A-Za-z0-9._-]{0,39})"
                        r"\s+\(org\.apache\.kafka\.common\.utils\.AppInfoParser\)", re.MULTILINE)
# what a host's grep looks for (an ERE: the same line, in any of the broker's logs)
LOGGED_GREP = r"Kafka version ?: ?[0-9][A-Za-z0-9._-]* \(org\.apache\.kafka\.common\.utils\.AppInfoParser\)"


def logged_lines(log_text: str) -> list[tuple[str | None, str]]:
    """Every ``Kafka version : N`` line AppInfoParser wrote into ``log_text``, oldest first: (its timestamp as logged,
    local time "2026-11-24 21:08:35"; None when the line has none), N). A broker JVM writes it once, at its start."""
    return [(ts.replace("T", " ") or None, v) for ts, v in _LOGGED_RE.findall(log_text or "") if parse(v)]


def logged_version(log_text: str) -> str | None:
    """The version of the newest such line (in a log appended across restarts: the newest JVM's), None without one."""
    found = logged_lines(log_text)
    return found[-1][1] if found else None


def from_znode(broker_id: int, registration_version: int | None) -> Observation | None:
    if registration_version is None:
        return None
    floor = ZNODE_FLOOR.get(int(registration_version))
    if floor is None:
        floor = max(ZNODE_FLOOR.values()) if int(registration_version) > max(ZNODE_FLOOR) else None
    return Observation(broker_id, "znode", floor, None, f"registration version {registration_version}") if floor else None


def from_api_versions(broker_id: int | None, ranges: Mapping[int, tuple[int, int]]) -> Observation:
    """The release range an ApiVersions answer ({api key: (min, max)}) allows."""
    low: Version = (0, 10, 0)
    high: Version | None = None
    said = []
    for release, key, min_max, what in API_MARKERS:
        has = key in ranges and ranges[key][1] >= min_max
        if has and high is None:
            low = release
            said.append(what)
        elif not has and high is None:
            high = release
            said.append(f"no {what}")
    return Observation(broker_id, "api_versions", low, high, "; ".join(said[-2:]))


def from_setting(version_text: str | None) -> Observation | None:
    v = parse(version_text)
    return Observation(None, "setting", v, None, f"kafka_version {version_text!r}") if v else None


def _cmp_prefix(a: Version, b: Version) -> int:
    """Compares as releases: (0, 10, 2, 1) is within (0, 10, 2); missing parts are 0."""
    n = max(len(a), len(b))
    a2, b2 = tuple(a) + (0,) * (n - len(a)), tuple(b) + (0,) * (n - len(b))
    return (a2 > b2) - (a2 < b2)


@dataclass(frozen=True)
class BrokerVersion:
    """Everything observed about one broker, narrowed to one range."""

    broker_id: int | None
    low: Version | None
    high: Version | None
    exact: Version | None
    observations: tuple[Observation, ...] = ()
    conflicts: tuple[str, ...] = ()


def narrow(broker_id: int | None, observations: Iterable[Observation]) -> BrokerVersion:
    obs = [o for o in observations if o is not None and o.source != "setting"]
    exact = next((o.low for o in obs if o.exact), None)
    low: Version | None = None
    high: Version | None = None
    for o in obs:
        if o.low is not None and (low is None or _cmp_prefix(o.low, low) > 0):
            low = o.low
        if o.high is not None and (high is None or _cmp_prefix(o.high, high) < 0):
            high = o.high
    conflicts = []
    if exact is not None:
        for o in obs:
            if (o.low is not None and _cmp_prefix(exact, o.low) < 0) or (o.high is not None and _cmp_prefix(exact, o.high) >= 0):
                conflicts.append(f"its log says {text(exact)} but {o.describe()}")
        low = exact
        high = None
    return BrokerVersion(broker_id, low, high, exact, tuple(obs), tuple(conflicts))


@dataclass(frozen=True)
class KafkaVersion:
    """The cluster's version as observed: every broker's range. ``has(feature)`` is True only when every broker is
    known to have it (a rolling upgrade is as old as its oldest broker)."""

    brokers: tuple[BrokerVersion, ...] = ()
    configured: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def known(self) -> bool:
        return bool(self.brokers) and all(b.low is not None for b in self.brokers)

    @property
    def low(self) -> Version | None:
        """The oldest release any broker may be (None: unknown)."""
        if not self.known:
            return None
        return min((b.low for b in self.brokers), key=lambda v: tuple(v) + (0,) * (4 - len(v)))

    @property
    def exact(self) -> str | None:
        """One release every broker logged, else None."""
        found = {b.exact for b in self.brokers}
        return text(found.pop()) if len(found) == 1 and None not in found else None

    def has(self, feature: str) -> bool:
        f = FEATURES[feature]
        low = self.low
        return low is not None and _cmp_prefix(low, f.since) >= 0

    def lacks(self, feature: str) -> bool:
        """True when some broker is known to be older than the release that brought ``feature``."""
        f = FEATURES[feature]
        return any(b.high is not None and _cmp_prefix(b.high, f.since) <= 0 or
                   b.exact is not None and _cmp_prefix(b.exact, f.since) < 0 for b in self.brokers)

    def describe(self) -> str:
        if not self.brokers:
            return "unknown (nothing observed)"
        if self.exact:
            return self.exact
        def rng(b: BrokerVersion) -> str:
            return "unknown" if b.low is None else (text(b.exact) if b.exact else
                                                    f">= {text(b.low)}" + (f", < {text(b.high)}" if b.high else ""))
        ranges = {rng(b) for b in self.brokers}
        if len(ranges) == 1:
            only = ranges.pop()
            return only if len(self.brokers) == 1 else f"{only} (every broker)"
        return "; ".join(f"broker {b.broker_id}: {rng(b)}" for b in self.brokers)

    def branch(self, feature: str) -> str:
        """One line for plans, findings and audit entries: which branch runs and why."""
        f = FEATURES[feature]
        if self.has(feature):
            return f"Kafka {self.describe()} has {f.what} (since {text(f.since)}, {f.ref})"
        why = "older than" if self.lacks(feature) else "not known to be at least"
        return f"Kafka {self.describe()} is {why} {text(f.since)} ({f.what}, {f.ref}): {f.without}"

    def mismatch(self) -> str | None:
        """Why the configured ``kafka_version`` disagrees with what the brokers say (None when it fits or nothing
        was observed)."""
        want = parse(self.configured)
        if want is None or not self.brokers:
            return None
        bad: dict[str, list] = {}
        for b in self.brokers:
            if b.exact is not None:
                if _cmp_prefix(b.exact, want) != 0 and not _within(want, b.exact):
                    bad.setdefault(f"run{{s}} {text(b.exact)}", []).append(b.broker_id)
            elif b.low is not None and (_cmp_prefix(want, b.low) < 0 and not _within(want, b.low)
                                        or b.high is not None and _cmp_prefix(want, b.high) >= 0):
                rng = f">= {text(b.low)}" + (f", < {text(b.high)}" if b.high else "")
                bad.setdefault(f"{{is}} {rng} (ApiVersions)", []).append(b.broker_id)
        if not bad:
            return None
        parts = []
        for what, ids in bad.items():
            many = len(ids) > 1
            who = f"brokers {', '.join(str(i) for i in ids)}" if many else f"broker {ids[0]}"
            parts.append(f"{who} " + what.format(s="" if many else "s", **{"is": "are" if many else "is"}))
        return f"kafka_version is {self.configured!r} but " + "; ".join(parts)


def _within(prefix: Version, v: Version) -> bool:
    """(0, 10) is a prefix of (0, 10, 2, 1): a setting of "0.10" fits a 0.10.2.1 broker."""
    return len(prefix) < len(v) and tuple(v[:len(prefix)]) == tuple(prefix)


def _v(x) -> Version | None:
    return None if x is None else tuple(int(i) for i in x)


def _obs_to_dict(o: Observation) -> dict:
    return {"broker_id": o.broker_id, "source": o.source, "low": list(o.low) if o.low else None,
            "high": list(o.high) if o.high else None, "detail": o.detail}


def to_dict(kv: KafkaVersion) -> dict:
    """JSON for snapshots, incidents and audit entries (``from_dict`` reads it back)."""
    return {"describe": kv.describe(), "configured": kv.configured, "notes": list(kv.notes),
            "brokers": [{"broker_id": b.broker_id, "observations": [_obs_to_dict(o) for o in b.observations]}
                        for b in kv.brokers]}


def from_dict(d: Mapping | None) -> KafkaVersion:
    if not d:
        return UNKNOWN
    per = {}
    for b in d.get("brokers") or ():
        per[b.get("broker_id")] = [Observation(o.get("broker_id"), str(o.get("source")), _v(o.get("low")), _v(o.get("high")),
                                               str(o.get("detail") or "")) for o in b.get("observations") or ()]
    kv = cluster_version(per, d.get("configured"))
    return KafkaVersion(kv.brokers, kv.configured, tuple(d.get("notes") or ()) or kv.notes)


def assumed(configured: str | None) -> KafkaVersion:
    """What the ``kafka_version`` setting says, for callers that have nothing observed (pure uses, tests): as if every
    broker had logged it. The product's paths observe the cluster instead (``KafkaHook.kafka_version``)."""
    o = from_log_line(None, configured or "", f"kafka_version setting {configured!r}") if configured else None
    return cluster_version({None: [o]} if o else {}, configured)


def cluster_version(per_broker: Mapping[int, Iterable[Observation]], configured: str | None = None) -> KafkaVersion:
    brokers = tuple(narrow(b, obs) for b, obs in sorted(per_broker.items()))
    notes = tuple(f"broker {b.broker_id}: {c}" for b in brokers for c in b.conflicts)
    return KafkaVersion(brokers, configured, notes)


UNKNOWN = KafkaVersion()


def render_markdown() -> str:
    """The capability table for docs (README links it)."""
    rows = ["| feature | since | change | what the product does without it |", "|---|---|---|---|"]
    for f in FEATURES.values():
        rows.append(f"| {f.what} | {text(f.since)} | {f.ref} | {f.without} |")
    return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- what a broker may be asked (seed 002)

# the API keys 0.9.0.1 knows (ApiKeys.java at the 0.9.0.1 tag: PRODUCE(0) .. LIST_GROUPS(16)); forId of any other key
# throws ArrayIndexOutOfBoundsException in the network thread (its codeToType array has 17 entries)
KEYS_0_9 = frozenset(range(17))
# librdkafka's broker.version.fallback when nothing places a broker lower: 0.9.0 (seed 002 ran 0.9.0.1; librdkafka
# matches the value by prefix and documents "0.9.0, 0.8.2, 0.8.1, 0.8.0" as the values below 0.10; it warns that both
# properties are deprecated -- librdkafka 3.x will drop brokers older than 0.10.0 altogether)
FALLBACK: Version = (0, 9, 0)
# every librdkafka client of a cluster that may hold a broker older than 0.10.0
LEGACY_CLIENT: dict = {"api.version.request": False, "broker.version.fallback": text(FALLBACK)}


@dataclass(frozen=True)
class Asking:
    """What the product may send one broker, decided before anything is sent to it.

    ``api_versions`` True: the broker is known to be 0.10.0 or newer (KIP-35), so ApiVersions may be asked and the
    versions of other requests negotiated from its answer. False (unknown included, the branch that is safe for 0.9):
    only requests every version since 0.9.0 knows, at version 0 -- the product's own wire code sends Metadata v0 alone,
    librdkafka clients get ``api.version.request=false`` and ``broker.version.fallback`` = ``text(oldest)``."""

    broker_id: int | None
    api_versions: bool
    why: str
    oldest: Version = FALLBACK  # the oldest release it may be, when not api_versions

    @property
    def fallback(self) -> str:
        return text(self.oldest)


def asking(broker_id: int | None, schema_version: int | None, logged: str | None = None,
           configured: str | None = None) -> Asking:
    """From the three things known before a broker is asked anything: its registration's schema ``version`` (0.9.0
    writes 2; 0.10.0/0.10.1 write 3 and 0.10.2+ 4 unless inter.broker.protocol.version is older than 0.10.0, then 2:
    ZkUtils.registerBrokerInZk at each tag), the ``Kafka version : N`` line its running JVM logged (``logged``), and the
    cluster's ``kafka_version`` setting (``configured``).

    A setting or a log line older than 0.10.0 forbids ApiVersions (the setting is the operator's word: on a doubt the
    0.9-safe branch). Only the broker itself allows it: its log line at 0.10.0 or newer, or a registration schema of 3+,
    which no 0.9 broker writes. A setting of 0.10+ alone allows nothing (in a rolling upgrade from 0.9 the setting may
    already name the new release while a broker still runs 0.9; those brokers all write schema 2). No registration read
    (an unregistered broker's last known endpoint) and schema 1/2: not known, the 0.9-safe branch."""
    since = FEATURES["api_versions"].since
    lows = []
    said = parse(configured)
    if said is not None and _cmp_prefix(said, since) < 0:
        lows.append((said, f"the kafka_version setting says {configured}"))
    own = parse(logged)
    if own is not None and _cmp_prefix(own, since) < 0:
        lows.append((own, f"its log says Kafka version : {logged}"))
    if lows:
        oldest = min((v for v, _ in lows), key=lambda v: tuple(v) + (0,) * (4 - len(v)))
        return Asking(broker_id, False, "; ".join(w for _, w in lows) + f" (older than {text(since)}: no ApiVersions)", oldest)
    if own is not None:
        return Asking(broker_id, True, f"its log says Kafka version : {logged}")
    floor = ZNODE_FLOOR.get(int(schema_version)) if isinstance(schema_version, int) else None
    if floor is None and isinstance(schema_version, int) and schema_version > max(ZNODE_FLOOR):
        floor = ZNODE_FLOOR[max(ZNODE_FLOOR)]
    if floor is not None and _cmp_prefix(floor, since) >= 0:
        return Asking(broker_id, True, f"its registration's schema version {schema_version} is written by {text(floor)} or newer only")
    if floor is None:
        return Asking(broker_id, False, "no registration schema and no log line read: its version is unknown, asked as 0.9 "
                      f"(no ApiVersions)")
    why = (f"its registration's schema version {schema_version} is written by {text(floor)} and by newer brokers whose "
           f"inter.broker.protocol.version is older than {text(since)}: it may be older than {text(since)} (no ApiVersions)")
    return Asking(broker_id, False, why, min(floor, FALLBACK))


def client_settings(askings: Iterable[Asking]) -> dict:
    """The librdkafka properties of every client for brokers ``askings`` (all a client may reach: its bootstrap brokers
    and the registered ones its Metadata answers name): ApiVersions only when every one of them may be asked it; else
    ``api.version.request=false`` with ``broker.version.fallback`` = the oldest release any of them may be. Nothing
    known (no brokers): as for 0.9."""
    askings = list(askings)
    old = [a for a in askings if not a.api_versions]
    if askings and not old:
        return {"api.version.request": True}
    oldest = min((a.oldest for a in old), key=lambda v: tuple(v) + (0,) * (4 - len(v)), default=FALLBACK)
    return {"api.version.request": False, "broker.version.fallback": text(oldest)}
