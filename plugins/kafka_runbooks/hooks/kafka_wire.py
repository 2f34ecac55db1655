"""One broker's own metadata, read over the Kafka protocol on a connection to that broker alone.

Why not confluent-kafka: librdkafka sends a Metadata request to *any* broker it knows (measured on the lab:
clients bootstrapped at broker 1 were answered by 2 or 3 in most calls, ``ClusterMetadata.orig_broker_id``), so
it cannot show what one broker's metadata cache holds. Here one TCP (or TLS) connection is opened to the
broker's registered endpoint, ``ApiVersions`` v0 picks the Metadata version both sides speak (up to v8), and the
``Metadata`` answer -- built by that broker from its own cache -- is decoded: per partition the leader, the
leader epoch (v7+, Kafka >= 2.1; None before), replicas and ISR, plus the controller the broker believes in.

The Metadata version is the highest both sides speak (the broker's ApiVersions answer): Kafka 0.10.2.1 answers
ApiVersions with Metadata v0..v2 (no leader epoch: ``versions.FEATURES["metadata_leader_epoch"]``), 2.3.0 with v0..v7.
The ApiVersions answer itself is kept (``Metadata.api_versions``): it is what the product reads a broker's version
range from (``versions.from_api_versions``). ``fetch_metadata`` is also the direct check of a broker that has no
DescribeConfigs (before 0.11, KIP-133): ApiVersions and Metadata answered on a connection to that broker alone, the
broker list of the answer naming the broker at the address asked (``Metadata.broker_at``).

A broker that may be older than 0.10.0 (``versions.asking``: decided before anything is sent) is never sent
ApiVersions: ``fetch_metadata(..., ask_versions=False)`` sends Metadata v0 alone, which every Kafka since 0.8 answers
(0.9.0.1 answers any Metadata version in the v0 format). Seed 002: API key 18 makes a 0.9 broker's network thread
throw ``ArrayIndexOutOfBoundsException: 18`` at ``ApiKeys.forId`` and drop every request it selected in that poll,
replication between brokers included; the connection that sent it gets no answer (it is not closed).

The decoding half is pure and bounded (every count and string length is checked against the bytes left);
``fetch_metadata`` and ``api_versions`` are the I/O. SASL is not spoken here: a SASL listener gets a
clear error.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any

API_METADATA = 3
API_VERSIONS = 18
MAX_METADATA_VERSION = 8  # v9+ are "flexible" (compact) encodings
MAX_RESPONSE_BYTES = 64 << 20
CLIENT_ID = "kafka-runbooks-metadata-view"


class WireError(RuntimeError):
    """The broker's answer could not be read (short, malformed, or an error code)."""


# --------------------------------------------------------------------------- encoding (pure)

