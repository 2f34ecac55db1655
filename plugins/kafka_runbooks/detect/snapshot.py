"""Read a ZooKeeper-mode Kafka cluster's metadata into a :class:`ClusterSnapshot`.

The layout is Kafka's own (the client is already chrooted, e.g. ``127.0.0.1:21811/kafka``)::

    /brokers/ids/<id>                          {"host":..,"port":..,"endpoints":[..],"rack":..}
    /controller                                {"version":1,"brokerid":1,"timestamp":".."}
    /brokers/topics/<T>                        {"version":1,"partitions":{"0":[1,2,3]}}
    /brokers/topics/<T>/partitions/<P>/state   {"leader":1,"leader_epoch":0,"isr":[1,2,3],..}
    /config/topics/<T>                         {"version":1,"config":{"min.insync.replicas":"2"}}
    /config/brokers/<id> and /<default>        {"version":1,"config":{"auto.leader.rebalance.enable":"false"}}
    /controller_epoch                          "7"
    /admin/reassign_partitions                 {"version":1,"partitions":[{"topic":"t","partition":0,..}]}
    /admin/preferred_replica_election          {"version":1,"partitions":[{"topic":"t","partition":0}]}

Everything read from ZooKeeper is untrusted: a znode that cannot be understood (invalid UTF-8 or
JSON, wrong types, out-of-range numbers, oversized values, non-numeric ids, topic names Kafka
would never create) becomes one line in ``snapshot.unparsable`` -- ``"<znode path>: <why>"`` --
and reading carries on.  Nothing is dropped silently and nothing raises, except a lost
connection that kazoo's own retry could not cure.

The parsing half (``parse_*``) is pure; only :func:`read_snapshot` talks to ZooKeeper.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import re
from typing import Any, Iterable, Mapping
from urllib.parse import urlsplit

from kafka_runbooks import clock
from kafka_runbooks.model import Broker, ClusterSnapshot, Partition

MAX_ZNODE_BYTES = 512 * 1024  # a topic with 10k partitions x RF 3 is ~200 KB; anything bigger is hostile
MAX_BROKER_ID = 2**31 - 1  # Kafka broker ids are Java ints
MAX_PARTITIONS_PER_TOPIC = 1_000_000
MAX_REPLICAS = 1000
MAX_ENDPOINT_CHARS = 1024
MAX_SHOWN_CHARS = 200  # how much of a hostile name is quoted back in `unparsable`

# Kafka's own rule (org.apache.kafka.common.internals.Topic.validate): legal chars, <= 249, not "." / ".."
_TOPIC_RE = re.compile(r"[A-Za-z0-9._-]{1,249}")
_DIGITS_RE = re.compile(r"(0|[1-9][0-9]{0,9})")


class Unparsable(ValueError):
    """A znode's content is not what Kafka writes; the message says why."""


# --------------------------------------------------------------------------- pure helpers

def show(name: str) -> str:
    """A name as it may be quoted in a message: legal names as-is, others escaped and bounded."""
    if _TOPIC_RE.fullmatch(name) and name not in (".", ".."):
        return name
    quoted = ascii(name)
    return quoted if len(quoted) <= MAX_SHOWN_CHARS else quoted[:MAX_SHOWN_CHARS] + "...'"


def quote(value: str) -> str:
    """A string value from a znode, quoted and bounded for a message."""
    quoted = ascii(value)
    return quoted if len(quoted) <= MAX_SHOWN_CHARS else quoted[:MAX_SHOWN_CHARS] + "...'"


def valid_topic_name(name: str) -> bool:
    return bool(_TOPIC_RE.fullmatch(name)) and name not in (".", "..")


def parse_id(text: str, what: str = "broker id") -> int:
    """A znode child name that must be a non-negative Java int (broker id, partition index)."""
    if not isinstance(text, str) or not _DIGITS_RE.fullmatch(text) or int(text) > MAX_BROKER_ID:
        raise Unparsable(f"{what} {quote(str(text))} is not a non-negative 32-bit integer")
    return int(text)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-standard JSON constant {name}")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)  # json.loads with keywords builds one per call
# the C scanner that _DECODER.decode ends in; decode's own steps (two whitespace regexes, two Python calls) are ~40%
# of decoding a partition state, and only matter for a document with surrounding whitespace or an error
_SCAN = _DECODER.scan_once


def decode_json(data: bytes | None, *, max_bytes: int = MAX_ZNODE_BYTES) -> Any:
    if data is None or len(data) == 0:
        raise Unparsable("empty znode (no data)")
    if len(data) > max_bytes:
        raise Unparsable(f"{len(data)} bytes exceeds the {max_bytes}-byte limit")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unparsable(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        doc, end = _SCAN(text, 0)
        if end == len(text):  # what decode returns when no whitespace surrounds the document
            return doc
    except (StopIteration, ValueError, RecursionError):
        pass  # decode says why (StopIteration: no JSON value at the start)
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise Unparsable("JSON nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, int-digits limit, NaN/Infinity
        raise Unparsable(f"invalid JSON: {str(exc)[:MAX_SHOWN_CHARS]}") from None


def _obj(doc: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(doc, dict):
        raise Unparsable(f"{what} is a JSON {type(doc).__name__}, expected an object")
    return doc


def _int(value: Any, field: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Unparsable(f"{field!r} is {_type_of(value)}, expected an integer")
    if not lo <= value <= hi:
        raise Unparsable(f"{field!r} = {str(value)[:40]} is outside [{lo}, {hi}]")
    return value


def _type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"a string {quote(value)}"
    return f"a JSON {type(value).__name__}"


def _id_list(value: Any, field: str, *, allow_empty: bool) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise Unparsable(f"{field!r} is {_type_of(value)}, expected a list of broker ids")
    if len(value) > MAX_REPLICAS:
        raise Unparsable(f"{field!r} has {len(value)} entries (limit {MAX_REPLICAS})")
    if not value and not allow_empty:
        raise Unparsable(f"{field!r} is empty")
    if all(type(v) is int and 0 <= v <= MAX_BROKER_ID for v in value):  # the common case, checked at once
        ids = tuple(value)
    else:
        ids = tuple(_int(v, f"{field}[{i}]", 0, MAX_BROKER_ID) for i, v in enumerate(value))
    if len(set(ids)) != len(ids):
        raise Unparsable(f"{field!r} repeats a broker id: {list(ids)}")
    return ids


def _endpoint(ep: Any) -> tuple[str, int]:
    if not isinstance(ep, str) or len(ep) > MAX_ENDPOINT_CHARS:
        raise Unparsable(f"endpoint is {_type_of(ep)[:80]}, expected 'LISTENER://host:port'")
    try:
        parts = urlsplit(ep)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise Unparsable(f"endpoint {show(ep)}: {exc}") from None
    if not parts.scheme or not host or port is None:
        raise Unparsable(f"endpoint {show(ep)} is not 'LISTENER://host:port'")
    return host, port


def parse_broker(broker_id: int, doc: Any) -> Broker:
    """`/brokers/ids/<id>` → Broker. ``host`` may be null (listeners only): taken from the first endpoint."""
    d = _obj(doc, "registration")
    endpoints_raw = d.get("endpoints", [])
    if not isinstance(endpoints_raw, list) or len(endpoints_raw) > 64:
        raise Unparsable(f"'endpoints' is {_type_of(endpoints_raw)}, expected a list of strings")
    endpoints = tuple(endpoints_raw)
    parsed = [_endpoint(ep) for ep in endpoints]  # every endpoint must parse
    host = d.get("host")
    if host is not None and (not isinstance(host, str) or not host or len(host) > 255):
        raise Unparsable(f"'host' is {_type_of(host)[:80]}, expected a host name")
    port = d.get("port", -1)
    port = _int(port, "port", -1, 65535)
    if not host or port <= 0:
        if not parsed:
            raise Unparsable("no host/port and no endpoints")
        ep_host, ep_port = parsed[0]
        host = host or ep_host
        port = port if port > 0 else ep_port
    rack = d.get("rack")
    if rack is not None and (not isinstance(rack, str) or len(rack) > 255):
        raise Unparsable(f"'rack' is {_type_of(rack)[:80]}, expected a string")
    jmx = d.get("jmx_port", -1)
    jmx = _int(jmx, "jmx_port", -1, 65535)
    # "version" in the registration is the znode schema version, not Kafka's: kept as schema_version (a floor of
    # Kafka's, kafka_runbooks.versions.ZNODE_FLOOR), never as Broker.version
    schema = d.get("version")
    schema = schema if isinstance(schema, int) and not isinstance(schema, bool) and 0 < schema < 1000 else None
    return Broker(id=broker_id, host=host, port=port, rack=rack, endpoints=endpoints, jmx_port=jmx if jmx > 0 else None,
                  schema_version=schema)


def registration_facts(stat: Any) -> dict[str, Any]:
    """What the registration znode's stat says about the broker's ZooKeeper session."""
    return {
        "registered_at": clock.iso(clock.from_millis(stat.ctime)),
        "session_id": int(stat.ephemeralOwner),
        "registration_zxid": int(stat.czxid),
    }


def parse_controller(doc: Any) -> int:
    return _int(_obj(doc, "controller").get("brokerid"), "brokerid", 0, MAX_BROKER_ID)


def parse_assignment(doc: Any) -> tuple[dict[int, tuple[int, ...]], list[str]]:
    """`/brokers/topics/<T>` → ({partition: replicas}, [problems with single partitions])."""
    d = _obj(doc, "topic assignment")
    parts = d.get("partitions")
    if not isinstance(parts, dict):
        raise Unparsable(f"'partitions' is {_type_of(parts)}, expected an object")
    if len(parts) > MAX_PARTITIONS_PER_TOPIC:
        raise Unparsable(f"{len(parts)} partitions (limit {MAX_PARTITIONS_PER_TOPIC})")
    out: dict[int, tuple[int, ...]] = {}
    problems: list[str] = []
    for key, replicas in parts.items():
        try:
            out[parse_id(key, "partition")] = _id_list(replicas, f"partitions.{show(key)}", allow_empty=False)
        except Unparsable as exc:
            problems.append(str(exc))
    return out, problems


def parse_state(doc: Any) -> tuple[int, tuple[int, ...], int]:
    """`.../partitions/<P>/state` → (leader, isr, leader_epoch)."""
    d = _obj(doc, "partition state")
    if "leader" not in d:
        raise Unparsable("no 'leader'")
    leader = _int(d["leader"], "leader", -1, MAX_BROKER_ID)
    isr = _id_list(d.get("isr"), "isr", allow_empty=True)
    epoch = _int(d.get("leader_epoch", 0), "leader_epoch", 0, MAX_BROKER_ID)
    return leader, isr, epoch


def config_map(doc: Any, what: str) -> dict[str, str]:
    """`/config/topics/<T>` or `/config/brokers/<id>` → its "config" object (string values only)."""
    d = _obj(doc, what)
    cfg = d.get("config", {})
    if not isinstance(cfg, dict):
        raise Unparsable(f"'config' is {_type_of(cfg)}, expected an object")
    bad = [k for k, v in cfg.items() if not isinstance(k, str) or not isinstance(v, str)]
    if bad:
        raise Unparsable(f"config values must be strings; {show(str(bad[0]))} is {_type_of(cfg[bad[0]])}")
    return dict(cfg)


def parse_topic_config(doc: Any) -> tuple[int | None, bool | None]:
    """`/config/topics/<T>` → (min.insync.replicas override, unclean.leader.election.enable override)."""
    cfg = config_map(doc, "topic config")
    min_isr = None
    raw = cfg.get("min.insync.replicas")
    if raw is not None:
        min_isr = _int(int(raw.strip()) if _DIGITS_RE.fullmatch(raw.strip()) else raw, "min.insync.replicas", 1, MAX_REPLICAS)
    return min_isr, parse_bool(cfg.get("unclean.leader.election.enable"), "unclean.leader.election.enable")


def parse_bool(raw: str | None, what: str) -> bool | None:
    if raw is None:
        return None
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise Unparsable(f"{what!r} = {quote(raw)} is not true/false")
    return value == "true"


def parse_partition_list(doc: Any, what: str) -> list[str]:
    """`/admin/reassign_partitions` or `/admin/preferred_replica_election` → ["topic-N", ...]."""
    d = _obj(doc, what)
    parts = d.get("partitions")
    if not isinstance(parts, list):
        raise Unparsable(f"'partitions' is {_type_of(parts)}, expected a list")
    out = []
    for entry in parts[:MAX_PARTITIONS_PER_TOPIC]:
        e = _obj(entry, f"{what} entry")
        topic = e.get("topic")
        if not isinstance(topic, str) or not valid_topic_name(topic):
            raise Unparsable(f"entry topic {_type_of(topic)[:80]} is not a legal topic name")
        out.append(f"{topic}-{_int(e.get('partition'), 'partition', 0, MAX_PARTITIONS_PER_TOPIC)}")
    return out


# --------------------------------------------------------------------------- I/O

class _Reads:
    """The snapshot's reads: pipelined on a session of their own (``zookeeper.PipelinedReader``, ~20x kazoo's pace at
    100,000 partitions), else -- when that session cannot be had or is lost -- through the kazoo client with its
    command retry, from where the pipelined reads stopped."""

    def __init__(self, zk, pipelined: bool) -> None:
        self.zk = zk
        self.reader = None
        if pipelined:
            from kazoo.exceptions import ConnectionLoss

            from kafka_runbooks.zookeeper import PipelinedReader

            try:
                self.reader = PipelinedReader.beside(zk)
                self.reader.open()
            except ConnectionLoss:
                self.reader = None

    def close(self) -> None:
        if self.reader is not None:
            self.reader.close()

    def _lost(self) -> None:
        self.reader.close()
        self.reader = None

    def get_many(self, paths: Iterable[str], parse=None) -> dict[str, Any]:
        """{path: (data or None when missing, ZnodeStat or None)}; with ``parse``: {path: parse(path, data, stat)}, parsed
        as the pipelined replies come in (``parse`` must not keep state: after a lost session, kazoo reads them all again)."""
        paths = list(paths)
        if self.reader is not None:
            from kazoo.exceptions import ConnectionLoss

            try:
                return self.reader.get_many(paths, parse)
            except ConnectionLoss:
                self._lost()
        got = _fetch_kazoo(self.zk, paths)
        return got if parse is None else {path: parse(path, data, stat) for path, (data, stat) in got.items()}

    def children(self, path: str) -> list[str] | None:
        if self.reader is not None:
            from kazoo.exceptions import ConnectionLoss

            try:
                return self.reader.children(path)
            except ConnectionLoss:
                self._lost()
        return _children_kazoo(self.zk, path)


def _fetch_kazoo(zk, paths: list[str]) -> dict[str, tuple[bytes | None, Any]]:
    """Read many znodes, pipelined (kazoo async), retrying a lost connection with the client's
    command retry.  Returns {path: (data or None when missing, ZnodeStat or None)}."""
    from kazoo.exceptions import ConnectionLoss, NoNodeError, OperationTimeoutError, SessionExpiredError

    pending = [(p, zk.get_async(p)) for p in paths]
    out: dict[str, tuple[bytes | None, Any]] = {}
    for path, result in pending:
        try:
            out[path] = result.get()
        except NoNodeError:
            out[path] = (None, None)
        except (ConnectionLoss, OperationTimeoutError, SessionExpiredError):
            try:
                out[path] = zk.retry(zk.get, path)
            except NoNodeError:
                out[path] = (None, None)
    return out


def _children_kazoo(zk, path: str) -> list[str] | None:
    from kazoo.exceptions import NoNodeError

    try:
        return zk.retry(zk.get_children, path)
    except NoNodeError:
        return None


def read_snapshot(zk, cluster: str, *, max_bytes: int = MAX_ZNODE_BYTES, pipelined: bool = True) -> ClusterSnapshot:
    """Read registrations, the controller, every partition's assignment + state, and the topics'
    min.insync.replicas overrides.  ``zk`` is a started (chrooted) KazooClient; the reads go pipelined on a
    session of their own on the same server (``pipelined=False``: through ``zk`` itself, as when that fails)."""
    reads = _Reads(zk, pipelined)
    collecting = gc.isenabled()
    # a snapshot is a few objects per partition, all kept: the cyclic collector would walk them again and again as they
    # pile up (~10% of the read's CPU at 100,000 partitions), finding no garbage among them
    gc.disable()
    try:
        return _read_snapshot(reads, cluster, max_bytes)
    finally:
        if collecting:
            gc.enable()
        reads.close()


class _Reading:
    """One snapshot's read in progress: the reads, the size limit, and the lines for ``unparsable``."""

    def __init__(self, reads: _Reads, max_bytes: int) -> None:
        self.reads = reads
        self.max_bytes = max_bytes
        self.bad: list[str] = []

    def note(self, path: str, why: str) -> None:
        self.bad.append(f"{path}: {why}")

    def doc_of(self, path: str, data: bytes | None) -> Any:
        return decode_json(data, max_bytes=self.max_bytes)


def _read_snapshot(reads: _Reads, cluster: str, max_bytes: int) -> ClusterSnapshot:
    taken_at = clock.now_iso()
    r = _Reading(reads, max_bytes)
    brokers = _read_brokers(r)
    admin = reads.get_many(["/controller", "/controller_epoch", *_ADMIN_PATHS])
    controller_id, controller_epoch = _controller_of(r, admin)
    in_progress = _in_progress_of(r, admin)
    broker_configs = _read_broker_configs(r)
    assignments, topic_overrides = _read_topics(r)
    partitions = _read_partitions(r, assignments, topic_overrides)
    return ClusterSnapshot(
        cluster=cluster,
        taken_at=taken_at,
        brokers=tuple(brokers),
        controller_id=controller_id,
        partitions=tuple(partitions),
        unparsable=tuple(r.bad),
        controller_epoch=controller_epoch,
        reassigning=tuple(in_progress["/admin/reassign_partitions"]),
        preferred_election_pending=tuple(in_progress["/admin/preferred_replica_election"]),
        broker_configs=broker_configs,
    )


def _read_brokers(r: _Reading) -> list[Broker]:
    """The registered brokers, by id; a registration that cannot be read keeps its broker, address unknown."""
    brokers: list[Broker] = []
    ids = r.reads.children("/brokers/ids")
    if ids is None:
        r.note("/brokers/ids", "missing: is the ZooKeeper chroot right for this Kafka cluster?")
        ids = []
    valid_ids: dict[str, int] = {}
    for child in sorted(ids):
        try:
            valid_ids[child] = parse_id(child)
        except Unparsable as exc:
            r.note(f"/brokers/ids/{show(child)}", str(exc))
    regs = r.reads.get_many([f"/brokers/ids/{c}" for c in valid_ids])
    for child, bid in sorted(valid_ids.items(), key=lambda kv: kv[1]):
        path = f"/brokers/ids/{child}"
        data, stat = regs[path]
        if stat is None:
            r.note(path, "deregistered while the snapshot was being read")
            continue
        try:
            broker = parse_broker(bid, r.doc_of(path, data))
        except Unparsable as exc:
            # The ephemeral registration exists, so the broker IS registered: keep it, address unknown.
            r.note(path, f"{exc}; broker kept as registered with unknown address")
            broker = Broker(id=bid, host="", port=0)
        brokers.append(dataclasses.replace(broker, **registration_facts(stat)))
    return brokers


_ADMIN_PATHS = ("/admin/reassign_partitions", "/admin/preferred_replica_election")


def _controller_of(r: _Reading, admin: dict[str, tuple[bytes | None, Any]]) -> tuple[int | None, int | None]:
    """(the controller's id, the controller epoch) from their znodes; None where one is missing or unreadable."""
    controller_id: int | None = None
    cdata, cstat = admin["/controller"]
    if cstat is not None:
        try:
            controller_id = parse_controller(r.doc_of("/controller", cdata))
        except Unparsable as exc:
            r.note("/controller", str(exc))
    controller_epoch: int | None = None
    edata, estat = admin["/controller_epoch"]
    if estat is not None:
        try:
            controller_epoch = _int(r.doc_of("/controller_epoch", edata), "controller_epoch", 0, MAX_BROKER_ID)
        except Unparsable as exc:
            r.note("/controller_epoch", str(exc))
    return controller_id, controller_epoch


def _in_progress_of(r: _Reading, admin: dict[str, tuple[bytes | None, Any]]) -> dict[str, list[str]]:
    """The maintenance in progress: {admin path: its partitions}; an unreadable one counts as in progress."""
    in_progress: dict[str, list[str]] = {}
    for path in _ADMIN_PATHS:
        data, stat = admin[path]
        in_progress[path] = []
        if stat is not None:
            try:
                in_progress[path] = parse_partition_list(r.doc_of(path, data), path)
            except Unparsable as exc:
                r.note(path, f"{exc}; treated as in progress")
                in_progress[path] = ["<unreadable>"]
    return in_progress


def _read_broker_configs(r: _Reading) -> dict[str, dict[str, str]]:
    """The dynamic broker configs: {broker id or "<default>": {key: value}}."""
    broker_configs: dict[str, dict[str, str]] = {}
    children = [c for c in (r.reads.children("/config/brokers") or []) if c == "<default>" or _DIGITS_RE.fullmatch(c)]
    for path, (data, stat) in r.reads.get_many([f"/config/brokers/{c}" for c in children]).items():
        if stat is None:
            continue
        try:
            broker_configs[path.rsplit("/", 1)[1]] = config_map(r.doc_of(path, data), "broker config")
        except Unparsable as exc:
            r.note(path, f"{exc}; dynamic broker config unknown")
    return broker_configs


def _read_topics(r: _Reading) -> tuple[dict[str, dict[int, tuple[int, ...]]], dict[str, tuple[int | None, bool | None]]]:
    """Every legal topic's assignment {partition: replicas} and its overrides (min.insync.replicas, unclean
    leader election)."""
    topics = r.reads.children("/brokers/topics")
    if topics is None:
        r.note("/brokers/topics", "missing: is the ZooKeeper chroot right for this Kafka cluster?")
        topics = []
    good_topics = []
    for t in sorted(topics):
        if valid_topic_name(t):
            good_topics.append(t)
        else:
            r.note(f"/brokers/topics/{show(t)}", "not a legal Kafka topic name (ignored: never used in paths)")
    docs = r.reads.get_many([f"/brokers/topics/{t}" for t in good_topics] + [f"/config/topics/{t}" for t in good_topics])
    assignments: dict[str, dict[int, tuple[int, ...]]] = {}
    topic_overrides: dict[str, tuple[int | None, bool | None]] = {}
    for t in good_topics:
        tpath, cpath = f"/brokers/topics/{t}", f"/config/topics/{t}"
        data, stat = docs[tpath]
        if stat is None:
            r.note(tpath, "deleted while the snapshot was being read")
            continue
        try:
            assignment, problems = parse_assignment(r.doc_of(tpath, data))
        except Unparsable as exc:
            r.note(tpath, str(exc))
            continue
        for why in problems:
            r.note(tpath, why)
        assignments[t] = assignment
        cdata, cstat = docs[cpath]
        topic_overrides[t] = (None, None)
        if cstat is not None:
            try:
                topic_overrides[t] = parse_topic_config(r.doc_of(cpath, cdata))
            except Unparsable as exc:
                r.note(cpath, f"{exc}; min.insync.replicas and unclean.leader.election.enable unknown for this topic")
    return assignments, topic_overrides


def _read_partitions(r: _Reading, assignments: dict[str, dict[int, tuple[int, ...]]],
                     topic_overrides: dict[str, tuple[int | None, bool | None]]) -> list[Partition]:
    """Every assigned partition's state, in (topic, partition) order; one without a readable state is noted."""
    state_keys = {f"/brokers/topics/{t}/partitions/{p}/state": (t, p) for t in sorted(assignments) for p in sorted(assignments[t])}

    def partition_of(spath: str, data: bytes | None, stat: Any) -> Partition | str:
        """The partition whose state ``spath`` holds, or why there is none (a line for ``unparsable``)."""
        t, p = state_keys[spath]
        if stat is None:
            return f"missing: partition {t}-{p} has replicas {list(assignments[t][p])} but no state"
        try:
            leader, isr, epoch = parse_state(r.doc_of(spath, data))
        except Unparsable as exc:
            return str(exc)
        min_isr, unclean = topic_overrides[t]
        return Partition(topic=t, index=p, replicas=assignments[t][p], leader=leader, isr=isr, leader_epoch=epoch,
                         min_insync_replicas=min_isr, unclean_leader_election=unclean)

    partitions: list[Partition] = []
    states = r.reads.get_many(state_keys, partition_of)  # parsed as they come in, while the server reads the next ones
    for spath in state_keys:  # in (topic, partition) order
        got = states[spath]
        if isinstance(got, str):
            r.note(spath, got)
        else:
            partitions.append(got)
    return partitions