def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def request(api_key: int, api_version: int, correlation_id: int, body: bytes, client_id: str = CLIENT_ID) -> bytes:
    """A size-prefixed request with header v1 (api_key, api_version, correlation_id, client_id)."""
    payload = struct.pack(">hhi", api_key, api_version, correlation_id) + _string(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def metadata_body(version: int) -> bytes:
    """All topics: an empty array in v0, null from v1; no auto-creation (v4+); no authorized operations (v8)."""
    body = struct.pack(">i", 0 if version == 0 else -1)
    if version >= 4:
        body += b"\x00"
    if version >= 8:
        body += b"\x00\x00"
    return body


# --------------------------------------------------------------------------- decoding (pure)

class Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError(f"response truncated: wanted {n} bytes at offset {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def string(self, nullable: bool = False) -> str | None:
        n = self.int16()
        if n < 0:
            if nullable:
                return None
            raise WireError(f"null string at offset {self.pos}")
        return self._take(n).decode("utf-8", "replace")

    def count(self, min_item_bytes: int, nullable: bool = False) -> int:
        n = self.int32()
        if n < 0:
            if nullable:
                return 0
            raise WireError(f"negative array length {n} at offset {self.pos}")
        if n * min_item_bytes > len(self.data) - self.pos:
            raise WireError(f"array of {n} items cannot fit in the {len(self.data) - self.pos} bytes left")
        return n

    def int32s(self) -> list[int]:
        return [self.int32() for _ in range(self.count(4, nullable=True))]


def parse_api_versions(payload: bytes) -> dict[int, tuple[int, int]]:
    """ApiVersions v0 response (after the correlation id) -> {api_key: (min, max)}."""
    r = Reader(payload)
    error = r.int16()
    if error != 0:
        raise WireError(f"ApiVersions answered error code {error}")
    out = {}
    for _ in range(r.count(6)):
        key, lo, hi = r.int16(), r.int16(), r.int16()
        out[key] = (lo, hi)
    return out


@dataclass(frozen=True)
class PartitionMeta:
    topic: str
    index: int
    error: int
    leader: int
    leader_epoch: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.index}"


@dataclass(frozen=True)
class Metadata:
    version: int
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    controller_id: int | None = None
    cluster_id: str | None = None
    partitions: tuple[PartitionMeta, ...] = ()
    topic_errors: dict[str, int] = field(default_factory=dict)
    api_versions: dict[int, tuple[int, int]] = field(default_factory=dict)  # the broker's ApiVersions answer

    def broker_at(self, host: str, port: int) -> int | None:
        """The id the answer gives the broker registered at host:port (None: not listed)."""
        ids = [b for b, (h, p) in self.brokers.items() if h.lower() == host.lower() and p == int(port)]
        return ids[0] if len(ids) == 1 else None


def parse_metadata(payload: bytes, version: int) -> Metadata:
    """Metadata response v0..v8 (after the correlation id)."""
    r = Reader(payload)
    if version >= 3:
        r.int32()  # throttle_time_ms
    brokers = {}
    for _ in range(r.count(10)):
        node = r.int32()
        host = r.string()
        port = r.int32()
        if version >= 1:
            r.string(nullable=True)  # rack
        brokers[node] = (host or "", port)
    cluster_id = r.string(nullable=True) if version >= 2 else None
    controller = r.int32() if version >= 1 else None
    partitions: list[PartitionMeta] = []
    topic_errors: dict[str, int] = {}
    for _ in range(r.count(8)):
        terr = r.int16()
        topic = r.string() or ""
        if version >= 1:
            r.int8()  # is_internal
        if terr:
            topic_errors[topic] = terr
        for _ in range(r.count(18)):
            perr = r.int16()
            index = r.int32()
            leader = r.int32()
            epoch = r.int32() if version >= 7 else None
            replicas = tuple(r.int32s())
            isr = tuple(r.int32s())
            if version >= 5:
                r.int32s()  # offline_replicas
            partitions.append(PartitionMeta(topic, index, perr, leader, epoch, replicas, isr))
        if version >= 8:
            r.int32()  # topic_authorized_operations
    if version >= 8:
        r.int32()  # cluster_authorized_operations
    return Metadata(version, brokers, controller if controller is None or controller >= 0 else None, cluster_id,
                    tuple(partitions), topic_errors)


# --------------------------------------------------------------------------- I/O

def _recv_exactly(sock, n: int, deadline: float) -> bytes:
    chunks, got = [], 0
    while got < n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout(f"no complete answer within the timeout ({got} of {n} bytes)")
        sock.settimeout(left)
        chunk = sock.recv(min(1 << 20, n - got))
        if not chunk:
            raise WireError(f"the broker closed the connection after {got} of {n} bytes")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _roundtrip(sock, api_key: int, version: int, correlation_id: int, body: bytes, deadline: float) -> bytes:
    sock.sendall(request(api_key, version, correlation_id, body))
    size = struct.unpack(">i", _recv_exactly(sock, 4, deadline))[0]
    if size < 4 or size > MAX_RESPONSE_BYTES:
        raise WireError(f"implausible response size {size}")
    data = _recv_exactly(sock, size, deadline)
    got = struct.unpack(">i", data[:4])[0]
    if got != correlation_id:
        raise WireError(f"response to correlation id {got}, expected {correlation_id}")
    return data[4:]


def ssl_context(config: dict[str, Any]) -> ssl.SSLContext:
    """A TLS context from librdkafka-style settings (ssl.ca.location, ssl.certificate.location, ...)."""
    ctx = ssl.create_default_context(cafile=config.get("ssl.ca.location"))
    if str(config.get("enable.ssl.certificate.verification", "true")).lower() == "false":
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        ctx.check_hostname = False
    if config.get("ssl.certificate.location"):
        ctx.load_cert_chain(config["ssl.certificate.location"], config.get("ssl.key.location"), config.get("ssl.key.password"))
    return ctx


def metadata_version(versions: dict[int, tuple[int, int]]) -> int:
    """The Metadata version to ask a broker with this ApiVersions answer (v2 of 0.10.2, v7 of 2.3, at most v8)."""
    lo, hi = versions.get(API_METADATA, (0, 0))
    version = min(hi, MAX_METADATA_VERSION)
    if version < lo:
        raise WireError(f"the broker speaks Metadata v{lo}..v{hi} only")
    return version


def _connect(host: str, port: int, timeout_s: float, config: dict[str, Any] | None):
    config = config or {}
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("PLAINTEXT", "SSL"):
        raise WireError(f"security.protocol {protocol} is not supported by the direct metadata probe (PLAINTEXT and SSL are)")
    raw = socket.create_connection((host, int(port)), timeout=timeout_s)
    try:
        return raw, (ssl_context(config).wrap_socket(raw, server_hostname=host) if protocol == "SSL" else raw)
    except BaseException:
        raw.close()
        raise


def api_versions(host: str, port: int, timeout_s: float, config: dict[str, Any] | None = None) -> dict[int, tuple[int, int]]:
    """The broker's ApiVersions answer ({api key: (min, max)}). Only for a broker known to be 0.10.0 or newer
    (``versions.asking``): a 0.9 broker does not answer it and drops every request of the same network-thread batch
    (seed 002); here that is a timeout (socket.timeout), never a closed connection."""
    deadline = time.monotonic() + timeout_s
    raw, sock = _connect(host, port, timeout_s, config)
    try:
        return parse_api_versions(_roundtrip(sock, API_VERSIONS, 0, 1, b"", deadline))
    finally:
        raw.close()


def fetch_metadata(host: str, port: int, timeout_s: float, config: dict[str, Any] | None = None, *,
                   ask_versions: bool = False) -> Metadata:
    """Ask the broker at host:port (and no other) for its metadata of every topic. Raises OSError (connect,
    timeout) or WireError (unreadable answer, unsupported security protocol).

    ``ask_versions`` (``versions.asking(...).api_versions``; default False, the branch safe for 0.9): ApiVersions first
    and the highest Metadata version both sides speak. False: Metadata v0 alone -- no leader epochs, no controller
    id, an empty ``api_versions``."""
    deadline = time.monotonic() + timeout_s
    raw, sock = _connect(host, port, timeout_s, config)
    try:
        if not ask_versions:
            return parse_metadata(_roundtrip(sock, API_METADATA, 0, 1, metadata_body(0), deadline), 0)
        versions = parse_api_versions(_roundtrip(sock, API_VERSIONS, 0, 1, b"", deadline))
        version = metadata_version(versions)
        md = parse_metadata(_roundtrip(sock, API_METADATA, version, 2, metadata_body(version), deadline), version)
        return Metadata(md.version, md.brokers, md.controller_id, md.cluster_id, md.partitions, md.topic_errors, versions)
    finally:
        raw.close()



# --------------------------------------------------------------------------- the serving watch's probe (asyncio)

WATCH_CLIENT_ID = "kafka-runbooks-serving-watch"


def _security(config: dict[str, Any] | None, host: str):
    config = config or {}
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in ("PLAINTEXT", "SSL"):
        raise WireError(f"security.protocol {protocol} is not supported by the direct probe (PLAINTEXT and SSL are)")
    return (ssl_context(config), host) if protocol == "SSL" else (None, None)


async def answers(host: str, port: int, timeout_s: float, config: dict[str, Any] | None = None, *,
                  ask_versions: bool = False) -> str:
    """Does the broker at host:port answer one tiny request within ``timeout_s``? Returns the request's name when it
    did; raises ``asyncio.TimeoutError`` (no answer in time: a hung or deadlocked broker accepts the connection and
    never answers), OSError (refused: nothing listens) or WireError (an answer that is not one).

    The request must be answered by the broker's request handler threads (a hung request pool answers nothing):
    ``ApiVersions`` v0 (a few hundred bytes) where ``versions.asking`` allows it, else ``Metadata`` v0 -- the only
    request this module sends to a broker that may be 0.9 (seed 002); v0 asks for every topic, so it is larger.
    Non-blocking (asyncio streams) and bounded as a whole: connect, send and read together."""
    ctx, server_hostname = _security(config, host)
    api, body, name = (API_VERSIONS, b"", "ApiVersions v0") if ask_versions else (API_METADATA, metadata_body(0), "Metadata v0")

    async def ask() -> str:
        reader, writer = await asyncio.open_connection(host, int(port), ssl=ctx, server_hostname=server_hostname)
        try:
            writer.write(request(api, 0, 1, body, client_id=WATCH_CLIENT_ID))
            await writer.drain()
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    raise WireError(f"implausible response size {size}")
                data = await reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                raise WireError(f"the broker closed the connection after {len(exc.partial)} bytes") from None
            got = struct.unpack(">i", data[:4])[0]
            if got != 1:
                raise WireError(f"response to correlation id {got}, expected 1")
            if ask_versions:
                parse_api_versions(data[4:])
            return name
        finally:
            writer.transport.abort()  # no close handshake to wait for (a hung broker would not do its part)

    return await asyncio.wait_for(ask(), timeout_s)
